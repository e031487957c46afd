"""Layer compiler (hdl/chiplet/compiler.py) on the executable golden model (golden/chiplet.py):
every compiled pass bit-exact against the direct numpy reference; passes cover each output
once; limits raise one-line errors; the chiplet cycle model's terms."""
import numpy as np
import pytest

from tessera.golden import chiplet as gc
from tessera.hdl.chiplet import compiler as cc
from tessera.hdl.chiplet.compiler import CompileError, ConvLayer, PEMapping, compile_layer
from tessera.hdl.chiplet.config import ChipletConfig
from tessera.hdl.global_pe.packets import OP_GROUP, OP_SEND
from tessera.hdl.pe.config import PEParams, Role
from tessera.sim_models.simba.layers import load_network

SMALL = ChipletConfig(nx=2, ny=2)
# small buffers: 4 KB weights, 1 KB input (64 words per half), 32 accumulators, PPU 4, GPE 512 words
TINY = ChipletConfig(nx=2, ny=2, words=512,
                     pe=PEParams(wbuf_bytes=4096, ibuf_bytes=1024, abuf_entries=32, ppu_depth=4))


def run_all(L, m, cfg, seed=0, which=None):
    T = gc.layer_tensors(L, seed)
    ref = gc.reference(L, T, cfg.pe.acc_width)
    n = len(compile_layer(L, m, cfg)) if which else 0
    which = None if which is None else sorted({i % n for i in which})
    passes = compile_layer(L, m, cfg, T, preload_passes=which)
    cov = gc.covered(passes, L)
    assert cov.min() == 1 and cov.max() == 1, "every output produced exactly once"
    sel = passes if which is None else [passes[i] for i in which]
    for ps in sel:
        r = gc.check_pass(ps, cfg, ref)
        assert r["bit_exact"], f"{L.name} {ps.summary()}: {r['mismatches']} mismatches"
        assert r["checked"] > 0
    return passes


SMALL_CASES = [
    # name, layer, mapping
    ("3x3s1_pad_chain_mcast", ConvLayer("a", C=20, K=24, R=3, S=3, H=9, W=7, stride=1, pad=1),
     PEMapping(kp=2, cp=2, pp=1, qp=1, p1=3, q1=4)),
    ("3x3s2_pad_spatial", ConvLayer("b", C=16, K=16, R=3, S=3, H=11, W=10, stride=2, pad=1),
     PEMapping(kp=1, cp=2, pp=2, qp=1, p1=2, q1=3)),
    ("1x1s1_kmcast", ConvLayer("c", C=24, K=40, R=1, S=1, H=6, W=6), PEMapping(4, 1, 1, 1, 3, 6)),
    ("1x1s2_subsampled", ConvLayer("d", C=16, K=16, R=1, S=1, H=9, W=9, stride=2),
     PEMapping(2, 2, 1, 1, 2, 5)),
    ("chain4_middle", ConvLayer("e", C=32, K=8, R=3, S=3, H=6, W=6, pad=1), PEMapping(1, 4, 1, 1, 6, 6)),
    ("5groups_rotate", ConvLayer("f", C=8, K=16, R=3, S=3, H=8, W=8, pad=1), PEMapping(2, 1, 2, 1, 2, 4)),
]


@pytest.mark.parametrize("name,L,m", SMALL_CASES, ids=[c[0] for c in SMALL_CASES])
def test_small_layers_bit_exact(name, L, m):
    for seed in (0, 1):
        run_all(L, m, SMALL, seed)


def test_tiny_buffers_force_passes():
    L = ConvLayer("g", C=16, K=96, R=3, S=3, H=12, W=10, stride=1, pad=1)
    passes = run_all(L, PEMapping(2, 2, 1, 1, 2, 4), TINY)
    assert len(passes) > 1
    assert len({p.k_range for p in passes}) > 1, "PPU depth 4 / weights force K passes"
    assert len({p.p_range for p in passes}) > 1, "512-word Global PE forces row bands"


