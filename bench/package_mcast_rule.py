"""The routers' multicast rule at the package's buffer sizes (Simba §3.1 interconnect; issue 18):
cycles per multicast packet on the bare 4x5 router mesh (``bench/noc_mcast.py`` :func:`measure`,
amaranth.sim, one source streaming multicast packets to 16 nodes) against
``chiplet_cycles.mcast_hop_cycles`` -- the term the chiplet and package models use: a packet
starts on a hop only with room for a max-length packet downstream, so when ``B <
max_packet_flits + pkt`` the next packet waits until the previous one has drained down to
``B - max_packet_flits`` flits: pkt + (pkt - (B - max)) + 2 x link latency cycles.

Points: the small package chiplet's NoC (B 16, max packet 9, 8-flit packets, link 1), its NoP
router (B 10, max 9, 7-flit packets, link latency 4: the mesh stands in for a NoP line), and the
16-PE chiplet's stop-16 check (B 17, max 17, 5 flits).  Writes ``build/bench/package_mcast_rule.json``.
Left out: other traffic, the serialised NoP link (``nop_flit_cycles`` > 1).
Run: ``nice -n 10 .venv/bin/python bench/package_mcast_rule.py [--points B,max,pkt,L ...]``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from noc_mcast import measure  # noqa: E402

from tessera.sim_models.simba.chiplet_cycles import mcast_hop_cycles  # noqa: E402

POINTS = ["16,9,8,1", "10,9,7,4", "17,17,5,1"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", nargs="*", default=POINTS, help="B,max_packet,pkt,link_latency")
    ap.add_argument("--out", default="build/bench")
    a = ap.parse_args(argv)
    pts = []
    for s in a.points:
        B, M, pkt, L = map(int, s.split(","))
        t0 = time.time()
        r = measure(B, pkt, maxlen=M, npk=24, link_latency=L)
        m = mcast_hop_cycles(B, M, L, pkt)
        pts.append({"buffer_flits": B, "max_packet_flits": M, "pkt_flits": pkt, "link_latency": L,
                    "rtl_cycles_per_packet": round(r, 2), "model_cycles_per_packet": m,
                    "seconds": round(time.time() - t0, 1)})
        print(f"B={B:3d} max={M:2d} pkt={pkt:2d} L={L}: RTL {r:6.2f} cycles/packet, model {m}", flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "package_mcast_rule.json").write_text(json.dumps(
        {"doc": __doc__.splitlines()[0], "points": pts}, indent=1) + "\n")
    print(f"wrote {out / 'package_mcast_rule.json'}")
    return 0 if all(abs(p["rtl_cycles_per_packet"] - p["model_cycles_per_packet"]) < 0.5 for p in pts) else 1


if __name__ == "__main__":
    sys.exit(main())
