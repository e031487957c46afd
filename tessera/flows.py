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


def cmd_demo(out: Path) -> int:
    import logging
    from tessera.tb.runner import run
    out.mkdir(parents=True, exist_ok=True)
    # cocotb-test relays the simulator's whole log through the "cocotb" logger:
    # send it to build/demo/<block>.log and print only the summary (and the log
    # tail of a block that fails).
    log = logging.getLogger("cocotb")
    log.propagate = False
    rows, failed = [], 0
    for name, spec in sorted(blocks().items()):
        export(spec, {}, out / "verilog" / name)
        if not spec.demo_module:
            rows.append({"block": name, "checks": "-", "cycles": "-", "status": "exported"})
            continue
        result = out / f"{name}.results.jsonl"
        result.unlink(missing_ok=True)
        t0 = time.time()
        logfile = out / f"{name}.log"
        handler = logging.FileHandler(logfile, mode="w")
        log.addHandler(handler)
        try:
            run(name, dict(spec.demo_params), spec.demo_module, testcase=spec.demo_testcase,
                result_file=result)
            status = "pass"
        except BaseException as err:       # cocotb-test raises SystemExit on failure
            status = f"FAIL ({err}; log: {logfile})"
            failed += 1
            handler.flush()
            print("".join(logfile.read_text().splitlines(keepends=True)[-40:]))
        finally:
            log.removeHandler(handler)
            handler.close()
        recs = [json.loads(line) for line in result.read_text().splitlines()] if result.exists() else []
        print(f"{name}: {status} ({time.time() - t0:.0f} s)", flush=True)
        rows.append({"block": name, "checks": sum(r["checks"] for r in recs),
                     "cycles": sum(r["cycles"] for r in recs), "status": status,
                     "seconds": round(time.time() - t0, 1)})
    for pkg, demo in _model_demos():
        try:
            for r in demo():
                rows.append({"status": "pass", **r})
        except Exception as err:
            rows.append({"block": pkg, "checks": "-", "cycles": "-", "status": f"FAIL ({err})"})
            failed += 1
    (out / "summary.json").write_text(json.dumps(rows, indent=2) + "\n")
    print()
    print(f"{'block':16s} {'checks':>8s} {'cycles':>10s}  status")
    print("-" * 60)
    for r in rows:
        print(f"{r['block']:16s} {str(r.get('checks', '-')):>8s} {str(r.get('cycles', '-')):>10s}  "
              f"{r['status']}{'  ' + r['detail'] if r.get('detail') else ''}")
    print(f"\nVerilog, manifests and filelists: {out / 'verilog'}; summary: {out / 'summary.json'}")
    return 1 if failed else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tessera.flows")
    ap.add_argument("flow", choices=["verilog", "lint", "demo"])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    return {"verilog": cmd_verilog, "lint": cmd_lint, "demo": cmd_demo}[args.flow](args.out)


if __name__ == "__main__":
    sys.exit(main())
