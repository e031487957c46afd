"""Multicast packet period of the router's cut-through rule (Simba §3.1 interconnect; issue 17):
the chiplet's 4x5 router mesh alone (hdl/noc/mesh.py, amaranth.sim), the Global PE's node (0, 4)
streaming multicast DATA-class packets of ``pkt`` flits to the 16 PE nodes at one flit per
cycle, sinks always ready.  Measures cycles per packet at the farthest PE (3, 0) after warm-up,
for router buffers ``B`` and ``max_packet_flits`` 17 (the chiplet's), and prints the chiplet
model's :func:`~tessera.sim_models.simba.chiplet_cycles.mcast_packet_cycles` beside it (the
model's term is this rule, not a fit: a router starts a multicast only with room for a max-length
packet in every downstream buffer, so with ``B < max_packet_flits + pkt`` packets go one at a
time per hop, 2*pkt + 2*link_latency cycles each).

Writes ``build/bench/noc_mcast.json``: ``points`` [{buffer_flits, pkt_flits, max_packet_flits,
rtl_cycles_per_packet, model_cycles_per_packet}].  Left out: other traffic (credits, OUT), the
Global PE's and PE nodes' own pacing (measured by bench/chiplet_layer.py).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from amaranth.sim import Simulator

from tessera.hdl.noc.mesh import Mesh

KX, KY, SRC = 4, 5, (0, 4)
PES = [(x, y) for y in range(4) for x in range(4)]


def measure(B: int, pkt: int, maxlen: int = 17, npk: int = 30, link_latency: int = 1) -> float:
    mesh = Mesh(kx=KX, ky=KY, vcs=2, buffer_flits=B, max_packet_flits=maxlen, payload_width=64,
                classes=2, max_node=max(KX, KY), link_latency=link_latency, sim=True)
    lay = mesh.cfg.flit
    mask = sum(1 << (y * KX + x) for x, y in PES)
    si, fi = SRC[1] * KX + SRC[0], 0 * KX + 3
    tails = []

    async def bench(ctx):
        for i in range(KX * KY):
            ctx.set(mesh.local_out[i].ready, 1)
        li, lo = mesh.local_in[si], mesh.local_out[fi]
        sent = fl = cyc = 0
        while cyc < 20 * npk * pkt + 500 and len(tails) < npk:
            if sent < npk:
                ctx.set(li.valid, 1)
                ctx.set(li.payload, lay.const({
                    "head": int(fl == 0), "tail": int(fl == pkt - 1), "mclass": 0, "mcast": 1,
                    "dest": {"mcast": {"nodes": mask, "chiplets": 1}},
                    "src": {"node": {"x": SRC[0], "y": SRC[1]}, "chiplet": {"x": 0, "y": 0}},
                    "payload": sent}))
            else:
                ctx.set(li.valid, 0)
            rdy = ctx.get(li.ready)
            ov, of = ctx.get(lo.valid), ctx.get(lo.payload)
            await ctx.tick()
            cyc += 1
            if sent < npk and rdy:
                fl, sent = (0, sent + 1) if fl == pkt - 1 else (fl + 1, sent)
            if ov and of.tail:
                tails.append(cyc)

    sim = Simulator(mesh)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(tails) == npk, f"only {len(tails)} of {npk} packets reached the farthest PE"
    w = npk // 3
    return (tails[-1] - tails[w]) / (npk - 1 - w)


def main(argv=None) -> int:
    from tessera.sim_models.simba.chiplet_cycles import mcast_packet_cycles
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", nargs="*", default=["17,5", "32,5"], help="B,pkt pairs")
    ap.add_argument("--out", default="build/bench")
    a = ap.parse_args(argv)
    t0 = time.time()
    pts = []
    for s in a.points:
        B, pkt = map(int, s.split(","))
        cfg = SimpleNamespace(router_buffer_flits=B, max_packet_flits=17, link_latency=1)
        r = measure(B, pkt)
        m = mcast_packet_cycles(cfg, pkt)
        pts.append({"buffer_flits": B, "pkt_flits": pkt, "max_packet_flits": 17,
                    "rtl_cycles_per_packet": round(r, 2), "model_cycles_per_packet": m})
        print(f"B={B:3d} pkt={pkt:2d}: RTL {r:6.2f} cycles/packet, model {m}", flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"doc": __doc__.splitlines()[0], "points": pts, "wall_seconds": round(time.time() - t0, 1),
           "command": "python bench/noc_mcast.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    (out / "noc_mcast.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out / 'noc_mcast.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
