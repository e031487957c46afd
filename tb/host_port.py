"""Host-port driver shared by the chiplet and package testbenches (Simba §3.1: the host reaches
a chiplet / package through one flit port and loads the controllers' programs).

:class:`HostPort` is the host side of a top with ``clear``, ``prog`` (valid/ready/payload),
``start``, ``host_in`` and ``host_out`` ports, driven once per cycle through an I/O adapter
(``io.set`` / ``io.get``; see ``tb/chiplet/chiplet.py`` ``CocotbIO`` / ``AmaranthIO``):

* ``clear`` pulse, program words from ``prog_q`` (only before ``start``), the ``start`` pulse
  once the program is in (``start_cycle`` = the cycle that samples it);
* ``host_in``: whole packets from ``tx`` (CREDIT packets from ``tx_credit`` first, only
  between packets), random idle cycles *between* packets with probability ``in_gap``;
* ``host_out``: random back-pressure (ready with probability ``out_ready``), packets
  reassembled into ``rx_packets`` (head dict, payloads); one CREDIT packet (kind 3, count 1,
  control class) back to the ``src`` of every DATA packet (:meth:`_credit_dest` says how the
  top addresses it);
* counters ``in_flits``, ``out_flits``, ``credits``.

The testbench class inherits it and supplies ``io``, ``rng``, ``in_gap``, ``out_ready``,
``ffields`` (flit fields), ``ctrl_cls``, ``cycle`` and ``packet(dest, payloads, mclass)``.
Left out: everything top-specific (barrier handshake, status ports, end of run).
"""
from __future__ import annotations

from collections import deque

from tessera.hdl.global_pe.packets import KIND_BITS, KIND_CREDIT, KIND_DATA, credit_layout, pack_fields
from tessera.tb.common import unpack


class HostPort:
    def _host_init(self):
        self.tx: deque = deque()          # packets (lists of flit ints) for host_in
        self.tx_credit: deque = deque()   # CREDIT packets (sent first, between packets)
        self.cur: list | None = None      # packet being sent
        self.prog_q: deque = deque()
        self.start_pending = False
        self.start_cycle = None
        self.end_cycle = None
        self.clear_pending = False
        self._host_forget()

    def _host_forget(self):
        """Forget the received packets and the flit counters (a new run)."""
        self.rx_flits: list = []          # every host_out flit (dicts)
        self.rx_packets: list = []        # complete packets: (head dict, [payloads])
        self._rx_cur: list | None = None
        self.in_flits = self.out_flits = self.credits = 0

    # ---- hooks of the top ----------------------------------------------------------------
    def _prog_word(self, entry) -> int:
        """The ``prog`` payload of a ``prog_q`` entry."""
        return entry

    def _started(self):
        """Called on the cycle that samples ``start``."""

    def _credit_dest(self, head: dict):
        """Destination (``packet``'s ``dest``) of the CREDIT for a DATA packet with this head."""
        raise NotImplementedError

    # ---- per cycle -------------------------------------------------------------------------
    def _drive_host(self):
        io = self.io
        clr = self.clear_pending
        io.set("clear", int(clr))
        io.set("prog__valid", 1 if self.prog_q and not clr else 0)
        io.set("prog__payload", self._prog_word(self.prog_q[0]) if self.prog_q else 0)
        io.set("start", 1 if (self.start_pending and not self.prog_q and not clr) else 0)
        if self.cur is None:
            if self.tx_credit:
                self.cur = self.tx_credit.popleft()
            elif self.tx and self.rng.random() >= self.in_gap:
                self.cur = self.tx.popleft()
        io.set("host_in__valid", 1 if self.cur else 0)
        io.set("host_in__payload", self.cur[0] if self.cur else 0)
        self._out_rdy = self.rng.random() < self.out_ready
        io.set("host_out__ready", int(self._out_rdy))

    def _sample_host(self):
        io = self.io
        clr, self.clear_pending = self.clear_pending, False
        if self.prog_q and not clr and io.get("prog__ready"):
            self.prog_q.popleft()
        if self.start_pending and not self.prog_q and io.get("start"):
            self.start_pending = False
            self.start_cycle = self.cycle
            self.end_cycle = None
            self._started()
        if self.cur and io.get("host_in__ready"):
            self.cur.pop(0)
            self.in_flits += 1
            if not self.cur:
                self.cur = None
        if self._out_rdy and io.get("host_out__valid"):
            f = unpack(self.ffields, io.get("host_out__payload"))
            self.rx_flits.append(f)
            self.out_flits += 1
            self._rx(f)

    def _rx(self, f):
        if f["head"]:
            if self._rx_cur is not None:
                raise AssertionError(f"host_out: head flit inside a packet at cycle {self.cycle}")
            self._rx_cur = [f]
        elif self._rx_cur is None:
            raise AssertionError(f"host_out: body flit without head at cycle {self.cycle}")
        else:
            self._rx_cur.append(f)
        if f["tail"]:
            pkt = self._rx_cur
            self._rx_cur = None
            pays = [x["payload"] for x in pkt]
            self.rx_packets.append((pkt[0], pays))
            if pays[0] & ((1 << KIND_BITS) - 1) == KIND_DATA:
                cr = pack_fields(credit_layout(), kind=KIND_CREDIT, count=1)
                self.tx_credit.append(self.packet(self._credit_dest(pkt[0]), [cr], self.ctrl_cls))
                self.credits += 1