def test_roles_chains_and_groups():
    L, m = SMALL_CASES[0][1], SMALL_CASES[0][2]
    ps = compile_layer(L, m, SMALL)[0]
    roles = sorted(j.role for j in ps.jobs)
    assert roles == [Role.FIRST, Role.FIRST, Role.LAST, Role.LAST]
    for j in ps.jobs:
        if j.role == Role.FIRST:
            down = [x for x in ps.jobs if x.node == j.psum_dest][0]
            assert down.role == Role.LAST and (down.k, down.p, down.q) == (j.k, j.p, j.q)
            assert abs(down.node[0] - j.node[0]) + abs(down.node[1] - j.node[1]) == 1
    # one multicast set per chain member (c), each of kp = 2 PEs
    assert sorted(len(s.members) for s in ps.sets) == [2, 2]
    sends = [c for c in ps.commands if c.op == OP_SEND and c.tag == cc.TAG_SEND]
    assert all(c.groups and not c.ucast for c in sends)
    # single-member sets go unicast
    ps1 = compile_layer(L, PEMapping(1, 2, 2, 1, 2, 4), SMALL)[0]
    s1 = [c for c in ps1.commands if c.op == OP_SEND and c.tag == cc.TAG_SEND]
    assert all(c.ucast and c.groups == 0 for c in s1)


def test_group_table_rewrite_keeps_one_group_per_set():
    L = ConvLayer("h", C=8, K=16, R=1, S=1, H=10, W=4)
    cfg = ChipletConfig(nx=4, ny=4, groups=2)
    T = gc.layer_tensors(L, 3)
    ps = compile_layer(L, PEMapping(2, 1, 4, 2, 2, 2), cfg, T)[0]      # 8 sets of 2 PEs, 2 groups
    gops = [c for c in ps.commands if c.op == OP_GROUP]
    assert len(gops) > 2
    used = {}
    for c in ps.commands:
        if c.op == OP_SEND and c.set_id >= 0:
            used.setdefault(c.set_id, set()).add(c.groups)
    assert all(len(v) == 1 for v in used.values())
    assert gc.check_pass(ps, cfg, gc.reference(L, T))["bit_exact"]


def test_program_assembles_and_registers():
    L, m = SMALL_CASES[4][1], SMALL_CASES[4][2]
    ps = compile_layer(L, m, SMALL)[0]
    assert 0 < len(ps.program.words) <= SMALL.prog_depth
    from tessera.hdl.chiplet import isa
    assert isa.field(ps.program.words[-1], "op") == isa.OP_END
    from tessera.hdl.chiplet.packets import REGS, unpack_pe_cfg
    for j in ps.jobs:
        r = dict(j.registers)
        assert r[REGS["ntiles"]] == j.ntiles and j.registers[-1][0] == REGS["start"]
        w = r[REGS["pe_cfg0"]] | r[REGS["pe_cfg1"]] << 32 | r[REGS["pe_cfg2"]] << 64
        assert unpack_pe_cfg(w) == j.cfg


def test_model_detects_a_broken_pass():
    """The executable model must fail when the compiled artefacts are wrong."""
    L, m = SMALL_CASES[0][1], SMALL_CASES[0][2]
    T = gc.layer_tensors(L, 0)
    ref = gc.reference(L, T)
    ps = compile_layer(L, m, SMALL, T)[0]
    # corrupt one input word of the host preload
    ps.preload_input[1][2] ^= 0x55       # address 17: pixel (0, 6) of channels 0-7
    assert not gc.check_pass(ps, SMALL, ref)["bit_exact"]
    # swap the output windows of two LAST PEs
    ps = compile_layer(L, m, SMALL, T)[0]
    lasts = [j for j in ps.jobs if j.role == Role.LAST]
    a, b = lasts[0], lasts[1]
    ps.ops = [("cfg", op[1], op[2], {a.node: b.out_base, b.node: a.out_base}[op[1]])
              if op[0] == "cfg" and op[2] == 6 and op[1] in (a.node, b.node) else op for op in ps.ops]
    assert not gc.check_pass(ps, SMALL, ref)["bit_exact"]


def test_reference_arithmetic():
    # PPU: round half up, relu, saturation; acc wraps at 24 bits
    v = np.array([[5], [-5], [3], [1 << 22]])
    y = gc.ppu_ref(v, [0, 0, 0, 0], [1, 1, 1, 64], 1, False)
    assert y.ravel().tolist() == [3, -2, 2, 127]
    assert gc.ppu_ref(np.array([[-7]]), [0], [1], 0, True).ravel().tolist() == [0]
    assert int(gc.wrap(1 << 23, 24)) == -(1 << 23)
    L = ConvLayer("w", C=8, K=8, R=1, S=1, H=1, W=1)
    T = {"X": np.full((8, 1, 1), -128, np.int8), "W": np.full((8, 8, 1, 1), -128, np.int8)}
    acc = gc.conv_acc(L, T["X"], T["W"], acc_width=16)
    assert int(acc[0, 0, 0]) == int(gc.wrap(8 * 128 * 128, 16))


