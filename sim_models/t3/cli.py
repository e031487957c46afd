"""``tessera t3``: evaluate one model / TP degree under the T3 configurations (§5.3).

    tessera t3 --model t-nlg --tp 8 [--config all|sequential|t3|t3-mca|ideal|ideal-rs-nmc]
               [--sublayer all|OP|FC-2|FC-1|IP] [--cus N] [--out DIR]

Prints a table (GEMM/RS/AG times, each configuration's time and speedup over Sequential); with
``--out`` also writes ``t3_<model>_tp<N>.json`` and PNGs (breakdown, speedups, fused timeline).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from . import config, study

CHOICES = ("all",) + study.CONFIGS


def add_parser(subparsers):
    p = subparsers.add_parser("t3", help="T3 fused GEMM-RS system model (Pati et al. ASPLOS'24)")
    p.add_argument("--model", required=True, choices=sorted(config.models()))
    p.add_argument("--tp", type=int, help="tensor-parallel degree (default: the model's first, Table 2)")
    p.add_argument("--config", default="all", choices=CHOICES)
    p.add_argument("--sublayer", default="all", choices=("all",) + config.SUBLAYERS)
    p.add_argument("--cus", type=int, help="CUs per GPU (default 80, Table 1; 160 = GPU-2X-CU)")
    p.add_argument("--out", metavar="DIR", help="write JSON and plots here")
    p.set_defaults(func=run)
    return p


def _err(msg: str) -> int:
    print(f"tessera t3: error: {msg}", file=sys.stderr)
    return 2


def run(args) -> int:
    mo = config.model(args.model)
    tp = args.tp if args.tp is not None else mo.tp[0]
    if tp < 2 or tp > 1024:
        return _err(f"--tp must be between 2 and 1024, got {tp}")
    if (mo.H % tp) or ((3 * mo.H) % tp):
        return _err(f"--tp {tp} does not divide H={mo.H} of {mo.name} (choose e.g. {', '.join(map(str, mo.tp))})")
    sysm = config.system()
    if args.cus is not None:
        if args.cus < 1 or args.cus > 4096:
            return _err(f"--cus must be between 1 and 4096, got {args.cus}")
        sysm = sysm.scaled(cus=args.cus)
    subs = config.SUBLAYERS if args.sublayer == "all" else (args.sublayer,)
    cfgs = study.CONFIGS if args.config == "all" else ("sequential", args.config)
    if args.config == "sequential":
        cfgs = ("sequential",)
    want_trace = bool(args.out)
    res = [study.evaluate(sysm, mo, tp, s, record=want_trace, configs=cfgs) for s in subs]
    print(f"{mo.name} TP{tp}: {sysm.cus} CUs, peak {sysm.peak_flops / 1e12:.1f} TFLOP/s, "
          f"ring {sysm.link_bw / 1e9:.0f} GB/s, DRAM {sysm.dram_bw / 1e9:.0f} GB/s (times in us)")
    print(f"{'sub':5s} {'M':>6s} {'N':>6s} {'K':>6s} {'stg':>4s} {'GEMM':>7s} {'RS':>6s} {'AG':>6s} "
          + " ".join(f"{c:>18s}" for c in cfgs))
    for r in res:
        print(f"{r.sublayer:5s} {r.M:6d} {r.N:6d} {r.K:6d} {r.stages:4d} {r.gemm * 1e6:7.0f} "
              f"{r.rs * 1e6:6.0f} {r.ag * 1e6:6.0f} "
              + " ".join(f"{r.times[c] * 1e6:9.0f} ({r.speedup(c):4.2f}x)" for c in cfgs))
    if args.out:
        from . import plots
        out = Path(args.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            return _err(f"cannot create --out {out}: {e.strerror}")
        rows = [r.to_json() for r in res]
        stem = f"t3_{mo.key}_tp{tp}"
        (out / f"{stem}.json").write_text(json.dumps(dict(model=mo.key, tp=tp, cus=sysm.cus, rows=rows),
                                                     indent=1, default=float))
        plots.breakdown(rows, out / f"{stem}_breakdown.png")
        shown = [c for c in cfgs if c != "sequential"]
        if shown:
            plots.speedups(rows, out / f"{stem}_speedup.png", configs=tuple(shown))
        for r in res:
            if r.fused:
                plots.timeline(r.fused, r.ag * 1e6, out / f"{stem}_{r.sublayer}_timeline.png",
                               f"{mo.name} {r.sublayer} TP{tp}")
        print(f"wrote {out}/{stem}.json and plots")
    return 0


def demo() -> list[dict]:
    """Quick real checks (< 10 s): alpha-beta, NMC RS gain vs paper, T-NLG TP8 ideal, address space."""
    import numpy as np

    from . import address_space as A
    from . import collectives as C
    rows = []
    s = config.system(8)
    S = 8192 * 4256 * 2
    checks = 0
    ab = C.alpha_beta("ag", S, 8, s.link_latency, s.link_bw)
    assert abs(C.ring("ag", s, S).time - ab) / ab < 1e-12
    checks += 1
    g8 = C.ring("rs", s, S).time / C.ring("rs_nmc", s, S).time - 1
    g16 = C.ring("rs", s.scaled(n_gpus=16), S, 16).time / C.ring("rs_nmc", s.scaled(n_gpus=16), S, 16).time - 1
    p = config.paper()
    assert abs(g8 - p["nmc_rs_gain_tp8"]) < 0.01 and abs(g16 - p["nmc_rs_gain_tp16"]) < 0.01
    checks += 2
    rows.append({"block": "t3 collectives", "checks": checks, "cycles": "-",
                 "detail": f"alpha-beta exact; NMC RS gain {100 * g8:.1f}%/{100 * g16:.1f}% (paper 7%/3%)"})
    from . import gemm, overlap, tracker_ref
    sx = config.system(4).scaled(cus=8)
    px = gemm.plan(sx, gemm.GemmDims("xcheck", 1024, 1024, 512), cached_output=False)
    fx = overlap.simulate(sx, px, comm=True, record=True, dt=0.05e-6)
    cx = A.configure_gemm_rs(1024, 1024, sx.wg_tile, sx.wf_tile, px.stages, 4)
    rep = tracker_ref.replay(cx, fx, sx.clock)
    assert not rep["problems"] and rep["fired"] == rep["entries"], rep["problems"]
    last = rep["slots"][-1]["last_trigger"]
    rows.append({"block": "t3 tracker xcheck", "checks": 2 + len(rep["slots"]), "cycles": last,
                 "detail": f"4 GPUs x {px.stages} stages: {rep['fired']} WF-tile triggers match model"})
    from tessera.tb.t3 import xcheck
    inst = xcheck.Instance(sx, px, fx, cx, tracker_ref.update_events(cx, fx, sx.clock))
    timed = xcheck.tracker_stream(inst)
    gx = xcheck.check(inst, timed, xcheck.run_golden(timed, xcheck.threshold(inst)))
    assert not gx["problems"] and gx["triggers"] == gx["tiles"], gx["problems"]
    rows.append({"block": "t3 tracker golden xcheck", "checks": 1 + len(gx["slots"]),
                 "cycles": gx["cycles"],
                 "detail": f"model stream on TrackerModel: {gx['triggers']} triggers once, in order, "
                           f"<= ready+{xcheck.LATENCY}+{gx['max_lateness']} cyc (serialisation)"})
    mo = config.model("t-nlg")
    r = study.evaluate(s, mo, 8, "OP", configs=("sequential", "t3", "ideal"))
    pu = gemm.plan(s, gemm.sublayer_dims(mo, 8, "OP"), cached_output=False)
    assert r.times["t3"] >= pu.t_compute_total + r.ag and r.speedup("t3") > 1.0
    rows.append({"block": "t3 fused OP", "checks": 2, "cycles": "-",
                 "detail": f"T-NLG OP TP8: T3 {r.speedup('t3'):.2f}x, ideal {r.speedup('ideal'):.2f}x"})
    cfg = A.configure_gemm_rs(256, 256, (64, 64), (32, 32), 4, 4)
    d0 = cfg.devices[0]
    assert d0.remote_maps[0].dst_device == 3 and [m.chunk for m in d0.dma_maps] == [1, 2]
    assert int(np.unique(d0.tracker.threshold)[0]) == 2 * 32 * 32
    rows.append({"block": "t3 address_space", "checks": 3, "cycles": "-",
                 "detail": "Fig 11/12 4-GPU config: remote_map->GPU3, dma_map stages 2,3, threshold 2048"})
    return rows
