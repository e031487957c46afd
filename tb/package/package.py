"""Package testbench: clock/reset, host drivers and monitors of the ``package`` block.

:class:`PackageTB` drives :mod:`tessera.hdl.package.package` (Simba §3.1 package, issue 18)
on either simulator through the chiplet testbench's I/O adapters (one call sequence per
cycle; ``CocotbIO`` on Verilator, :class:`AmaranthIO` here with array ports ``a__0``):

* program load per chiplet (``prog`` + ``prog_sel``, before ``start``), ``start`` pulse;
  the run ends when every chiplet's controller shows ``done`` or ``error``;
  ``cycles`` = start -> last end (rising edges, as ChipletTB), ``done_cycle[c]`` read from
  the RTL;
* host flit driver on ``host_in`` (whole packets, random gaps between packets) with
  hierarchical destinations (:meth:`PackageTB.packet` ``dest`` = ((cx, cy), (x, y)));
  ``src`` of host flits is ``PackageConfig.host_addr``;
* host sink on ``host_out`` with random back-pressure (``out_ready``) returning one CREDIT
  per DATA packet to its hierarchical ``src`` (both drivers: the chiplet testbench's
  :class:`tessera.tb.host_port.HostPort`, with ``prog_sel`` and hierarchical credits here);
* barrier monitor: ``bar_req``/``bar_id`` per chiplet; the handler registered with
  :meth:`PackageTB.on_barrier` runs once when every chiplet of ``bar_mask`` shows
  ``BAR id`` (the host cue); ``bar_events`` records per barrier id the cycle of each
  chiplet's arrival (bar_req rise) and release (fall), from which :meth:`barrier_cost` =
  cycles from the last arrival to the last release;
* random NoP link latency is a build parameter (``nop_link_latency`` of the block): the
  tests draw it per build from their seed.
"""
from __future__ import annotations

from amaranth.hdl import Value

from tessera.hdl.package.config import PackageConfig
from tessera.tb.chiplet.chiplet import AmaranthIO as _ChipletAmaranthIO
from tessera.tb.chiplet.chiplet import ChipletTB, simulate
from tessera.tb.common import pack


class AmaranthIO(_ChipletAmaranthIO):
    """amaranth.sim adapter; ``a__3`` indexes array port ``a``."""

    def _handle(self, name):
        h = self._h.get(name)
        if h is None:
            obj = self.dut
            for part in name.split("__"):
                obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
            h = self._h[name] = Value.cast(obj)
        return h