def test_limits_one_line_errors():
    L = ConvLayer("big", C=8, K=8, R=3, S=3, H=40, W=40, pad=1)
    with pytest.raises(CompileError, match="input buffer"):
        compile_layer(L, PEMapping(1, 1, 1, 1, 40, 40), SMALL)
    with pytest.raises(CompileError, match="PEs"):
        compile_layer(L, PEMapping(2, 2, 2, 1, 4, 4), SMALL)
    with pytest.raises(CompileError, match="R/S"):
        compile_layer(ConvLayer("r", C=8, K=8, R=17, S=17, H=20, W=20), PEMapping(1, 1, 1, 1, 1, 1), SMALL)
    big = ConvLayer("wide", C=8, K=8, R=1, S=1, H=1, W=3000)
    with pytest.raises(CompileError) as e:
        compile_layer(big, PEMapping(1, 1, 1, 1, 1, 300), SMALL)
    assert "\n" not in str(e.value)


NET = {l.name: l for l in load_network("resnet50")}
# ResNet-50 v1 (the workload file, Caffe stride placement) has no 3x3 stride-2 layer; the
# v1.5 placement (torchvision) puts stride 2 on res3a_branch2b: that shape, plus conv1 (7x7/2)
S2 = ConvLayer("res3a_branch2b_s2", C=128, K=128, R=3, S=3, H=56, W=56, stride=2, pad=1)
RESNET = [  # layer, mapping (the mapper's choice for one 16-PE chiplet), passes checked
    (NET["res2a_branch2b"], PEMapping(8, 2, 1, 1, 5, 8), [0, -1]),
    (NET["res2b_branch2a"], PEMapping(4, 4, 1, 1, 4, 8), [0]),
    (S2, PEMapping(8, 2, 1, 1, 3, 4), [-1]),
    (NET["conv1"], PEMapping(8, 1, 2, 1, 7, 9), [0]),
    (NET["res3a_branch2a"], PEMapping(16, 1, 1, 1, 4, 4), [0]),
    (NET["res3b_branch2b"], PEMapping(16, 1, 1, 1, 3, 4), [0, -1]),
    (NET["res4b_branch2b"], PEMapping(16, 1, 1, 1, 2, 2), [-1]),
]


@pytest.mark.parametrize("L,m,which", RESNET, ids=[r[0].name for r in RESNET])
def test_resnet50_layers_16pe(L, m, which):
    """ResNet-50 layers (3x3 s1, 1x1, 3x3 s2, 7x7 s2, 1x1 s2, res3b_branch2b, res4) on the
    default 16-PE chiplet: the checked passes bit-exact, all outputs covered exactly once."""
    passes = run_all(L, m, ChipletConfig(), which=which)
    assert all(len(p.program.words) <= 1024 for p in passes)


def test_mapper_adapter_and_cycle_model():
    from tessera.sim_models.simba.chiplet_cycles import map_for_chiplet, pass_cycles
    from tessera.sim_models.simba.pe_cycles import load_pe_cycles, tile_cycles
    L = NET["res3b_branch2b"]
    res, n = map_for_chiplet(L, ChipletConfig(), samples=100)
    assert n == 1 and res.mapping.n_chiplets == 1
    ps = compile_layer(L, res.mapping, ChipletConfig())[0]
    m = pass_cycles(ps, ChipletConfig())
    assert m["cycles"] == pytest.approx(sum(m["terms"].values()))
    pc = load_pe_cycles()
    t = tile_cycles(ps.jobs[0].cfg.as_dict(), pc)
    assert m["period"] >= t and m["terms"]["steady"] == pytest.approx((m["rounds"] - 1) * m["period"])
    assert 0 < m["utilization"] <= m["compute_utilization"] <= 1
    # an over-large weight layer is mapped as K slices (the mapper has no K tiling above the PE)
    res4, n4 = map_for_chiplet(NET["res4b_branch2b"], ChipletConfig(), samples=50)
    assert n4 >= 2


def test_1x1_stride2_sends_the_subsampled_image():
    L = ConvLayer("s2", C=16, K=16, R=1, S=1, H=9, W=9, stride=2)
    ps = compile_layer(L, PEMapping(2, 2, 1, 1, 2, 5), SMALL)[0]
    assert ps.step == 2 and all(j.cfg.stride == 1 for j in ps.jobs)
    assert ps.Wb == 5 and ps.in_words == ps.gblocks * ps.Hb * 5     # 9 columns -> 5 read


