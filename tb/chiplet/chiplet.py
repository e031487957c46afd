"""Chiplet testbench (cocotbext-axi style): clock/reset, host drivers and monitors.

:class:`ChipletTB` drives the ``chiplet`` block's host ports (:mod:`tessera.hdl.chiplet.chiplet`):

* program load on ``prog`` (before ``start``), ``start`` pulse, the cycle
  counter ``start`` -> ``done``/``error`` (``cycles`` = the number of rising
  edges from the one that samples ``start`` to the first one at which the
  controller shows ``done`` or ``error``; it includes the controller's program
  fetch, every CFG/command, the NoC traffic and the final WAITs, nothing
  else);
* a host flit driver on ``host_in`` (:meth:`ChipletTB.send_packet` queues
  whole packets; optional random idle cycles *between* packets, never inside
  one -- the router's local input carries one packet at a time);
* a host sink on ``host_out`` with random back-pressure that returns one
  ``CREDIT`` packet (kind 3, count 1, control class, to the packet's ``src``)
  for every ``DATA`` packet it has fully received, and keeps every packet
  (these host-port drivers: :class:`tessera.tb.host_port.HostPort`, shared
  with the package testbench);
* the barrier hook: while ``bar_req`` is high with id ``i``, the handler
  registered with :meth:`ChipletTB.on_barrier` runs once (typically: queue the
  preload) and ``bar_ack`` is raised;
* flit counters (``host_in`` / ``host_out`` flits, credits returned) and the
  RTL's ``noc_flits``.

It runs on either simulator through an I/O adapter with one call sequence per
cycle (``pre`` -> drive -> ``settle`` -> sample -> ``post``):
:class:`CocotbIO` (Verilator, ``dut.<port>__<field>`` handles) and
:class:`AmaranthIO` (amaranth.sim testbench context on a
:class:`~tessera.hdl.chiplet.chiplet.Chiplet` built with ``sim=True``).
Flits are ints packed in the endpoint layout (:meth:`ChipletConfig.flit_layout`).
"""
from __future__ import annotations

import random

from amaranth.hdl import Value

from tessera.export import _layout_fields
from tessera.hdl.chiplet.config import ChipletConfig, node_map
from tessera.hdl.chiplet.isa import ERR_TIMEOUT
from tessera.hdl.chiplet.packets import ctrl_class
from tessera.hdl.global_pe.packets import (DATA_CLASS, KIND_BITS, KIND_DATA, KIND_OUT,
                                           data_header_layout, out_header_layout, pack_fields,
                                           unpack_fields)
from tessera.tb.common import pack
from tessera.tb.host_port import HostPort


# ---- simulator adapters ------------------------------------------------------------------
class CocotbIO:
    """cocotb/Verilator: drive after the falling edge, sample in ReadOnly."""

    def __init__(self, dut):
        self.dut = dut
        self.clk = dut.clk
        self._h = {}

    def _handle(self, name):
        h = self._h.get(name)
        if h is None:
            h = self._h[name] = getattr(self.dut, name)
        return h

    def set(self, name, value):
        self._handle(name).value = int(value)

    def get(self, name) -> int:
        return int(self._handle(name).value)

    def has(self, name) -> bool:
        try:
            self._handle(name)
        except AttributeError:
            return False
        return True

    async def pre(self):
        from cocotb.triggers import FallingEdge
        await FallingEdge(self.clk)

    async def settle(self):
        from cocotb.triggers import ReadOnly
        await ReadOnly()

    async def post(self):
        pass

    async def start_clock(self, period_ns=10):
        import cocotb
        from cocotb.clock import Clock
        cocotb.start_soon(Clock(self.clk, period_ns, unit="ns").start())

    async def reset(self, cycles=3):
        from cocotb.triggers import RisingEdge
        self.dut.rst.value = 1
        for _ in range(cycles):
            await RisingEdge(self.clk)
        self.dut.rst.value = 0


class AmaranthIO:
    """amaranth.sim testbench context; port names as in the Verilog (``a__b``)."""

    def __init__(self, ctx, dut):
        self.ctx, self.dut = ctx, dut
        self._h = {}

    def _handle(self, name):
        h = self._h.get(name)
        if h is None:
            obj = self.dut
            for part in name.split("__"):
                obj = getattr(obj, part)
            h = self._h[name] = Value.cast(obj)
        return h

    def set(self, name, value):
        self.ctx.set(self._handle(name), int(value))

    def get(self, name) -> int:
        return int(self.ctx.get(self._handle(name)))

    async def pre(self):
        pass

    async def settle(self):
        pass

    async def post(self):
        await self.ctx.tick()

    async def start_clock(self, period_ns=10):
        pass                                  # sim.add_clock by the caller

    async def reset(self, cycles=3):
        pass                                  # amaranth.sim starts from reset values


