"""NoC saturation benchmark (issue 3): Verilated mesh + Amaranth traffic generators.

For 4x4 and 6x6 meshes, uniform random traffic (self-addressed included), 1- and 4-flit
packets, 1 VC x 4-flit buffers and a larger VC/buffer configuration, for both router
pipelines: ``sa_stages`` 1 (one-cycle switch allocation, the chiplet's router) and 2 (two
cycles, an option of the router/mesh blocks; also at 1 VC x 5 flits, the smallest buffer that
covers its credit round trip 2L+3 -- 1 VC x 4 is the comparison with BookSim at equal VCs
and buffers): zero-load latency
(offered load ZERO_LOAD = 0.005 flits/node/cycle, Little's law), cycles per hop (slope of the unicast
latency over hop count at that load), saturation = accepted flits/node/cycle at full offered
load, bound = 4/k, and a latency-load curve.  Multicast entries compare the link traversals of
a broadcast XY tree (golden model, the tree the router replicates on) with the minimum
spanning tree and with k*k unicasts; the RTL's delivered broadcast copies are counted.

Writes build/bench/noc_throughput.json, noc_latency_load.csv and .png.
Run:  .venv/bin/python bench/noc_throughput.py  [--quick] [--sa 1,2]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path

from tessera.golden import noc as G
from tessera.tb.noc.traffic import run_traffic

OUT = Path(os.environ.get("TESSERA_BUILD", Path(__file__).resolve().parent.parent / "build")) / "bench"
# (name, VCs, buffer flits, pipeline): pipeline 1 / 2 = sa_stages, "a2" = alloc_stages 2
CONFIGS = [("1vc_x_4", 1, 4, 1), ("2vc_x_8", 2, 8, 1),
           ("sa2_1vc_x_4", 1, 4, 2), ("sa2_1vc_x_5", 1, 5, 2), ("sa2_2vc_x_8", 2, 8, 2),
           ("al2_1vc_x_4", 1, 4, "a2"), ("al2_2vc_x_8", 2, 8, "a2")]


def _stages(sa):
    """pipeline key -> (sa_stages, alloc_stages)"""
    return (1, 2) if sa == "a2" else (sa, 1)
# "Zero load": low enough that queueing adds < 0.01 cycles/hop to the slope (at 0.02 the 6x6
# slope was 2.007), long enough windows for ~2000 packets on a 4x4 mesh.
ZERO_LOAD = 0.005


def run_points(k, vcs, buf, points, check=False, sa=1):
    s, a = _stages(sa)
    return run_traffic(k, vcs, buf, points, check=check, sa_stages=s, alloc_stages=a)


def rate_for(load_flits, plen):
    """Generator threshold for an offered load in flits/node/cycle."""
    return min(65536, max(1, round(load_flits / plen * 65536)))


def summarise(rec, k):
    d = rec["delta"]
    n, cyc = k * k, rec["point"]["cycles"]
    acc = d["rcv_flits"] / (n * cyc)
    lat = d["inflight_sum"] / d["rcv_pkts"] if d["rcv_pkts"] else float("nan")
    H = 2 * k - 1
    per_hop = [(h, d[f"lat_sum_{h}"] / d[f"lat_cnt_{h}"]) for h in range(H) if d[f"lat_cnt_{h}"]]
    return acc, lat, per_hop


def slope(pairs):
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4x4 only, shorter runs")
    ap.add_argument("--sa", default="1,2,a2",
                    help="router pipelines to run (sa_stages 1 / 2, a2 = alloc_stages 2)")
    ap.add_argument("--configs", default="", help="only these configurations (names, comma)")
    ap.add_argument("--no-mcast", action="store_true", help="skip the RTL multicast runs")
    args = ap.parse_args(argv)
    sas = {x if x == "a2" else int(x) for x in args.sa.split(",")}
    only = set(filter(None, args.configs.split(",")))
    OUT.mkdir(parents=True, exist_ok=True)
    meshes = [4] if args.quick else [4, 6]
    warm, cyc = (500, 2000) if args.quick else (1000, 5000)
    entries, curve = [], []
    for k in meshes:
        bound = 4 / k
        for cname, vcs, buf, sa in CONFIGS:
            if sa not in sas or (only and cname not in only):
                continue
            pts = []
            for plen in (1, 4):
                pts.append({"rate": rate_for(ZERO_LOAD, plen), "plen": plen, "warmup": warm,
                            "cycles": cyc * 4})
                pts.append({"rate": 65536, "plen": plen, "warmup": warm, "cycles": cyc})
            loads = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
            for f in loads:
                pts.append({"rate": rate_for(f * bound, 1), "plen": 1, "warmup": warm,
                            "cycles": cyc})
            res = run_points(k, vcs, buf, pts, sa=sa)
            for j, plen in enumerate((1, 4)):
                _, zl, per_hop = summarise(res[2 * j], k)
                sat, _, _ = summarise(res[2 * j + 1], k)
                e = {"mesh": f"{k}x{k}", "traffic": "uniform_random_incl_self",
                     "packet_flits": plen, "vcs": vcs, "buffer_flits": buf, "link_latency": 1,
                     "config": cname, "sa_stages": _stages(sa)[0],
                     "alloc_stages": _stages(sa)[1],
                     "zero_load_latency_golden": G.zero_load_latency(
                         0, sa_stages=_stages(sa)[0], alloc_stages=_stages(sa)[1]),
                     "zero_load_latency_cycles": round(zl, 2),
                     "zero_load_cycles_per_hop": round(slope(per_hop), 3),
                     "saturation_flits_per_node_cycle": round(sat, 4),
                     "bound": round(bound, 4), "fraction_of_bound": round(sat / bound, 4),
                     "router_errors": res[2 * j + 1]["end"]["errors"]}
                entries.append(e)
            for f, r in zip(loads, res[4:]):
                acc, lat, _ = summarise(r, k)
                curve.append({"mesh": f"{k}x{k}", "config": cname, "offered": round(f * bound, 4),
                              "accepted": round(acc, 4), "latency_cycles": round(lat, 2)})
        # multicast: broadcast from the centre and from a corner
        for src in [(0, 0), (k // 2, k // 2)]:
            nodes = [(x, y) for x in range(k) for y in range(k)]
            tree = len(G.mcast_tree(src, nodes))
            uni = sum(G.hops(src, d) for d in nodes)
            entries.append({"kind": "multicast", "mesh": f"{k}x{k}", "source": list(src),
                            "destinations": k * k, "xy_tree_link_traversals": tree,
                            "minimum_link_traversals": G.broadcast_min_links(k, k),
                            "unicast_link_traversals": uni,
                            "tree_over_minimum": round(tree / G.broadcast_min_links(k, k), 4)})
    # RTL multicast copies: 4x4 broadcast-heavy random multicast traffic, every copy delivered
    for sa, buf in ((1, 4), (2, 5), ("a2", 4)):
        if sa not in sas or args.no_mcast:
            continue
        res = run_points(4, 2, buf, [{"rate": rate_for(0.02, 1), "plen": 1, "mcast": 256,
                                      "warmup": 200, "cycles": 3000, "drain": 2000}],
                         check=True, sa=sa)
        dr = res[0]["drained"]
        entries.append({"kind": "multicast_rtl", "mesh": "4x4", "sa_stages": _stages(sa)[0],
                        "alloc_stages": _stages(sa)[1],
                        "buffer_flits": buf, "copies_due": dr["mcast_due"],
                        "copies_delivered": dr["mcast_rcv"], "order_errors": dr["mseq_err"]})
    (OUT / "noc_throughput.json").write_text(json.dumps(entries, indent=2) + "\n")
    with open(OUT / "noc_latency_load.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(curve[0]))
        w.writeheader()
        w.writerows(curve)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for key in sorted({(c["mesh"], c["config"]) for c in curve}):
            pts = [c for c in curve if (c["mesh"], c["config"]) == key]
            ax.plot([p["accepted"] for p in pts], [p["latency_cycles"] for p in pts], "o-",
                    label=f"{key[0]} {key[1]}")
        ax.set_xlabel("accepted load (flits/node/cycle)")
        ax.set_ylabel("latency incl. source queue (cycles)")
        ax.set_ylim(0, 200)
        ax.legend()
        ax.set_title("Uniform random, 1-flit packets, link latency 1")
        fig.tight_layout()
        fig.savefig(OUT / "noc_latency_load.png", dpi=120)
    except Exception as err:                      # plotting is optional
        print(f"(no PNG: {err})", file=sys.stderr)
    print(f"{'mesh':5s} {'config':14s} {'flits':>5s} {'zl_lat':>7s} {'cyc/hop':>7s} "
          f"{'sat':>6s} {'bound':>6s} {'frac':>6s}")
    for e in entries:
        if "kind" in e:
            continue
        print(f"{e['mesh']:5s} {e['config']:14s} {e['packet_flits']:5d} "
              f"{e['zero_load_latency_cycles']:7.2f} {e['zero_load_cycles_per_hop']:7.3f} "
              f"{e['saturation_flits_per_node_cycle']:6.3f} {e['bound']:6.3f} "
              f"{e['fraction_of_bound']:6.3f}")
    for e in entries:
        if e.get("kind") == "multicast":
            print(f"multicast {e['mesh']} src {e['source']}: XY tree {e['xy_tree_link_traversals']} "
                  f"links, minimum {e['minimum_link_traversals']}, unicasts "
                  f"{e['unicast_link_traversals']}")
        elif e.get("kind") == "multicast_rtl":
            print(f"RTL multicast 4x4 sa_stages={e['sa_stages']} "
                  f"alloc_stages={e['alloc_stages']}: "
                  f"{e['copies_delivered']}/{e['copies_due']} copies delivered, "
                  f"order errors {e['order_errors']}")
    print(f"wrote {OUT / 'noc_throughput.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
