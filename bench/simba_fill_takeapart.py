"""Issue 14, stop 31 (lead 2): why Fig 12's gain from the sequential fill (Fig. 11b) is ~6x in the model
(paper: up to 15 %), taken apart one assumption at a time on its best layers.

Fig 12 in bench/simba_repro.py: the layer's best 32-chiplet tiling under the runtime baseline, evaluated
with the Fig. 11b sequential fill (IA packed into the Global PEs from chiplet 0, 64 KB each; OA in the
Global PEs after them), against the Sec. 5.2 placement optimum of the same tiling (optim.placement).
Each variant changes one thing and reports sequential / placed latency and the gain (sequential / placed - 1):

  base        as simba_repro.py
  ia_only     the fill holds only the IA; OA stay on their producers (no OA writes share the fill's links)
  sources_n   IA spread evenly over the first n Global PEs in row-major order (n = 6: the top row, Fig. 11b
              read literally; 12, 18, 32), OA on their producers: how many source Global PEs the fill needs
  multicast   the tiling chosen with the chiplets splitting K/C only (Sec. 3.3's default weight partitioning):
              every IA block is multicast to its K partitions, so the fill's bytes cross each tree link once
  fill_search the tiling searched under the sequential fill itself (the best uniform tiling for that start)
  nop_xN      NoP link bandwidth x N (serialisation on the links): 25 Gb/s (x2.3), x4, x10, x100
  gpe_port_xN the source Global PE's NoC port x N (serialisation at the source)
  bytes       the bytes the fill sends: IA incl. halo, the most loaded NoP link, its time at 11 Gb/s

XY routing is sourced (Sec. 4.1: "dimension-ordered X-Y routing"), so it is not a variant.
Usage: nice -n 10 .venv/bin/python bench/simba_fill_takeapart.py [--samples 300] [--layers a,b]
Writes build/bench/simba_fill_takeapart.json.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from tessera.sim_models.simba.arch import load_arch
from tessera.sim_models.simba.layers import load_network
from tessera.sim_models.simba.mapper import search
from tessera.sim_models.simba.model import build_structure, evaluate, evaluate_batch, ia_block_bytes
from tessera.sim_models.simba.optim import placement

OUT = Path("build/bench")
LAYERS = ("res2b_branch2b", "res2a_branch2b", "res3d_branch2b", "res2a_branch1", "res2b_branch2c", "res4a_branch1")


def pack_in_order(sizes, per, last=None):
    """Blocks of ``sizes`` bytes packed in order into Global PEs of ``per`` bytes each (home 0,
    1, ...; a block may straddle two homes); home ``last`` takes whatever is left.  Returns,
    per block, its (home, fraction) parts."""
    homes, h, room = [], 0, per
    for s in sizes:
        parts, left = [], float(s)
        while left > 1e-9:
            take = min(room, left)
            parts.append((h, take / s))
            left -= take
            room -= take
            if room <= 1e-9 and (last is None or h < last):
                h, room = h + 1, per
        homes.append(parts)
    return homes


class EvenIA:
    """IA homes: the blocks spread evenly (by bytes, in block order) over the Global PEs of the first
    ``n`` chiplets in row-major order; OA on their producers (model.build_structure's callable path)."""

    def __init__(self, n, cap):
        self.n, self.cap = n, cap

    def __repr__(self):
        return f"even_ia({self.n})"

    def __call__(self, layer, ext, ia_keys, dests):
        ce, pe_, qe = ext
        sizes = [ia_block_bytes(layer, ce[ci], pe_[pi], qe[qi]) for ci, pi, qi in ia_keys]
        per = max(1.0, sum(sizes) / self.n)
        if per > self.cap:
            raise ValueError(f"{self.n} Global PEs cannot hold {sum(sizes)} B")
        return pack_in_order(sizes, per, last=self.n - 1)


class SeqIA(EvenIA):
    """The sequential fill of the IA only (64 KB per Global PE from chiplet 0), OA on their producers."""

    def __init__(self, cap):
        super().__init__(None, cap)

    def __repr__(self):
        return "sequential_ia"

    def __call__(self, layer, ext, ia_keys, dests):
        ce, pe_, qe = ext
        sizes = [ia_block_bytes(layer, ce[ci], pe_[pi], qe[qi]) for ci, pi, qi in ia_keys]
        self.n = int(np.ceil(sum(sizes) / self.cap))
        return pack_in_order(sizes, float(self.cap))


def fill_bytes(L, arch, r):
    mp = r.mapping
    st = build_structure(L, arch, mp.kc, mp.cc, mp.pc, mp.qc, r.binding, r.placement, mp.k_ext, mp.p_ext)
    ia = sum(ia_block_bytes(L, *(st.extras["ext"][i][j] for i, j in ((1, k[0]), (2, k[1]), (3, k[2]))))
             for k in st.ia_homes)
    b = evaluate_batch(st, arch, [mp.kp], [mp.cp], [mp.pp], [mp.qp], [mp.p1], [mp.q1])
    homes = sorted({h for hs in st.ia_homes.values() for h, _ in hs})
    return {"ia_bytes_incl_halo": ia, "ia_bytes": L.C * L.H * L.W, "ia_homes": homes,
            "max_link_bytes": float(b.link_bytes[0].max()),
            "max_link_cycles": float(b.link_bytes[0].max() / arch.nop_link_bytes_per_cycle),
            "t_in_max": float(b.terms["t_in"][0].max()), "comp_max": float(b.terms["comp"][0].max()),
            "sync": float(np.ravel(b.terms["sync"])[0]), "setup": float(b.terms["setup"][0])}


def gain(L, arch, b, pl):
    s = evaluate(L, arch, b.mapping, placement=pl)
    p = placement(L, arch, b)
    p = min((p, placement(L, arch, s)), key=lambda r: r.latency_cycles)
    return {"sequential_cycles": s.latency_cycles, "placed_cycles": p.latency_cycles,
            "placed": f"{p.binding} / {p.placement}", "gain": s.latency_cycles / p.latency_cycles - 1,
            "mapping": b.mapping.short()}


def starts(net, arch, S, doc, t0):
    """Fig 12 over every layer (best 32-chiplet tiling of the runtime baseline, S samples, seed 0) from
    each start state: the best layer's gain, the median, res4a_branch1."""
    from concurrent.futures import ProcessPoolExecutor
    names = list(net)
    with ProcessPoolExecutor(2) as ex:
        rows = list(ex.map(_start_row, [(net[n], arch, S) for n in names]))
    doc["starts"] = {}
    for key in rows[0]:
        g = {n: r[key] for n, r in zip(names, rows) if r.get(key) is not None}
        top = max(g, key=g.get)
        doc["starts"][key] = {"best_layer": top, "best_gain": g[top], "median": sorted(g.values())[len(g) // 2],
                              "res4a_branch1": g.get("res4a_branch1"), "layers_over_20pct": sum(v > 0.2 for v in g.values()),
                              "per_layer": g}
        print(f"  start {key:22s} Fig 12 best {top} {g[top]:.3f} median {doc['starts'][key]['median']:.3f} "
              f"res4a_branch1 {g.get('res4a_branch1', float('nan')):.3f} layers > 20 %: "
              f"{doc['starts'][key]['layers_over_20pct']}", flush=True)
    p = OUT / "simba_fill_takeapart_starts.json"
    p.write_text(json.dumps(doc, indent=1, default=str))
    print(f"wrote {p} ({time.time() - t0:.0f} s)")


class OneSource(EvenIA):
    """Every IA block in the Global PE of chiplet ``src`` (room unlimited: Sec. 5.2's "broadcast
    from a single chiplet"); OA on their producers."""

    def __init__(self, src):
        super().__init__(1, float("inf"))
        self.src = src

    def __repr__(self):
        return f"one_source({self.src})"

    def __call__(self, layer, ext, ia_keys, dests):
        return [[(self.src, 1.0)] for _ in ia_keys]


def r4a(net, arch, S, doc, t0):
    """Sec. 5.2's res4a_branch1 example with the paper's tiling (K over 32 chiplets: one broadcast),
    searched under the sequential fill as bench/simba_repro.py does: what its placement gain is made of."""
    L = net["res4a_branch1"]
    b = search(L, arch, 32, S, seed=0, placement="sequential", splits=[(32, 1, 1, 1)])
    p = placement(L, arch, b)
    d = {"tiling": b.mapping.short(), "sequential_cycles": b.latency_cycles, "placed_cycles": p.latency_cycles,
         "placed": f"{p.binding} / {p.placement}", "gain": b.latency_cycles / p.latency_cycles - 1,
         "bytes": fill_bytes(L, arch, b), "variants": {}}
    for lab, pl, bind in (("fill holds the IA only (OA on their producers)", SeqIA(arch.gpe_buffer_bytes), "row-major"),
                          ("one source at chiplet 0 (corner)", OneSource(0), "row-major"),
                          ("one source at chiplet 14 (centre)", OneSource(14), "row-major")):
        r = evaluate(L, arch, b.mapping, binding=bind, placement=pl)
        d["variants"][lab] = {"cycles": r.latency_cycles, "over_placed": r.latency_cycles / p.latency_cycles - 1}
        print(f"  {lab:50s} {r.latency_cycles:9.0f} cycles, {r.latency_cycles / p.latency_cycles - 1:+.3f} vs placed",
              flush=True)
    c0, c14 = (d["variants"][k]["cycles"] for k in ("one source at chiplet 0 (corner)", "one source at chiplet 14 (centre)"))
    d["corner_to_centre_gain"] = c0 / c14 - 1
    print(f"  res4a_branch1 ({d['tiling']}): fill gain {d['gain']:.3f}; one source moved corner -> centre "
          f"{d['corner_to_centre_gain']:.4f} (paper 5 %)", flush=True)
    doc["res4a_branch1_paper_tiling"] = d
    p_ = OUT / "simba_fill_takeapart_r4a.json"
    p_.write_text(json.dumps(doc, indent=1, default=str))
    print(f"wrote {p_} ({time.time() - t0:.0f} s)")


def _start_row(a):
    L, arch, S = a
    b = search(L, arch, 32, S, seed=0)
    out = {}
    for key, pl in (("sequential", "sequential"), ("row", "row"), ("distributed", "distributed"),
                    ("even_32", EvenIA(32, arch.gpe_buffer_bytes)), ("sequential_ia_only", SeqIA(arch.gpe_buffer_bytes)),
                    ("local-row-oa", "local-row-oa")):
        try:
            out[key] = gain(L, arch, b, pl)["gain"]
        except Exception:
            out[key] = None
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--layers", default=",".join(LAYERS))
    ap.add_argument("--r4a", action="store_true", help="res4a_branch1 with the paper's broadcast tiling only")
    ap.add_argument("--starts", action="store_true", help="Fig 12 over all layers from each start state instead")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    arch = load_arch(bench_dir=OUT)
    net = {l.name: l for l in load_network("resnet50")}
    S = args.samples
    doc = {"samples": S, "note": __doc__, "layers": {}}
    t0 = time.time()
    if args.starts:
        return starts(net, arch, S, doc, t0)
    if args.r4a:
        return r4a(net, arch, S, doc, t0)
    for name in args.layers.split(","):
        L = net[name]
        b = search(L, arch, 32, S, seed=0)
        d = {"tiling": b.mapping.short()}
        d["base"] = gain(L, arch, b, "sequential")
        d["base"]["bytes"] = fill_bytes(L, arch, evaluate(L, arch, b.mapping, placement="sequential"))
        d["ia_only"] = gain(L, arch, b, SeqIA(arch.gpe_buffer_bytes))
        for n in (6, 12, 18, 32):
            try:
                d[f"sources_{n}"] = gain(L, arch, b, EvenIA(n, arch.gpe_buffer_bytes))
            except ValueError as e:
                d[f"sources_{n}"] = {"error": str(e)}
        bm = search(L, arch, 32, S, seed=0, chip_pq=False)
        d["multicast"] = gain(L, arch, bm, "sequential")
        d["multicast"]["local_cycles_vs_base_local"] = bm.latency_cycles / b.latency_cycles
        d["multicast"]["bytes"] = fill_bytes(L, arch, evaluate(L, arch, bm.mapping, placement="sequential"))
        bs = search(L, arch, 32, S, seed=0, placement="sequential")
        d["fill_search"] = gain(L, arch, bs, "sequential")
        for g in (25.0, 44.0, 110.0, 1100.0):
            a = arch.with_(grs_gbps=g)
            ba = search(L, a, 32, S, seed=0)
            d[f"nop_{g / 11:g}x"] = gain(L, a, ba, "sequential")
        a = arch.with_(grs_gbps=1100.0, noc_link_bytes_per_cycle=arch.noc_link_bytes_per_cycle * 100)
        d["nop_100x_and_gpe_port_100x"] = gain(L, a, search(L, a, 32, S, seed=0), "sequential")
        for x in (4.0, 100.0):
            a = arch.with_(noc_link_bytes_per_cycle=arch.noc_link_bytes_per_cycle * x)
            ba = search(L, a, 32, S, seed=0)
            d[f"gpe_port_{x:g}x"] = gain(L, a, ba, "sequential")
        doc["layers"][name] = d
        print(f"[{time.time() - t0:5.0f}s] {name} ({d['tiling']}): " + " | ".join(
            f"{k} {v['gain']:.3f}" for k, v in d.items() if isinstance(v, dict) and "gain" in v), flush=True)
        (OUT / "simba_fill_takeapart.json").write_text(json.dumps(doc, indent=1, default=str))
    print(f"wrote {OUT / 'simba_fill_takeapart.json'} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
