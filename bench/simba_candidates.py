"""Issue 14, stop 29: a fresh look at the headline (0.27 ms vs 0.50) and Fig 5 from the paper's text,
one candidate at a time, each measured on the same small-sample searches.

Paper statements checked (Shao et al., CACM'21; /work/shared/papers/001_*):
* Sec. 3.3: the default tiling "uniformly partitions weights spatially, leveraging model parallelism"
  along C and K; Simba "can also" partition P and Q across chiplets and PEs.
* Sec. 4.1: "measurements begin after the weights have been loaded into each PE's weight buffer and the
  inputs have been loaded into the Global PE buffers"; "we compile and run each layer independently".
* Sec. 4.3 (Fig 5): res2[a-c]_branch2b stops gaining past 8 chiplets because "the number of weights in this
  layer is so small" and is slower at 32 because "inter-PE communication costs overwhelm the limited
  parallelism".
* Sec. 4.6: Simba uses "distributed and persistent weight storage".
* Sec. 3.1: the RISC-V configures PEs / Global PEs "via memory-mapped registers using an AXI-based
  communication protocol", collects done interrupts; chiplets synchronise "via memory-mapped interrupts"
  (no cycle counts given).

Candidates (each a section of the JSON, each against the same baseline rows):
  A weights     per-PE weight-buffer occupancy of the chosen tilings incl. P/Q copies (charged?), the
                network's weights vs the package's weight buffers, and the experiment weight_copy_nop=1
                (copies multicast over the NoP from one home per (k, c) block before each layer)
  B halo/moves  halo share of the input blocks the chosen P/Q tilings read, the between-layer moves,
                the moves charged without overlapping the producer, and Fig 5 with res2a_branch2b
                reading its inputs where res2a_branch2a wrote them (producer homes)
  C partition   Fig 5 / Fig 6 under the weight-partitioned premises (chip-kc, kc-only)
  D fixed costs controller cycles per configuration word (AXI MMIO), per-chiplet serial sync
Each variant reports Fig 5 (res2a_branch2b, res2a_branch1, res5a_branch2b: latency per chiplet count
normalised to the best, best count, t32/t8), Fig 6 (11 -> 25 Gb/s on 32 chiplets) and, where it changes
the layer model, the headline (all optimisations) and the uniform baseline.

Usage: nice -n 10 .venv/bin/python bench/simba_candidates.py [--samples 300] [--net-samples 150] [--jobs 2]
Writes build/bench/simba_candidates.json.  ~15-25 min on a loaded 2-core host.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from tessera.sim_models.simba.arch import load_arch
from tessera.sim_models.simba.interlayer import ProducerHomes, move_bytes, move_time, producers
from tessera.sim_models.simba.layers import load_network
from tessera.sim_models.simba.mapper import dataflow_kwargs, search
from tessera.sim_models.simba.model import build_structure, cdiv, ia_block_bytes
from tessera.sim_models.simba.network import run_network

OUT = Path("build/bench")
COUNTS = [1, 2, 4, 8, 16, 32]
FIG5 = ("res2a_branch2b", "res2a_branch1", "res5a_branch2b")


def fig5(net, arch, S, **kw):
    out = {}
    for name in FIG5:
        per = search(net[name], arch, COUNTS, S, seed=5, keep_per_count=True, **kw)
        t = {n: per[n].latency_cycles for n in per}
        b = min(t, key=t.get)
        out[name] = {"best_n": b, "t32/t8": t[32] / t[8], "norm": {n: round(t[n] / t[b], 4) for n in sorted(t)},
                     "t8_us": t[8] / (arch.pe_clock_ghz * 1e3), "t32_us": t[32] / (arch.pe_clock_ghz * 1e3),
                     "map8": per[8].mapping.short(), "map32": per[32].mapping.short()}
    return out


def fig6(net, arch, S, **kw):
    out = {}
    for name in ("res3a_branch1", "res3a_branch2b"):
        lat = [search(net[name], arch.with_(grs_gbps=g), 32, S, seed=6, **kw).latency_cycles for g in (11.0, 25.0)]
        out[name] = 1 - lat[1] / lat[0]
    return out


def headline(layers, arch, S, jobs, **kw):
    r = run_network(layers, arch, 32, "all", S, seed=0, jobs=jobs, **kw)
    f = arch.pe_clock_ghz * 1e6
    used = [x["uniform"].n_chiplets for x in r["rows"]]
    return r, {"all_ms": r["total_cycles"] / f, "uniform_ms": r["total_uniform_cycles"] / f,
               "moves_ms": r["move_uniform_cycles"] / f,
               "layers_on_<=8_chiplets": sum(u <= 8 for u in used), "layers_on_32": sum(u == 32 for u in used)}


def weights_section(layers, arch, run):
    """A: the weight bytes each chosen tiling stores per PE, with its copies."""
    rows, worst = [], 0
    for x in run["rows"]:
        L, mp = x["layer"], x["uniform"].mapping
        st = build_structure(L, arch, mp.kc, mp.cc, mp.pc, mp.qc, placement="local", k_ext=mp.k_ext, p_ext=mp.p_ext)
        kpe, cpe = cdiv(st.k, mp.kp), cdiv(st.c, mp.cp)
        per_pe = int((L.R * L.S * cdiv(kpe, arch.k0) * cdiv(cpe, arch.c0) * arch.k0 * arch.c0).max())
        worst = max(worst, per_pe)
        stored = int(L.R * L.S * (st.k * st.c).sum() * mp.pp * mp.qp)   # bytes over all PEs (incl. copies)
        rows.append({"layer": L.name, "mapping": mp.short(), "weight_bytes": L.weight_bytes,
                     "chiplet_copies": mp.pc * mp.qc, "pe_copies_per_chiplet": mp.pp * mp.qp,
                     "stored_bytes": stored, "max_bytes_per_pe": per_pe})
    total_w = sum(L.weight_bytes for L in layers)
    return {
        "resnet50_weight_MB": total_w / 1e6,
        "weight_buffer_MB_32_chiplets": 32 * arch.pes_per_chiplet * arch.weight_buffer_bytes / 1e6,
        "weight_buffer_MB_36_chiplets": 36 * arch.pes_per_chiplet * arch.weight_buffer_bytes / 1e6,
        "max_weight_bytes_per_pe_in_chosen_tilings": worst, "pe_weight_buffer_bytes": arch.weight_buffer_bytes,
        "layers_with_chiplet_copies": sum(r["chiplet_copies"] > 1 for r in rows),
        "stored_over_unique_bytes": sum(r["stored_bytes"] for r in rows) / total_w,
        "layers": rows}


def halo_section(layers, arch, run):
    """B: halo share of the chosen tilings' input blocks (model.ia_block_bytes: a block spans its
    halo rows and columns, zero-padding at the borders included); moves with and without producer
    overlap."""
    f = arch.pe_clock_ghz * 1e3
    halo_num = halo_den = 0.0
    per3 = []
    for x in run["rows"]:
        L, mp = x["layer"], x["uniform"].mapping
        if L.R == 1:
            continue
        st = build_structure(L, arch, mp.kc, mp.cc, mp.pc, mp.qc, placement="local", k_ext=mp.k_ext, p_ext=mp.p_ext)
        ke, ce, pe_, qe = st.extras["ext"]
        blk = sum(ia_block_bytes(L, ce[ci], pe_[pi], qe[qi]) for ci, pi, qi in st.ia_homes)
        exact = L.C * L.H * L.W
        halo_num += blk - exact
        halo_den += exact
        per3.append({"layer": L.name, "mapping": mp.short(), "ia_block_bytes": blk, "input_bytes": exact,
                     "halo_share": blk / exact - 1})
    prod = producers(layers)
    serial = overl = 0.0
    for i, j in enumerate(prod):
        if j is None:
            continue
        t, lat = move_time(move_bytes(layers[j], run["rows"][j]["uniform"], layers[i], run["rows"][i]["uniform"], arch), arch)
        serial += (t + lat) if t > 0 else 0.0
    overl = run["move_uniform_cycles"]
    return {"halo_share_3x3_layers": halo_num / halo_den, "layers_3x3": per3,
            "moves_overlapped_ms": overl / f / 1e3, "moves_serial_ms": serial / f / 1e3,
            "uniform_ms_with_serial_moves": (run["total_uniform_cycles"] - overl + serial) / f / 1e3}


def producer_homes_fig5(net, arch, S):
    """B: Fig 5 for res2a_branch2b reading its inputs where res2a_branch2a (best tiling on the same
    chiplet count) wrote them: the halo rows and any re-partition cross the NoP inside the layer."""
    prod, cons = net["res2a_branch2a"], net["res2a_branch2b"]
    t = {}
    maps = {}
    for n in COUNTS:
        pres = search(prod, arch, n, S, seed=5)
        r = search(cons, arch, n, S, seed=5, placement=ProducerHomes(prod, pres, arch))
        t[n] = r.latency_cycles
        maps[n] = r.mapping.short()
    b = min(t, key=t.get)
    return {"best_n": b, "t32/t8": t[32] / t[8], "norm": {n: round(t[n] / t[b], 4) for n in sorted(t)},
            "map8": maps[8], "map32": maps[32]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=300, help="samples per Fig 5 / Fig 6 search")
    ap.add_argument("--net-samples", type=int, default=150, help="samples per layer in the headline runs")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="comma list of sections (base,A,B,C,D) to run")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    arch = load_arch(bench_dir=OUT)
    layers = load_network("resnet50")
    net = {l.name: l for l in layers}
    S, NS = args.samples, args.net_samples
    only = set(args.only.split(",")) if args.only else {"base", "A", "B", "C", "D"}
    doc = {"samples": S, "net_samples": NS, "note": __doc__, "variants": {}}
    t0 = time.time()

    def variant(label, a, kw=None, net_run=True, source=""):
        kw = kw or {}
        v = {"source": source, "fig5": fig5(net, a, S, **kw), "fig6": fig6(net, a, S, **kw)}
        run = None
        if net_run:
            nk = {k: kw[k] for k in ("placement_start",) if k in kw}
            if "chip_pq" in kw:
                nk["dataflow"] = {(False, True): "chip-kc", (False, False): "kc-only"}[(kw["chip_pq"], kw["pe_pq"])]
            run, v["headline"] = headline(layers, a, NS, args.jobs, **nk)
        doc["variants"][label] = v
        f5 = v["fig5"]["res2a_branch2b"]
        h = v.get("headline", {})
        print(f"[{time.time() - t0:6.0f}s] {label:58s} F5 b2b best {f5['best_n']:2d} t32/t8 {f5['t32/t8']:.3f}"
              f" | b1 {v['fig5']['res2a_branch1']['t32/t8']:.3f} | F6 {v['fig6']['res3a_branch1']:.3f}/"
              f"{v['fig6']['res3a_branch2b']:.3f}"
              + (f" | all {h['all_ms']:.3f} uniform {h['uniform_ms']:.3f} ms" if h else ""), flush=True)
        return run

    base = None
    if only & {"base", "A", "B"}:
        base = variant("baseline (free, runtime placement)", arch, source="model default")
    if "A" in only:
        doc["A_weights"] = weights_section(layers, arch, base)
        w = doc["A_weights"]
        print(f"  A: ResNet-50 weights {w['resnet50_weight_MB']:.1f} MB vs {w['weight_buffer_MB_32_chiplets']:.1f} MB "
              f"of weight buffers on 32 chiplets; max per PE in chosen tilings {w['max_weight_bytes_per_pe_in_chosen_tilings']}"
              f" B of {w['pe_weight_buffer_bytes']}; {w['layers_with_chiplet_copies']} layers copy weights across "
              f"chiplets; stored / unique {w['stored_over_unique_bytes']:.1f}x", flush=True)
        variant("A weight copies multicast over the NoP before each layer", arch.with_(weight_copy_nop=1),
                source="experiment: Sec. 4.6 persistent weights read as one copy; Sec. 4.1 contradicts it")
    if "B" in only:
        doc["B_halo"] = halo_section(layers, arch, base)
        b = doc["B_halo"]
        print(f"  B: halo share of 3x3 input blocks {b['halo_share_3x3_layers']:.3f}; moves overlapped "
              f"{b['moves_overlapped_ms']:.4f} ms, serial {b['moves_serial_ms']:.4f} ms; uniform with serial moves "
              f"{b['uniform_ms_with_serial_moves']:.3f} ms", flush=True)
        doc["B_halo"]["fig5_res2a_branch2b_producer_homes"] = producer_homes_fig5(net, arch, S)
        print(f"  B: Fig 5 res2a_branch2b, inputs where res2a_branch2a wrote them: "
              f"{doc['B_halo']['fig5_res2a_branch2b_producer_homes']}", flush=True)
    if "C" in only:
        variant("C chiplets split K/C only (chip-kc)", arch, {"chip_pq": False, "pe_pq": True}, net_run=False,
                source="Sec. 3.3 default weight partitioning at the package level; Sec. 4.1 powers of two")
        variant("C K/C only at both levels (kc-only, Listing 1)", arch, {"chip_pq": False, "pe_pq": False},
                source="Listing 1 parallel_for k, c only")
    if "D" in only:
        for cyc in (12.0, 30.0):
            variant(f"D controller {cyc:g} cycles per configuration word (AXI MMIO)", arch.with_(ctrl_instr_cycles=cyc),
                    source="Sec. 3.1 memory-mapped AXI configuration; cycles per word not published (model 3)")
        for ns in (200.0, 400.0):
            variant(f"D {ns:g} ns serial sync per active chiplet", arch.with_(chiplet_sync_ns=ns),
                    source="Sec. 3.1 memory-mapped interrupts; cost not published (model 0)")
    doc["seconds"] = time.time() - t0
    tag = "" if not args.only else "_" + args.only.replace(",", "_")
    p = OUT / f"simba_candidates{tag}.json"
    p.write_text(json.dumps(doc, indent=1, default=str))
    print(f"wrote {p}")


if __name__ == "__main__":
    main()