# ---- the testbench -----------------------------------------------------------------------
class ChipletTB(HostPort):
    INPUTS = ("host_in__valid", "host_in__payload", "host_out__ready", "prog__valid",
              "prog__payload", "start", "clear", "bar_ack")

    def __init__(self, io, cfg: ChipletConfig | None = None, seed: int = 1,
                 in_gap: float = 0.0, out_ready: float = 1.0):
        self.io = io
        self.cfg = cfg = cfg or ChipletConfig()
        self.nmap = node_map(cfg)
        self.rng = random.Random(seed)
        self.in_gap, self.out_ready = in_gap, out_ready
        self.flay = cfg.flit_layout()
        self.ffields = _layout_fields(self.flay)
        self.ctrl_cls = ctrl_class(cfg.classes)
        self.cycle = 0
        self._host_init()
        self.bar_handlers: dict = {}
        self._bar_done: set = set()
        self.status: dict = {}
        self.checks = 0

    # ---- packet construction ---------------------------------------------------------
    def addr(self, xy) -> dict:
        return {"chiplet": {"x": 0, "y": 0}, "node": {"x": xy[0], "y": xy[1]}}

    def flit(self, head, tail, mclass, dest, payload, mcast_nodes=None) -> int:
        d = {"head": head, "tail": tail, "mclass": mclass, "payload": payload}
        for k, v in (("src", self.addr(self.nmap.gateway)),):
            d.update({f"{k}.chiplet.x": v["chiplet"]["x"], f"{k}.chiplet.y": v["chiplet"]["y"],
                      f"{k}.node.x": v["node"]["x"], f"{k}.node.y": v["node"]["y"]})
        if mcast_nodes is not None:
            d.update({"mcast": 1, "dest.mcast.chiplets": 1,
                      "dest.mcast.nodes": self.nmap.mask(mcast_nodes)})
        else:
            d.update({"mcast": 0, "dest.ucast.chiplet.x": 0, "dest.ucast.chiplet.y": 0,
                      "dest.ucast.node.x": dest[0], "dest.ucast.node.y": dest[1]})
        return pack(self.ffields, d)

    def packet(self, dest, payloads, mclass=DATA_CLASS, mcast_nodes=None) -> list:
        """Flits (ints) of one packet from the gateway: payloads[0] is the head's."""
        n = len(payloads)
        return [self.flit(int(i == 0), int(i == n - 1), mclass, dest, p, mcast_nodes)
                for i, p in enumerate(payloads)]

    def out_packets(self, words, base, max_words=None, dest=None):
        """OUT packets (into a Global PE RECV window) carrying ``words`` at ``base``...
        ``dest``: the Global PE's address (default: this chiplet's)."""
        max_words = max_words or self.cfg.max_tile
        olay = out_header_layout()
        pk = []
        for i in range(0, len(words), max_words):
            part = words[i:i + max_words]
            head = pack_fields(olay, kind=KIND_OUT, addr=base + i, nwords=len(part))
            pk.append(self.packet(dest or self.nmap.gpe, [head] + list(part), DATA_CLASS))
        return pk

    # ---- host actions ------------------------------------------------------------------
    def new_run(self):
        """Forget the last run's host-side records and pulse ``clear`` (the controller
        forgets its program and status; the sticky summaries clear) before the next load."""
        self._host_forget()
        self.start_cycle = self.end_cycle = None
        self.bar_handlers, self._bar_done = {}, set()
        self.clear_pending = True

    def load_program(self, words):
        self.prog_q.extend(int(w) for w in words)

    def send_packet(self, flits):
        self.tx.append(list(flits))

    def send_packets(self, packets):
        for p in packets:
            self.send_packet(p)

    def start(self):
        self.start_pending = True

    def on_barrier(self, bid: int, handler):
        """Run ``handler(tb)`` once when the program's ``BAR bid`` is reached, then ack
        (after as many cycles as the handler returns, if it returns an int)."""
        self.bar_handlers[bid] = handler

    def data_words(self) -> int:
        return sum(len(ws) for _h, ws in self.data_packets())

    def data_packets(self):
        """(header dict, words) of every DATA packet received on host_out."""
        out = []
        for head, pays in self.rx_packets:
            h = unpack_fields(data_header_layout(), pays[0])
            if h["kind"] == KIND_DATA:
                out.append((h, pays[1:]))
        return out

    # ---- per-cycle engine ----------------------------------------------------------------
    def _drive(self):
        self._drive_host()                    # clear, prog, start, host_in, host_out
        self.io.set("bar_ack", int(self._bar_ack))

    def _sample(self):
        io = self.io
        self._sample_host()
        # barrier: ack one cycle after req is seen (handler runs once per id)
        req = io.get("bar_req")
        bid = io.get("bar_id")
        if req and not self._bar_ack:
            if bid not in self._bar_done:
                self._bar_done.add(bid)
                h = self.bar_handlers.get(bid)
                if h is not None:
                    self._bar_hold = int(h(self) or 0)
            if self._bar_hold > 0:
                self._bar_hold -= 1
            else:
                self._bar_ack = True
        elif self._bar_ack:
            self._bar_ack = False
        busy = io.get("busy")
        if self.start_cycle is not None and self.end_cycle is None and self.cycle > self.start_cycle \
                and not busy and (io.get("done") or io.get("error")):
            self.end_cycle = self.cycle
        self._busy = busy

    def _credit_dest(self, head):
        return (head["src.node.x"], head["src.node.y"])

    async def setup(self):
        self._bar_ack = False
        self._bar_hold = 0
        self._busy = 0
        await self.io.start_clock()
        for name in self.INPUTS:
            self.io.set(name, 0)
        await self.io.reset()

    async def step(self):
        await self.io.pre()
        self._drive()
        await self.io.settle()
        self._sample()
        await self.io.post()
        self.cycle += 1

    async def run(self, max_cycles=100_000, drain=True, until=None):
        """Run until the program has ended (and, if ``drain``, host_in is empty and the
        credits are out; and ``until(tb)`` holds, e.g. every expected word has arrived on
        host_out: a SEND completes when its last flit has left the Global PE, not when it
        reached the host); returns the start->end cycle count.  Raises on a hang."""
        for _ in range(max_cycles):
            await self.step()
            ended = self.end_cycle is not None
            if ended and (not drain or (self.cur is None and not self.tx and not self.tx_credit)) \
                    and (until is None or until(self)):
                break
        else:
            raise AssertionError(f"chiplet still busy after {max_cycles} cycles (hang)")
        self.read_status()
        return self.cycles

    @property
    def cycles(self):
        if self.start_cycle is None or self.end_cycle is None:
            return None
        return self.end_cycle - self.start_cycle

    def read_status(self) -> dict:
        io = self.io
        names = ("busy", "done", "error", "timeout", "err_code", "err_pc", "stray",
                 "gpe_status", "pe_error", "pe_running", "noc_err", "noc_flits")
        self.status = {n: io.get(n) for n in names}
        self.status.update(cycles=self.cycles, host_in_flits=self.in_flits,
                           host_out_flits=self.out_flits, credits_returned=self.credits)
        return self.status


