"""Golden model of the Simba Global PE (Simba §3.1 "Simba global PE"), from the spec.

Executes a command list against a numpy buffer (``words x word_bits/8`` int8
lanes, lane j = byte j of a word, little endian) and returns what the
spec says must happen, independent of timing:

* ``packets[consumer]``: for every consumer, one list per *destination
  stream* that reaches it -- multicast group g, or unicast to it -- of
  :class:`Tile` (tag, seq, words) in the order that stream carries them:
  the tiles of successive SENDs to one group (or one unicast node) follow
  each other in command order, while different streams may interleave
  arbitrarily at the consumer (a node in two groups gets two lists);
  ``dest_packets`` pairs each tile with its packet destination (multicast
  masks or unicast node), which tells lanes apart on the wire;
* ``completions``: (tag, status) per command, listed in command order;
  the spec fixes the set, not the order (completions are tagged; SENDs
  finish at the pace of their consumers);
* ``buffer``: final contents;
* ``flags``: the sticky status flags the RECV traffic must raise.

RECV commands carry the OUT packets the producers send while the window is
open (``arrivals``: (consumer, address, words)); arrival order does not
change the result unless two words hit one address (tests avoid that).
Shares only data definitions (:mod:`tessera.hdl.global_pe.packets`) with the
RTL.  Timing, credits and back-pressure are not modelled: the testbench
checks those properties directly.  Commands may overlap in the hardware;
the spec requires the result of running them one by one in command order,
which is what this model does.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tessera.hdl.global_pe.packets import (EW_ADD, EW_MAX, EW_MUL, OP_EWISE, OP_GROUP, OP_RECV,
                                           OP_SEND, ST_BAD_ARG, ST_BAD_OP, ST_BAD_REGION,
                                           ST_EMPTY_SET, ST_OK, GpeConfig)


@dataclass
class Command:
    op: int
    tag: int = 0
    a: int = 0
    b: int = 0
    c: int = 0
    cnt: tuple = (1, 1, 1)
    stride: tuple = (0, 0, 0)
    tile: int = 1
    groups: int = 0                 # bit g: multicast to group g
    ucast: bool = False
    uaddr: tuple = ((0, 0), (0, 0))  # ((chiplet x, y), (node x, y))
    mask: tuple = (0, 0)            # (chiplet mask, node mask)
    gidx: int = 0
    sub: int = 0
    shift: int = 0
    arrivals: list = field(default_factory=list)   # RECV: [(consumer, addr, [words])]

    def fields(self) -> dict:
        """Payload dict keyed by the manifest field names of ``command_layout``."""
        (ucx, ucy), (unx, uny) = self.uaddr
        return {"op": self.op, "tag": self.tag, "sub": self.sub, "shift": self.shift,
                "a": self.a, "b": self.b, "c": self.c,
                "cnt0": self.cnt[0], "cnt1": self.cnt[1], "cnt2": self.cnt[2],
                "stride0": self.stride[0], "stride1": self.stride[1],
                "stride2": self.stride[2], "tile": self.tile, "groups": self.groups,
                "ucast": int(self.ucast), "uaddr.chiplet.x": ucx, "uaddr.chiplet.y": ucy,
                "uaddr.node.x": unx, "uaddr.node.y": uny,
                "mask.chiplets": self.mask[0], "mask.nodes": self.mask[1], "gidx": self.gidx}


@dataclass(frozen=True)
class Tile:
    tag: int
    seq: int
    words: tuple                    # ints, one per buffer word


@dataclass
class Result:
    packets: dict
    completions: list
    buffer: np.ndarray
    flags: dict


def word_to_int(row: np.ndarray) -> int:
    return int.from_bytes(row.astype(np.uint8).tobytes(), "little")


def int_to_word(value: int, nbytes: int) -> np.ndarray:
    return np.frombuffer(int(value).to_bytes(nbytes, "little"), dtype=np.uint8).astype(np.int8)


def ewise_words(a: np.ndarray, b: np.ndarray, sub: int, shift: int) -> np.ndarray:
    """int8 arrays -> int8 result: f(a, b) >> shift (floor), saturated to [-128, 127]."""
    x = a.astype(np.int32)
    y = b.astype(np.int32)
    if sub == EW_ADD:
        r = x + y
    elif sub == EW_MUL:
        r = x * y
    elif sub == EW_MAX:
        r = np.maximum(x, y)
    else:
        raise ValueError(f"bad EWISE function {sub}")
    r = r >> shift                  # numpy >> on signed ints is arithmetic (floor)
    return np.clip(r, -128, 127).astype(np.int8)


class GlobalPEModel:
    def __init__(self, cfg: GpeConfig, buffer: np.ndarray | None = None):
        self.cfg = cfg
        nbytes = cfg.word_bits // 8
        self.buf = (np.zeros((cfg.words, nbytes), dtype=np.int8) if buffer is None
                    else np.array(buffer, dtype=np.int8).reshape(cfg.words, nbytes))
        self.table = [(0, 0)] * cfg.groups
        self.streams: dict[int, dict] = {}    # consumer -> {stream key: [(Tile, dest)]}
        self.completions: list = []
        self.flags = {"stray_word": 0, "bad_flit": 0, "credit_overflow": 0}

    # -- helpers ---------------------------------------------------------
    def members(self, chip_mask: int, node_mask: int) -> list[int]:
        cfg = self.cfg
        return [c * cfg.nodes + n for c in range(cfg.chiplets) if chip_mask >> c & 1
                for n in range(cfg.nodes) if node_mask >> n & 1]

    def consumer(self, uaddr) -> int:
        (cx, cy), (nx, ny) = uaddr
        cfg = self.cfg
        return (cy * cfg.chiplet_mesh_x + cx) * cfg.nodes + ny * cfg.node_mesh_x + nx

    def check(self, cmd: Command) -> int:
        cfg = self.cfg
        W = cfg.words
        if cmd.op == OP_SEND:
            (cx, cy), (nx, ny) = cmd.uaddr
            on_mesh = (nx < cfg.node_mesh_x and ny < cfg.node_mesh_y
                       and cx < cfg.chiplet_mesh_x and cy < cfg.chiplet_mesh_y)
            if (cmd.tile == 0 or cmd.tile > cfg.max_tile or 0 in cmd.cnt
                    or (cmd.ucast and not on_mesh)):
                return ST_BAD_ARG
            last = cmd.a + sum((n - 1) * s for n, s in zip(cmd.cnt, cmd.stride))
            if last >= W:
                return ST_BAD_REGION
            sel = [g for g in range(cfg.groups) if cmd.groups >> g & 1]
            if not sel and not cmd.ucast:
                return ST_EMPTY_SET
            if any(self.table[g][0] == 0 or self.table[g][1] == 0 for g in sel):
                return ST_EMPTY_SET
            return ST_OK
        if cmd.op == OP_RECV:
            n = cmd.cnt[0]
            if n == 0:
                return ST_BAD_ARG
            if cmd.a + n > W:
                return ST_BAD_REGION
            if cmd.mask[0] == 0 or cmd.mask[1] == 0:
                return ST_EMPTY_SET
            return ST_OK
        if cmd.op == OP_EWISE:
            n = cmd.cnt[0]
            if cmd.sub not in (EW_ADD, EW_MUL, EW_MAX) or n == 0:
                return ST_BAD_ARG
            if any(x + n > W for x in (cmd.a, cmd.b, cmd.c)):
                return ST_BAD_REGION
            for src in (cmd.a, cmd.b):
                if cmd.c != src and abs(cmd.c - src) < n:
                    return ST_BAD_REGION
            return ST_OK
        if cmd.op == OP_GROUP:
            if cmd.gidx >= cfg.groups:
                return ST_BAD_ARG
            if cmd.mask[0] == 0 or cmd.mask[1] == 0:
                return ST_EMPTY_SET
            return ST_OK
        return ST_BAD_OP

    # -- execution ---------------------------------------------------------
    def step(self, cmd: Command):
        status = self.check(cmd)
        self.completions.append((cmd.tag, status))
        if status != ST_OK:
            return
        if cmd.op == OP_GROUP:
            self.table[cmd.gidx] = tuple(cmd.mask)
        elif cmd.op == OP_SEND:
            (n0, n1, n2), (s0, s1, s2) = cmd.cnt, cmd.stride
            i2, i1, i0 = np.meshgrid(np.arange(n2), np.arange(n1), np.arange(n0), indexing="ij")
            addrs = (cmd.a + i2 * s2 + i1 * s1 + i0 * s0).reshape(-1)
            words = [word_to_int(self.buf[x]) for x in addrs]
            chunks = [words[r + i:r + min(i + cmd.tile, n0)]          # row-aligned tiles
                      for r in range(0, len(words), n0) for i in range(0, n0, cmd.tile)]
            tiles = [Tile(cmd.tag, k % (1 << 16), tuple(ch)) for k, ch in enumerate(chunks)]
            dests = [(("group", g), ("mcast",) + tuple(self.table[g]),
                      self.members(*self.table[g]))
                     for g in range(self.cfg.groups) if cmd.groups >> g & 1]
            if cmd.ucast:
                u = self.consumer(cmd.uaddr)
                dests.append((("ucast",), ("ucast", u), [u]))
            for key, dest, consumers in dests:
                for c in consumers:
                    self.streams.setdefault(c, {}).setdefault(key, []).extend(
                        (t, dest) for t in tiles)
        elif cmd.op == OP_RECV:
            prod = set(self.members(*cmd.mask))
            lo, hi = cmd.a, cmd.a + cmd.cnt[0]
            got = 0
            for src, addr, words in cmd.arrivals:
                for k, w in enumerate(words):
                    x = addr + k
                    if src in prod and lo <= x < hi and got < cmd.cnt[0]:
                        self.buf[x] = int_to_word(w, self.cfg.word_bits // 8)
                        got += 1
                    else:
                        self.flags["stray_word"] = 1
            if got != cmd.cnt[0]:
                raise ValueError(f"RECV tag {cmd.tag}: arrivals deliver {got} of "
                                 f"{cmd.cnt[0]} words")
        elif cmd.op == OP_EWISE:
            n = cmd.cnt[0]
            self.buf[cmd.c:cmd.c + n] = ewise_words(self.buf[cmd.a:cmd.a + n],
                                                    self.buf[cmd.b:cmd.b + n], cmd.sub, cmd.shift)

    @property
    def packets(self) -> dict:
        """{consumer: [tiles of one destination stream, ...]} (streams in first-use order)."""
        return {c: [[t for t, _ in st] for st in streams.values()]
                for c, streams in self.streams.items()}

    @property
    def dest_packets(self) -> dict:
        """As :attr:`packets`, each tile paired with the packet destination it travels
        under: ``("mcast", chiplet mask, node mask)`` or ``("ucast", consumer)``."""
        return {c: [list(st) for st in streams.values()] for c, streams in self.streams.items()}

    def run(self, commands) -> Result:
        for cmd in commands:
            self.step(cmd)
        return Result(self.packets, self.completions, self.buf.copy(), dict(self.flags))


def run(cfg: GpeConfig, commands, buffer=None) -> Result:
    return GlobalPEModel(cfg, buffer).run(commands)
