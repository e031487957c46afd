"""Tests of the PE golden model (tessera.golden.pe) against hand-computed values
and an independent direct convolution written here with plain loops."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tessera.golden import pe as g
from tessera.hdl.pe.config import ErrorCause, PEConfig, PEParams, Role

P11 = PEParams(K0=1, C0=1)          # scalar PE for hand examples
P = PEParams()                      # default Simba PE: 8x8, 24-bit


def cfg_(**kw) -> PEConfig:
    return PEConfig(**kw)


def ppu_scalar(v, bias=0, scale=1, shift=0, relu=False, params=P11):
    cfg = cfg_(R=1, S=1, P1=1, Q1=1, H_in=1, W_in=1, shift=shift, relu=relu)
    return int(g.ppu(params, cfg, np.array([[[[v]]]]), [bias], [scale])[0, 0, 0, 0])


# ----------------------------------------------------------------- hand cases
def test_1x1_filter_scalar():
    cfg = cfg_(R=1, S=1, P1=2, Q1=2, H_in=2, W_in=2, role=Role.ONLY)
    W = np.array([[[[3]]]], dtype=np.int8)
    X = np.array([[[1, 2], [3, 4]]], dtype=np.int8)
    acc = g.accumulate(P11, cfg, W, X)
    assert acc.shape == (1, 2, 2, 1)
    assert acc[0, :, :, 0].tolist() == [[3, 6], [9, 12]]
    r = g.run_tile(P11, cfg, W, X, bias=[0], scale=[1])
    assert r["error"] == ErrorCause.NONE
    assert r["out"].dtype == np.int8
    assert r["out"].tolist() == [[3], [6], [9], [12]]


def test_2x2_filter_by_hand_two_output_lanes():
    # out[p][q] = sum_rs W[r][s] X[p+r][q+s]; lane 1 has the negated filter.
    p2 = PEParams(K0=2, C0=1)
    cfg = cfg_(R=2, S=2, P1=2, Q1=2, H_in=3, W_in=3, role=Role.FIRST)
    w = np.array([[1, 2], [3, 4]])
    W = np.stack([w, -w])[:, None].astype(np.int8)            # [2, 1, 2, 2]
    X = np.arange(1, 10).reshape(1, 3, 3).astype(np.int8)
    r = g.run_tile(p2, cfg, W, X)
    assert r["psum_out"].tolist() == [[37, -37], [47, -47], [67, -67], [77, -77]]


def test_stride_2():
    cfg = cfg_(R=1, S=1, P1=2, Q1=2, H_in=3, W_in=3, stride=2, role=Role.FIRST)
    X = np.arange(1, 10).reshape(1, 3, 3).astype(np.int8)
    r = g.run_tile(P11, cfg, np.ones((1, 1, 1, 1), np.int8), X)
    assert r["psum_out"][:, 0].tolist() == [1, 3, 7, 9]


def test_stride_2_with_3x3_and_padding():
    # h = 2p + r - 1, w = 2q + s - 1 on a 3x3 input; all-ones filter -> window sums.
    cfg = cfg_(R=3, S=3, P1=2, Q1=2, H_in=3, W_in=3, stride=2, pad_top=1, pad_left=1,
               role=Role.FIRST)
    X = np.arange(1, 10).reshape(1, 3, 3).astype(np.int8)
    r = g.run_tile(P11, cfg, np.ones((1, 1, 3, 3), np.int8), X)
    # (0,0): rows 0..1 cols 0..1 -> 1+2+4+5; (0,1): rows 0..1 cols 1..2 -> 2+3+5+6 ...
    assert r["psum_out"][:, 0].tolist() == [12, 16, 24, 28]


def test_padding_by_hand():
    cfg = cfg_(R=3, S=3, P1=2, Q1=2, H_in=2, W_in=2, pad_top=1, pad_left=1, role=Role.FIRST)
    W = np.arange(1, 10).reshape(1, 1, 3, 3).astype(np.int8)
    X = np.array([[[1, 2], [3, 4]]], dtype=np.int8)
    r = g.run_tile(P11, cfg, W, X)
    assert r["psum_out"][:, 0].tolist() == [77, 67, 47, 37]
    assert g.useful_macs(P11, cfg) == 16
    assert g.loop_macs(cfg, P11) == 36


def test_implicit_bottom_right_padding_and_unused_rows():
    # H_in larger than needed: extra rows unused; smaller: zeros.
    X = np.arange(1, 17).reshape(1, 4, 4).astype(np.int8)
    cfg = cfg_(R=2, S=2, P1=1, Q1=1, H_in=4, W_in=4, role=Role.FIRST)
    r = g.run_tile(P11, cfg, np.ones((1, 1, 2, 2), np.int8), X)
    assert r["psum_out"].tolist() == [[1 + 2 + 5 + 6]]
    cfg = cfg_(R=2, S=2, P1=2, Q1=2, H_in=1, W_in=1, role=Role.FIRST)
    r = g.run_tile(P11, cfg, np.ones((1, 1, 2, 2), np.int8), np.array([[[5]]], np.int8))
    assert r["psum_out"][:, 0].tolist() == [5, 0, 0, 0]
    assert g.useful_macs(P11, cfg) == 1


def test_multichannel_lane_mapping():
    # K0=2, C0=2, K1=2, C1=2: output channel k = k1*K0+k0, input channel c = c1*C0+c0.
    p = PEParams(K0=2, C0=2)
    cfg = cfg_(R=1, S=1, C1=2, K1=2, P1=1, Q1=1, H_in=1, W_in=1, role=Role.FIRST)
    X = np.array([1, 10, 100, -1], dtype=np.int8).reshape(4, 1, 1)
    W = np.zeros((4, 4, 1, 1), np.int8)
    for k in range(4):
        W[k, k, 0, 0] = k + 1          # channel k sees (k+1) * X[c=k]
    r = g.run_tile(p, cfg, W, X)
    # beats: k1=0 -> channels 0,1 ; k1=1 -> channels 2,3
    assert r["psum_out"].tolist() == [[1, 20], [300, -4]]


# ------------------------------------------------------------------------ PPU
@pytest.mark.parametrize("v,shift,expect", [
    (-5, 1, -2), (5, 1, 3), (-3, 1, -1), (3, 1, 2), (-1, 1, 0), (1, 1, 1),
    (-6, 2, -1), (-10, 2, -2), (-11, 2, -3), (-9, 2, -2), (10, 2, 3), (7, 0, 7),
])
def test_ppu_round_half_up(v, shift, expect):
    assert ppu_scalar(v, shift=shift) == expect


def test_ppu_bias_scale_exact():
    assert ppu_scalar(10, bias=-4, scale=3) == 18
    assert ppu_scalar(10, bias=-4, scale=-3) == -18
    assert ppu_scalar(-100, bias=3, scale=5, shift=3) == -61     # -485/8 = -60.625 -> -61
    # t = v + bias is exact (not wrapped to 24 bits): 2^23-1 + 1 = 2^23, >>16 -> 128 -> 127
    assert ppu_scalar((1 << 23) - 1, bias=1, scale=1, shift=16) == 127
    assert ppu_scalar(-(1 << 23), bias=-(1 << 23), scale=1, shift=17) == -128
    # largest magnitude product: (2^24 - 2) * -2^15, shift 31 -> -256 -> -128
    assert ppu_scalar((1 << 23) - 1, bias=(1 << 23) - 1, scale=-(1 << 15), shift=31) == -128
    assert ppu_scalar(-(1 << 23), bias=-(1 << 23), scale=-(1 << 15), shift=31) == 127
    # 3*2^20 * 2^14 / 2^31 = 24 exactly (rounding term does not change it)
    assert ppu_scalar(3 << 20, bias=0, scale=1 << 14, shift=31) == 24


def test_ppu_saturation_and_relu():
    assert ppu_scalar(1000) == 127
    assert ppu_scalar(-1000) == -128
    assert ppu_scalar(128) == 127 and ppu_scalar(127) == 127
    assert ppu_scalar(-129) == -128 and ppu_scalar(-128) == -128
    assert ppu_scalar(-1000, relu=True) == 0
    assert ppu_scalar(-1, relu=True) == 0
    assert ppu_scalar(1000, relu=True) == 127
    assert ppu_scalar(42, relu=True) == 42
    assert ppu_scalar(-3, shift=1, relu=True) == 0


def test_ppu_vectorised_per_channel():
    p = PEParams(K0=2, C0=1)
    cfg = cfg_(R=1, S=1, K1=2, P1=1, Q1=2, H_in=1, W_in=2, shift=1)
    v = np.array([[[[1, 2], [3, 4]]], [[[5, 6], [7, 8]]]])          # [K1=2, 1, 2, K0=2]
    out = g.ppu(p, cfg, v, bias=[0, 1, 2, 3], scale=[1, -1, 2, -2])
    # ch0: (v)/2 ; ch1: -(v+1)/2 ; ch2: 2(v+2)/2 ; ch3: -2(v+3)/2 (half up)
    assert out.tolist() == [[[[1, -1], [2, -2]]], [[[7, -9], [9, -11]]]]


# -------------------------------------------------------------- order/pooling
def test_pixel_order():
    assert g.pixel_order(2, 3, False) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert g.pixel_order(2, 4, True) == [(0, 0), (0, 1), (1, 0), (1, 1),
                                         (0, 2), (0, 3), (1, 2), (1, 3)]
    o = g.pixel_order(4, 4, True)
    assert o[4:8] == [(0, 2), (0, 3), (1, 2), (1, 3)] and o[8:12] == [(2, 0), (2, 1), (3, 0), (3, 1)]
    with pytest.raises(ValueError):
        g.pixel_order(3, 2, True)


def test_pooling_and_stream_order():
    # identity 1x1 conv on a 4x4 map, K1=2 (second channel group = negated)
    p = PEParams(K0=1, C0=1)
    X = np.array([[1, 5, -3, 2], [4, 0, 9, 9], [-7, -8, 6, 1], [-6, -5, 2, 3]], np.int8)[None]
    W = np.array([1, -1], np.int8).reshape(2, 1, 1, 1)
    base = dict(R=1, S=1, K1=2, P1=4, Q1=4, H_in=4, W_in=4)
    r = g.run_tile(p, cfg_(**base, pool=True, role=Role.ONLY), W, X, bias=[0, 0], scale=[1, 1])
    assert r["out"][:, 0].tolist() == [5, 9, -5, 6, 0, 3, 8, -1]
    r = g.run_tile(p, cfg_(**base, pool=True, relu=True, role=Role.ONLY), W, X,
                   bias=[0, 0], scale=[1, 1])
    assert r["out"][:, 0].tolist() == [5, 9, 0, 6, 0, 3, 8, 0]
    # psum stream with pool=1 follows the pooled pixel order (no pooling of psums)
    r = g.run_tile(p, cfg_(**base, pool=True, role=Role.FIRST), W, X)
    assert r["psum_out"][:4, 0].tolist() == [1, 5, 4, 0]
    assert r["psum_out"][4:8, 0].tolist() == [-3, 2, 9, 9]
    assert r["psum_out"].shape == (32, 1)
    r = g.run_tile(p, cfg_(**base, pool=False, role=Role.FIRST), W, X)
    assert r["psum_out"][:8, 0].tolist() == [1, 5, -3, 2, 4, 0, 9, 9]


def test_stream_roundtrip():
    for pool in (False, True):
        cfg = cfg_(K1=3, P1=4, Q1=6, H_in=6, W_in=8, pool=pool)
        a = np.arange(3 * 4 * 6 * 8).reshape(3, 4, 6, 8)
        s = g.to_stream(P, cfg, a)
        assert s.shape == (72, 8)
        assert (g.from_stream(P, cfg, s) == a).all()
        k1, (pp, qq) = 1, g.pixel_order(4, 6, pool)[5]
        assert (s[24 + 5] == a[k1, pp, qq]).all()


# ------------------------------------------------------------------ wrapping
def test_accumulator_wraps_24_bit():
    # 3*3*64 = 576 products of (-128)(-128) = 9437184 -> 9437184 - 2^24
    cfg = cfg_(R=3, S=3, C1=8, K1=1, P1=1, Q1=1, H_in=3, W_in=3, role=Role.FIRST)
    W = np.full((8, 64, 3, 3), -128, np.int8)
    X = np.full((64, 3, 3), -128, np.int8)
    r = g.run_tile(P, cfg, W, X)
    assert r["psum_out"].tolist() == [[9437184 - (1 << 24)] * 8]
    # negative side: 576 * (-128 * 127) = -9363456 -> + 2^24
    W2 = np.full((8, 64, 3, 3), 127, np.int8)
    assert g.accumulate(P, cfg, W2, X)[0, 0, 0, 0] == -9363456 + (1 << 24)


def test_accumulator_wraps_16_bit_param():
    p = PEParams(K0=1, C0=2, acc_width=16)
    cfg = cfg_(R=1, S=1, P1=1, Q1=2, H_in=1, W_in=2, role=Role.FIRST)
    W = np.array([[[[127]], [[127]]]], np.int8)                      # [1, 2, 1, 1]
    X = np.array([[[127, -128]], [[127, -128]]], np.int8)            # [2, 1, 2]
    # 2*127*127 = 32258 (fits); 2*127*(-128) = -32512 (fits) -> no wrap
    assert g.accumulate(p, cfg, W, X)[0, 0, :, 0].tolist() == [32258, -32512]
    r = g.run_tile(p, dataclasses.replace(cfg, role=Role.MIDDLE), W, X,
                   psum_in=np.array([[1000], [-1000]]))
    assert r["psum_out"][:, 0].tolist() == [33258 - 65536, -33512 + 65536]


def test_psum_add_wraps_and_last_uses_wrapped():
    cfg = cfg_(R=1, S=1, P1=1, Q1=1, H_in=1, W_in=1, role=Role.MIDDLE)
    W = np.ones((1, 1, 1, 1), np.int8)
    X = np.ones((1, 1, 1), np.int8)
    r = g.run_tile(P11, cfg, W, X, psum_in=np.array([[(1 << 23) - 1]]))
    assert r["psum_out"].tolist() == [[-(1 << 23)]]
    last = dataclasses.replace(cfg, role=Role.LAST, shift=16)
    r = g.run_tile(P11, last, W, X, psum_in=np.array([[(1 << 23) - 1]]), bias=[0], scale=[1])
    assert r["out"].tolist() == [[-128]]                 # -2^23 >> 16 = -128, not +128 -> 127
    with pytest.raises(ValueError):                      # psum_in outside int24
        g.run_tile(P11, cfg, W, X, psum_in=np.array([[1 << 23]]))


# ----------------------------------------------------------------- roles
def test_roles_chain_equals_single_pe():
    """Split C over a FIRST -> MIDDLE -> LAST chain; must equal ONLY on the full C."""
    rng = np.random.default_rng(7)
    for seed in range(6):
        cfg, W, X, bias, scale = g.random_case(P, seed, role=Role.ONLY, C1=3)
        full = g.run_tile(P, cfg, W, X, bias=bias, scale=scale)["out"]
        c1 = dataclasses.replace(cfg, C1=1)
        parts = [(W[:, 8 * i:8 * i + 8], X[8 * i:8 * i + 8]) for i in range(3)]
        ps = g.run_tile(P, dataclasses.replace(c1, role=Role.FIRST), *parts[0])["psum_out"]
        ps = g.run_tile(P, dataclasses.replace(c1, role=Role.MIDDLE), *parts[1], psum_in=ps)["psum_out"]
        out = g.run_tile(P, dataclasses.replace(c1, role=Role.LAST), *parts[2], psum_in=ps,
                         bias=bias, scale=scale)["out"]
        assert out.dtype == np.int8 and (out == full).all()
        # a MIDDLE with a random psum adds it lane-wise in stream order
        pin = g.random_psum(P, c1, rng)
        mid = g.run_tile(P, dataclasses.replace(c1, role=Role.MIDDLE), *parts[0], psum_in=pin)
        first = g.run_tile(P, dataclasses.replace(c1, role=Role.FIRST), *parts[0])
        assert (mid["psum_out"] == g.wrap(first["psum_out"] + pin, 24)).all()


def test_role_argument_checks():
    cfg = cfg_(R=1, S=1, P1=1, Q1=1, H_in=1, W_in=1)
    W, X = np.ones((1, 1, 1, 1), np.int8), np.ones((1, 1, 1), np.int8)
    with pytest.raises(ValueError):
        g.run_tile(P11, dataclasses.replace(cfg, role=Role.FIRST), W, X, psum_in=np.zeros((1, 1)))
    with pytest.raises(ValueError):
        g.run_tile(P11, dataclasses.replace(cfg, role=Role.MIDDLE), W, X)
    with pytest.raises(ValueError):
        g.run_tile(P11, dataclasses.replace(cfg, role=Role.ONLY), W, X)
    with pytest.raises(ValueError):                       # wrong W shape
        g.run_tile(P11, dataclasses.replace(cfg, role=Role.FIRST), np.ones((1, 1, 3, 3), np.int8), X)
    with pytest.raises(ValueError):                       # out of int8 range
        g.accumulate(P11, cfg, np.full((1, 1, 1, 1), 128), X)
    # FIRST ignores PPU contents
    r = g.run_tile(P11, dataclasses.replace(cfg, role=Role.FIRST), W, X, bias=[5], scale=[9])
    assert r["psum_out"].tolist() == [[1]]


# ---------------------------------------------------------------- check_config
def test_check_config_causes_and_priority():
    ok = cfg_()
    assert g.check_config(P, ok) == ErrorCause.NONE
    C = lambda **kw: g.check_config(P, dataclasses.replace(ok, **kw))
    for f in ("R", "S", "C1", "K1", "P1", "Q1", "H_in", "W_in"):
        assert C(**{f: 0}) == ErrorCause.ZERO_BOUND, f
    assert C(stride=0) == C(stride=3) == ErrorCause.BAD_STRIDE
    assert C(stride=2) == ErrorCause.NONE
    assert C(pad_top=3) == C(pad_left=3) == ErrorCause.BAD_PAD
    assert C(pad_top=2, pad_left=2) == ErrorCause.NONE
    # weight buffer: 512 entries; 3*3*K1*C1
    assert C(C1=56, K1=1, H_in=4, W_in=4) == ErrorCause.NONE           # 504 <= 512
    assert C(C1=57, K1=1, H_in=4, W_in=4) == ErrorCause.WBUF_OVERFLOW  # 513
    assert C(R=1, S=1, C1=512, H_in=1, W_in=2, P1=1, Q1=1) == ErrorCause.NONE
    # input buffer: 1024 words
    assert C(R=1, S=1, C1=1, H_in=32, W_in=32) == ErrorCause.NONE
    assert C(R=1, S=1, C1=1, H_in=32, W_in=33) == ErrorCause.IBUF_OVERFLOW
    # accumulation buffer: 128 entries
    assert C(K1=8, P1=4, Q1=4) == ErrorCause.NONE
    assert C(K1=8, P1=4, Q1=5) == ErrorCause.ABUF_OVERFLOW
    # ppu depth 16, only LAST/ONLY
    assert C(K1=17, P1=2, Q1=2, role=Role.ONLY) == ErrorCause.PPU_OVERFLOW
    assert C(K1=17, P1=2, Q1=2, role=Role.LAST) == ErrorCause.PPU_OVERFLOW
    assert C(K1=17, P1=2, Q1=2, role=Role.FIRST) == ErrorCause.NONE
    assert C(K1=17, P1=2, Q1=2, role=Role.MIDDLE) == ErrorCause.NONE
    assert C(K1=16, P1=2, Q1=2, role=Role.ONLY) == ErrorCause.NONE
    assert C(pool=True, P1=3) == C(pool=True, Q1=5) == ErrorCause.BAD_POOL
    assert C(pool=False, P1=3) == ErrorCause.NONE
    # priorities: the smallest code wins
    assert C(R=0, stride=3, pool=True, P1=3) == ErrorCause.ZERO_BOUND
    assert C(stride=3, pad_top=5) == ErrorCause.BAD_STRIDE
    assert C(pad_top=5, C1=100) == ErrorCause.BAD_PAD
    assert C(C1=100, H_in=40, W_in=40) == ErrorCause.WBUF_OVERFLOW
    assert C(R=1, S=1, C1=2, H_in=40, W_in=40, K1=9, P1=4, Q1=4) == ErrorCause.IBUF_OVERFLOW
    assert C(K1=20, P1=4, Q1=4, role=Role.ONLY) == ErrorCause.ABUF_OVERFLOW
    assert C(K1=17, P1=2, Q1=1, role=Role.LAST, pool=True) == ErrorCause.PPU_OVERFLOW
    # non-representable fields cannot reach the port
    with pytest.raises(ValueError):
        C(R=16)
    with pytest.raises(ValueError):
        C(stride=4)
    with pytest.raises(ValueError):
        C(C1=-1)
    with pytest.raises(ValueError):
        g.check_config(PEParams(abuf_entries=100), ok)


def test_illegal_config_emits_nothing():
    for role, key in ((Role.FIRST, "psum_out"), (Role.LAST, "out")):
        cfg = cfg_(stride=3, role=role)
        r = g.run_tile(P, cfg, None, None)
        assert r["error"] == ErrorCause.BAD_STRIDE
        assert r[key].shape == (0, 8) and set(r) == {"error", key}
    with pytest.raises(ValueError):
        g.accumulate(P, cfg_(stride=3), None, None)


# -------------------------------------------------------------- load beats
def test_weight_beats_layout():
    p = PEParams(K0=2, C0=3, wbuf_bytes=2 * 3 * 64, ibuf_bytes=3 * 64)
    cfg = cfg_(R=2, S=3, C1=2, K1=2, P1=1, Q1=1, H_in=2, W_in=3)
    W = np.arange(4 * 6 * 2 * 3).reshape(4, 6, 2, 3).astype(np.int64) % 251 - 125
    W = W.astype(np.int8)
    beats = g.weight_beats(p, cfg, W)
    assert len(beats) == 2 * 3 * 2 * 2 * 2
    seen = {}
    for b in beats:
        assert len(b["data"]) == 3 and 0 <= b["row"] < 2
        seen[(b["addr"], b["row"])] = b["data"]
    assert len(seen) == len(beats) and max(a for a, _ in seen) == 2 * 3 * 2 * 2 - 1
    for r in range(2):
        for s in range(3):
            for k1 in range(2):
                for c1 in range(2):
                    addr = ((r * 3 + s) * 2 + k1) * 2 + c1
                    for k0 in range(2):
                        assert seen[(addr, k0)] == [int(W[k1 * 2 + k0, c1 * 3 + c0, r, s]) for c0 in range(3)]
    # spot value by hand: addr 1 = (r0, s0, k1=0, c1=1), row 1 -> W[1][3..5][0][0]
    assert seen[(1, 1)] == [int(W[1, 3, 0, 0]), int(W[1, 4, 0, 0]), int(W[1, 5, 0, 0])]


def test_input_and_ppu_beats_layout():
    p = PEParams(K0=2, C0=2)
    cfg = cfg_(R=1, S=1, C1=2, K1=2, P1=2, Q1=3, H_in=2, W_in=3)
    X = (np.arange(4 * 2 * 3).reshape(4, 2, 3) - 12).astype(np.int8)
    beats = g.input_beats(p, cfg, X)
    assert [b["addr"] for b in beats] == list(range(12))
    # addr (c1*H_in + h)*W_in + w = (1*2+1)*3+2 = 11 -> X[2..3][1][2]
    assert beats[11]["data"] == [int(X[2, 1, 2]), int(X[3, 1, 2])]
    assert beats[4]["data"] == [int(X[0, 1, 1]), int(X[1, 1, 1])]
    pb = g.ppu_beats(p, cfg, bias=[-(1 << 23), 1, 2, (1 << 23) - 1], scale=[-(1 << 15), 5, 6, 32767])
    assert pb == [{"addr": 0, "row": 0, "bias": -(1 << 23), "scale": -(1 << 15)},
                  {"addr": 0, "row": 1, "bias": 1, "scale": 5},
                  {"addr": 1, "row": 0, "bias": 2, "scale": 6},
                  {"addr": 1, "row": 1, "bias": (1 << 23) - 1, "scale": 32767}]
    with pytest.raises(ValueError):
        g.ppu_beats(p, cfg, bias=[1 << 23, 0, 0, 0], scale=[0] * 4)
    assert g.pack_lanes([-1, 2, -128], 8) == 0x8002FF
    assert g.unpack_lanes(0x8002FF, 3, 8) == [-1, 2, -128]


# ------------------------------------------------- independent cross-checks
def direct_conv(params, cfg, W, X):
    """Straightforward direct convolution, plain loops, then wrap."""
    K0, C0 = params.K0, params.C0
    K, C = cfg.K1 * K0, cfg.C1 * C0
    out = np.zeros((cfg.K1, cfg.P1, cfg.Q1, K0), dtype=np.int64)
    for k in range(K):
        for p in range(cfg.P1):
            for q in range(cfg.Q1):
                tot = 0
                for c in range(C):
                    for r in range(cfg.R):
                        for s in range(cfg.S):
                            h = p * cfg.stride + r - cfg.pad_top
                            w = q * cfg.stride + s - cfg.pad_left
                            if 0 <= h < cfg.H_in and 0 <= w < cfg.W_in:
                                tot += int(W[k, c, r, s]) * int(X[c, h, w])
                m = 1 << params.acc_width
                tot = (tot + m // 2) % m - m // 2
                out[k // K0, p, q, k % K0] = tot
    return out


@pytest.mark.parametrize("seed", range(12))
def test_accumulate_vs_direct_conv(seed):
    params = [PEParams(K0=1, C0=1), PEParams(K0=2, C0=4), PEParams(K0=4, C0=2, acc_width=16),
              PEParams(K0=2, C0=2, acc_width=12)][seed % 4]
    rng = np.random.default_rng(1000 + seed)
    cfg, W, X, _, _ = g.random_case(params, rng)
    assert (g.accumulate(params, cfg, W, X) == direct_conv(params, cfg, W, X)).all()
    # useful_macs by brute force
    n = sum(1 for p in range(cfg.P1) for q in range(cfg.Q1) for r in range(cfg.R) for s in range(cfg.S)
            if 0 <= p * cfg.stride + r - cfg.pad_top < cfg.H_in
            and 0 <= q * cfg.stride + s - cfg.pad_left < cfg.W_in)
    assert g.useful_macs(params, cfg) == n * cfg.K1 * cfg.C1 * params.K0 * params.C0
    assert g.loop_macs(cfg, params) == (cfg.R * cfg.S * cfg.C1 * cfg.K1 * cfg.P1 * cfg.Q1
                                        * params.K0 * params.C0)


def test_ppu_vs_scalar_formula_random():
    rng = np.random.default_rng(3)
    for seed in range(10):
        cfg, W, X, bias, scale = g.random_case(P, rng, role=Role.ONLY)
        acc = g.accumulate(P, cfg, W, X)
        out = g.ppu(P, cfg, acc, bias, scale)
        for idx in [tuple(int(rng.integers(0, n)) for n in acc.shape) for _ in range(20)]:
            ch = idx[0] * 8 + idx[3]
            y = (int(acc[idx]) + int(bias[ch])) * int(scale[ch])
            if cfg.shift:
                y = (y + 2 ** (cfg.shift - 1)) // 2 ** cfg.shift      # floor division
            y = max(y, 0) if cfg.relu else y
            assert int(out[idx]) == min(max(y, -128), 127)


def test_random_case_is_legal_seeded_and_honours_overrides():
    small = PEParams(K0=2, C0=2, wbuf_bytes=4 * 32, ibuf_bytes=2 * 64, abuf_entries=16, ppu_depth=2)
    for params in (P, small):
        for seed in range(40):
            cfg, W, X, bias, scale = g.random_case(params, seed)
            assert g.check_config(params, cfg) == ErrorCause.NONE
            assert cfg.R in (1, 3) and cfg.S in (1, 3) and cfg.P1 <= 8 and cfg.Q1 <= 8
            assert W.dtype == np.int8 and W.shape == (cfg.K1 * params.K0, cfg.C1 * params.C0, cfg.R, cfg.S)
            assert X.dtype == np.int8 and X.shape == (cfg.C1 * params.C0, cfg.H_in, cfg.W_in)
            assert bias.shape == scale.shape == (cfg.K1 * params.K0,)
            assert np.abs(bias).max() <= 1 << 23 and np.abs(scale).max() <= 1 << 15
    a = g.random_case(P, 5)
    b = g.random_case(P, 5)
    assert a[0] == b[0] and (a[1] == b[1]).all() and (a[2] == b[2]).all()
    cfg = g.random_case(P, 9, pool=True, role=Role.LAST, R=3, stride=2)[0]
    assert cfg.pool and cfg.role == Role.LAST and cfg.R == 3 and cfg.stride == 2
    assert cfg.P1 % 2 == 0 and cfg.Q1 % 2 == 0
    with pytest.raises(ValueError):
        g.random_case(P, 0, stride=3)
    with pytest.raises(ValueError):
        g.random_case(P, 0, bogus=1)


def direct_tile(params, cfg, W, X, psum_in, bias, scale):
    """Whole tile with plain loops: direct conv, psum add, scalar PPU, 2x2 max pool."""
    K0, aw = params.K0, params.acc_width
    m = 1 << aw
    acc = direct_conv(params, cfg, W, X)                   # [K1, P1, Q1, K0]
    if cfg.pool:
        pix = [(2 * pb + dy, 2 * qb + dx) for pb in range(cfg.P1 // 2) for qb in range(cfg.Q1 // 2)
               for dy in (0, 1) for dx in (0, 1)]
    else:
        pix = [(p, q) for p in range(cfg.P1) for q in range(cfg.Q1)]
    beats = []
    for k1 in range(cfg.K1):
        for i, (p, q) in enumerate(pix):
            beat = []
            for k0 in range(K0):
                v = int(acc[k1, p, q, k0])
                if psum_in is not None:
                    v = (v + int(psum_in[k1 * len(pix) + i][k0]) + m // 2) % m - m // 2
                beat.append(v)
            beats.append(beat)
    if cfg.role in (Role.FIRST, Role.MIDDLE):
        return beats
    outs = []
    for j, beat in enumerate(beats):
        k1 = j // len(pix)
        row = []
        for k0, v in enumerate(beat):
            ch = k1 * K0 + k0
            y = (v + int(bias[ch])) * int(scale[ch])
            if cfg.shift:
                y = (y + 2 ** (cfg.shift - 1)) // 2 ** cfg.shift
            if cfg.relu:
                y = max(y, 0)
            row.append(min(max(y, -128), 127))
        outs.append(row)
    if cfg.pool:
        outs = [[max(outs[4 * b + i][k0] for i in range(4)) for k0 in range(K0)]
                for b in range(len(outs) // 4)]
    return outs


@pytest.mark.parametrize("seed", range(16))
def test_run_tile_vs_direct_tile(seed):
    params = [PEParams(K0=2, C0=2), PEParams(K0=4, C0=2, acc_width=16),
              PEParams(K0=1, C0=4, acc_width=12), PEParams(K0=8, C0=8)][(seed // 4) % 4]
    rng = np.random.default_rng(2000 + seed)
    cfg, W, X, bias, scale = g.random_case(params, rng, role=Role(seed % 4))
    psum = g.random_psum(params, cfg, rng) if cfg.role in (Role.MIDDLE, Role.LAST) else None
    r = g.run_tile(params, cfg, W, X, psum_in=psum, bias=bias, scale=scale)
    assert r["error"] == ErrorCause.NONE
    key = "psum_out" if cfg.role in (Role.FIRST, Role.MIDDLE) else "out"
    assert r[key].tolist() == direct_tile(params, cfg, W, X, psum, bias, scale)
