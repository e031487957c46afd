"""Shared cocotb testbench pieces (cocotbext-axi style).

* :class:`StreamSource` drives an Amaranth ``lib.stream`` sink port
  (``<name>__valid/__ready/__payload``) from a queue, with optional random
  idle cycles; :class:`StreamSink` collects a source port with random
  back-pressure.  Payloads are ints, or dicts packed/unpacked with the field
  list of the block's manifest (``lib.data`` layout).
* :class:`TBBase` owns clock, reset, the parameter set and seed passed in by
  :mod:`tessera.tb.runner`, and the check/cycle counters reported to
  ``make demo``.
"""
from __future__ import annotations

import json
import os
import random
from collections import deque
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge


def pack(fields, value) -> int:
    """dict -> int using manifest fields [{name, offset, width, signed}]."""
    if isinstance(value, int):
        return value
    word = 0
    for f in fields:
        v = value.get(f["name"], 0)
        word |= (int(v) & ((1 << f["width"]) - 1)) << f["offset"]
    return word


def unpack(fields, word: int) -> dict:
    out = {}
    for f in fields:
        v = (word >> f["offset"]) & ((1 << f["width"]) - 1)
        if f["signed"] and v >> (f["width"] - 1):
            v -= 1 << f["width"]
        out[f["name"]] = v
    return out


def load_manifest(block: str | None = None) -> dict:
    """The manifest written beside the Verilog by tessera.tb.runner (cwd is the build dir)."""
    block = block or os.environ["TESSERA_BLOCK"]
    for cand in (Path.cwd() / f"{block}.manifest.json", Path.cwd().parent / f"{block}.manifest.json"):
        if cand.exists():
            return json.loads(cand.read_text())
    raise FileNotFoundError(f"{block}.manifest.json not found near {Path.cwd()}")


class StreamSource:
    """Drives valid/payload of a DUT stream input; honours ready."""

    def __init__(self, dut, name, clk, fields=None, idle_prob=0.0, rng=None):
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")
        self.clk, self.fields, self.idle_prob = clk, fields, idle_prob
        self.rng = rng or random.Random(0)
        self.queue: deque = deque()
        self.sent = 0
        self.valid.value = 0
        self._task = cocotb.start_soon(self._run())

    def send_nowait(self, item):
        self.queue.append(item)

    def idle(self) -> bool:
        return not self.queue and not int(self.valid.value)

    async def wait_idle(self):
        while not self.idle():
            await RisingEdge(self.clk)

    def clear(self):
        self.queue.clear()
        self.valid.value = 0

    async def _run(self):
        current = None
        while True:
            await RisingEdge(self.clk)
            if current is not None and int(self.valid.value) and int(self.ready.value):
                self.sent += 1
                current = None
            if current is None and self.queue and self.rng.random() >= self.idle_prob:
                current = self.queue.popleft()
                self.payload.value = pack(self.fields, current) if self.fields else current
                self.valid.value = 1
            elif current is None:
                self.valid.value = 0


class StreamSink:
    """Collects a DUT stream output with random back-pressure (ready_prob)."""

    def __init__(self, dut, name, clk, fields=None, ready_prob=1.0, rng=None, signed=False,
                 width=None):
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")
        self.clk, self.fields, self.ready_prob = clk, fields, ready_prob
        self.rng = rng or random.Random(1)
        self.signed = signed
        self.items: list = []
        self.ready.value = 0
        self._task = cocotb.start_soon(self._run())

    async def _run(self):
        while True:
            self.ready.value = int(self.rng.random() < self.ready_prob)
            await RisingEdge(self.clk)
            if int(self.valid.value) and int(self.ready.value):
                raw = self.payload.value
                word = raw.to_signed() if self.signed else raw.to_unsigned()
                self.items.append(unpack(self.fields, word) if self.fields else word)


class TBBase:
    """Clock, reset, parameters and result reporting for one DUT."""

    def __init__(self, dut, period_ns: int = 10):
        self.dut = dut
        self.params = json.loads(os.environ.get("TESSERA_PARAMS", "{}"))
        self.seed = int(os.environ.get("TESSERA_SEED", "1"))
        self.rng = random.Random(self.seed)
        self.checks = 0
        self.cycles = 0
        self.clk = dut.clk
        cocotb.start_soon(Clock(dut.clk, period_ns, unit="ns").start())

    async def reset(self, cycles: int = 3):
        self.dut.rst.value = 1
        for _ in range(cycles):
            await RisingEdge(self.clk)
        self.dut.rst.value = 0
        await RisingEdge(self.clk)

    def check(self, cond: bool, msg: str = ""):
        assert cond, msg
        self.checks += 1

    def check_equal(self, got, expected, what: str = ""):
        assert got == expected, f"{what}: got {got!r}, expected {expected!r}"
        self.checks += 1

    async def clocks(self, n: int):
        for _ in range(n):
            await RisingEdge(self.clk)

    async def settle(self):
        await ReadOnly()

    def report(self, name: str, **extra):
        """Append {test, checks, cycles, ...} to $TESSERA_RESULT (for make demo)."""
        path = os.environ.get("TESSERA_RESULT")
        if not path:
            return
        with open(path, "a") as fh:
            fh.write(json.dumps({"test": name, "checks": self.checks, "cycles": self.cycles,
                                 **extra}) + "\n")