def test_weight_layout_round_trip():
    """golden/chiplet.py reads the weight buffer with golden/pe.py's one address function."""
    from tessera.golden import pe as gpe
    from tessera.hdl.pe.config import PEConfig
    p = PEParams()
    c = PEConfig(R=3, S=2, C1=2, K1=3, P1=2, Q1=2, H_in=4, W_in=3)
    W = np.random.default_rng(3).integers(-128, 128, (c.K1 * 8, c.C1 * 8, c.R, c.S)).astype(np.int8)
    wb = {(b["addr"], b["row"]): np.array(b["data"], np.int8) for b in gpe.weight_beats(p, c, W)}
    assert len(wb) == c.R * c.S * c.K1 * c.C1 * 8
    assert np.array_equal(gc._pe_weights(c, wb, 8, 8), W)


def test_cycle_model_credit_loop():
    """A multicast lane carries credit_window - (credit_batch - 1) packets per round trip of its
    farthest member; a multicast packet is whole in every router on the way (7 hops from
    (0,4) to (3,0): 8 routers x (5 flits + hop)): on the 4x4 res3b_branch2b pass the Global
    PE's send term is credit-bound at 16 credits with batches of 4, at 1 flit/cycle at 32."""
    from tessera.sim_models.simba.chiplet_cycles import credit_rtt, default_constants, pass_cycles
    L = NET["res3b_branch2b"]
    m = PEMapping(kp=16, cp=1, pp=1, qp=1, p1=1, q1=2)
    out = {}
    cc = default_constants()[0]
    for cw in (16, 32):
        cfg = ChipletConfig(credit_window=cw, credit_batch=4)
        ps = compile_layer(L, m, cfg)[0]
        out[cw] = pass_cycles(ps, cfg)
    rtt = credit_rtt(ps, cfg, cc)
    assert rtt == 8 * (5 + cc.hop_cycles) + 4 + 7 * cc.hop_cycles + cc.credit_fixed_cycles
    tile_flits = 16 * 3 * 5                                                  # C1 H_in rows of 4 words
    assert out[16]["period_terms"]["gpe_send"] == pytest.approx(tile_flits * rtt / (13 * 5))
    assert out[32]["period_terms"]["gpe_send"] == tile_flits
    assert out[16]["period_bound"] == "gpe_send" and out[32]["period_bound"] == "pe_tile"


def test_cycle_model_gpe_ejection():
    """The Global PE's ejection port takes one CREDIT flit per credit_batch DATA packets per
    member + the round's OUT flits: 16 members x 48 packets per tile = 768 credit flits per
    round at credit_batch 1 (the 29 % utilisation of the 4x4 res3b_branch2b run), 192 at 4."""
    from tessera.sim_models.simba.chiplet_cycles import pass_cycles
    L = NET["res3b_branch2b"]
    m = PEMapping(kp=16, cp=1, pp=1, qp=1, p1=1, q1=2)
    r = {}
    for cb in (1, 4):
        cfg = ChipletConfig(credit_batch=cb)
        r[cb] = pass_cycles(compile_layer(L, m, cfg)[0], cfg)
    out = 16 * (2 + 1) / 0.94                                   # 16 LAST PEs: 2 beats + a head
    assert r[1]["period_terms"]["gpe_eject"] == pytest.approx(16 * 48 + out)
    assert r[4]["period_terms"]["gpe_eject"] == pytest.approx(16 * 48 / 4 + out)
    assert r[1]["period_bound"] == "gpe_eject" and r[4]["period_bound"] != "gpe_eject"


def test_cycle_model_multicast_buffer_stall():
    """The router rule (room for a max packet downstream): buffers of one max packet (17)
    serialise multicast packets per hop, 2 x 5 flits + 2 x link_latency each; the default
    buffer (32) holds a max packet beside a 5-flit one, so packets stream at 1 flit/cycle."""
    from tessera.sim_models.simba.chiplet_cycles import mcast_packet_cycles, pass_cycles
    L = NET["res3b_branch2b"]
    m = PEMapping(kp=16, cp=1, pp=1, qp=1, p1=1, q1=2)
    cfg = ChipletConfig(buffer_flits=17)
    assert mcast_packet_cycles(cfg, 5) == 12 and mcast_packet_cycles(ChipletConfig(), 5) == 5
    r = pass_cycles(compile_layer(L, m, cfg)[0], cfg)
    assert r["period_terms"]["gpe_send"] == pytest.approx(48 * 12)
