"""Flows behind the Makefile: ``verilog`` (export all blocks), ``lint``
(Verilator -Wall + Yosys synth/check on every export) and ``demo`` (export,
a short cocotb cosimulation of each block against its golden model, a summary
table, then each system model's demo).

System models take part in the demo by defining ``demo() -> list[dict]`` in
``tessera.sim_models.<pkg>.cli`` (rows with keys ``block``, ``checks``,
``cycles`` or ``detail``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from .export import export
from .registry import blocks, model_clis
from .toolchain import verilator_lint, yosys_check


def cmd_verilog(out: Path) -> int:
    for name, spec in sorted(blocks().items()):
        paths = export(spec, {}, out / name)
        print(f"{name:14s} -> {paths['verilog']}")
    return 0


def cmd_lint(out: Path) -> int:
    bad = 0
    for name, spec in sorted(blocks().items()):
        paths = export(spec, {}, out / name)
        lint = verilator_lint([paths["verilog"]], name)
        synth = yosys_check([paths["verilog"]], name)
        ok = lint.returncode == 0 and synth.returncode == 0
        bad += not ok
        print(f"{name:14s} verilator {'ok' if lint.returncode == 0 else 'FAIL'}  "
              f"yosys {'ok' if synth.returncode == 0 else 'FAIL'}")
        if not ok:
            print(lint.stderr[-3000:], synth.stdout[-2000:], synth.stderr[-2000:])
    return 1 if bad else 0


def _model_demos():
    for name, mod in model_clis():
        if hasattr(mod, "demo"):
            yield name, mod.demo


# make demo: the smallest configuration that still shows each block's point (the registry's
# demo_params, overridden here).  A 3x3 mesh has a centre router using all five ports and every
# XY turn; the 4x4 of the benches spent 415 s in its Verilator build.
DEMO_OVERRIDES = {"mesh": {"kx": 3, "ky": 3}}
# blocks whose demo testbench touches only top-level ports: --public-depth 1 (smaller C++)
DEMO_PUBLIC_TOP = {"mesh"}
# C++ optimisation of the demo's Verilated models: a few thousand cycles, so build time
# dominates (measured: see README, "make demo").  Benches keep the optimised default.
DEMO_OPT = "-O0"
# longest first, so that two workers finish together (fresh clone, 2 cores; refined from the
# previous run's timings in build/demo/summary.json)
DEMO_ORDER = ["global_pe", "mesh", "nocsys", "pe_chain", "pe", "router", "t3_node", "tracker",
              "mca", "dma_table"]

_EVENTS = None          # worker side: multiprocessing queue for progress events


def _init_worker(q):
    global _EVENTS
    _EVENTS = q


def _event(name, stage):
    if _EVENTS is not None:
        _EVENTS.put((name, stage, time.time()))


class _StageLog:
    """logging handler: cocotb-test's "Running command: ..." lines -> progress stage events."""

    def __init__(self, name):
        import logging

        class H(logging.Handler):
            def emit(h, rec):
                msg = rec.getMessage()
                if msg.startswith("Running command: "):
                    cmd = msg.split()[2:4]
                    stage = ("verilating" if "verilator" in " ".join(cmd) else
                             "compiling C++" if cmd[:1] == ["make"] else "simulating")
                    h.when.setdefault(stage, time.time())
                    _event(name, stage)
        self.handler = H()
        self.handler.when = {}


def _export_cached(name: str, out: Path):
    """The block's default-parameter Verilog, manifest and filelist in ``out`` (elaborated once,
    cached with the simulation exports in build/sim/, see tessera.tb.runner.prepare)."""
    import shutil
    from tessera.tb.runner import prepare
    sim_dir, vpath, _ = prepare(name, {})
    out.mkdir(parents=True, exist_ok=True)
    v = out / f"{name}.v"
    shutil.copyfile(vpath, v)
    shutil.copyfile(sim_dir / f"{name}.manifest.json", out / f"{name}.manifest.json")
    (out / f"{name}.f").write_text(f"{v.resolve()}\n")


def _what(recs, name):
    whats = [r["what"] for r in recs if r.get("what")]
    if whats:
        return "; ".join(whats)
    return f"{name}: {sum(r.get('checks', 0) for r in recs)} checks vs golden model" if recs else ""


