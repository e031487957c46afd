"""Package barrier cost on the RTL (issue 18; Simba §3.2 synchronisation over the NoP).

Runs the exported ``package`` block (cocotb/Verilator, testcase ``barrier_costs`` of
tb/package/test_package.py) with a program that is one ``BAR 1`` on every chiplet, each
chiplet in turn arriving last (30 CMDWs late), and reports per configuration:

* ``cost``: cycles from the last chiplet's arrival (its ``bar_req`` rises) to the last
  release (the last ``bar_req`` falls): the late chiplet's ARRIVE flit to the master
  (controller node of chiplet (0, 0)) + the master's release multicast to every chiplet
  + the BAR's 1-cycle ack;
* ``release_after_last_arrival``: the same to each chiplet's release.

Configurations: 2x2 chiplets (the make-test build of tests/test_package.py, cached) and
1x4 (longer NoP path), small 2x2-PE chiplets.  Writes build/bench/package_barrier.json.
Usage: python bench/package_barrier.py
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "bench" / "package_barrier.json"
sys.path.insert(0, str(ROOT / "tests"))


def main():
    from test_package import params as test_params
    from tessera.tb.runner import run
    cases = [("2x2", test_params(1)), ("1x4", dict(test_params(1), ckx=4, cky=1))]
    entries = []
    for name, p in cases:
        with tempfile.TemporaryDirectory() as td:
            out = Path(td) / "bar.json"
            run("package", p, "tessera.tb.package.test_package", testcase="barrier_costs",
                opt="-O0", public="top", extra_env={"PACKAGE_BAR_OUT": str(out)})
            r = json.loads(out.read_text())
        costs = [b["cost"] for b in r["barriers"]]
        e = {"chiplets": name, "nop_link_latency": p["nop_link_latency"],
             "link_latency": 1, "barriers": r["barriers"],
             "cost_min": min(costs), "cost_max": max(costs)}
        entries.append(e)
        print(f"{name} chiplets, NoP link latency {p['nop_link_latency']}: barrier cost "
              f"{min(costs)}..{max(costs)} cycles (late chiplet: "
              + ", ".join(f"{tuple(b['late_chiplet'])} {b['cost']}" for b in r["barriers"]) + ")")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"doc": __doc__.splitlines()[0], "entries": entries}, indent=1))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
