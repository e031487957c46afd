"""Generic convolution / FC layer description and the ResNet-50 workload (seed paper Sec. 4.1).

A layer is C -> K channels, R x S filter, H x W input, stride and symmetric padding; an FC
layer is a 1x1 conv on a 1x1 map.  Networks are JSON files in ``data/<name>.json`` (add one to
add a network).  Left out: grouped/depth-wise convs, pooling and element-wise ops (those run in
the Global PE near-memory, Sec. 3.1, and carry no MACs here).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

DATA = Path(__file__).parent / "data"


class LayerError(ValueError):
    """Invalid layer description."""


@dataclass(frozen=True)
class Layer:
    name: str
    C: int
    K: int
    R: int
    S: int
    H: int
    W: int
    stride: int = 1
    pad: int = 0

    def __post_init__(self):
        for f in ("C", "K", "R", "S", "H", "W", "stride"):
            if not isinstance(getattr(self, f), int) or getattr(self, f) < 1:
                raise LayerError(f"{self.name}: {f} must be a positive integer, got {getattr(self, f)!r}")
        if self.pad < 0:
            raise LayerError(f"{self.name}: pad must be >= 0")
        if self.H + 2 * self.pad < self.R or self.W + 2 * self.pad < self.S:
            raise LayerError(f"{self.name}: filter larger than padded input")

    @property
    def P(self) -> int:
        return (self.H + 2 * self.pad - self.R) // self.stride + 1

    @property
    def Q(self) -> int:
        return (self.W + 2 * self.pad - self.S) // self.stride + 1

    @property
    def macs(self) -> int:
        return self.P * self.Q * self.K * self.C * self.R * self.S

    @property
    def weight_bytes(self) -> int:
        return self.R * self.S * self.C * self.K

    @property
    def oa_bytes(self) -> int:
        return self.P * self.Q * self.K

    def rows_read(self, p_lo: int, p_hi: int) -> int:
        """Distinct (unpadded) input rows read to produce output rows [p_lo, p_hi)."""
        return _span(p_lo, p_hi, self.stride, self.R, self.pad, self.H)

    def cols_read(self, q_lo: int, q_hi: int) -> int:
        return _span(q_lo, q_hi, self.stride, self.S, self.pad, self.W)

    @cached_property
    def ia_bytes_read(self) -> int:
        """Input activation bytes the layer actually reads (what is placed in Global PEs)."""
        return self.C * self.rows_read(0, self.P) * self.cols_read(0, self.Q)


def _span(lo, hi, stride, r, pad, size) -> int:
    if hi <= lo:
        return 0
    rows = set()
    for p in range(lo, hi):
        base = p * stride - pad
        rows.update(x for x in range(base, base + r) if 0 <= x < size)
    return len(rows)


def rows_per_tile(n_out: int, stride: int, r: int) -> int:
    """Input rows (incl. halo, padding counted) feeding ``n_out`` consecutive output rows."""
    return n_out * r if stride >= r else (n_out - 1) * stride + r


def load_network(name_or_path: str | Path) -> list[Layer]:
    p = Path(name_or_path)
    if not p.suffix:
        p = DATA / f"{name_or_path}.json"
    if not p.exists():
        avail = sorted(x.stem for x in DATA.glob("*.json") if x.stem != "simba_arch")
        raise LayerError(f"unknown network {str(name_or_path)!r} (available: {', '.join(avail)})")
    raw = json.loads(p.read_text())
    layers = [Layer(**d) for d in raw["layers"]]
    names = [l.name for l in layers]
    if len(set(names)) != len(names):
        raise LayerError(f"{p.name}: duplicate layer names")
    return layers