def _demo_block(name: str, out: Path, opt: str | None) -> dict:
    """One make-demo step (runs in a worker process): export, build, cosimulate, read the records."""
    import logging
    from tessera.tb.runner import run
    spec = blocks()[name]
    t0, c0 = time.time(), _cpu_seconds()
    _event(name, "elaborating")
    log = logging.getLogger("cocotb")
    log.propagate = False
    logfile = out / f"{name}.log"
    handler = logging.FileHandler(logfile, mode="w")
    stages = _StageLog(name).handler
    log.addHandler(handler)
    log.addHandler(stages)
    row = {"block": name}
    try:
        _export_cached(name, out / "verilog" / name)
        if not spec.demo_module:
            row.update(checks="-", cycles="-", status="exported", what="Verilog, manifest, filelist",
                       seconds=round(time.time() - t0, 1), cpu_s=round(_cpu_seconds() - c0, 1))
            return row
        params = {**spec.demo_params, **DEMO_OVERRIDES.get(name, {})}
        result = out / f"{name}.results.jsonl"
        result.unlink(missing_ok=True)
        try:
            run(name, params, spec.demo_module, testcase=spec.demo_testcase, result_file=result,
                public="top" if name in DEMO_PUBLIC_TOP else "all", opt=opt)
            status = "pass"
        except BaseException as err:       # cocotb-test raises SystemExit on failure
            status = f"FAIL ({err}; log: {logfile})"
            handler.flush()
            row["log_tail"] = "".join(logfile.read_text().splitlines(keepends=True)[-40:])
        recs = [json.loads(line) for line in result.read_text().splitlines()] if result.exists() else []
        row.update(checks=sum(r["checks"] for r in recs), cycles=sum(r["cycles"] for r in recs),
                   status=status, what=_what(recs, name), params=params)
        when = stages.when
        if "verilating" in when and "simulating" in when:     # wall seconds per stage
            row["stages_s"] = {"elaborate": round(when["verilating"] - t0, 1),
                               "build": round(when["simulating"] - when["verilating"], 1),
                               "simulate": round(time.time() - when["simulating"], 1)}
    except Exception as err:               # export / elaboration failure: reported, not fatal
        row.update(checks="-", cycles="-", status=f"FAIL ({type(err).__name__}: {err})")
    finally:
        log.removeHandler(handler)
        log.removeHandler(stages)
        handler.close()
    row["seconds"] = round(time.time() - t0, 1)
    row["cpu_s"] = round(_cpu_seconds() - c0, 1)
    return row


def _demo_models(pkg: str) -> list[dict]:
    """A system model's demo rows (runs in a worker process)."""
    _event(pkg, "model checks")
    t0 = time.time()
    mod = dict(model_clis())[pkg]
    try:
        rows = [{"status": "pass", **r} for r in mod.demo()]
    except Exception as err:
        rows = [{"block": pkg, "checks": "-", "cycles": "-", "status": f"FAIL ({err})"}]
    for r in rows:
        r.setdefault("what", r.get("detail", ""))
        r["seconds"] = round(time.time() - t0, 1)
    return rows


# One real layer pass on the RTL chiplet (issue 17): a small PE array keeps it inside the
# demo's time budget; the same command at --pes 4x4 is `tessera run-layer`.
DEMO_LAYER = {"network": "resnet50", "layer": "res3b_branch2b", "pes": (2, 2), "passes": [0]}


