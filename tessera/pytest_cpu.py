"""pytest plugin: CPU seconds per test (this process + waited-for children, i.e. Verilator/g++
builds and cocotb simulations) and the Verilator builds each test ran, for measuring the
suite on a loaded machine where wall time lies, and for the suite's schedule.

    pytest -p tessera.pytest_cpu --cpu-json FILE ...      # per-test record, top tests printed
    python -m tessera.pytest_cpu FILE...                  # merge records, print the profile
    python -m tessera.pytest_cpu --durations FILE...      # merge into tests/durations.json

``tests/durations.json`` (per test: CPU seconds and the build it shares) is what
``tests/conftest.py`` orders and groups ``make test`` by; ``make durations`` regenerates it.
With xdist each worker writes ``FILE.<worker>``.  Build infrastructure: no paper section.
"""
from __future__ import annotations

import json
import os
import resource
import sys
import time

import pytest


def _cpu() -> float:
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


_rows: dict[str, dict] = {}


def _builds() -> list:
    mod = sys.modules.get("tessera.tb.runner")
    return getattr(mod, "BUILDS_USED", []) if mod else []


def pytest_addoption(parser):
    parser.addoption("--cpu-json", default=None, help="write per-test CPU/wall seconds here")
    parser.addoption("--cpu-top", type=int, default=25, help="print the N tests with most CPU")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    c0, t0, n0 = _cpu(), time.time(), len(_builds())
    yield
    row = {"cpu_s": round(_cpu() - c0, 2), "wall_s": round(time.time() - t0, 2)}
    used = _builds()[n0:]
    if used:
        row["builds"] = list(dict.fromkeys(used))
    _rows[item.nodeid.split("@")[0]] = row
    _write(item.config)             # after every test: an interrupted run keeps its record


def _write(config):
    path = config.getoption("--cpu-json")
    wid = os.environ.get("PYTEST_XDIST_WORKER")
    if path and _rows:
        p = f"{path}.{wid}" if wid else path
        os.makedirs(os.path.dirname(os.path.abspath(p)), exist_ok=True)
        with open(p + ".tmp", "w") as fh:
            json.dump(_rows, fh, indent=1)
        os.replace(p + ".tmp", p)


def report(rows: dict, top: int, out=sys.stdout):
    tot = sum(r["cpu_s"] for r in rows.values())
    out.write(f"\n== CPU per test: {len(rows)} tests, {tot:.0f} s CPU total, "
              f"{sum(r['wall_s'] for r in rows.values()):.0f} s wall total\n")
    for k, r in sorted(rows.items(), key=lambda kv: -kv[1]["cpu_s"])[:top]:
        out.write(f"{r['cpu_s']:8.1f} s cpu {r['wall_s']:8.1f} s wall  {k}\n")
    files: dict[str, float] = {}
    for k, r in rows.items():
        f = k.split("::")[0]
        files[f] = files.get(f, 0) + r["cpu_s"]
    out.write("-- per file:\n")
    for f, c in sorted(files.items(), key=lambda kv: -kv[1]):
        out.write(f"{c:8.1f} s cpu  {f}\n")


def pytest_sessionfinish(session):
    path = session.config.getoption("--cpu-json")
    wid = os.environ.get("PYTEST_XDIST_WORKER")
    _write(session.config)
    if not wid and _rows and path:
        report(_rows, session.config.getoption("--cpu-top"))


def durations(rows: dict) -> dict:
    """tests/durations.json: per test its CPU seconds and the first build it ran."""
    tests = {}
    for k, r in sorted(rows.items()):
        t = {"cpu_s": r["cpu_s"]}
        if r.get("builds"):
            t["build"] = r["builds"][0]
        tests[k] = t
    return {"doc": "CPU seconds per test and its Verilator build (tessera.pytest_cpu); "
                   "tests/conftest.py schedules make test by it; regenerate: make durations",
            "tests": tests}


if __name__ == "__main__":
    args = sys.argv[1:]
    dur = "--durations" in args
    args = [a for a in args if a != "--durations"]
    merged: dict = {}
    for f in args:
        merged.update(json.load(open(f)))
    if dur:
        out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "durations.json")
        with open(out, "w") as fh:
            json.dump(durations(merged), fh, indent=0, sort_keys=False)
            fh.write("\n")
        print(f"wrote {os.path.normpath(out)} ({len(merged)} tests)")
    report(merged, 40)
