"""Global PE activation buffer: banked single-cycle SRAM with request arbitration.

Simba §3.1 "Simba global PE" (second-level activation store; 64 KB, 2048 x
256 bit, 4 banks per the public Simba Timeloop model).

Organisation: ``banks`` banks of ``words / banks`` words, low-order
interleaved (bank = address mod banks, row = address div banks).  Each bank
is one :class:`tessera.hdl.sram.SRAM` (1W1R, read latency ``read_latency``:
1, or 2 with the SRAM's output register -- on ECP5 the DP16KD's 5.6 ns
clock-to-output then ends in a flip-flop), so a read and a
write to the same bank proceed in the same cycle.  A read and a write of the
*same word* in one cycle return an undefined value (``collision="undefined"``:
no bypass logic, block RAM as is).  The Global PE never relies on that word:
an EWISE reads word i before it writes word i (in place: the write of word i
follows its reads by >= 3 cycles); a SEND and an EWISE never run on
overlapping regions (:mod:`.decoder`); and the controller keeps SENDs and
EWISEs off open RECV windows.  ``collision`` flags a same-word read and write
granted in one cycle (the cycle after; sticky ``status.rw_collision`` of the top), so a
controller that breaks that rule is seen, not silently served stale data.

Arbitration (never loses a request): every requester presents ``valid`` and
keeps its request (address, data) stable until it sees ``grant`` -- a
request is a hold-until-granted handshake, so nothing is ever dropped.  Each
bank has one round-robin arbiter for its read port and one for its write
port; the requester granted last on that port gets the lowest priority next,
so a held request is granted within (number of requesters) cycles of
contention on its bank.  With ``wr_first`` the write port is not round robin:
write requester 0 is always granted at once, and the others share the cycles
it leaves its bank idle (round robin among themselves).  The Global PE gives
write requester 0 to the network input (RECV): its write grant then comes
from its own request registers, not through the other writer's request
(timing, issue 20), and a RECV word never waits, while an EWISE write waits
only for cycles in which RECV writes the same bank (RECV never writes one
bank in two consecutive cycles when ``banks`` >= 2: consecutive kept words
of a packet have consecutive addresses, and packets are separated by a head
flit, so an EWISE write waits at most 1 cycle).  Requesters on different banks are granted in the
same cycle.  With ``rd_first`` the read port is not round robin either: read requester
0 is granted whenever it asks (its grant is its own request), and it must raise
``rd_hold`` (from registers: a superset of the cycles it may ask in) -- the other
readers share, round robin, the cycles with ``rd_hold`` low, on every bank (the
bank's address multiplexer selects requester 0 by ``rd_hold``, so requester 0's
address is never decoded into anyone's grant; a ``rd_hold`` cycle without a
request reads a word nobody receives).  The Global PE gives read requester 0 and
``rd_first`` to SEND at read latency 2.  Read data appears on ``data`` with
``data_valid`` ``read_latency`` cycles after the grant.

Left out: ECC, power gating, byte write enables (writes are whole words).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tessera.hdl.sram import SRAM


def read_req_signature(addr_bits, width):
    return wiring.Signature({"valid": Out(1), "addr": Out(addr_bits), "grant": In(1),
                             "data": In(width), "data_valid": In(1)})


def write_req_signature(addr_bits, width):
    return wiring.Signature({"valid": Out(1), "addr": Out(addr_bits), "data": Out(width),
                             "grant": In(1)})


def round_robin(m: Module, reqs, name: str, en=None):
    """Grant one of ``reqs`` (list of 1-bit values); the last grantee gets lowest priority.

    Returns (grant list, any).  Pointer updates when a grant is given.  ``en`` (optional)
    gates the result: the pick is made from ``reqs`` alone and ANDed with ``en`` last
    (the same grants as ANDing ``en`` into every request, with a shorter path from
    ``en``)."""
    n = len(reqs)
    raw = [Signal(name=f"{name}_r{i}") for i in range(n)] if en is not None else None
    grants = [Signal(name=f"{name}_g{i}") for i in range(n)]
    any_req = Signal(name=f"{name}_any")
    pick = raw if en is not None else grants
    m.d.comb += any_req.eq(Cat(*reqs).any() if en is None else Cat(*reqs).any() & en)
    if en is not None:
        m.d.comb += [g.eq(r & en) for g, r in zip(grants, raw)]
    if n == 1:
        m.d.comb += pick[0].eq(reqs[0])
        return grants, any_req
    last = Signal(range(n), name=f"{name}_last", init=n - 1)
    # each pick as one sum of products over the pointer values (a flat AND-OR, not a chain
    # of n multiplexers: fewer LUT levels after mapping; the same function)
    at = [last == p for p in range(n)]
    for i in range(n):
        terms = []
        for p in range(n):
            order = [(p + k) % n for k in range(1, n + 1)]
            cond = at[p] & reqs[i]
            for j in order[:order.index(i)]:
                cond = cond & ~reqs[j]
            terms.append(cond)
        m.d.comb += pick[i].eq(Cat(*terms).any())
    for i in range(n):
        with m.If(grants[i]):
            m.d.sync += last.eq(i)
    return grants, any_req


class Buffer(wiring.Component):
    """Banked activation buffer with ``n_read`` read and ``n_write`` write requesters
    (``wr_first`` / ``rd_first``: requester 0 first on the write / read port;
    ``read_latency`` 1 or 2)."""

    def __init__(self, words=2048, width=256, banks=4, n_read=3, n_write=2, wr_first=False,
                 rd_first=False, read_latency=1):
        if banks < 1 or banks & (banks - 1):
            raise ValueError("banks must be a power of two")
        if words % banks or words < banks:
            raise ValueError("words must be a multiple of banks")
        if read_latency not in (1, 2):
            raise ValueError(f"read_latency must be 1 or 2, got {read_latency}")
        self.words, self.width, self.banks = words, width, banks
        self.addr_bits = max(1, (words - 1).bit_length())
        self.n_read, self.n_write = n_read, n_write
        self.wr_first, self.rd_first = wr_first, rd_first and n_read > 1
        self.read_latency = read_latency
        ports = {
            "rd": In(read_req_signature(self.addr_bits, width)).array(n_read),
            "wr": In(write_req_signature(self.addr_bits, width)).array(n_write),
            "collision": Out(1),
        }
        if self.rd_first:
            ports["rd_hold"] = In(1)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        bbits = (self.banks - 1).bit_length()
        depth = self.words // self.banks

        def bank_of(addr):
            return addr[:bbits] if bbits else 0

        def row_of(addr):
            return addr[bbits:]

        rgrant = [[None] * self.banks for _ in range(self.n_read)]
        wgrant = [[None] * self.banks for _ in range(self.n_write)]
        bank_rdata = []
        coll = []
        for k in range(self.banks):
            bank = SRAM(depth, self.width, collision="undefined", read_latency=self.read_latency)
            m.submodules[f"bank{k}"] = bank
            bank_rdata.append(bank.r_data)
            rreq = [p.valid & (bank_of(p.addr) == k) for p in self.rd]
            if self.rd_first:
                # read requester 0 first: its grant is its own request; the others share,
                # round robin, the cycles in which ``rd_hold`` (a superset of requester 0's
                # requests, from registers) is low -- nothing of theirs reaches requester 0,
                # and requester 0's address decides nothing of theirs but through rd_hold
                rest, anyo = round_robin(m, rreq[1:], f"rd_b{k}", en=~self.rd_hold)
                gr = [rreq[0]] + rest
                anyr = Signal(name=f"rd_b{k}_any")
                m.d.comb += anyr.eq(rreq[0] | anyo)
            else:
                gr, anyr = round_robin(m, rreq, f"rd_b{k}")
            wreq = [p.valid & (bank_of(p.addr) == k) for p in self.wr]
            if self.wr_first and self.n_write > 1:
                # write requester 0 first; the others share what it leaves, round robin
                # (its grant is its own request: no arbitration on its path)
                rest, _ = round_robin(m, [r & ~wreq[0] for r in wreq[1:]], f"wr_b{k}")
                gw = [wreq[0]] + rest
                anyw = Signal(name=f"wr_b{k}_any")
                m.d.comb += anyw.eq(Cat(*wreq).any())
            else:
                gw, anyw = round_robin(m, wreq, f"wr_b{k}")
            # address / data multiplexers: the grants are one-hot and the port ignores
            # them when no one is granted, so the last requester is the default (one
            # select fewer); the write port's first select is requester 0's own request
            # when it goes first
            r_addr = row_of(self.rd[-1].addr)
            for i in reversed(range(1 if self.rd_first else 0, self.n_read - 1)):
                r_addr = Mux(gr[i], row_of(self.rd[i].addr), r_addr)
            if self.rd_first:      # requester 0's address while it may read (no decode)
                r_addr = Mux(self.rd_hold, row_of(self.rd[0].addr), r_addr)
            w_addr, w_data = row_of(self.wr[-1].addr), self.wr[-1].data
            for i in reversed(range(self.n_write - 1)):
                w_addr = Mux(gw[i], row_of(self.wr[i].addr), w_addr)
                w_data = Mux(gw[i], self.wr[i].data, w_data)
            m.d.comb += [bank.r_addr.eq(r_addr), bank.w_addr.eq(w_addr), bank.w_data.eq(w_data)]
            for i in range(self.n_read):
                rgrant[i][k] = gr[i]
            for i in range(self.n_write):
                wgrant[i][k] = gw[i]
            # r_en: with rd_first, every rd_hold cycle reads (requester 0's address; a read
            # nobody asked for is dropped: no data_valid) -- no decode of its address here
            r_en = (self.rd_hold | anyr) if self.rd_first else anyr
            m.d.comb += [bank.r_en.eq(r_en), bank.w_en.eq(anyw)]
            both = Signal(name=f"rw_b{k}")
            ra, wa = Signal.like(bank.r_addr), Signal.like(bank.w_addr)
            m.d.sync += [both.eq(anyr & anyw), ra.eq(bank.r_addr), wa.eq(bank.w_addr)]
            coll.append(both & (ra == wa))
        m.d.comb += self.collision.eq(Cat(*coll).any())

        for i, p in enumerate(self.rd):
            g = Signal(name=f"rd{i}_granted")
            m.d.comb += [g.eq(Cat(*rgrant[i]).any()), p.grant.eq(g)]
            # the granted bank and data_valid, delayed by the read latency
            which = Signal(range(max(2, self.banks)), name=f"rd{i}_bank")
            dv = g
            with m.If(g):
                m.d.sync += which.eq(bank_of(p.addr))
            for d in range(1, self.read_latency):
                w2 = Signal.like(which, name=f"rd{i}_bank_d{d}")
                dv2 = Signal(name=f"rd{i}_valid_d{d}")
                m.d.sync += [w2.eq(which), dv2.eq(dv)]
                which, dv = w2, dv2
            m.d.sync += p.data_valid.eq(dv)
            for k in range(self.banks):
                with m.If(which == k):
                    m.d.comb += p.data.eq(bank_rdata[k])
        for i, p in enumerate(self.wr):
            m.d.comb += p.grant.eq(Cat(*wgrant[i]).any())
        return m