def amaranth_run(cfg: ChipletConfig, body, seed=1, in_gap=0.0, out_ready=1.0):
    """Build a ``Chiplet(cfg, sim=True)``, run ``await body(tb)`` in amaranth.sim; returns tb."""
    from tessera.hdl.chiplet.chiplet import Chiplet
    return simulate(Chiplet(cfg, sim=True), lambda io: ChipletTB(io, cfg, seed=seed, in_gap=in_gap,
                                                                 out_ready=out_ready), body)


def simulate(dut, make_tb, body, io_class=AmaranthIO):
    """amaranth.sim of ``dut``: ``tb = make_tb(io_class(ctx, dut))``, set up, ``await body(tb)``;
    returns tb (the chiplet and package testbenches)."""
    from amaranth.sim import Simulator
    holder = {}

    async def bench(ctx):
        tb = holder["tb"] = make_tb(io_class(ctx, dut))
        await tb.setup()
        await body(tb)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return holder["tb"]


# ---- scenarios shared by the amaranth.sim and cocotb tests --------------------------------
def _program(cfg: ChipletConfig):
    from tessera.hdl.chiplet.asm import Program
    from tessera.hdl.global_pe.packets import command_layout
    nm = node_map(cfg)
    return nm, Program(nm.mesh, command_layout(cfg.gpe))


