"""Global PE activation buffer: banked single-cycle SRAM with request arbitration.

Simba §3.1 "Simba global PE" (second-level activation store; 64 KB, 2048 x
256 bit, 4 banks per the public Simba Timeloop model).

Organisation: ``banks`` banks of ``words / banks`` words, low-order
interleaved (bank = address mod banks, row = address div banks).  Each bank
is one ``amaranth.lib.memory.Memory`` with one synchronous read port and one
write port (1R1W SRAM macro), so a read and a write to the same bank proceed
in the same cycle (read-before-write: a same-address read returns the old
word).

Arbitration (never loses a request): every requester presents ``valid`` and
keeps its request (address, data) stable until it sees ``grant`` -- a
request is a hold-until-granted handshake, so nothing is ever dropped.  Each
bank has one round-robin arbiter for its read port and one for its write
port; the requester granted last on that port gets the lowest priority next,
so a held request is granted within (number of requesters) cycles of
contention on its bank.  Requesters on different banks are granted in the
same cycle.  Read data appears on ``data`` with ``data_valid`` one cycle
after the grant.

Left out: ECC, power gating, byte write enables (writes are whole words).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out


def read_req_signature(addr_bits, width):
    return wiring.Signature({"valid": Out(1), "addr": Out(addr_bits), "grant": In(1),
                             "data": In(width), "data_valid": In(1)})


def write_req_signature(addr_bits, width):
    return wiring.Signature({"valid": Out(1), "addr": Out(addr_bits), "data": Out(width),
                             "grant": In(1)})


class SramBank(wiring.Component):
    """One 1R1W bank (the SRAM macro; exported as a black box for synthesis)."""

    def __init__(self, depth, width):
        self.depth, self.width = depth, width
        abits = max(1, (depth - 1).bit_length())
        super().__init__({"raddr": In(abits), "ren": In(1), "rdata": Out(width),
                          "waddr": In(abits), "wen": In(1), "wdata": In(width)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=self.width, depth=self.depth, init=[])
        rp = mem.read_port()
        wp = mem.write_port()
        m.d.comb += [rp.addr.eq(self.raddr), rp.en.eq(self.ren), self.rdata.eq(rp.data),
                     wp.addr.eq(self.waddr), wp.en.eq(self.wen), wp.data.eq(self.wdata)]
        return m


def round_robin(m: Module, reqs, name: str):
    """Grant one of ``reqs`` (list of 1-bit values); the last grantee gets lowest priority.

    Returns (grant list, any).  Pointer updates when a grant is given."""
    n = len(reqs)
    grants = [Signal(name=f"{name}_g{i}") for i in range(n)]
    any_req = Signal(name=f"{name}_any")
    m.d.comb += any_req.eq(Cat(*reqs).any())
    if n == 1:
        m.d.comb += grants[0].eq(reqs[0])
        return grants, any_req
    last = Signal(range(n), name=f"{name}_last", init=n - 1)
    for p in range(n):              # if-chains, not case: lint-clean for any n
        with m.If(last == p):
            order = [(p + k) % n for k in range(1, n + 1)]
            for pos, i in enumerate(order):
                higher = [reqs[j] for j in order[:pos]]
                cond = reqs[i]
                for h in higher:
                    cond = cond & ~h
                m.d.comb += grants[i].eq(cond)
    for i in range(n):
        with m.If(grants[i]):
            m.d.sync += last.eq(i)
    return grants, any_req


class Buffer(wiring.Component):
    """Banked activation buffer with ``n_read`` read and ``n_write`` write requesters."""

    def __init__(self, words=2048, width=256, banks=4, n_read=3, n_write=2):
        if banks < 1 or banks & (banks - 1):
            raise ValueError("banks must be a power of two")
        if words % banks or words < banks:
            raise ValueError("words must be a multiple of banks")
        self.words, self.width, self.banks = words, width, banks
        self.addr_bits = max(1, (words - 1).bit_length())
        self.n_read, self.n_write = n_read, n_write
        super().__init__({
            "rd": In(read_req_signature(self.addr_bits, width)).array(n_read),
            "wr": In(write_req_signature(self.addr_bits, width)).array(n_write),
        })

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
        for k in range(self.banks):
            bank = SramBank(depth, self.width)
            m.submodules[f"bank{k}"] = bank
            bank_rdata.append(bank.rdata)
            rreq = [p.valid & (bank_of(p.addr) == k) for p in self.rd]
            gr, anyr = round_robin(m, rreq, f"rd_b{k}")
            wreq = [p.valid & (bank_of(p.addr) == k) for p in self.wr]
            gw, anyw = round_robin(m, wreq, f"wr_b{k}")
            for i in range(self.n_read):
                rgrant[i][k] = gr[i]
                with m.If(gr[i]):
                    m.d.comb += bank.raddr.eq(row_of(self.rd[i].addr))
            for i in range(self.n_write):
                wgrant[i][k] = gw[i]
                with m.If(gw[i]):
                    m.d.comb += [bank.waddr.eq(row_of(self.wr[i].addr)),
                                 bank.wdata.eq(self.wr[i].data)]
            m.d.comb += [bank.ren.eq(anyr), bank.wen.eq(anyw)]

        for i, p in enumerate(self.rd):
            g = Signal(name=f"rd{i}_granted")
            m.d.comb += [g.eq(Cat(*rgrant[i]).any()), p.grant.eq(g)]
            which = Signal(range(max(2, self.banks)), name=f"rd{i}_bank")
            m.d.sync += p.data_valid.eq(g)
            with m.If(g):
                m.d.sync += which.eq(bank_of(p.addr))
            for k in range(self.banks):
                with m.If(which == k):
                    m.d.comb += p.data.eq(bank_rdata[k])
        for i, p in enumerate(self.wr):
            m.d.comb += p.grant.eq(Cat(*wgrant[i]).any())
        return m
