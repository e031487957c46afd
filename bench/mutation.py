"""Mutation score of the RTL tests (issue 20 item 6).

Applies each single-line RTL mutation of ``bench/data/mutations.json`` one at
a time (operators, off-by-ones, arbiter pointers, credit updates, tracker
counters, PPU rounding, ...), runs the tests named for it, and restores the
file.  A mutation is *caught* when a named test fails (or the run exceeds its
timeout: a hang is a detected fault).  A mutation whose text no longer
matches the source exactly once is reported as ``stale`` (the list must follow
the RTL) and counts as not caught.

Writes ``build/bench/mutation.json``: ``mutations`` (how many were applied),
``caught``, ``score``, ``survivors`` (ids with file and change) and one record
per mutation.  Verilator models rebuild for each mutated Verilog (the runner's
cache follows the exported text), so a full run takes a while; ``--only ID``
runs a subset.

``mutation.json`` is rewritten after every mutation.  Usage: ``python bench/mutation.py
[--only ID ...] [--merge] [--budget S] [--list]`` (``--merge`` keeps an earlier run's records for the
mutations not run now; ``listed`` is how many the list holds).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LIST = REPO / "bench" / "data" / "mutations.json"
OUT = Path(os.environ.get("TESSERA_BUILD", REPO / "build")) / "bench" / "mutation.json"


def load() -> list[dict]:
    doc = json.loads(LIST.read_text())
    ids = [m["id"] for m in doc["mutations"]]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise SystemExit(f"duplicate mutation ids: {sorted(dup)}")
    return doc["mutations"]


def apply(m: dict) -> tuple[Path, str] | None:
    """Mutate ``m['file']`` in place; returns (path, original text) or None if stale."""
    path = REPO / m["file"]
    text = path.read_text()
    if text.count(m["original"]) != 1:
        return None
    path.write_text(text.replace(m["original"], m["mutant"], 1))
    return path, text


def run_one(m: dict, timeout: int) -> dict:
    rec = {"id": m["id"], "file": m["file"], "block": m.get("block", ""),
           "kind": m.get("kind", ""), "original": m["original"].strip(),
           "mutant": m["mutant"].strip(), "tests": m["tests"]}
    t0 = time.time()
    applied = apply(m)
    if applied is None:
        rec.update(result="stale", caught=False, seconds=0.0)
        return rec
    path, original = applied
    try:
        cmd = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-x", "-q", "-p", "no:cacheprovider",
               *m["tests"]]
        try:
            p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
            if p.returncode == 1:
                result = "caught"
            elif p.returncode == 0:
                result = "survived"
            else:                # 2 interrupted/collection error, 4 usage, 5 no tests: the list is wrong
                result = f"error (pytest exit {p.returncode})"
            tail = p.stdout.strip().splitlines()[-1:] if p.stdout.strip() else []
        except subprocess.TimeoutExpired:
            result, tail = "caught (timeout)", []
    finally:
        path.write_text(original)
    rec.update(result=result, caught=result.startswith("caught"), seconds=round(time.time() - t0, 1),
               summary=tail[0] if tail else "")
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="mutation ids to run")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per mutation's test run")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds: start no new mutation after this (the rest are reported as not run)")
    ap.add_argument("--merge", action="store_true",
                    help="keep the records of an earlier mutation.json for mutations not run now "
                         "(a full score from runs in parts); ids no longer listed are dropped")
    args = ap.parse_args(argv)
    muts = load()
    if args.list:
        for m in muts:
            print(f"{m['id']:28s} {m['file']:34s} {m['mutant'].strip()[:60]}")
        return 0
    if args.only:
        unknown = set(args.only) - {m["id"] for m in muts}
        if unknown:
            raise SystemExit(f"unknown mutation ids: {sorted(unknown)}")
        muts = [m for m in muts if m["id"] in args.only]
    earlier = []
    if args.merge and OUT.exists():
        earlier = json.loads(OUT.read_text()).get("records", [])
    order = [m["id"] for m in load()]

    def write(records):
        """mutation.json after every mutation (a long run can be stopped and resumed)."""
        ran = {r["id"] for r in records}
        recs = sorted([r for r in earlier if r["id"] not in ran and r["id"] in order] + records,
                      key=lambda r: order.index(r["id"]))
        caught = sum(r["caught"] for r in recs)
        doc = {
            "mutations": len(recs),
            "caught": caught,
            "score": round(caught / len(recs), 3) if recs else None,
            "listed": len(order),
            "survivors": [{k: r[k] for k in ("id", "file", "original", "mutant", "result")}
                          for r in recs if not r["caught"]],
            "records": recs,
            "source": "python bench/mutation.py (list: bench/data/mutations.json)",
        }
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(doc, indent=2) + "\n")
        return doc

    records = []
    t0 = time.time()
    for i, m in enumerate(muts, 1):
        if args.budget is not None and time.time() - t0 > args.budget:
            print(f"budget of {args.budget:.0f} s used: {len(muts) - i + 1} mutations not run", flush=True)
            break
        r = run_one(m, args.timeout)
        records.append(r)
        print(f"[{i:2d}/{len(muts)} {time.time() - t0:6.0f} s] {r['id']:28s} {r['result']:18s} "
              f"{r['seconds']:6.0f} s  {r.get('summary', '')[:60]}", flush=True)
        doc = write(records)
    if not records:
        doc = write(records)
    caught, records = doc["caught"], doc["records"]
    print(f"\nmutation score: {caught}/{len(records)} caught"
          + (f" ({100 * caught / len(records):.0f} %)" if records else ""))
    for s in doc["survivors"]:
        print(f"  survived: {s['id']} ({s['file']}): {s['mutant'][:70]}  [{s['result']}]")
    print(OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
