"""Bit-exact golden model of the Simba processing element (PE).

Implements Simba (MICRO'19 / CACM) §3.1 "Simba PE" (Fig 1(c): weight buffer,
input buffer, K0 vector MACs of C0 lanes, accumulation buffer, post-processing
unit) and the PE / vector-MAC levels of Listing 1 (§3.3), exactly as written in
the behavioural contract of :mod:`tessera.hdl.pe.config` (the only source used:
this model was written from that docstring, never from the RTL).

What it computes: the tile loop nest (with zero padding and stride), the
acc_width-bit two's-complement wrap of the accumulators, the cross-PE
partial-sum add per role (FIRST / MIDDLE / LAST / ONLY), the PPU (bias, scale,
round-half-up shift, ReLU, int8 saturation, 2x2 max-pool), the stream order of
results, the buffer layouts as load-beat lists, and the configuration check
(smallest :class:`ErrorCause` that applies).

Input double buffering (cfg ``ibuf_half``): the region's base in the load
addresses, the region's capacity in the IBUF_OVERFLOW check, and which
``i_load`` addresses the contract accepts while a tile is busy
(:func:`iload_accepted_while_busy`).

What it leaves out (deliberately): all timing (cycles, ready/valid
back-pressure, start/start_ready/busy/done handshakes, back-to-back tiles,
when held-back loads land, synchronous reset aborting a tile); buffer state
across tiles (callers pass W/X/bias/scale explicitly); bit packing of ports
beyond the small :func:`pack_lanes`/:func:`unpack_lanes` helpers; the NoC,
Global PE and anything above the PE level of Listing 1.

Readings of the contract where the text allows more than one (most literal
reading chosen; each is pinned by a test in ``tests/test_golden_pe.py``):

1. Loop order.  Listing 1's order (r, s, k1, c1, pixels, k0, c0) does not
   change the result: wrapping modulo 2**acc_width is a ring homomorphism, so
   wrapping after every MAC equals one wrap of the exact (int64) sum, which is
   what :func:`accumulate` does.
2. Input tile extent.  No check relates H_in/W_in to P1, Q1, R, S, stride; rows
   / columns the loop nest reaches beyond [0,H_in) x [0,W_in) read 0 (implicit
   bottom / right padding), and rows/columns never reached are simply unused.
3. ``psum_in`` values must be signed acc_width-bit integers (ValueError
   otherwise); the add acc + psum_in wraps.  LAST applies the PPU to the
   wrapped sum.
4. PPU ``t = v + bias`` is exact (not wrapped), as the text says "exact sum";
   with ``shift == 0`` there is no rounding term; ReLU is applied after the
   shift and before the clamp (the order listed; equivalent anyway).
5. Pooling takes the max of the int8 PPU results of 4 consecutive beats in
   pixel order (i.e. after saturation), per lane.
6. ``check_config``: a field that does not fit its CFG_FIELDS width (or is
   negative) cannot be put on the cfg port at all, so it raises ValueError
   rather than returning a cause.  PPU_OVERFLOW applies to roles LAST/ONLY
   only; BAD_POOL only when pool=1.  Capacity checks are ``>`` (a tile that
   exactly fills a buffer is legal).
7. "power-of-two depths" is read as: wbuf_entries, ibuf_words, abuf_entries
   and ppu_depth must be powers of two (and wbuf_bytes / ibuf_bytes multiples
   of K0*C0 / C0); :func:`validate_params` raises ValueError otherwise.
   acc_width is limited to [2, 62] by this model (not by the contract).
8. Roles and optional inputs: psum_in is required for MIDDLE/LAST and refused
   (ValueError) for FIRST/ONLY (a stream the PE would never consume);
   bias/scale are required for LAST/ONLY and ignored for FIRST/MIDDLE (they
   model PPU-buffer contents, which exist whatever the role).  On an illegal
   config, :func:`run_tile` returns the cause and an empty (0, K0) output
   without looking at the data (the PE computes nothing).
9. :func:`ppu` takes ``v`` shaped [K1, ..., K0] (axis 0 = k1, last axis = k0)
   so that the channel of each value is k1*K0 + k0.
10. pool=1 with role FIRST/MIDDLE: partial sums are not pooled, but they
   stream in the pooled pixel order (stream order is defined by pixel_order,
   which depends on pool); BAD_POOL applies to every role.
11. :func:`loop_macs` takes ``(cfg, params)`` (the order in its brief), unlike
   the other functions; a swapped call raises TypeError.
"""
from __future__ import annotations

