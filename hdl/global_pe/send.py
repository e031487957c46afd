"""SEND engine: 3-level address generator, credit-gated lane scheduler, packetiser.

Simba §3.1 "Simba global PE": unicast or multicast of activation tiles to
PEs on this or other chiplets.  A SEND names a region (base + up to three
(count, stride) levels, level 0 innermost) and a set of *lanes*: each
selected multicast group of the group table and/or one unicast node.  Every
lane receives the whole region as a sequence of tiles, in order, each as
one NoC packet: a head flit (:func:`packets.data_header_layout`) and one
flit per word.  Tiles are row-aligned: each level-0 row (``cnt0`` words) is
cut into packets of ``tile`` words, the last of a row possibly shorter, so a
packet never spans two rows (no region-size multiplier is needed).

Lanes progress independently: each has its own address-generator state
(i0, i1, i2, address, row/plane bases) and tile sequence number.  At every
tile boundary a round-robin picker chooses a lane that
still has tiles *and* whose members all have credit
(:class:`MulticastManager`), takes one credit from every member and streams
that tile; a lane without credit is skipped, so a slow consumer holds back
only its own lanes.

Pipeline: issue stage (head flit, or one buffer read per cycle) -> one
cycle SRAM latency -> flit FIFO (depth 4) -> ``out``.  The issue stage only
issues when the FIFO has room for everything in flight, so the read data
always has a place (no loss, no replay); with the network ready and credit
available the engine emits one flit per cycle, head flits included.

Left out: cut-through of a tile to several lanes from a single read (each
lane re-reads the buffer), more than one SEND in flight.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from .buffer import read_req_signature, round_robin
from .packets import (DATA_CLASS, FIELD, KIND_DATA, SEQ_BITS, TAG_BITS, TILE_BITS, GpeConfig,
                      data_header_layout, mask_layout, net_flit_layout, node_address_layout)

FIFO_DEPTH = 4


class SendEngine(wiring.Component):
    def __init__(self, cfg: GpeConfig, addr_bits: int):
        self.cfg = cfg
        self.addr_bits = addr_bits
        super().__init__({
            "start": In(1), "busy": Out(1), "done": Out(1),
            "tag": In(TAG_BITS), "base": In(FIELD),
            "cnt": In(FIELD).array(3), "stride": In(FIELD).array(3),
            "tile": In(TILE_BITS), "groups": In(cfg.groups), "ucast": In(1),
            "uaddr": In(node_address_layout(cfg)),
            # multicast manager
            "table": In(mask_layout(cfg)).array(cfg.groups),
            "lane_ready": In(cfg.lanes),
            "cons_en": Out(1), "cons_lane": Out(range(cfg.lanes)),
            "uaddr_q": Out(node_address_layout(cfg)),
            # buffer and network
            "rd": Out(read_req_signature(addr_bits, cfg.word_bits)),
            "node_id": In(node_address_layout(cfg)),
            "out": Out(stream.Signature(net_flit_layout(cfg))),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        L = cfg.lanes
        flit_l = net_flit_layout(cfg)

        m.submodules.fifo = fifo = SyncFIFO(width=flit_l.size, depth=FIFO_DEPTH)
        m.d.comb += [self.out.payload.eq(fifo.r_data), self.out.valid.eq(fifo.r_rdy),
                     fifo.r_en.eq(self.out.ready)]

        # latched command
        tag = Signal(TAG_BITS)
        cnt = [Signal(FIELD, name=f"cnt{k}") for k in range(3)]
        stride = [Signal(FIELD, name=f"stride{k}") for k in range(3)]
        tile = Signal(TILE_BITS)
        uaddr = Signal(node_address_layout(cfg))
        m.d.comb += self.uaddr_q.eq(uaddr)

        # per-lane state
        active = Signal(L)
        i0 = list(Signal(FIELD, name=f"l{i}_i0") for i in range(L))
        i1 = list(Signal(FIELD, name=f"l{i}_i1") for i in range(L))
        addr = list(Signal(FIELD, name=f"l{i}_addr") for i in range(L))
        base1 = list(Signal(FIELD, name=f"l{i}_base1") for i in range(L))
        base2 = list(Signal(FIELD, name=f"l{i}_base2") for i in range(L))
        seq = list(Signal(SEQ_BITS, name=f"l{i}_seq") for i in range(L))
        i2 = list(Signal(FIELD, name=f"l{i}_i2") for i in range(L))

        cur = Signal(range(L))
        left = Signal(TILE_BITS)        # words of the current tile still to issue
        cur_mcast = Signal()
        cur_dest = Signal(flit_l["dest"].shape)

        # issue -> S1 (SRAM latency) stage
        s1_valid = Signal()
        s1_head = Signal()
        s1_tail = Signal()
        s1_hdr = Signal(data_header_layout())
        s1_mcast = Signal()
        s1_dest = Signal(flit_l["dest"].shape)
        space = Signal()
        m.d.comb += space.eq(fifo.w_level + s1_valid < FIFO_DEPTH)

        m.d.sync += s1_valid.eq(0)
        flit = Signal(flit_l)
        m.d.comb += [flit.head.eq(s1_head), flit.tail.eq(s1_tail), flit.mclass.eq(DATA_CLASS),
                     flit.mcast.eq(s1_mcast), flit.dest.eq(s1_dest), flit.src.eq(self.node_id),
                     flit.payload.eq(Mux(s1_head, s1_hdr.as_value(), self.rd.data)),
                     fifo.w_data.eq(flit), fifo.w_en.eq(s1_valid)]


        IDLE, PICK, DATA, DRAIN = range(4)
        state = Signal(2)

        def per_lane(idx):
            """Yield (lane, condition) for the lanes (no case statements: lint-clean)."""
            for i in range(L):
                yield i, idx == i

        def sel(arr, idx):
            out = arr[L - 1]
            for i in range(L - 2, -1, -1):
                out = Mux(idx == i, arr[i], out)
            return out

        m.d.comb += self.rd.addr.eq(sel(addr, cur)[:self.addr_bits])

        with m.If(state == IDLE):
            with m.If(self.start):
                m.d.sync += [tag.eq(self.tag), tile.eq(self.tile), uaddr.eq(self.uaddr),
                             active.eq(Cat(self.groups, self.ucast))]
                m.d.sync += [c.eq(v) for c, v in zip(cnt, self.cnt)]
                m.d.sync += [s.eq(v) for s, v in zip(stride, self.stride)]
                for i in range(L):
                    m.d.sync += [i0[i].eq(0), i1[i].eq(0), i2[i].eq(0),
                                 addr[i].eq(self.base), base1[i].eq(self.base),
                                 base2[i].eq(self.base), seq[i].eq(0)]
                m.d.sync += state.eq(PICK)
        with m.Elif(state == PICK):
            m.d.comb += self.busy.eq(1)
            eligible = [active[i] & self.lane_ready[i] & space for i in range(L)]
            grants, any_g = round_robin(m, eligible, "lane")
            with m.If(~active.any()):
                m.d.sync += state.eq(DRAIN)
            with m.Elif(any_g):
                lane = Signal(range(L))
                for i in range(L):
                    with m.If(grants[i]):
                        m.d.comb += lane.eq(i)
                rem = Signal(FIELD + 1)          # words left in the lane's current row
                m.d.comb += rem.eq(cnt[0] - sel(i0, lane))
                nw = Signal(TILE_BITS)
                m.d.comb += nw.eq(Mux(rem < tile, rem, tile))
                m.d.comb += [self.cons_en.eq(1), self.cons_lane.eq(lane)]
                dest = Signal(flit_l["dest"].shape)
                mc = Signal()
                for g in range(cfg.groups):
                    with m.If(grants[g]):
                        m.d.comb += [dest.mcast.eq(self.table[g]), mc.eq(1)]
                with m.If(grants[cfg.groups]):
                    m.d.comb += [dest.ucast.eq(uaddr), mc.eq(0)]
                m.d.sync += [cur.eq(lane), left.eq(nw), cur_mcast.eq(mc), cur_dest.eq(dest),
                             s1_valid.eq(1), s1_head.eq(1), s1_tail.eq(0),
                             s1_mcast.eq(mc), s1_dest.eq(dest),
                             s1_hdr.kind.eq(KIND_DATA), s1_hdr.tag.eq(tag),
                             s1_hdr.seq.eq(sel(seq, lane)), s1_hdr.nwords.eq(nw)]
                m.d.sync += state.eq(DATA)
        with m.Elif(state == DATA):
            m.d.comb += [self.busy.eq(1), self.rd.valid.eq(space)]
            with m.If(self.rd.grant):
                last = left == 1
                m.d.sync += [s1_valid.eq(1), s1_head.eq(0), s1_tail.eq(last),
                             s1_mcast.eq(cur_mcast), s1_dest.eq(cur_dest),
                             left.eq(left - 1)]
                # advance the 3-level address generator of the current lane
                for i, hit in per_lane(cur):
                    with m.If(hit):
                        w0 = i0[i] + 1 == cnt[0]
                        w1 = i1[i] + 1 == cnt[1]
                        with m.If(~w0):
                            m.d.sync += [i0[i].eq(i0[i] + 1), addr[i].eq(addr[i] + stride[0])]
                        with m.Elif(~w1):
                            nxt = (base1[i] + stride[1])[:FIELD]
                            m.d.sync += [i0[i].eq(0), i1[i].eq(i1[i] + 1),
                                         addr[i].eq(nxt), base1[i].eq(nxt)]
                        with m.Else():
                            nxt = (base2[i] + stride[2])[:FIELD]
                            m.d.sync += [i0[i].eq(0), i1[i].eq(0), i2[i].eq(i2[i] + 1),
                                         addr[i].eq(nxt), base1[i].eq(nxt), base2[i].eq(nxt)]
                        with m.If(last):
                            m.d.sync += seq[i].eq(seq[i] + 1)
                            with m.If(w0 & w1 & (i2[i] + 1 == cnt[2])):   # region done
                                m.d.sync += active[i].eq(0)
                with m.If(last):
                    m.d.sync += state.eq(PICK)
        with m.Else():   # DRAIN
            m.d.comb += self.busy.eq(1)
            with m.If(~s1_valid & ~fifo.level.any()):
                m.d.comb += self.done.eq(1)
                m.d.sync += state.eq(IDLE)
        return m