def _demo_chiplet_layer(out: Path, opt: str | None) -> dict:
    """make demo step: compile a ResNet-50 layer pass for a small chiplet, run it on the RTL
    (cocotb/Verilator), compare every output byte with numpy, cycles next to the model's."""
    from tessera.hdl.chiplet.config import ChipletConfig
    from tessera.run_layer import run_layer
    from tessera.sim_models.simba.layers import load_network
    d = DEMO_LAYER
    name = f"chiplet {d['pes'][0]}x{d['pes'][1]} layer"
    _event("chiplet_layer", "compiling, building, simulating")
    t0, c0 = time.time(), _cpu_seconds()
    row = {"block": name}
    try:
        layer = {l.name: l for l in load_network(d["network"])}[d["layer"]]
        cfg = ChipletConfig(nx=d["pes"][0], ny=d["pes"][1]).validate()
        lines = []
        e = run_layer(layer, cfg, passes=d["passes"], out_dir=out / "chiplet_layer",
                      log=lines.append, opt=opt)[0]
        ok = bool(e["bit_exact"]) and bool(e["golden_bit_exact"])
        row.update(checks=e["bytes_checked"], cycles=e["rtl_cycles"],
                   status="pass" if ok else "FAIL (output mismatch)",
                   what=(f"{d['layer']} pass {e['pass']} ({e['mapping']}): {e['bytes_checked']} output "
                         f"bytes vs numpy conv+PPU, bit-exact={e['bit_exact']}; RTL {e['rtl_cycles']} "
                         f"cycles vs model {e['model_cycles']:.0f} ({e['error']:+.1%}), "
                         f"util {e['utilization']:.1%}"))
    except Exception as err:
        row.update(checks="-", cycles="-", status=f"FAIL ({type(err).__name__}: {err})")
    row["seconds"] = round(time.time() - t0, 1)
    row["cpu_s"] = round(_cpu_seconds() - c0, 1)
    return row


def _fmt_s(sec: float) -> str:
    return f"{sec:.0f} s" if sec < 120 else f"{int(sec // 60)} m {sec % 60:02.0f} s"


def _cpu_seconds() -> float:
    import resource
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def _order(names, out: Path):
    """Longest first: the previous run's seconds where known, else DEMO_ORDER."""
    prev = {}
    try:
        prev = {r["block"]: float(r["seconds"]) for r in json.loads((out / "summary.json").read_text())
                if isinstance(r.get("seconds"), (int, float))}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    rank = {n: i for i, n in enumerate(DEMO_ORDER)}
    if len(prev) >= len(names) // 2 and all(n in prev for n in names):
        return sorted(names, key=lambda n: -prev[n])
    return sorted(names, key=lambda n: rank.get(n, -1))


class _Progress:
    """Progress output.  TTY: one line per started/finished step and a live status line
    (rewritten in place); not a TTY (CI logs): one line per finished step; quiet: nothing."""

    def __init__(self, quiet: bool, t0: float, stream=None):
        self.stream = stream or sys.stdout
        self.quiet = quiet
        self.tty = self.stream.isatty() and not quiet
        self.t0 = t0
        self.running: dict[str, tuple[str, float]] = {}
        self.finished: set[str] = set()
        self._live = False

    def _clear(self):
        if self._live:
            self.stream.write("\r\033[K")
            self._live = False

    def line(self, text: str):
        if self.quiet:
            return
        self._clear()
        self.stream.write(f"[{time.time() - self.t0:5.0f} s] {text}\n")
        self.stream.flush()
        self.tick()

    def stage(self, name: str, stage: str, when: float):
        if name in self.finished:
            return
        new = name not in self.running
        self.running[name] = (stage, when)
        if self.tty and new:
            self.line(f"{name}: started ({stage})")
        else:
            self.tick()

    def done(self, name: str, text: str):
        self.running.pop(name, None)
        self.finished.add(name)
        self.line(text)

    def tick(self):
        if not self.tty or not self.running:
            return
        now = time.time()
        parts = [f"{n} {st} {now - t:.0f} s" for n, (st, t) in self.running.items()]
        self.stream.write(f"\r\033[K[{now - self.t0:5.0f} s] running: " + ", ".join(parts))
        self.stream.flush()
        self._live = True

    def finish(self):
        self._clear()


def _table(rows) -> str:
    w = max([len(r["block"]) for r in rows] + [5])
    lines = [f"{'block':{w}s} {'status':8s} {'checks':>7s} {'cycles':>8s} {'time':>6s}  "
             "what was checked against what", "-" * 110]
    for r in rows:
        st = r["status"] if len(r["status"]) <= 8 else "FAIL"
        sec = r.get("seconds")
        lines.append(f"{r['block']:{w}s} {st:8s} {str(r.get('checks', '-')):>7s} "
                     f"{str(r.get('cycles', '-')):>8s} {(_fmt_s(sec) if sec is not None else '-'):>6s}  "
                     f"{r.get('what') or r.get('detail') or ''}")
    return "\n".join(lines)