from dataclasses import fields

import numpy as np

from tessera.hdl.pe.config import CFG_FIELDS, ErrorCause, IbufHalf, PEConfig, PEParams, Role

__all__ = [
    "validate_params", "check_config", "pixel_order", "weight_beats", "input_beats",
    "ppu_beats", "accumulate", "ppu", "run_tile", "to_stream", "from_stream",
    "useful_macs", "loop_macs", "random_case", "random_psum", "pack_lanes",
    "unpack_lanes", "wrap", "ibuf_region", "iload_accepted_while_busy",
]


# --------------------------------------------------------------------------- checks
def _is_pow2(n: int) -> bool:
    return n >= 1 and (n & (n - 1)) == 0


def validate_params(params: PEParams) -> None:
    """Raise ValueError if the hardware parameters are not a legal PE."""
    if not isinstance(params, PEParams):
        raise TypeError(f"expected PEParams, got {type(params).__name__}")
    for name in ("K0", "C0", "acc_width", "wbuf_bytes", "ibuf_bytes", "abuf_entries", "ppu_depth"):
        v = getattr(params, name)
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"PEParams.{name} must be a positive integer, got {v!r}")
    if not 2 <= params.acc_width <= 62:
        raise ValueError(f"PEParams.acc_width must be in [2, 62] (model limit), got {params.acc_width}")
    if params.wbuf_bytes % (params.K0 * params.C0):
        raise ValueError(f"wbuf_bytes={params.wbuf_bytes} is not a multiple of K0*C0={params.K0 * params.C0}")
    if params.ibuf_bytes % params.C0:
        raise ValueError(f"ibuf_bytes={params.ibuf_bytes} is not a multiple of C0={params.C0}")
    for name, depth in (("wbuf_entries", params.wbuf_entries), ("ibuf_words", params.ibuf_words),
                        ("abuf_entries", params.abuf_entries), ("ppu_depth", params.ppu_depth)):
        if not _is_pow2(depth):
            raise ValueError(f"PEParams: {name}={depth} must be a power of two")


def _validate_cfg_fields(cfg: PEConfig) -> None:
    if not isinstance(cfg, PEConfig):
        raise TypeError(f"expected PEConfig, got {type(cfg).__name__}")
    for k, v in cfg.as_dict().items():
        if int(v) != v or not 0 <= int(v) < (1 << CFG_FIELDS[k]):
            raise ValueError(f"PEConfig.{k}={v!r} does not fit the {CFG_FIELDS[k]}-bit cfg field")


def check_config(params: PEParams, cfg: PEConfig) -> ErrorCause:
    """The PE's verdict on a tile config: the smallest ErrorCause that applies."""
    validate_params(params)
    _validate_cfg_fields(cfg)
    c = cfg
    if 0 in (c.R, c.S, c.C1, c.K1, c.P1, c.Q1, c.H_in, c.W_in):
        return ErrorCause.ZERO_BOUND
    if c.stride not in (1, 2):
        return ErrorCause.BAD_STRIDE
    if c.pad_top >= c.R or c.pad_left >= c.S:
        return ErrorCause.BAD_PAD
    if c.R * c.S * c.K1 * c.C1 > params.wbuf_entries:
        return ErrorCause.WBUF_OVERFLOW
    cap = params.ibuf_words if int(c.ibuf_half) == IbufHalf.WHOLE else params.ibuf_words // 2
    if c.C1 * c.H_in * c.W_in > cap:
        return ErrorCause.IBUF_OVERFLOW
    if c.K1 * c.P1 * c.Q1 > params.abuf_entries:
        return ErrorCause.ABUF_OVERFLOW
    if int(c.role) in (Role.LAST, Role.ONLY) and c.K1 > params.ppu_depth:
        return ErrorCause.PPU_OVERFLOW
    if c.pool and (c.P1 % 2 or c.Q1 % 2):
        return ErrorCause.BAD_POOL
    if int(c.ibuf_half) not in (IbufHalf.WHOLE, IbufHalf.LOWER, IbufHalf.UPPER):
        return ErrorCause.BAD_IBUF_HALF
    return ErrorCause.NONE


