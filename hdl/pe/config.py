"""Simba PE: parameters, tile configuration and the behavioural contract.

Data definitions only (shared by the RTL in this package, the golden model
``tessera.golden.pe`` and the testbench); no logic that either side relies on.

Simba §3.1 / Fig 1(c) and Listing 1 (§3.3), PE and vector-MAC levels:

    for r in [0,R): for s in [0,S): for k1 in [0,K1): for c1 in [0,C1):
      for (p, q) in pixel_order(P1, Q1, pool):              # weights stay put
        parallel_for k0 in [0,K0): parallel_for c0 in [0,C0):
          acc[k1][p][q][k0] += W[k1*K0+k0][c1*C0+c0][r][s] * X[c1*C0+c0][h][w]
    with h = p*stride + r - pad_top, w = q*stride + s - pad_left;
    X is 0 where h or w is outside the input tile [0,H_in) x [0,W_in).

PE-level contract (what the golden model implements from this text)
-------------------------------------------------------------------
* Hardware parameters (:class:`PEParams`): K0 vector MACs x C0 lanes, int8
  signed weights/activations, ``acc_width``-bit (default 24) signed
  accumulators (``mac_dsps``, ``mac_stages``, ``ppu_mul_stages``,
  ``mac_operand_reg`` only change
  the implementation: DSP/LUT split and pipeline depth, i.e. cycle counts,
  never results).  **Overflow: accumulators and partial sums wrap modulo
  2**acc_width (two's complement), like Simba's 24-bit datapath**; every
  addition on the accumulator path (MAC accumulate, cross-PE psum add) wraps.
* Buffers (sizes are parameters, power-of-two depths):
  - weight buffer: ``wbuf_bytes // (K0*C0)`` entries, one entry = one weight
    block W[k1*K0+k0][c1*C0+c0][r][s] for all k0, c0.  Entry address
    ``((r*S + s)*K1 + k1)*C1 + c1``.  Loaded through ``w_load`` beats
    ``{addr, row=k0, data[c0]}`` (int8 per lane, lane c0 at bits 8*c0).
  - input buffer: ``ibuf_bytes // C0`` words of C0 int8.  The tile's field
    ``ibuf_half`` (:class:`IbufHalf`) selects the region it reads: WHOLE (0,
    the default: base 0, the whole buffer), LOWER (1: base 0) or UPPER (2:
    base ``ibuf_words // 2``), a half holding ``ibuf_words // 2`` words;
    address ``base + (c1*H_in + h)*W_in + w`` holds X[c1*C0 + c0][h][w] in
    lane c0.  Loaded through ``i_load`` beats ``{addr, data[c0]}`` (``addr``
    absolute, base included).
  - accumulation buffer: ``abuf_entries`` entries x K0 x acc_width; a tile
    needs K1*P1*Q1 entries.
  - PPU parameters: ``ppu_depth`` entries (one per k1) x K0 x {bias int24,
    scale int16}; loaded through ``p_load`` beats ``{addr=k1, row=k0, bias, scale}``
    for output channel k1*K0 + k0.  Needed by the last PE only.
  ``w_load`` and ``p_load`` are accepted only while the PE is not busy
  (ready low while busy).  ``i_load`` is accepted when no started tile still
  reads ``addr``'s region (a tile reads its region from its start until its
  last MAC operation has been issued, before its results drain): always
  while not busy, and while busy with LOWER/UPPER tiles when ``addr`` lies
  in a half none of the reading tiles reads (double buffering: the next
  tile's input is loaded while the current one computes); a beat into a
  region a tile still reads is held back (ready low), never dropped.  Buffer contents survive
  tiles and reset (weights stay preloaded).
* Pixel order: ``pool=0``: p outer, q inner (row-major).  ``pool=1``
  (requires even P1, Q1): 2x2 blocks in row-major block order, inside a block
  (0,0),(0,1),(1,0),(1,1):  for pb, for qb, for dy, for dx: p=2pb+dy, q=2qb+dx.
* Stream order of results: for k1 in [0,K1): for (p,q) in pixel_order -> one
  beat of K0 values (lane k0 = output channel k1*K0+k0).  ``psum_in`` must
  arrive and ``psum_out`` leaves in exactly this order; all PEs of a chain
  get the same tile config except ``role``.
* Roles: FIRST: result = acc -> psum_out.  MIDDLE: result = acc + psum_in
  (wrapping) -> psum_out.  LAST: acc + psum_in -> PPU -> out.  ONLY (a single
  PE, no chain): acc -> PPU -> out.
* PPU (per output channel, exact integer arithmetic, then int8):
      t = v + bias                       (v = wrapped acc_width-bit result, exact sum)
      y = t * scale                      (exact)
      y = (y + (1 << (shift-1))) >> shift   if shift > 0   (arithmetic shift:
                                          round half up, i.e. towards +inf;
                                          -2.5 -> -2, 2.5 -> 3)
      y = max(y, 0) if relu
      a = clamp(y, -128, 127)            (saturation both ways)
  then, if pool, max over each 2x2 block (4 consecutive beats in pixel order)
  -> one beat per block; ``out`` carries K1 * P1*Q1/(4 if pool else 1) beats
  of K0 int8 (lane k0 at bits 8*k0).
* Control: ``cfg`` is sampled on the cycle ``start`` is high while
  ``start_ready`` is high (a start while ``start_ready`` is low is ignored).
  The configuration check is pipelined (``CHECK_LATENCY`` = 4 in pe.py):
  ``cfg_cause`` is the cause of ``cfg``'s fields other than ``ibuf_half`` as
  they were CHECK_LATENCY cycles before and of ``ibuf_half`` now (so it is
  exact once cfg has been held CHECK_LATENCY cycles); a start accepted while
  idle raises ``busy`` at once and is decided -- the tile starts, or
  ``error`` rises and busy falls -- 1 cycle after it is accepted if cfg but
  ``ibuf_half`` had not changed in the CHECK_LATENCY cycles before the start,
  else CHECK_LATENCY + 1 cycles after it (``start_ready`` low meanwhile).
  ``start_ready`` is high while the PE is not busy, and also -- back-to-back
  tiles -- while fewer than 3 tiles are in flight and the newest one's
  operations have all been generated, when ``cfg`` *of the previous cycle*
  was equal to that tile's configuration in every field but ``ibuf_half``
  and ``ibuf_half`` now is legal for it (the compare is registered; the new
  tile runs with the newest tile's configuration and the start's
  ``ibuf_half``, so ``cfg`` but ``ibuf_half`` must not change in the cycle of
  a back-to-back start: a controller holds it, as it must anyway for the
  check; the new tile computes while earlier ones drain; a different
  configuration waits until the PE is idle).  Then
  either ``busy`` rises (or stays high) and, after the tile's last result
  beat has been accepted downstream, ``done`` pulses for one cycle (once per
  tile, in start order; busy falls when no tile is left in flight); or the
  configuration is illegal (only possible while not busy): ``error`` rises
  with ``error_cause`` (below), nothing is computed or emitted, busy falls
  (it was high only while the start was being decided).  ``error``/``error_cause``
  clear on an accepted start and hold until the next one.  When
  several checks fail, the cause is the smallest :class:`ErrorCause` code
  that applies.  Synchronous reset (``rst``) aborts every tile in flight: all
  control state, pipelines and output valids clear; buffer contents are
  kept.
"""
from __future__ import annotations