def addr_int(cfg: ChipletConfig, xy) -> int:
    """A node address (this chiplet) packed as the Global PE's ``uaddr`` field."""
    from tessera.hdl.global_pe.packets import node_address_layout
    lay = node_address_layout(cfg.gpe)
    return lay.const({"chiplet": {"x": 0, "y": 0},
                      "node": {"x": xy[0], "y": xy[1]}}).as_value().value


def gpe_mask(cfg: ChipletConfig, nodes) -> int:
    """A Global PE ``mask`` field (mask_layout: chiplets bit 0 = this chiplet, then nodes)."""
    return 1 | (node_map(cfg).mask(nodes) << cfg.chiplet_mesh_x * cfg.chiplet_mesh_y)


def timeout_program(cfg: ChipletConfig, tmo=100) -> list:
    """CFG-write a PE register (no START) and WAIT for its DONE: must end in TIMEOUT."""
    from tessera.hdl.chiplet.packets import REGS
    nm, p = _program(cfg)
    p.tmo(tmo).cfg(*nm.pes[-1], reg=REGS["ntiles"], value=1).wait([nm.pes[-1]]).end()
    return p.words


def round_trip_program(cfg: ChipletConfig, n: int, base: int, bar_id=1, mcast=False) -> list:
    """RECV n words from the gateway at ``base``; BAR ``bar_id`` (host streams them); WAIT;
    SEND the window to the gateway (unicast, or ``mcast``: as a multicast to group 0 =
    {gateway}, so the packets take the routers' multicast path); WAIT; END."""
    from tessera.hdl.global_pe.packets import OP_GROUP, OP_RECV, OP_SEND
    nm, p = _program(cfg)
    gw = nm.gateway
    p.tmo(min(50_000, (1 << cfg.timeout_bits) - 1))
    p.cmd(op=OP_RECV, tag=1, a=base, cnt0=n, mask=gpe_mask(cfg, [gw]))
    if mcast:
        p.cmd(op=OP_GROUP, tag=3, gidx=0, mask=gpe_mask(cfg, [gw]))
    p.bar(bar_id)
    p.wait(gpe=True)
    p.cmd(op=OP_SEND, tag=2, a=base, cnt0=n, cnt1=1, cnt2=1, stride0=1, stride1=0, stride2=0,
          tile=cfg.max_tile, groups=int(mcast), ucast=int(not mcast),
          uaddr=addr_int(cfg, gw) if not mcast else 0)
    p.wait(gpe=True)
    p.end()
    return p.words


def bad_programs(cfg: ChipletConfig) -> dict:
    """Programs that must end in an error, never a hang: {name: (words, err_code, timeout)}."""
    from tessera.hdl.chiplet import isa
    nm, p = _program(cfg)
    p.tmo(50).raw(7).end()
    out = {"bad_opcode": (p.words, isa.ERR_OP, 0)}
    nm, p = _program(cfg)
    p.tmo(50).cfg(nm.mesh[0], 0, reg=0, value=0, check=False).end()
    out["bad_node"] = (p.words, isa.ERR_NODE, 0)
    nm, p = _program(cfg)
    p.tmo(60).wait_mask(1 << nm.index(nm.empty[-1]) if nm.empty else 1 << 31).end()
    out["wait_never"] = (p.words, isa.ERR_TIMEOUT, 1)
    return out


async def run_program(tb: ChipletTB, words, packets=(), max_cycles=5000) -> dict:
    """Clear, load ``words``, queue host ``packets``, start, run to the end; the status."""
    tb.new_run()
    tb.load_program(words)
    tb.send_packets(packets)
    tb.start()
    await tb.run(max_cycles=max_cycles)
    return dict(tb.status)


