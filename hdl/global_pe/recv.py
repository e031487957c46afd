"""Network-in unit: RECV tracker (output-activation writes) and credit returns.

Simba §3.1 "Simba global PE" (output activations arrive from the PEs'
post-processing units and are stored for the next layer) and the multicast
manager's credit loop.

Incoming packets (:mod:`packets`):

* CREDIT: the count is passed to the multicast manager for the consumer
  named by the flit's ``src``.
* OUT: ``nwords`` data flits for buffer words ``addr, addr+1, ...``.  A
  word is written (and counted) only if an open RECV slot lists the packet's
  source as a producer and its window ``[a, a + count)`` holds the address
  (the lowest such slot owns the word); otherwise it is dropped and the
  sticky ``stray_word`` flag is set (so a RECV never lets data land outside
  the region it opened).  A RECV completes when ``count`` words have been
  written, whatever their order or producer.  Words are counted, not
  de-duplicated: a producer that sends a word twice is a protocol error the
  count does not catch.
* Anything else (unknown kind, body flit without a head, source outside the
  meshes) is dropped and sets ``bad_flit``.

The network input is back-pressured only while a write waits for its bank
(hold-until-granted, see :mod:`buffer`): a kept word is matched against the
windows as it is accepted and then waits in a one-word write stage, so the
write request starts from registers; a word is counted (and its RECV may
complete) when its write is granted, one cycle after it was accepted at
the earliest.  In the Global PE this unit is the buffer's first write
requester (``wr_first``): its writes are granted in the cycle they are
requested, so it never back-pressures the network and a word is counted
exactly one cycle after it was accepted; the grant comes from this unit's
own write-stage registers (no path from the EWISE unit's write request).  ``recv_slots`` RECVs can be open
at once (e.g. the next layer's window while the current one fills); the
controller must issue a RECV before it triggers the producers (a word that
arrives earlier is a stray) and keep open windows of the same producers
disjoint.

Timing: a credit return reaches the multicast manager one cycle after its
flit is accepted (``cr_*`` are registers), in one register copy per group of
``CR_GROUP`` consumers (``cr_g_*``: each copy is loaded only by returns to its
group, so the copies differ and Yosys keeps them; each feeds 8 counters
instead of 80); each window keeps its end address ``a + count`` in a
register, and the two comparisons of the match (``waddr >= a``,
``waddr < a + count``) are themselves registers, computed a cycle ahead from
the next address and window (stop 31: cycle-identical, the match is an AND of
flip-flops); source indices are shift-add sums of constants (no multiplier).

Left out: duplicate detection.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .buffer import write_req_signature
from .packets import (FIELD, KIND_CREDIT, KIND_OUT, GpeConfig, credit_layout,
                      mask_layout, net_flit_layout, out_header_layout)


def const_mul(x, k: int):
    """x * k for a constant k as a sum of shifted copies of x (no multiplier cell)."""
    terms = [x << b for b in range(k.bit_length()) if k >> b & 1]
    out = 0
    for t in terms:
        out = out + t
    return out



def cr_clip(cfg) -> int:
    """A credit return's count as handed to the multicast manager is clipped to
    ``credit_window + 2``: its counters only compare ``credit + count`` with the window
    ``W`` and ``W + 1`` and use the sum below those, so every counter value and overflow
    flag is unchanged (credit >= 0), and each of the ~80 counters adds a few bits instead
    of 8 (timing: the stop-30 critical path was this add and compare)."""
    return min(255, cfg.credit_window + 2)


CR_GROUP = 8    # consumers per copy of the credit-return registers (a power of two)


def cr_groups(cfg) -> int:
    """Number of copies of the registered credit return (one per ``CR_GROUP`` consumers)."""
    return -(-cfg.consumers // CR_GROUP)

class RecvUnit(wiring.Component):
    def __init__(self, cfg: GpeConfig, addr_bits: int):
        self.cfg = cfg
        self.addr_bits = addr_bits
        S = cfg.recv_slots
        super().__init__({
            # start: open a window in slot ``start_slot`` (chosen by the top: a free slot)
            "start": In(1), "start_slot": In(range(max(2, S))),
            "active": Out(S), "done": Out(S),
            "a": In(FIELD), "count": In(FIELD), "mask": In(mask_layout(cfg)),
            "net_in": In(stream.Signature(net_flit_layout(cfg))),
            "wr": Out(write_req_signature(addr_bits, cfg.word_bits)),
            "cr_en": Out(1), "cr_consumer": Out(range(cfg.consumers)), "cr_count": Out(8),
            # the same return, one register copy per group of CR_GROUP consumers (loaded
            # only by returns to its group: distinct enables, so Yosys cannot merge them)
            "cr_g_en": Out(cr_groups(cfg)),
            "cr_g_local": Out(range(CR_GROUP)).array(cr_groups(cfg)),
            "cr_g_count": Out(cr_clip(cfg).bit_length()).array(cr_groups(cfg)),
            "stray_word": Out(1), "bad_flit": Out(1),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        S = cfg.recv_slots
        m = Module()
        f = self.net_in.payload
        active = [Signal(name=f"s{k}_active") for k in range(S)]
        win_a = [Signal(FIELD, name=f"s{k}_a") for k in range(S)]
        win_e = [Signal(FIELD + 1, name=f"s{k}_end") for k in range(S)]   # a + count
        pmask = [Signal(mask_layout(cfg), name=f"s{k}_mask") for k in range(S)]
        left = [Signal(FIELD, name=f"s{k}_left") for k in range(S)]   # words still expected
        # left == 1, in a register (timing: the write grant decides a completion through
        # one AND, not a compare)
        last1 = [Signal(name=f"s{k}_last1") for k in range(S)]
        m.d.comb += self.active.eq(Cat(*active))

        # source decoding
        src = f.src
        src_ok = Signal()
        m.d.comb += src_ok.eq((src.chiplet.x < cfg.chiplet_mesh_x)
                              & (src.chiplet.y < cfg.chiplet_mesh_y)
                              & (src.node.x < cfg.node_mesh_x) & (src.node.y < cfg.node_mesh_y))
        cidx = Signal(range(max(2, cfg.chiplets)))     # 1 bit for a single chiplet (no 0-width wire)
        nidx = Signal(range(cfg.nodes))
        m.d.comb += [cidx.eq(const_mul(src.chiplet.y, cfg.chiplet_mesh_x) + src.chiplet.x),
                     nidx.eq(const_mul(src.node.y, cfg.node_mesh_x) + src.node.x)]
        hdr_out = out_header_layout()(f.payload[:out_header_layout().size])
        hdr_cr = credit_layout()(f.payload[:credit_layout().size])

        for k in range(S):
            with m.If(self.start & (self.start_slot == k)):
                m.d.sync += [active[k].eq(1), win_a[k].eq(self.a),
                             win_e[k].eq(self.a + self.count),
                             pmask[k].eq(self.mask), left[k].eq(self.count),
                             last1[k].eq(self.count == 1)]

        # packet state
        waddr = Signal(FIELD + 1)
        src_in = Signal(S)              # the packet's producer is in slot k's set
        drop_all = Signal()             # body of a bad / credit packet
        in_body = Signal()

        # write stage: a kept word waits here for its bank (the match is done on the
        # way in, so the write request starts from registers)
        p_v = Signal()
        p_addr = Signal(self.addr_bits)
        p_data = Signal(cfg.word_bits)
        p_owner = Signal(S)
        p_free = Signal()
        m.d.comb += [self.wr.valid.eq(p_v), self.wr.addr.eq(p_addr), self.wr.data.eq(p_data),
                     p_free.eq(~p_v | self.wr.grant)]
        with m.If(self.wr.grant):
            m.d.sync += p_v.eq(0)
        # the word belongs to the first (lowest) slot that is open, lists the
        # producer and whose window holds the address.  The two window compares are
        # registers (``ge``/``lt``: ``waddr >= a`` and ``waddr < a + count`` for the current
        # ``waddr`` and window), updated from the next address (header address, ``waddr + 1``
        # kept in the register ``waddr1``, or unchanged) and the next window, so the match
        # is an AND of flip-flops (timing: the stop-30 path was waddr -> compare carry chains
        # -> match -> the write stage's enables).  A window that opens takes ``a`` and
        # ``a + count`` of the cycle before its start pulse (``pa``/``pe``): the decoder holds
        # its command register for >= 6 cycles before the pulse, so they are the same values.
        ld = Signal()                   # a header loads waddr
        inc = Signal()                  # a body flit is accepted: waddr + 1
        waddr1 = Signal(FIELD + 1, init=1)
        pa = Signal(FIELD)
        pe = Signal(FIELD + 1)
        m.d.sync += [pa.eq(self.a), pe.eq(self.a + self.count)]
        with m.If(ld):
            m.d.sync += [waddr.eq(hdr_out.addr), waddr1.eq(hdr_out.addr + 1)]
        with m.Elif(inc):
            m.d.sync += [waddr.eq(waddr1), waddr1.eq(waddr1 + 1)]
        ge = [Signal(init=1, name=f"s{k}_ge") for k in range(S)]     # waddr >= a (0 >= 0)
        lt = [Signal(name=f"s{k}_lt") for k in range(S)]             # waddr < a + count
        hdr_a = hdr_out.addr
        ge_p = Signal()
        lt_p = Signal()
        m.d.comb += [ge_p.eq(Mux(ld, hdr_a >= pa, Mux(inc, waddr1 >= pa, waddr >= pa))),
                     lt_p.eq(Mux(ld, hdr_a < pe, Mux(inc, waddr1 < pe, waddr < pe)))]
        for k in range(S):
            ge_w = Mux(ld, hdr_a >= win_a[k], Mux(inc, waddr1 >= win_a[k], ge[k]))
            lt_w = Mux(ld, hdr_a < win_e[k], Mux(inc, waddr1 < win_e[k], lt[k]))
            st = self.start & (self.start_slot == k)
            m.d.sync += [ge[k].eq(Mux(st, ge_p, ge_w)), lt[k].eq(Mux(st, lt_p, lt_w))]
        match = Signal(S)
        for k in range(S):
            m.d.comb += match[k].eq(active[k] & src_in[k] & ~drop_all & ge[k] & lt[k])
        # (for tests: the registers the flags summarise)
        self.dbg = {"ge": ge, "lt": lt, "waddr": waddr, "win_a": win_a, "win_e": win_e,
                    "in_body": in_body}
        owner = Signal(S)               # one-hot of match
        for k in range(S):
            m.d.comb += owner[k].eq(match[k] & ~match[:k].any() if k else match[0])
        keep = Signal()
        m.d.comb += keep.eq(match.any())

        m.d.sync += [self.cr_en.eq(0), self.cr_g_en.eq(0)]
        gbits = (CR_GROUP - 1).bit_length()
        cons = Signal(max((cfg.consumers - 1).bit_length(), gbits + 1))   # consumer index
        m.d.comb += cons.eq(const_mul(cidx, cfg.nodes) + nidx)
        cr_val = Signal(8)
        m.d.comb += cr_val.eq(Mux(hdr_cr.count > cr_clip(cfg), cr_clip(cfg), hdr_cr.count))
        with m.If(~in_body):
            m.d.comb += self.net_in.ready.eq(1)
            with m.If(self.net_in.valid):
                with m.If(~f.head):
                    m.d.sync += self.bad_flit.eq(1)
                    m.d.sync += [in_body.eq(~f.tail), drop_all.eq(1)]
                with m.Elif(~src_ok):
                    m.d.sync += [self.bad_flit.eq(1), in_body.eq(~f.tail), drop_all.eq(1)]
                with m.Elif(hdr_cr.kind == KIND_CREDIT):
                    m.d.sync += [self.cr_en.eq(1), self.cr_consumer.eq(cons),
                                 self.cr_count.eq(cr_val)]
                    for g in range(cr_groups(cfg)):
                        with m.If(cons[gbits:] == g):
                            m.d.sync += [self.cr_g_en[g].eq(1),
                                         self.cr_g_local[g].eq(cons[:gbits]),
                                         self.cr_g_count[g].eq(cr_val)]
                    with m.If(~f.tail):
                        m.d.sync += [self.bad_flit.eq(1), in_body.eq(1), drop_all.eq(1)]
                with m.Elif(hdr_out.kind == KIND_OUT):
                    m.d.comb += ld.eq(1)
                    m.d.sync += [in_body.eq(~f.tail), drop_all.eq(0)]
                    for k in range(S):
                        m.d.sync += src_in[k].eq((pmask[k].chiplets >> cidx)[0]
                                                 & (pmask[k].nodes >> nidx)[0])
                with m.Else():
                    m.d.sync += [self.bad_flit.eq(1), in_body.eq(~f.tail), drop_all.eq(1)]
        with m.Else():
            with m.If(self.net_in.valid):
                with m.If(keep):
                    m.d.comb += self.net_in.ready.eq(p_free)
                    with m.If(p_free):
                        m.d.sync += [p_v.eq(1), p_addr.eq(waddr[:self.addr_bits]),
                                     p_data.eq(f.payload), p_owner.eq(owner)]
                with m.Else():
                    m.d.comb += self.net_in.ready.eq(1)
                    with m.If(~drop_all):
                        m.d.sync += self.stray_word.eq(1)
                with m.If(self.net_in.ready):
                    m.d.comb += inc.eq(1)
                    with m.If(f.tail):
                        m.d.sync += in_body.eq(0)

        for k in range(S):
            counted = Signal(name=f"s{k}_counted")
            m.d.comb += counted.eq(self.wr.grant & p_owner[k])
            with m.If(counted):
                m.d.sync += [left[k].eq(left[k] - 1), last1[k].eq(left[k] == 2)]
            with m.If(active[k] & counted & last1[k]):
                m.d.comb += self.done[k].eq(1)
                m.d.sync += active[k].eq(0)
        return m
