"""PE utilisation on representative ResNet-50 tiles (Simba §4: weights preloaded).

Runs the Simba PE RTL (Verilator via cocotb, default parameters) on the tiles
of bench/data/pe_tiles.json, checks every output against the golden model,
and reports per tile

    cycles          steady-state cycles per tile: the distance between the
                    done pulses of back-to-back tiles (the tile 3 times, each
                    started as soon as the PE accepts it -- while the previous
                    one drains -- as a PE runs the tiles of a layer with its
                    input double-buffered); the pipeline fill is paid once
    latency_cycles  one tile started while idle, start -> done (fill + drain)
    utilization = useful MACs / (cycles x K0 x C0)   (utilization_isolated:
                    with latency_cycles)

where useful MACs exclude multiplications by zero padding (``mac_ops`` is
the loop-nest operation count R*S*C1*K1*P1*Q1; the PE skips most padded
rows/columns, so an edge tile can take fewer cycles than mac_ops).  Writes
build/bench/pe_utilization.json; ``min_utilization_large_tiles`` is the
minimum over tiles with P1*Q1 >= 16 and R*S*C1 >= 9 (target >= 0.95).
Usage: python bench/pe_utilization.py   (or make bench)
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from tessera.golden import pe as golden
from tessera.hdl.pe.config import PEConfig, PEParams
from tessera.tb.runner import BUILD, run

HERE = Path(__file__).resolve().parent


def main() -> int:
    spec = json.loads((HERE / "data" / "pe_tiles.json").read_text())
    params = PEParams()
    tiles = [{**t, "cfg": PEConfig(**t["cfg"]).as_dict(), "seed": i}
             for i, t in enumerate(spec["tiles"])]
    with tempfile.TemporaryDirectory() as tmp:
        tin, tout = Path(tmp) / "in.json", Path(tmp) / "out.json"
        tin.write_text(json.dumps(tiles))
        run("pe", {}, "tessera.tb.pe.test_pe", testcase="bench", seed=1,
            extra_env={"TESSERA_BENCH_IN": str(tin), "TESSERA_BENCH_OUT": str(tout)})
        measured = json.loads(tout.read_text())
    rows = []
    for t in measured:
        cfg = PEConfig(**t["cfg"])
        useful = golden.useful_macs(params, cfg)
        cyc = t["cycles"]
        large = cfg.P1 * cfg.Q1 >= 16 and cfg.R * cfg.S * cfg.C1 >= 9
        rows.append({"name": t["name"], "layer": t["layer"], "config": t["cfg"],
                     "edge": bool(t.get("edge", False)),
                     "mac_ops": cfg.R * cfg.S * cfg.C1 * cfg.K1 * cfg.P1 * cfg.Q1,
                     "cycles": cyc, "latency_cycles": t["latency_cycles"],
                     "useful_macs": useful,
                     "utilization": useful / (cyc * params.K0 * params.C0),
                     "utilization_isolated": useful / (t["latency_cycles"] * params.K0 * params.C0),
                     "large": large})
    large = [r for r in rows if r["large"]]
    interior_large = [r for r in large if not r["edge"]]
    result = {
        "block": "pe", "params": params.__dict__,
        "definition": "utilization = useful MACs (excluding zero padding) / (cycles x K0 x C0); "
                      "cycles = done-to-done of back-to-back tiles (next tile started while the "
                      "previous drains); latency_cycles / utilization_isolated: one tile from idle, "
                      "start -> done",
        "tiles": rows,
        "min_utilization_large_tiles": min(r["utilization"] for r in large),
        "min_utilization_large_interior_tiles": min(r["utilization"] for r in interior_large),
        "min_utilization_isolated_large_tiles": min(r["utilization_isolated"] for r in large),
        "target": 0.95,
    }
    out = BUILD / "bench" / "pe_utilization.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'tile':28s} {'ops':>7s} {'cycles':>7s} {'util':>6s} {'latency':>7s} {'util_iso':>8s}  large")
    for r in rows:
        print(f"{r['name']:28s} {r['mac_ops']:7d} {r['cycles']:7d} {r['utilization']:6.3f} "
              f"{r['latency_cycles']:7d} {r['utilization_isolated']:8.3f}  "
              f"{'yes' if r['large'] else 'no'}{' (edge)' if r['edge'] else ''}")
    print(f"min_utilization_large_tiles          = {result['min_utilization_large_tiles']:.4f}")
    print(f"min_utilization_large_interior_tiles = {result['min_utilization_large_interior_tiles']:.4f}")
    print(f"min_utilization_isolated_large_tiles = {result['min_utilization_isolated_large_tiles']:.4f}")
    print(f"target 0.95\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