async def run_status_flags(tb: ChipletTB) -> dict:
    """Sticky summaries: a malformed packet to PE 1 raises its NI's ``bad_packet`` ->
    ``pe_error`` bit 1; a flit to an empty node (if any) -> its ``noc_err`` bit; a program
    that clears PE 1's NI flags (CFG ``clear``) leaves the top's summary set (sticky) until
    the host's ``clear``."""
    from tessera.hdl.chiplet.packets import EXT_BITS, KIND_EXT, REGS
    nm = tb.nmap
    bad = KIND_EXT | (15 << KIND_BITS)                 # kind 0, unused ext 15
    assert 15 < (1 << EXT_BITS)
    pk = [tb.packet(nm.pes[1], [bad], tb.ctrl_cls)]
    if nm.empty:
        pk.append(tb.packet(nm.empty[0], [0], tb.ctrl_cls))
    res = {}

    def snap(name):
        def h(t):
            res[name] = t.read_status()
            return 100                                 # hold the ack: packets land
        return h
    _nm, p = _program(tb.cfg)
    p.tmo(1000).bar(2)                                 # host: malformed packets, wait
    p.bar(3)                                           # snapshot
    p.cfg(*nm.pes[1], reg=REGS["clear"], value=1)      # the node clears its own flags
    p.bar(4).end()
    tb.new_run()
    tb.load_program(p.words)
    tb.on_barrier(2, lambda t: (t.send_packets(pk), 100)[1])
    tb.on_barrier(3, snap("flags"))
    tb.on_barrier(4, lambda t: 100)                    # the CFG clear lands
    tb.start()
    await tb.run(max_cycles=3000)
    res["end"] = res["after_node_clear"] = dict(tb.status)
    tb.new_run()
    for _ in range(4):
        await tb.step()
    res["after_host_clear"] = tb.read_status()
    return res


async def run_timeout(tb: ChipletTB) -> dict:
    tb.new_run()
    tb.load_program(timeout_program(tb.cfg))
    tb.start()
    await tb.run(max_cycles=5000)
    return dict(tb.status)


async def run_round_trip(tb: ChipletTB, seed: int, n=37, in_gap=0.3, out_ready=0.6,
                         mcast=None) -> dict:
    """Data round trip host_in -> Global PE -> host_out (SEND as a multicast on even seeds
    unless ``mcast`` says); returns status + what came back (and the head flits)."""
    mcast = (seed % 2 == 0) if mcast is None else mcast
    rng = random.Random(seed)
    words = [rng.getrandbits(tb.cfg.word_bits) for _ in range(n)]
    base = 16 * (seed % 8)
    tb.new_run()
    tb.rng.seed(seed)
    tb.in_gap, tb.out_ready = in_gap, out_ready
    tb.load_program(round_trip_program(tb.cfg, n, base, mcast=mcast))
    tb.on_barrier(1, lambda t: t.send_packets(t.out_packets(words, base)))
    tb.start()
    await tb.run(max_cycles=20_000, until=lambda t: t.data_words() >= n)
    return dict(status=dict(tb.status), words=words, packets=tb.data_packets(),
                credits=tb.credits, in_flits=tb.in_flits, out_flits=tb.out_flits, mcast=mcast,
                heads=[h for h, _p in tb.rx_packets])


def check_timeout(s):
    assert (s["done"], s["error"], s["timeout"]) == (0, 1, 1), s
    assert s["err_code"] == ERR_TIMEOUT
    assert s["noc_err"] == 0 and s["pe_error"] == 0, s
    assert 100 < s["cycles"] < 200, s["cycles"]


def check_bad_programs(results: dict, expect: dict):
    for name, (_w, code, tmo) in expect.items():
        s = results[name]
        assert (s["done"], s["error"], s["err_code"], s["timeout"]) == (0, 1, code, tmo), (name, s)
        assert s["busy"] == 0


def check_status_flags(r: dict, nmap):
    f = r["flags"]
    assert f["pe_error"] == 1 << 1, f
    want_noc = (1 << nmap.index(nmap.empty[0])) if nmap.empty else 0
    assert f["noc_err"] == want_noc, f
    assert r["end"]["done"] == 1 and r["end"]["error"] == 0, r["end"]
    assert r["after_node_clear"]["pe_error"] == 1 << 1          # sticky in the top
    assert r["after_node_clear"]["noc_err"] == want_noc
    assert r["after_host_clear"]["pe_error"] == 0 and r["after_host_clear"]["noc_err"] == 0


def check_round_trip(r, max_tile):
    s, words, pkts = r["status"], r["words"], r["packets"]
    n = len(words)
    assert (s["done"], s["error"], s["timeout"]) == (1, 0, 0), s
    assert s["noc_err"] == 0 and s["gpe_status"] == 0 and s["stray"] == 0, s
    got = [w for _h, ws in pkts for w in ws]
    assert got == words
    assert all(len(ws) <= max_tile for _h, ws in pkts)
    assert r["credits"] == len(pkts) == -(-n // max_tile)
    # host_in carried the OUT packets (n words + a head each) and the credits
    assert r["in_flits"] == n + -(-n // max_tile) + r["credits"]
    assert r["out_flits"] == n + len(pkts)
    assert all(h["mcast"] == int(r["mcast"]) for h in r["heads"])
    assert s["noc_flits"] >= r["in_flits"]