class PackageTB(ChipletTB):
    INPUTS = ("host_in__valid", "host_in__payload", "host_out__ready", "prog__valid",
              "prog__payload", "prog_sel", "start", "clear", "bar_mask")

    def __init__(self, io, pcfg: PackageConfig | None = None, seed: int = 1,
                 in_gap: float = 0.0, out_ready: float = 1.0, bar_mask: int = 0):
        self.pcfg = pcfg = (pcfg or PackageConfig()).validate()
        super().__init__(io, pcfg.chiplet_cfg(), seed=seed, in_gap=in_gap, out_ready=out_ready)
        self.C = pcfg.nchiplets
        self.bar_mask = bar_mask
        self.host = pcfg.host_addr
        self._bar_prev = [0] * self.C
        self.bar_events: dict = {}        # id -> {"arrive": {c: cycle}, "release": {c: cycle}}
        self.end_cycles: dict = {}

    # ---- packets (hierarchical destinations) ----------------------------------------------
    @staticmethod
    def _split(dest):
        if isinstance(dest[0], (tuple, list)):
            return tuple(dest[0]), tuple(dest[1])
        return (0, 0), tuple(dest)

    def flit(self, head, tail, mclass, dest, payload, mcast_nodes=None, mcast_chiplets=None):
        (hc, hn) = self.host
        d = {"head": head, "tail": tail, "mclass": mclass, "payload": payload,
             "src.chiplet.x": hc[0], "src.chiplet.y": hc[1], "src.node.x": hn[0],
             "src.node.y": hn[1]}
        if mcast_nodes is not None:
            cm = 0
            for cxy in (mcast_chiplets or [(0, 0)]):
                cm |= 1 << self.pcfg.index(cxy)
            d.update({"mcast": 1, "dest.mcast.chiplets": cm,
                      "dest.mcast.nodes": self.nmap.mask(mcast_nodes)})
        else:
            c, n = self._split(dest)
            d.update({"mcast": 0, "dest.ucast.chiplet.x": c[0], "dest.ucast.chiplet.y": c[1],
                      "dest.ucast.node.x": n[0], "dest.ucast.node.y": n[1]})
        return pack(self.ffields, d)

    def out_packets(self, words, base, max_words=None, chiplet=(0, 0)):
        """OUT packets into chiplet ``chiplet``'s Global PE RECV window at ``base``."""
        return super().out_packets(words, base, max_words, dest=(chiplet, self.nmap.gpe))

    # ---- host actions ---------------------------------------------------------------------
    def new_run(self):
        super().new_run()
        self.bar_events, self.end_cycles = {}, {}

    def load_program(self, words, chiplet=0):
        """Queue ``words`` for chiplet index ``chiplet``'s controller."""
        self.prog_q.extend((int(chiplet), int(w)) for w in words)

    def on_barrier(self, bid: int, handler):
        """Run ``handler(tb)`` once when every chiplet of ``bar_mask`` shows ``BAR bid``."""
        self.bar_handlers[bid] = handler

    def barrier_cost(self, bid: int):
        """Cycles from the last arrival to the last release of barrier ``bid``."""
        ev = self.bar_events.get(bid)
        if not ev or not ev["release"]:
            return None
        return max(ev["release"].values()) - max(ev["arrive"].values())

    # ---- per-cycle engine -------------------------------------------------------------------
    def _prog_word(self, entry):                 # prog_q holds (chiplet, word)
        return entry[1]

    def _started(self):
        self.end_cycles = {}

    def _credit_dest(self, h):
        return ((h["src.chiplet.x"], h["src.chiplet.y"]), (h["src.node.x"], h["src.node.y"]))

    def _drive(self):
        self._drive_host()                       # clear, prog, start, host_in, host_out
        self.io.set("prog_sel", self.prog_q[0][0] if self.prog_q else 0)
        self.io.set("bar_mask", self.bar_mask)

    def _sample(self):
        io = self.io
        self._sample_host()
        # barrier monitor
        req = io.get("bar_req")
        mask = self.bar_mask or (1 << self.C) - 1
        ids = {}
        for c in range(self.C):
            r = (req >> c) & 1
            if r:
                ids[c] = io.get(f"bar_id__{c}")
            if r and not self._bar_prev[c]:
                ev = self.bar_events.setdefault(ids[c], {"arrive": {}, "release": {}})
                ev["arrive"][c] = self.cycle
                self._last_bid = getattr(self, "_last_bid", {})
                self._last_bid[c] = ids[c]
            if not r and self._bar_prev[c]:
                bid = self._last_bid[c]
                self.bar_events[bid]["release"][c] = self.cycle
            self._bar_prev[c] = r
        for bid, h in list(self.bar_handlers.items()):
            if bid in self._bar_done:
                continue
            if all(ids.get(c) == bid for c in range(self.C) if mask >> c & 1):
                self._bar_done.add(bid)
                h(self)
        # ends
        busy, done, err = io.get("busy"), io.get("done"), io.get("error")
        if self.start_cycle is not None and self.cycle > self.start_cycle:
            for c in range(self.C):
                if c not in self.end_cycles and not (busy >> c & 1) \
                        and ((done | err) >> c & 1):
                    self.end_cycles[c] = self.cycle
            if self.end_cycle is None and len(self.end_cycles) == self.C:
                self.end_cycle = self.cycle

    async def reset_mid_run(self, cycles=3):
        """Pulse the DUT's reset (cocotb adapter) in the middle of a run and forget the
        host side of that run (queued packets, program words, barrier state)."""
        await self.io.pre()                      # out of the sampling phase
        for name in self.INPUTS:
            self.io.set(name, 0)
        await self.io.reset(cycles)
        self.cycle += cycles
        self.tx.clear()
        self.tx_credit.clear()
        self.prog_q.clear()
        self.cur = None
        self.start_pending = False
        self._bar_prev = [0] * self.C
        self.new_run()
        self.clear_pending = False

    def log(self, msg):                  # replaced by tests that want a progress log
        pass

    async def run(self, max_cycles=100_000, drain=True, until=None):
        try:
            return await super().run(max_cycles=max_cycles, drain=drain, until=until)
        except AssertionError:
            self.read_status()
            self.log(f"hang: {self.status} bar_events {self.bar_events} "
                     f"tx {len(self.tx)} cur {self.cur is not None} rx {len(self.rx_packets)}")
            raise

    def read_status(self) -> dict:
        io = self.io
        C = self.C
        st = {n: io.get(n) for n in ("busy", "done", "error", "timeout", "stray", "nop_err",
                                     "nop_flits", "bar_req", "bar_err")}
        for n in ("err_code", "err_pc", "done_cycle", "gpe_status", "pe_error", "pe_running",
                  "noc_err", "noc_flits"):
            st[n] = [io.get(f"{n}__{c}") for c in range(C)]
        st.update(cycles=self.cycles, host_in_flits=self.in_flits,
                  host_out_flits=self.out_flits, credits_returned=self.credits,
                  end_cycles=[self.end_cycles.get(c, -1) - (self.start_cycle or 0)
                              for c in range(C)])
        self.status = st
        return st


def amaranth_run(pcfg: PackageConfig, body, seed=1, in_gap=0.0, out_ready=1.0, bar_mask=0):
    """Build ``Package(pcfg, sim=True)``, run ``await body(tb)`` in amaranth.sim; returns tb."""
    from tessera.hdl.package.package import Package
    return simulate(Package(pcfg, sim=True), lambda io: PackageTB(io, pcfg, seed=seed, in_gap=in_gap,
                                                                  out_ready=out_ready, bar_mask=bar_mask),
                    body, AmaranthIO)