def ibuf_region(params: PEParams, half) -> tuple[int, int]:
    """(base word, words) of the input-buffer region a tile with ``ibuf_half``
    reads: WHOLE -> (0, ibuf_words), LOWER -> (0, ibuf_words // 2), UPPER ->
    (ibuf_words // 2, ibuf_words // 2)."""
    n = params.ibuf_words
    return {IbufHalf.WHOLE: (0, n), IbufHalf.LOWER: (0, n // 2),
            IbufHalf.UPPER: (n // 2, n // 2)}[IbufHalf(int(half))]


def iload_accepted_while_busy(params: PEParams, running: PEConfig, addr: int) -> bool:
    """Whether an ``i_load`` beat to ``addr`` is accepted while the tile ``running``
    is busy: only into a half that tile does not read (WHOLE tiles: never)."""
    half = int(running.ibuf_half)
    if half == IbufHalf.WHOLE:
        return False
    base, n = ibuf_region(params, half)
    return not base <= addr < base + n


def _require_legal(params: PEParams, cfg: PEConfig) -> None:
    cause = check_config(params, cfg)
    if cause != ErrorCause.NONE:
        raise ValueError(f"illegal PE config ({cause.name}): {cfg}")


def _int_array(a, shape, lo, hi, name) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype == object:
        arr = arr.astype(np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be an integer array, got dtype {arr.dtype}")
    if tuple(arr.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {arr.shape}, expected {tuple(shape)}")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < lo or arr.max() > hi):
        raise ValueError(f"{name} has values outside [{lo}, {hi}]")
    return arr


# ------------------------------------------------------------------------ orders
def pixel_order(P1: int, Q1: int, pool) -> list[tuple[int, int]]:
    """Order in which output pixels (p, q) are visited / streamed."""
    if P1 < 0 or Q1 < 0:
        raise ValueError("P1, Q1 must be >= 0")
    if not pool:
        return [(p, q) for p in range(P1) for q in range(Q1)]
    if P1 % 2 or Q1 % 2:
        raise ValueError(f"pool needs even P1, Q1 (got {P1}, {Q1})")
    return [(2 * pb + dy, 2 * qb + dx)
            for pb in range(P1 // 2) for qb in range(Q1 // 2)
            for dy in range(2) for dx in range(2)]


def _order_idx(cfg: PEConfig):
    order = pixel_order(cfg.P1, cfg.Q1, cfg.pool)
    ps = np.array([p for p, _ in order], dtype=np.intp)
    qs = np.array([q for _, q in order], dtype=np.intp)
    return ps, qs


def to_stream(params: PEParams, cfg: PEConfig, acc) -> np.ndarray:
    """[K1, P1, Q1, K0] -> [K1*P1*Q1, K0] in stream order (k1 outer, pixel order inner)."""
    a = np.asarray(acc)
    shape = (cfg.K1, cfg.P1, cfg.Q1, params.K0)
    if a.shape != shape:
        raise ValueError(f"to_stream: shape {a.shape}, expected {shape}")
    ps, qs = _order_idx(cfg)
    return a[:, ps, qs, :].reshape(cfg.K1 * len(ps), params.K0)


def from_stream(params: PEParams, cfg: PEConfig, stream) -> np.ndarray:
    """[K1*P1*Q1, K0] in stream order -> [K1, P1, Q1, K0] (inverse of :func:`to_stream`)."""
    s = np.asarray(stream)
    n = cfg.K1 * cfg.P1 * cfg.Q1
    if s.shape != (n, params.K0):
        raise ValueError(f"from_stream: shape {s.shape}, expected {(n, params.K0)}")
    ps, qs = _order_idx(cfg)
    out = np.empty((cfg.K1, cfg.P1, cfg.Q1, params.K0), dtype=s.dtype)
    out[:, ps, qs, :] = s.reshape(cfg.K1, len(ps), params.K0)
    return out


# ------------------------------------------------------------------- arithmetic
def wrap(a, bits: int):
    """Two's-complement wrap of integers (array or int) to signed ``bits`` bits."""
    half = 1 << (bits - 1)
    if isinstance(a, (int, np.integer)):
        return ((int(a) + half) % (1 << bits)) - half
    a = np.asarray(a)
    if bits <= 62:
        a = a.astype(np.int64)
        return ((a + half) & ((1 << bits) - 1)) - half
    a = a.astype(object)
    return ((a + half) % (1 << bits)) - half


def accumulate(params: PEParams, cfg: PEConfig, W, X) -> np.ndarray:
    """Listing 1 loop nest: acc[k1, p, q, k0], wrapped to signed acc_width bits.

    W: int8 [K1*K0, C1*C0, R, S]; X: int8 [C1*C0, H_in, W_in].
    """
    _require_legal(params, cfg)
    c, K0, C0 = cfg, params.K0, params.C0
    K, C = c.K1 * K0, c.C1 * C0
    W = _int_array(W, (K, C, c.R, c.S), -128, 127, "W")
    X = _int_array(X, (C, c.H_in, c.W_in), -128, 127, "X")
    st = c.stride
    # Zero-padded input: padded row i <-> h = i - pad_top, covering every h the nest reads.
    Hp = (c.P1 - 1) * st + c.R
    Wp = (c.Q1 - 1) * st + c.S
    Xp = np.zeros((C, Hp, Wp), dtype=np.int64)
    hn = min(c.H_in, Hp - c.pad_top)
    wn = min(c.W_in, Wp - c.pad_left)
    Xp[:, c.pad_top:c.pad_top + hn, c.pad_left:c.pad_left + wn] = X[:, :hn, :wn]
    acc = np.zeros((K, c.P1, c.Q1), dtype=np.int64)   # exact: |sum| <= R*S*C*2^14 << 2^63
    for r in range(c.R):
        for s in range(c.S):
            patch = Xp[:, r:r + (c.P1 - 1) * st + 1:st, s:s + (c.Q1 - 1) * st + 1:st]
            acc += np.tensordot(W[:, :, r, s], patch, axes=(1, 0))
    acc = wrap(acc, params.acc_width)
    return acc.reshape(c.K1, K0, c.P1, c.Q1).transpose(0, 2, 3, 1).copy()


def ppu(params: PEParams, cfg: PEConfig, v, bias, scale) -> np.ndarray:
    """Post-processing unit on v shaped [K1, ..., K0] -> int8 array of the same shape.

    t = v + bias (exact); y = t*scale (exact); y = (y + 2^(shift-1)) >> shift if
    shift > 0; relu; clamp to [-128, 127].  Pooling is not done here.
    """
    validate_params(params)
    _validate_cfg_fields(cfg)
    K0, aw = params.K0, params.acc_width
    v = np.asarray(v)
    if v.ndim < 2 or v.shape[0] != cfg.K1 or v.shape[-1] != K0:
        raise ValueError(f"ppu: v shape {v.shape} must be [K1={cfg.K1}, ..., K0={K0}]")
    dt = np.int64 if aw <= 46 else object      # |t*scale| < 2^(aw-1+15) + 2^38 fits int64
    v = _int_array(v, v.shape, -(1 << (aw - 1)), (1 << (aw - 1)) - 1, "v").astype(dt)
    bshape = (cfg.K1,) + (1,) * (v.ndim - 2) + (K0,)
    b = _int_array(bias, (cfg.K1 * K0,), -(1 << 23), (1 << 23) - 1, "bias").astype(dt).reshape(bshape)
    sc = _int_array(scale, (cfg.K1 * K0,), -(1 << 15), (1 << 15) - 1, "scale").astype(dt).reshape(bshape)
    y = (v + b) * sc
    if cfg.shift > 0:
        y = (y + (1 << (cfg.shift - 1))) >> cfg.shift   # arithmetic shift: floor
    if cfg.relu:
        y = np.where(y < 0, 0, y)
    y = np.where(y > 127, 127, np.where(y < -128, -128, y))
    return y.astype(np.int8)


def run_tile(params: PEParams, cfg: PEConfig, W, X, psum_in=None, bias=None, scale=None) -> dict:
    """One tile of one PE.  Returns {"error": ErrorCause, "psum_out" | "out": [n_beats, K0]}."""
    role = Role(int(cfg.role))
    key = "psum_out" if role in (Role.FIRST, Role.MIDDLE) else "out"
    err = check_config(params, cfg)
    if err != ErrorCause.NONE:
        return {"error": err, key: np.zeros((0, params.K0), dtype=np.int64 if key == "psum_out" else np.int8)}
    needs_psum = role in (Role.MIDDLE, Role.LAST)
    if needs_psum and psum_in is None:
        raise ValueError(f"role {role.name} needs psum_in")
    if not needs_psum and psum_in is not None:
        raise ValueError(f"role {role.name} takes no psum_in")
    if key == "out" and (bias is None or scale is None):
        raise ValueError(f"role {role.name} needs bias and scale (PPU)")
    aw, K0 = params.acc_width, params.K0
    acc = accumulate(params, cfg, W, X)
    if needs_psum:
        n = cfg.K1 * cfg.P1 * cfg.Q1
        ps = _int_array(psum_in, (n, K0), -(1 << (aw - 1)), (1 << (aw - 1)) - 1, "psum_in")
        acc = wrap(acc + from_stream(params, cfg, ps), aw)
    if key == "psum_out":
        return {"error": err, "psum_out": to_stream(params, cfg, acc).astype(np.int64)}
    s = to_stream(params, cfg, ppu(params, cfg, acc, bias, scale))
    if cfg.pool:
        s = s.reshape(cfg.K1, cfg.P1 * cfg.Q1 // 4, 4, K0).max(axis=2).reshape(-1, K0)
    return {"error": err, "out": s.astype(np.int8)}


# ---------------------------------------------------------------------- buffers
def weight_addr(cfg: PEConfig, r: int, s: int, k1: int, c1: int) -> int:
    """Weight-buffer entry of filter tap (r, s) for output block k1, input block c1
    (rows k0, lanes c0): the one definition of the w_load layout (the PE's loop nest
    reads it in this order; golden/chiplet.py inverts it)."""
    return ((r * cfg.S + s) * cfg.K1 + k1) * cfg.C1 + c1


def weight_beats(params: PEParams, cfg: PEConfig, W) -> list[dict]:
    """w_load beats: entry ((r*S+s)*K1+k1)*C1+c1, row k0, data[c0] = W[k1*K0+k0][c1*C0+c0][r][s]."""
    _require_legal(params, cfg)
    c, K0, C0 = cfg, params.K0, params.C0
    W = _int_array(W, (c.K1 * K0, c.C1 * C0, c.R, c.S), -128, 127, "W")
    W6 = W.reshape(c.K1, K0, c.C1, C0, c.R, c.S)
    beats = []
    for r in range(c.R):
        for s in range(c.S):
            for k1 in range(c.K1):
                for c1 in range(c.C1):
                    addr = weight_addr(c, r, s, k1, c1)
                    for k0 in range(K0):
                        beats.append({"addr": addr, "row": k0,
                                      "data": [int(x) for x in W6[k1, k0, c1, :, r, s]]})
    return beats


def input_beats(params: PEParams, cfg: PEConfig, X) -> list[dict]:
    """i_load beats: word base + (c1*H_in+h)*W_in+w holds X[c1*C0+c0][h][w] in lane c0
    (base: 0, or ibuf_words // 2 for an UPPER tile, see :func:`ibuf_region`)."""
    _require_legal(params, cfg)
    c, C0 = cfg, params.C0
    X = _int_array(X, (c.C1 * C0, c.H_in, c.W_in), -128, 127, "X")
    X4 = X.reshape(c.C1, C0, c.H_in, c.W_in)
    base = ibuf_region(params, c.ibuf_half)[0]
    return [{"addr": base + (c1 * c.H_in + h) * c.W_in + w,
             "data": [int(x) for x in X4[c1, :, h, w]]}
            for c1 in range(c.C1) for h in range(c.H_in) for w in range(c.W_in)]


def ppu_beats(params: PEParams, cfg: PEConfig, bias, scale) -> list[dict]:
    """p_load beats: addr k1, row k0, bias/scale of output channel k1*K0+k0."""
    _require_legal(params, cfg)
    K0, n = params.K0, cfg.K1 * params.K0
    b = _int_array(bias, (n,), -(1 << 23), (1 << 23) - 1, "bias")
    sc = _int_array(scale, (n,), -(1 << 15), (1 << 15) - 1, "scale")
    return [{"addr": k1, "row": k0, "bias": int(b[k1 * K0 + k0]), "scale": int(sc[k1 * K0 + k0])}
            for k1 in range(cfg.K1) for k0 in range(K0)]


def pack_lanes(values, width: int) -> int:
    """Pack signed lane values into one unsigned int, lane i at bits width*i."""
    word = 0
    for i, v in enumerate(values):
        v = int(v)
        if not -(1 << (width - 1)) <= v < (1 << (width - 1)):
            raise ValueError(f"lane {i} value {v} does not fit {width} signed bits")
        word |= (v & ((1 << width) - 1)) << (width * i)
    return word


def unpack_lanes(word: int, n: int, width: int) -> list[int]:
    """Inverse of :func:`pack_lanes`."""
    return [wrap((int(word) >> (width * i)) & ((1 << width) - 1), width) for i in range(n)]


# ---------------------------------------------------------------------- counts
def useful_macs(params: PEParams, cfg: PEConfig) -> int:
    """Scalar MACs of the loop nest whose input (h, w) is inside the input tile."""
    _require_legal(params, cfg)
    c = cfg
    p = np.arange(c.P1)[:, None] * c.stride + np.arange(c.R)[None, :] - c.pad_top   # [P1, R] -> h
    q = np.arange(c.Q1)[:, None] * c.stride + np.arange(c.S)[None, :] - c.pad_left  # [Q1, S] -> w
    nh = int(((p >= 0) & (p < c.H_in)).sum())
    nw = int(((q >= 0) & (q < c.W_in)).sum())
    return nh * nw * c.K1 * c.C1 * params.K0 * params.C0


def loop_macs(cfg: PEConfig, params: PEParams) -> int:
    """R*S*C1*K1*P1*Q1*K0*C0 (note the argument order: cfg first)."""
    if not isinstance(cfg, PEConfig) or not isinstance(params, PEParams):
        raise TypeError("loop_macs(cfg: PEConfig, params: PEParams)")
    c = cfg
    return c.R * c.S * c.C1 * c.K1 * c.P1 * c.Q1 * params.K0 * params.C0


# ---------------------------------------------------------------------- random
def random_case(params: PEParams, rng, **overrides):
    """A seeded random legal tile within the buffers, with random data.

    rng: numpy Generator or seed.  overrides: PEConfig fields to fix; the other
    fields are drawn consistently with them (R, S in {1, 3}, stride in {1, 2},
    P1, Q1 <= 8, C1, K1 <= 4; ibuf_half WHOLE).  Returns (cfg, W int8, X int8,
    bias, scale).
    Raises ValueError if no legal config exists with the overrides.
    """
    validate_params(params)
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    names = {f.name for f in fields(PEConfig)}
    bad = set(overrides) - names
    if bad:
        raise ValueError(f"random_case: unknown PEConfig fields {sorted(bad)}")
    K0, C0 = params.K0, params.C0
    for _ in range(2000):
        d = {}

        def pick(name, draw):
            d[name] = overrides[name] if name in overrides else draw()
            return d[name]

        R = pick("R", lambda: int(rng.choice([1, 3])))
        S = pick("S", lambda: int(rng.choice([1, 3])))
        st = pick("stride", lambda: int(rng.integers(1, 3)))
        pt = pick("pad_top", lambda: int(rng.integers(0, max(R, 1))))
        pl = pick("pad_left", lambda: int(rng.integers(0, max(S, 1))))
        pool = pick("pool", lambda: bool(rng.integers(0, 2)))
        P1 = pick("P1", lambda: int(2 * rng.integers(1, 5)) if pool else int(rng.integers(1, 9)))
        Q1 = pick("Q1", lambda: int(2 * rng.integers(1, 5)) if pool else int(rng.integers(1, 9)))
        pick("H_in", lambda: max(1, (P1 - 1) * st + R - pt + int(rng.integers(-max(R - 1, 0), 2))))
        pick("W_in", lambda: max(1, (Q1 - 1) * st + S - pl + int(rng.integers(-max(S - 1, 0), 2))))
        C1 = pick("C1", lambda: int(rng.integers(1, 5)))
        pick("K1", lambda: int(rng.integers(1, 5)))
        pick("role", lambda: int(rng.integers(0, 4)))
        pick("relu", lambda: bool(rng.integers(0, 2)))
        # shift so that typical outputs land around +-64 (some saturate, some do not)
        n = max(R * S * C1 * C0, 1)
        typ = 5461.0 * np.sqrt(n) * 18918.0 / 64.0
        pick("shift", lambda: int(np.clip(round(np.log2(typ)) + int(rng.integers(-1, 2)), 0, 31)))
        pick("ibuf_half", lambda: int(IbufHalf.WHOLE))    # not drawn (no rng use)
        try:
            cfg = PEConfig(**d)
            if check_config(params, cfg) == ErrorCause.NONE:
                break
        except ValueError:
            pass
    else:
        raise ValueError(f"random_case: no legal config found with overrides {overrides}")
    c = cfg
    W = rng.integers(-128, 128, size=(c.K1 * K0, c.C1 * C0, c.R, c.S), dtype=np.int8)
    X = rng.integers(-128, 128, size=(c.C1 * C0, c.H_in, c.W_in), dtype=np.int8)
    bmax = (1 << 23) if rng.random() < 0.1 else (1 << 15)
    bias = rng.integers(-bmax, bmax, size=c.K1 * K0, dtype=np.int64)
    scale = rng.integers(-(1 << 15), 1 << 15, size=c.K1 * K0, dtype=np.int64)
    return cfg, W, X, bias, scale


def random_psum(params: PEParams, cfg: PEConfig, rng, bits: int | None = None) -> np.ndarray:
    """Random psum_in stream [K1*P1*Q1, K0] of signed ``bits``-bit values (default acc_width)."""
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    bits = params.acc_width if bits is None else bits
    if not 1 <= bits <= params.acc_width:
        raise ValueError(f"random_psum: bits={bits} must be in [1, acc_width={params.acc_width}]")
    half = 1 << (bits - 1)
    n = cfg.K1 * cfg.P1 * cfg.Q1
    return rng.integers(-half, half, size=(n, params.K0), dtype=np.int64)