from dataclasses import dataclass, field, asdict
from enum import IntEnum


class Role(IntEnum):
    FIRST = 0
    MIDDLE = 1
    LAST = 2
    ONLY = 3


class ErrorCause(IntEnum):
    NONE = 0
    ZERO_BOUND = 1          # R, S, C1, K1, P1, Q1, H_in or W_in is 0
    BAD_STRIDE = 2          # stride not 1 or 2
    BAD_PAD = 3             # pad_top >= R or pad_left >= S
    WBUF_OVERFLOW = 4       # R*S*K1*C1 > weight-buffer entries
    IBUF_OVERFLOW = 5       # C1*H_in*W_in > ibuf_words (ibuf_half 0), else > ibuf_words // 2
    ABUF_OVERFLOW = 6       # K1*P1*Q1 > accumulation-buffer entries
    PPU_OVERFLOW = 7        # role LAST/ONLY and K1 > ppu_depth
    BAD_POOL = 8            # pool with odd P1 or Q1
    BAD_IBUF_HALF = 9       # ibuf_half = 3 (no such region)


class IbufHalf(IntEnum):
    """Input-buffer region a tile reads (cfg field ``ibuf_half``)."""
    WHOLE = 0
    LOWER = 1
    UPPER = 2


# Widths of the configuration fields (the RTL's cfg port layout).
CFG_FIELDS = {
    "R": 4, "S": 4, "C1": 11, "K1": 8, "P1": 8, "Q1": 8, "H_in": 11, "W_in": 11,
    "stride": 2, "pad_top": 4, "pad_left": 4, "role": 2, "relu": 1, "pool": 1, "shift": 5,
    "ibuf_half": 2,
}


@dataclass(frozen=True)
class PEParams:
    """Hardware parameters (constructor arguments of the RTL)."""
    K0: int = 8
    C0: int = 8
    acc_width: int = 24
    wbuf_bytes: int = 32768
    ibuf_bytes: int = 8192
    abuf_entries: int = 128
    ppu_depth: int = 16
    # implementation parameters (timing/area only; the contract above is unchanged)
    mac_dsps: int = 64          # MAC multipliers on DSP blocks (the rest in LUTs)
    mac_stages: int = 3         # MAC pipeline registers (products, adder tree)
    ppu_mul_stages: int = 2     # PPU scale-multiply pipeline registers
    mac_operand_reg: bool = True    # operand registers by each multiplier (same cycles; see mac_array.py)
    mult_impl: str = "generic"      # multiplier cell technology: generic | ecp5 (see mult.py)

    @property
    def wbuf_entries(self) -> int:
        return self.wbuf_bytes // (self.K0 * self.C0)

    @property
    def ibuf_words(self) -> int:
        return self.ibuf_bytes // self.C0


@dataclass(frozen=True)
class PEConfig:
    """One tile (the ``cfg`` port).  Defaults: a 3x3, stride-1, 4x4-pixel tile."""
    R: int = 3
    S: int = 3
    C1: int = 1
    K1: int = 1
    P1: int = 4
    Q1: int = 4
    H_in: int = 6
    W_in: int = 6
    stride: int = 1
    pad_top: int = 0
    pad_left: int = 0
    role: int = Role.ONLY
    relu: bool = False
    pool: bool = False
    shift: int = 0
    ibuf_half: int = IbufHalf.WHOLE

    def as_dict(self) -> dict:
        d = asdict(self)
        d["role"] = int(d["role"])
        d["relu"] = int(d["relu"])
        d["pool"] = int(d["pool"])
        d["ibuf_half"] = int(d["ibuf_half"])
        return d

    def fits_fields(self) -> bool:
        return all(0 <= int(v) < (1 << CFG_FIELDS[k]) for k, v in self.as_dict().items())
