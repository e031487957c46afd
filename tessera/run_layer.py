"""``tessera run-layer``: map a layer with the Simba mapper, compile it for the chiplet, run
it, check every output byte, and put the cycles next to the chiplet model's (Simba §3.3 flow:
mapper -> configuration binaries -> run; issue 17).

Steps per layer: :func:`sim_models.simba.chiplet_cycles.map_for_chiplet` (the package model's
mapper on a one-chiplet Arch; a K slice when the weights do not fit the PEs), seeded tensors
(:func:`golden.chiplet.layer_tensors`), :func:`hdl.chiplet.compiler.compile_layer` -> passes;
per pass: the executable golden model (``golden/chiplet.py``) against the direct numpy
reference, the chiplet cycle model (``sim_models/simba/chiplet_cycles.py``), and the RTL run:
``tessera.tb.chiplet.run_layer.run_pass`` (the exported ``chiplet`` under cocotb/Verilator, build
cached per parameter set, or amaranth.sim with ``--sim amaranth``) -> the words read back on
``host_out``, start -> done cycles, the RTL's NoC flit counter; every output byte is compared with
the reference.  With ``--no-rtl`` (or no chiplet RTL in the tree) the RTL fields stay None and the
command says so: no RTL number is ever estimated or copied from the model.

``--rows N`` runs a P slice of each selected pass (its first N output rows, compiled as a pass
of their own by :func:`hdl.chiplet.compiler.slice_pass`: same mapping and PE configurations,
fewer tiles per PE); the entry's ``slice`` names it (null for a whole pass).

Artefacts in ``--out DIR``: ``run_layer.json`` (entries as ``bench/chiplet_layer.py``) and,
per pass, ``<layer>.pass<i>.npz`` (program words, preload packets, out_index, expected words).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

ENTRY_KEYS = ("layer", "pass", "bit_exact", "rtl_cycles", "model_cycles", "utilization", "noc_flits")


def parse_pes(text: str) -> tuple[int, int]:
    try:
        nx, ny = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--pes must look like 4x4, got {text!r}") from None
    return nx, ny


def rtl_runner():
    """``run_pass`` of the chiplet testbench, or None while the RTL flow is not in this tree."""
    try:
        from tessera.hdl.chiplet import chiplet  # noqa: F401
        from tessera.tb.chiplet import run_layer as rl
    except ImportError:
        return None
    return getattr(rl, "run_pass", None)


def run_layer(layer, cfg, seed: int = 0, samples: int = 300, passes=None, out_dir=None,
              rtl: bool = True, log=print, sim: str = "verilator", opt: str | None = None,
              rows: int | None = None) -> list[dict]:
    """Entries (one per pass run) with the JSON contract keys + model/golden details.
    ``rows``: run only the first ``rows`` output rows of each selected pass (a P slice,
    :func:`hdl.chiplet.compiler.slice_pass`; the entry's ``slice`` says so)."""
    from tessera.golden import chiplet as gc
    from tessera.hdl.chiplet.compiler import compile_layer, preload, slice_pass
    from tessera.sim_models.simba.chiplet_cycles import default_constants, map_for_chiplet, pass_cycles
    t0 = time.time()
    res, nslice = map_for_chiplet(layer, cfg, samples=samples, seed=seed)
    mp = res.mapping
    T = gc.layer_tensors(layer, seed)
    all_passes = compile_layer(layer, mp, cfg)
    sel = list(range(len(all_passes))) if passes is None else \
        sorted({i % len(all_passes) for i in passes})
    compiled = compile_layer(layer, mp, cfg, T, preload_passes=[] if rows else sel)
    if rows:
        for i in sel:
            compiled[i] = slice_pass(compiled[i], cfg, rows, T)
            if compiled[i].slice_of is None:         # the pass has no more rows: all of it
                preload(compiled[i], cfg, T)
    ref = gc.reference(layer, T, cfg.pe.acc_width)
    cov = gc.covered(all_passes, layer)
    cc, pc = default_constants()
    runner = rtl_runner() if rtl else None
    log(f"{layer.name}: C={layer.C} K={layer.K} {layer.R}x{layer.S}/{layer.stride} pad {layer.pad} "
        f"{layer.H}x{layer.W} -> mapper: {mp.short()}"
        + (f" (mapped as K/{nslice} slices: weights exceed the chiplet's PEs)" if nslice > 1 else "")
        + f"; {len(compiled)} passes, outputs covered once: {bool(cov.min() == 1 == cov.max())}")
    entries = []
    for i in sel:
        ps = compiled[i]
        chk = gc.check_pass(ps, cfg, ref)
        m = pass_cycles(ps, cfg, cc, pc)
        vals, valid = gc.expected_words(ps, ref)
        e = {"layer": layer.name, "pass": i, "bit_exact": None, "rtl_cycles": None,
             "model_cycles": round(m["cycles"], 1), "utilization": None, "noc_flits": None,
             "error": None, "golden_bit_exact": chk["bit_exact"], "bytes_checked": chk["checked"],
             "model_utilization": round(m["utilization"], 4),
             "model_compute_utilization": round(m["compute_utilization"], 4),
             "model_noc_flits": m["noc_flits"], "model_period_bound": m["period_bound"],
             "model_cycles_one_input_region": round(pass_cycles(ps, cfg, cc, pc, slots=1)["cycles"], 1),
             "model_terms": {k: round(v, 1) for k, v in m["terms"].items()},
             "mapping": mp.short(), "pes": f"{cfg.nx}x{cfg.ny}", "useful_macs": ps.useful_macs,
             "program_words": len(ps.program.words), "k_range": list(ps.k_range),
             "p_range": list(ps.p_range),
             "slice": (f"P[{ps.p_range[0]}:{ps.p_range[1]}) of pass {i} (P[{ps.slice_of[1][0]}:"
                       f"{ps.slice_of[1][1]})): {max(j.ntiles for j in ps.jobs)} tiles per PE"
                       if ps.slice_of else None)}
        if runner is not None:
            t1 = time.time()
            r = runner(ps, cfg, Path(out_dir or "build/run_layer"), seed, sim=sim, opt=opt)
            e["rtl_seconds"] = round(time.time() - t1, 1)
            e["rtl_events"] = r.get("events")
            got = np.asarray(r["words"], np.int8)
            ok = got.shape == vals.shape and bool(np.array_equal(got[valid], vals[valid]))
            e.update(bit_exact=ok, rtl_cycles=int(r["cycles"]), noc_flits=r.get("noc_flits"),
                     utilization=round(ps.useful_macs / (r["cycles"] * cfg.npes * cfg.pe.K0 * cfg.pe.C0), 4),
                     error=round((m["cycles"] - r["cycles"]) / r["cycles"], 4), rtl_status=r.get("status"))
        entries.append(e)
        rtl_txt = (f"RTL {e['rtl_cycles']} cycles, bit_exact {e['bit_exact']}, util {e['utilization']}, "
                   f"model error {e['error']:+.1%}" if runner is not None else "RTL: not run")
        log(f"  {ps.summary()}")
        log(f"    golden model: {chk['checked']} output bytes vs numpy reference -> "
            f"{'bit-exact' if chk['bit_exact'] else 'MISMATCH (%d)' % chk['mismatches']}; "
            f"model {m['cycles']:.0f} cycles ({m['period_bound']}-bound period {m['period']:.0f} x "
            f"{m['rounds']} tiles), util {m['utilization']:.1%}, {m['noc_flits']} NoC flits; {rtl_txt}")
        if out_dir is not None:
            d = Path(out_dir)
            d.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(
                d / f"{layer.name}.pass{i}.npz", program=np.array(ps.program.words, dtype=np.uint64),
                out_index=ps.out_index, expected=vals, valid=valid, golden_words=chk["words"],
                preload_input=np.array([w for p in ps.preload_input for w in p], dtype=np.uint64),
                preload_input_lengths=np.array([len(p) for p in ps.preload_input]),
                **{f"preload_pe_{x}_{y}": np.array([w for p in pk for w in p], dtype=object)
                   for (x, y), pk in ps.preload_pe.items()})
    if runner is None:
        why = "--no-rtl" if not rtl else "the chiplet RTL / testbench runner is not in this tree"
        log(f"  RTL not run ({why}): rtl_cycles, bit_exact, utilization, noc_flits are null "
            f"({time.time() - t0:.1f} s)")
    return entries


def add_parser(sub):
    p = sub.add_parser("run-layer", help="compile a layer for the chiplet, run it, check it, cycles vs model")
    p.add_argument("--network", default="resnet50")
    p.add_argument("--layer", required=True)
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--pes", default="4x4", help="PE array NXxNY (default 4x4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples", type=int, default=300, help="mapper samples")
    p.add_argument("--passes", type=int, nargs="*", metavar="I",
                   help="only these pass indices (negative from the end); default all")
    p.add_argument("--no-rtl", action="store_true", help="golden model and cycle model only")
    p.add_argument("--rows", type=int, metavar="N",
                   help="run a slice: the first N output rows of each pass (default: whole passes)")
    p.add_argument("--sim", choices=("verilator", "amaranth"), default="verilator",
                   help="RTL simulator (default cocotb/Verilator, cached build)")
    # package path (issue 18, tessera/run_package.py)
    p.add_argument("--chiplets", metavar="CXxCY", help="run on a package of CXxCY chiplets (issue 18)")
    p.add_argument("--slice", metavar="C=..,K=..,H=..", help="with --chiplets: cut the layer to a slice")
    p.add_argument("--small", action="store_true", help="with --chiplets: small PE / Global PE buffers")
    p.set_defaults(func=run)


def run(args) -> int:
    if getattr(args, "chiplets", None):
        from tessera.run_package import run as run_pkg
        return run_pkg(args)
    from tessera.hdl.chiplet.compiler import CompileError
    from tessera.hdl.chiplet.config import ChipletConfig
    from tessera.params import ParamError
    from tessera.sim_models.simba.layers import LayerError, load_network
    err = lambda msg: (print(f"tessera run-layer: error: {msg}", file=sys.stderr), 2)[1]
    try:
        nx, ny = parse_pes(args.pes)
        cfg = ChipletConfig(nx=nx, ny=ny).validate()
        layers = {l.name: l for l in load_network(args.network)}
    except (ValueError, ParamError, LayerError) as e:
        return err(str(e).splitlines()[0])
    if args.layer not in layers:
        return err(f"unknown layer {args.layer!r} in {args.network}")
    if not 1 <= args.samples <= 100000:
        return err(f"--samples must be in [1, 100000], got {args.samples}")
    try:
        entries = run_layer(layers[args.layer], cfg, args.seed, args.samples, args.passes, args.out,
                            rtl=not args.no_rtl, sim=args.sim, rows=args.rows)
    except CompileError as e:
        return err(str(e))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "run_layer.json").write_text(json.dumps({"entries": entries}, indent=1) + "\n")
    print(f"wrote {out / 'run_layer.json'}")
    bad = [e for e in entries if not e["golden_bit_exact"] or e["bit_exact"] is False]
    return 1 if bad else 0