def cmd_demo(out: Path, jobs: int = 2, quiet: bool = False, opt: str | None = DEMO_OPT) -> int:
    """make demo: every block exported, each demo cosimulation (Verilator, cocotb) against its
    golden model, the system models' checks, in ``jobs`` worker processes; then the report."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    t0, c0 = time.time(), _cpu_seconds()
    out.mkdir(parents=True, exist_ok=True)
    names = _order(sorted(blocks()), out)
    models = [pkg for pkg, _ in _model_demos()]
    prog = _Progress(quiet, t0)
    if not quiet:
        print(f"make demo: {len(names)} RTL blocks ({sum(bool(blocks()[n].demo_module) for n in names)} "
              f"cosimulated, C++ {opt or 'default'}), {len(models)} system models, {jobs} workers; "
              f"logs in {out}/", flush=True)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    rows: dict[str, list] = {}
    failed = 0
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=ctx, initializer=_init_worker,
                             initargs=(q,)) as ex:
        futs = {ex.submit(_demo_block, n, out, opt): n for n in names}
        futs.update({ex.submit(_demo_models, m): m for m in models})
        futs[ex.submit(_demo_chiplet_layer, out, opt)] = "chiplet_layer"
        pending = set(futs)
        while pending:
            done, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
            while not q.empty():
                name, stage, when = q.get_nowait()
                prog.stage(name, stage, when)
            for f in done:
                name = futs[f]
                try:
                    res = f.result()
                except Exception as err:                 # a crashed worker: reported, not fatal
                    res = {"block": name, "checks": "-", "cycles": "-", "status": f"FAIL ({err})"}
                res = res if isinstance(res, list) else [res]
                rows[name] = res
                for r in res:
                    bad = r["status"].startswith("FAIL")
                    failed += bad
                    prog.done(r["block"], f"{r['block']}: {r['status'] if not bad else 'FAIL'} "
                                          f"({_fmt_s(r.get('seconds', 0))})  {r.get('what', '')}")
                    if bad and r.get("log_tail"):
                        prog.finish()
                        print(r["log_tail"], flush=True)
                prog.running.pop(name, None)
                prog.finished.add(name)
            prog.tick()
    prog.finish()
    ordered = [r for n in sorted(blocks()) for r in rows.get(n, [])] + \
              rows.get("chiplet_layer", []) + [r for m in models for r in rows.get(m, [])]
    for r in ordered:
        r.pop("log_tail", None)
    (out / "summary.json").write_text(json.dumps(ordered, indent=2) + "\n")
    wall, cpu = time.time() - t0, _cpu_seconds() - c0
    print()
    print(_table(ordered))
    print(f"\nmake demo: {_fmt_s(wall)} wall, {_fmt_s(cpu)} CPU (all processes), {jobs} workers; "
          f"{failed} failed")
    (out / "timing.json").write_text(json.dumps({"wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                                                 "jobs": jobs, "opt": opt}) + "\n")
    print(f"Verilog, manifests and filelists: {out / 'verilog'}; summary: {out / 'summary.json'}")
    from .report import build_page
    t1 = time.time()
    text, page = build_page(out.parent)
    path = out.parent / "report" / "index.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    detail = "" if quiet else (f" ({len(page.figures)} figures, {len(page.missing)} missing inputs listed, "
                               f"{time.time() - t1:.0f} s; make bench / make synth fill them)")
    print(f"report: {path.resolve()}{detail}")
    return 1 if failed else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tessera.flows")
    ap.add_argument("flow", choices=["verilog", "lint", "demo"])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", "2")),
                    help="demo: worker processes (default $JOBS or 2)")
    ap.add_argument("--quiet", action="store_true", help="demo: no progress lines, only the summary")
    ap.add_argument("--opt", default=DEMO_OPT,
                    help=f"demo: C++ optimisation of the Verilated models (default {DEMO_OPT}; "
                         "'default' = the benches' build)")
    args = ap.parse_args(argv)
    if args.flow == "demo":
        return cmd_demo(args.out, args.jobs, args.quiet, None if args.opt == "default" else args.opt)
    return {"verilog": cmd_verilog, "lint": cmd_lint}[args.flow](args.out)


if __name__ == "__main__":
    sys.exit(main())
