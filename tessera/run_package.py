"""``tessera run-layer ... --chiplets CXxCY``: a layer (slice) mapped onto a Simba package by
the Simba mapper's chiplet-level split, compiled per chiplet, checked bit-exact, run on the RTL
package when it is in the tree, with per-chiplet completion times next to the package model's
(Simba §3.3 mapper -> binder -> per-chiplet binaries; §5.1 per-chiplet completion / non-uniform
partition; issue 18).

Steps: :func:`sim_models.simba.package_cycles.map_for_package` (mapper search on the package
Arch, then ``optim.nonuniform`` when the model prefers it; or an explicit binding, e.g. for the
Fig. 7 experiment), seeded tensors, :func:`hdl.package.compiler.compile_package`, the
executable golden model (``golden/package.py``) against the numpy reference, the package cycle
model (``sim_models/simba/package_cycles.py``, constants with provenance), and the RTL run
(``tb/package/run_package.py`` through the RTL's package testbench).  Without the package RTL
(or with ``--no-rtl``) ``bit_exact``, ``rtl_cycles``, ``rtl_chiplet_cycles`` and ``nop_flits``
stay null: never estimated.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ENTRY_KEYS = ("layer", "chiplets", "bit_exact", "rtl_cycles", "model_cycles", "rtl_chiplet_cycles",
              "model_chiplet_cycles", "nop_flits")


def parse_grid(text: str, what: str = "--chiplets") -> tuple[int, int]:
    try:
        a, b = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"{what} must look like 2x2, got {text!r}") from None
    return a, b


def parse_slice(layer, text: str | None):
    """``C=16,K=32,H=8`` (any of C, K, H, W): the layer cut to that many input / output
    channels and input rows / columns (same filter, stride, pad)."""
    from dataclasses import replace
    if not text:
        return layer
    kw = {}
    for part in text.split(","):
        k, _, v = part.partition("=")
        k = k.strip().upper()
        if k not in ("C", "K", "H", "W") or not v.strip().isdigit():
            raise ValueError(f"--slice wants C=..,K=..,H=..,W=.. (positive integers), got {part!r}")
        kw[k] = min(int(v), getattr(layer, k))
    if "H" in kw and "W" not in kw:
        kw["W"] = min(kw["H"], layer.W)
    name = layer.name + "_" + "".join(f"{k}{v}" for k, v in kw.items())
    return replace(layer, name=name, **kw)


def rtl_runner():
    """``run_pass`` of the package testbench runner, or None while the package RTL / its
    testbench is not in this tree."""
    try:
        from tessera.hdl.package import package  # noqa: F401
        from tessera.tb.package import package as _tb  # noqa: F401
        from tessera.tb.package import run_package as rp
    except ImportError:
        return None
    if not hasattr(package, "Package") and not getattr(package, "BLOCKS", None):
        return None
    return getattr(rp, "run_pass", None)


def run_package(layer, pcfg, seed: int = 0, samples: int = 300, out_dir=None, rtl: bool = True,
                log=print, binding=None, mapping=None, sim: str = "verilator", nonuniform: bool = True,
                tag: str | None = None, opt: str | None = None, final_barrier: bool = False) -> dict:
    """One entry of the JSON contract (+ model / golden details); ``opt``: C++ optimisation
    level of the Verilator model (e.g. ``"-O0"``: one build per package shape)."""
    from tessera.golden import chiplet as gc
    from tessera.golden import package as gp
    from tessera.hdl.package.compiler import compile_package
    from tessera.sim_models.simba.model import evaluate
    from tessera.sim_models.simba.package_cycles import (default_constants, map_for_package,
                                                         package_arch, package_cycles)
    t0 = time.time()
    arch = package_arch(pcfg)
    if mapping is None:
        res = map_for_package(layer, pcfg, samples=samples, seed=seed, nonuniform=nonuniform,
                              binding=binding or "row-major")
        mapping, binding = res.mapping, res.binding
    else:
        res = evaluate(layer, arch, mapping, binding or "row-major")
    binding = binding or "row-major"
    T = gc.layer_tensors(layer, seed)
    pp = compile_package(layer, mapping, pcfg, T, binding=binding, arch=arch, final_barrier=final_barrier)
    chk = gp.check_package(pp, T)
    pc = default_constants(pcfg)
    m = package_cycles(pp, pc)
    n = pcfg.ckx * pcfg.cky
    e = {"layer": tag or layer.name, "chiplets": f"{pcfg.ckx}x{pcfg.cky}", "bit_exact": None,
         "rtl_cycles": None, "model_cycles": m["cycles"], "rtl_chiplet_cycles": None,
         "model_chiplet_cycles": m["chiplet_cycles"], "nop_flits": None,
         "model_nop_flits": m["nop_flits"], "golden_bit_exact": chk["bit_exact"],
         "bytes_checked": chk["checked"], "covered_once": chk["covered_once"],
         "mapping": mapping.short(), "k_ext": list(mapping.k_ext or []), "p_ext": list(mapping.p_ext or []),
         "binding": list(pp.phys), "ia_homes": [c.chiplet for c in pp.chiplets if c.home_of is not None],
         "simba_model_cycles": round(res.latency_cycles, 1), "shape": dict(C=layer.C, K=layer.K, R=layer.R,
                                                                         H=layer.H, W=layer.W,
                                                                         stride=layer.stride, pad=layer.pad),
         "pes": f"{pcfg.chiplet.nx}x{pcfg.chiplet.ny}", "nop_link_latency": pcfg.nop_link_latency,
         "nop_flit_cycles": pcfg.nop_flit_cycles, "useful_macs": pp.useful_macs,
         "program_words": [len(c.program.words) for c in pp.chiplets],
         "model_constants": m["constants"], "rtl_error": None, "rtl_chiplet_error": None}
    runner = rtl_runner() if rtl else None
    log(f"{layer.name}: C={layer.C} K={layer.K} {layer.R}x{layer.S}/{layer.stride} pad {layer.pad} "
        f"{layer.H}x{layer.W} on {e['chiplets']} chiplets of {e['pes']} PEs -> {mapping.short()}, "
        f"binding {list(pp.phys)}")
    log(f"  golden model: {chk['checked']} output bytes vs numpy -> "
        f"{'bit-exact' if chk['bit_exact'] else 'MISMATCH (%d)' % chk['mismatches']}, each output once: "
        f"{chk['covered_once']}")
    log(f"  Simba model (mapper's estimate): {res.latency_cycles:.0f} cycles")
    log(f"  package model: {m['cycles']:.0f} cycles; per chiplet "
        + " ".join(f"c{c}={v:.0f}" for c, v in enumerate(m["chiplet_cycles"]))
        + f"; NoP flits {m['nop_flits']}")
    for k, v in m["constants"].items():
        log(f"    {k} = {v}  ({m['provenance'].get(k, '')})")
    if runner is not None:
        t1 = time.time()
        r = runner(pp, Path(out_dir or "build/run_package"), seed, sim=sim, opt=opt)
        cmp_ = gp.compare(pp, r["windows"], gc.reference(layer, T, pcfg.chiplet.pe.acc_width))
        e.update(bit_exact=cmp_["bit_exact"], rtl_cycles=int(r["cycles"]),
                 rtl_chiplet_cycles=[int(x) for x in r["chiplet_cycles"]], nop_flits=r.get("nop_flits"),
                 rtl_seconds=round(time.time() - t1, 1), rtl_status=r.get("status"),
                 rtl_barrier_cycles=r.get("barrier_cycles"), rtl_events=r.get("events"),
                 rtl_bar_events=r.get("bar_events"))
        e["rtl_error"] = round((m["cycles"] - r["cycles"]) / r["cycles"], 4)
        e["rtl_chiplet_error"] = [round((a - b) / b, 4) if b else None
                                  for a, b in zip(m["chiplet_cycles"], e["rtl_chiplet_cycles"])]
        log(f"  RTL: {e['rtl_cycles']} cycles, per chiplet {e['rtl_chiplet_cycles']}, NoP flits "
            f"{e['nop_flits']}, bit_exact {e['bit_exact']}; model error {e['rtl_error']:+.1%}")
    else:
        why = "--no-rtl" if not rtl else "the package RTL / testbench runner is not in this tree"
        log(f"  RTL not run ({why}): bit_exact, rtl_cycles, rtl_chiplet_cycles, nop_flits are null")
    if out_dir is not None:
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        import numpy as np
        np.savez_compressed(d / f"{e['layer']}.package.npz",
                            **{f"program_c{c.chiplet}": np.array(c.program.words, dtype=np.uint64)
                               for c in pp.chiplets})
    e["seconds"] = round(time.time() - t0, 1)
    del n
    e["_pp"] = pp                  # for the bench's calibration (not serialised)
    return e


def run(args) -> int:
    """The ``--chiplets`` path of ``tessera run-layer``."""
    from tessera.hdl.chiplet.compiler import CompileError
    from tessera.hdl.chiplet.config import ChipletConfig
    from tessera.hdl.package.compiler import small_package, target_of
    from tessera.hdl.package.config import PackageConfig
    from tessera.params import ParamError
    from tessera.sim_models.simba.layers import LayerError, load_network
    from tessera.sim_models.simba.model import MappingError
    err = lambda msg: (print(f"tessera run-layer: error: {msg}", file=sys.stderr), 2)[1]
    try:
        ckx, cky = parse_grid(args.chiplets)
        nx, ny = parse_grid(args.pes, "--pes")
        if args.small:
            pcfg = small_package(ckx, cky, nx=nx, ny=ny)
        else:
            pcfg = PackageConfig(chiplet=ChipletConfig(nx=nx, ny=ny), ckx=ckx, cky=cky)
        pcfg = target_of(pcfg)
        layers = {l.name: l for l in load_network(args.network)}
        if args.layer not in layers:
            return err(f"unknown layer {args.layer!r} in {args.network}")
        layer = parse_slice(layers[args.layer], args.slice)
    except (ValueError, ParamError, LayerError, CompileError) as e:
        return err(str(e).splitlines()[0])
    try:
        e = run_package(layer, pcfg, args.seed, args.samples, args.out, rtl=not args.no_rtl, sim=args.sim)
    except (CompileError, MappingError) as x:
        return err(str(x))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    e.pop("_pp", None)
    (out / "run_package.json").write_text(json.dumps({"entries": [e]}, indent=1) + "\n")
    print(f"wrote {out / 'run_package.json'}")
    return 1 if (not e["golden_bit_exact"] or e["bit_exact"] is False) else 0
