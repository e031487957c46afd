"""Package compiler (hdl/package/compiler.py) on the executable package golden model
(golden/package.py): layer slices split over chiplets along K, C (psum chains across chiplets),
P/Q and non-uniform K/P extents, bit-exact against the numpy reference, every output once;
cross-chiplet multicast / chain / output addressing; limits raise one-line CompileErrors."""
import numpy as np
import pytest

from tessera.golden import chiplet as gc
from tessera.golden import package as gp
from tessera.hdl.chiplet import packets as pk
from tessera.hdl.global_pe.packets import OP_SEND
from tessera.hdl.package.compiler import CompileError, compile_package, small_package
from tessera.hdl.pe.config import Role
from tessera.sim_models.simba.layers import Layer
from tessera.sim_models.simba.model import Mapping

PKG = small_package(2, 2)

CASES = {
    "K2C2_chain_across": (Layer("kc", 16, 32, 3, 3, 8, 8, 1, 1), Mapping(2, 2, 1, 1, 2, 1, 1, 1, 2, 4)),
    "C4_chain_of_4_chiplets": (Layer("cc4", 32, 8, 3, 3, 6, 6, 1, 1), Mapping(1, 4, 1, 1, 1, 2, 1, 1, 2, 3)),
    "P2Q2": (Layer("pq", 8, 16, 3, 3, 8, 8, 1, 1), Mapping(1, 1, 2, 2, 2, 1, 2, 1, 2, 4)),
    "stride2_K2P2": (Layer("s2", 8, 16, 3, 3, 9, 9, 2, 1), Mapping(2, 1, 2, 1, 2, 1, 1, 1, 2, 2)),
    "1x1_K4": (Layer("c1", 16, 32, 1, 1, 8, 8), Mapping(4, 1, 1, 1, 1, 2, 2, 1, 2, 8)),
    "nonuniform_K_P": (Layer("nu", 8, 24, 3, 3, 8, 8, 1, 1),
                       Mapping(2, 1, 2, 1, 2, 1, 1, 1, 2, 2, k_ext=(16, 8), p_ext=(5, 3))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bit_exact_on_golden(name):
    L, m = CASES[name]
    T = gc.layer_tensors(L, 3)
    pp = compile_package(L, m, PKG, T)
    r = gp.check_package(pp, T)
    assert r["covered_once"], "every output produced exactly once"
    assert r["checked"] == L.K * L.P * L.Q
    assert r["bit_exact"], f"{r['mismatches']} bytes differ"


def test_cross_chiplet_structure():
    """K2C2: chiplets (k, c=0) send psums to (k, c=1) on another chiplet (hierarchical
    psum_dest); the IA block's home multicasts to both K chiplets with one chiplet mask; only
    chain-last chiplets hold outputs; non-last chiplets get no PPU data."""
    L, m = CASES["K2C2_chain_across"]
    pp = compile_package(L, m, PKG, gc.layer_tensors(L, 0))
    chips = pp.chiplets
    for ch in chips:
        ki, ci, pi, qi = ch.kcpq
        for j in ch.ps.jobs:
            regs = dict(j.registers)
            if ci == 0:
                assert j.role in (Role.FIRST, Role.MIDDLE)
                wb, pb = gp._decode_loads(ch.preload_pe[j.node], 8, 8)
                assert wb and not pb, "weights only: the PPU runs on the chain's last chiplet"
            if ci == 0 and j.c == m.cp - 1:
                v = regs[pk.REGS["psum_dest"]]
                assert v >> 31 & 1, "remote psum destination"
                nxt = [c for c in chips if c.kcpq == (ki, 1, pi, qi)][0]
                assert ((v >> 16) & 0xF, (v >> 20) & 0xF) == nxt.xy
    homes = [c for c in chips if c.home_of is not None]
    assert len(homes) == 2 and all(len(c.consumers) == 2 for c in homes)
    for h in homes:
        sends = [o[1] for o in h.ops if o[0] == "send" and o[1].op == OP_SEND and o[1].tag == 4]
        mask = sum(1 << c for c in h.consumers)
        assert sends and all(s.chip_mask == mask for s in sends)
    assert sorted(c.chiplet for c in chips if c.windows) == sorted(c.chiplet for c in chips if c.kcpq[1] == 1)
    # every program: 2 barriers (input cue, configured), no final barrier by default
    for ch in chips:
        assert [o[1] for o in ch.ops if o[0] == "bar"] == [1, 2]


def test_golden_model_catches_a_broken_chain():
    """Sanity: the executable model follows the registers (a wrong remote psum_dest breaks)."""
    L, m = CASES["K2C2_chain_across"]
    pp = compile_package(L, m, PKG, gc.layer_tensors(L, 0))
    ch = pp.chiplets[0]
    for i, op in enumerate(ch.ops):
        if op[0] == "cfg" and op[2] == pk.REGS["psum_dest"] and op[3] >> 31 & 1:
            ch.ops[i] = ("cfg", op[1], op[2], pk.dest_value((0, 0), (1, 1)))
    with pytest.raises(ValueError):
        gp.run_package(pp)


def test_binding_places_logical_chiplets():
    """An explicit binding (Fig. 7: the same slice on other chiplets of a 4x4 package)."""
    L, m = CASES["1x1_K4"]
    pkg = small_package(4, 4)
    pp = compile_package(L, m, pkg, gc.layer_tensors(L, 1), binding=(0, 3, 12, 15))
    assert pp.phys == (0, 3, 12, 15)
    assert [c.chiplet for c in pp.chiplets if c.logical is not None] == [0, 3, 12, 15]
    assert gp.check_package(pp, gc.layer_tensors(L, 1))["bit_exact"]


def test_errors_name_the_limit():
    L = Layer("big", 64, 64, 3, 3, 16, 16, 1, 1)
    with pytest.raises(CompileError, match="passes|buffer|exceed"):
        compile_package(L, Mapping(2, 1, 1, 2, 2, 1, 2, 1, 4, 4), PKG)
    with pytest.raises(CompileError, match="chiplets"):
        compile_package(CASES["P2Q2"][0], Mapping(2, 1, 2, 2, 1, 1, 1, 1, 1, 1), PKG)
    with pytest.raises(CompileError, match="ckx"):
        compile_package(CASES["P2Q2"][0], Mapping(1, 1, 1, 1, 1, 1, 1, 1, 1, 1), small_package(7, 1))


def test_program_fits_and_host_address():
    L, m = CASES["P2Q2"]
    pp = compile_package(L, m, PKG)
    (hc, hn) = PKG.host_addr
    for ch in pp.chiplets:
        assert len(ch.program.words) <= PKG.chiplet.prog_depth
        for o in ch.ops:
            if o[0] == "send" and o[1].tag == 5:
                assert (o[1].uchip, o[1].unode) == (hc, hn)
    assert np.all(gp.coverage(pp) == 1) is not None


def test_assemble_ops_is_the_program():
    """The one op -> instruction assembly (hdl/chiplet/asm.py assemble_ops) gives each chiplet's
    program, op by op (the package model counts controller time with op_words); a command
    field beyond its bits is a CompileError; the final barrier adds exactly one BAR word."""
    from dataclasses import replace

    from tessera.hdl.chiplet.asm import assemble_ops
    from tessera.hdl.chiplet.isa import OP_BAR, field
    from tessera.hdl.global_pe.packets import FIELD
    L, m = CASES["K2C2_chain_across"]
    pp = compile_package(L, m, PKG)
    fb = compile_package(L, m, PKG, final_barrier=True)
    cfg = PKG.chiplet_cfg()
    for ch, chb in zip(pp.chiplets, fb.chiplets):
        prog = assemble_ops(ch.ops, cfg)
        assert prog.words == ch.program.words
        assert len(prog.op_words) == len(ch.ops) and sum(prog.op_words) == len(prog.words)
        bars = lambda p: sum(field(w, "op") == OP_BAR for w in p.words)
        assert len(chb.program.words) == len(ch.program.words) + 1 and bars(chb.program) == bars(prog) + 1
    send = next(o for o in pp.chiplets[0].ops if o[0] == "send")
    with pytest.raises(CompileError, match="field a"):
        assemble_ops([("send", replace(send[1], a=1 << FIELD))], cfg)


# ------------------------------------------------------------------ tessera run-layer --chiplets
def test_run_layer_chiplets_cli(tmp_path, capsys):
    import json

    from tessera.cli import main
    from tessera.run_package import ENTRY_KEYS
    rc = main(["run-layer", "--layer", "res3b_branch2b", "--chiplets", "2x2", "--pes", "2x2", "--small",
               "--slice", "C=16,K=32,H=8", "--samples", "60", "--no-rtl", "--out", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    e = json.loads((tmp_path / "run_package.json").read_text())["entries"][0]
    assert set(ENTRY_KEYS) <= set(e)
    assert e["golden_bit_exact"] is True and e["covered_once"] is True
    assert len(e["model_chiplet_cycles"]) == 4 and e["model_cycles"] == max(e["model_chiplet_cycles"])
    assert e["rtl_cycles"] is None and e["bit_exact"] is None and e["nop_flits"] is None
    assert e["rtl_chiplet_cycles"] is None
    assert "per chiplet c0=" in out and "NoP flits" in out and "nop_hop_cycles = " in out
    assert "RTL not run (--no-rtl)" in out


@pytest.mark.parametrize("argv,msg", [
    (["--chiplets", "2"], "--chiplets"), (["--chiplets", "7x1"], "ckx"),
    (["--chiplets", "2x2", "--slice", "Z=3"], "--slice"),
    (["--chiplets", "2x2", "--small", "--slice", "C=256,K=256,H=28"], "passes|exceed|buffer|mapping"),
])
def test_run_layer_chiplets_errors(tmp_path, capsys, argv, msg):
    from tessera.cli import main
    rc = main(["run-layer", "--layer", "res3b_branch2b", "--pes", "2x2", "--samples", "30", "--no-rtl",
               "--out", str(tmp_path)] + argv)
    err = capsys.readouterr().err
    assert rc == 2 and "error:" in err and len(err.strip().splitlines()) == 1
    import re
    assert re.search(msg, err)
