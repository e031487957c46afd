"""SEND engine: lane pool with 3-level address generators, credit-gated lane
scheduler, packetiser; several SENDs in flight.

Simba §3.1 "Simba global PE": unicast or multicast of activation tiles to
PEs on this or other chiplets.  A SEND names a region (base + up to three
(count, stride) levels, level 0 innermost) and a set of destinations: each
selected multicast group of the group table and/or one unicast node.  Every
destination receives the whole region as a sequence of tiles, in order, each
as one NoC packet: a head flit (:func:`packets.data_header_layout`) and one
flit per word.  Tiles are row-aligned: each level-0 row (``cnt0`` words) is
cut into packets of ``tile`` words, the last of a row possibly shorter, so a
packet never spans two rows.

**Lanes.**  The engine holds ``groups + ucast_lanes`` lanes: lane ``g`` serves
multicast group ``g``, lanes ``groups..`` serve unicast destinations.  A
lane is a complete copy of one SEND's stream state: its command (tag,
counts, strides, tile size), its address generator (down-counters k0, k1, k2
of the elements left in each level, so a level wraps on a zero test; address,
row/plane bases), its tile sequence number and the *send slot* of its
command.  A SEND starts (``start``) as soon as every lane it needs is idle
-- the lane of each selected group, and for a unicast any idle unicast lane
provided no busy unicast lane serves the same node -- and a send slot is
free (``send_slots`` SENDs in flight).  So a SEND to a fast group starts
and finishes while an earlier SEND's slow group still waits for credits;
tiles to one group (or one unicast node) still leave in command order,
because a later SEND waits for that lane.

**Scheduling.**  At every tile boundary a round-robin picker chooses a lane
that still has tiles *and* whose members all have credit
(:class:`MulticastManager`), takes one credit from every member and streams
that tile; a lane without credit is skipped, so a slow consumer holds back
only its own lanes, whichever SEND they belong to.

**Completion.**  The last flit of a SEND (the final word of the last of its
lanes to finish) carries a side-band mark through the flit FIFO; when that
flit leaves on ``out``, ``done`` pulses with the slot, which is then free.
SEND completions therefore follow the network, not command order.

**Hazards.**  ``chk_lo``/``chk_hi`` ask whether a SEND still issuing reads
may read that address range (``chk_hit``): a slot's range is the bounding
box ``[base, span]`` of its region, kept until its last lane has issued its
last read (conservative: words already read or skipped by strides count).  The top uses it to hold back an EWISE that would overwrite data
an earlier SEND has yet to read.

Pipeline: issue stage (head flit, or one buffer read per cycle) -> one
cycle SRAM latency -> flit FIFO (depth 4) -> ``out``.  With read latency 2
(``GpeConfig.read_latency=2``; the default is 1) the issue stage is the same
(the read is issued in the same cycle; its address is the current lane's ``addr``
register selected by the one-hot current lane ``cur_oh``, stop 32), the word
passes the bank's output register, and the flit is built one register stage
later (``s2``: head / tail / completion mark and the head flit's fields as
selected in s1), so every SEND flit and completion leaves exactly one cycle
later, every pick and credit take stays in its cycle (with nothing fed back:
test ``test_send_read_latency_2_is_one_cycle_later``), and the lane pick ends
in registers (stop 29; the stop-28 read ahead, which kept SEND's cycles by
reading a tile's first word in its pick cycle, put the lane round robin in
front of the block-RAM address: 71.0 MHz).  SEND is then first on the bank
read port: its request (DATA and FIFO room, from registers) is its grant and
its ``rd_hold``, and the EWISE operand reads take the cycles it leaves.  The
FIFO room test counts s2 too (``inflight``; depth 4 still covers the pop ->
issue -> FIFO loop).  The issue stage only issues when the FIFO has room for everything in flight, so the read data
always has a place (no loss, no replay); with the network ready and credit
available the engine emits one flit per cycle, head flits included.

Read latency 2, stop 32 (issue 20; cycle-identical): nothing selected by the lane pick's
grants reaches a wide register in the pick cycle.  The pick loads only ``cur_oh``, the
per-lane ``rowleft`` (enabled by the lane's grant), the round-robin pointer and the 1-bit
state / ``first`` / ``dcur`` registers; the tile's size is taken in the DATA cycle right
after the pick (``first``: ``nw_next`` of the current lane, which still holds the picked
size in that cycle, and its registered ``== 1`` copy ``nw_one`` for the tail test); each
lane's address generator steps on its own registered enable ``dcur[i] & space``
(``dcur[i]`` = DATA and lane i current) instead of ``state``, ``space`` and ``cur_oh``
combined (stop 31's ``send.state`` -> every lane's generator path); SEND's read request
and ``rd_hold`` are one register, ``rdh`` (= DATA and FIFO room, computed from the next
state and the next ``inflight``), so the EWISE operand arbitration and the bank address
multiplexers start at a flip-flop.  At read latency 1 the stop-29 logic is unchanged
(``raddr`` loaded by the pick; ``rd.valid`` = DATA and room).

Left out: cut-through of a tile to several lanes from a single read (each
lane re-reads the buffer); starting part of a SEND's lanes while others are
still busy (the SEND waits for all of them, and commands behind it wait too).
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from .buffer import read_req_signature, round_robin
from .packets import (DATA_CLASS, FIELD, KIND_DATA, SEQ_BITS, TAG_BITS, TILE_BITS, GpeConfig,
                      data_header_layout, mask_layout, net_flit_layout, node_address_layout)

FIFO_DEPTH = 4


def _sel(arr, idx):
    """arr[idx] as a Mux chain (no case statements: lint-clean for any length)."""
    out = arr[-1]
    for i in range(len(arr) - 2, -1, -1):
        out = Mux(idx == i, arr[i], out)
    return out


def onehot_mux(sel, values):
    """OR of ``values[i]`` where one-hot ``sel[i]``: an AND-OR, no priority chain."""
    out = 0
    for g, v in zip(sel, values):
        v = v.as_value() if hasattr(v, "as_value") else v
        out = out | (v & g.replicate(len(v)))
    return out


class SendEngine(wiring.Component):
    def __init__(self, cfg: GpeConfig, addr_bits: int):
        self.cfg = cfg
        self.addr_bits = addr_bits
        S = cfg.send_slots
        super().__init__({
            "start": In(1), "start_slot": In(range(max(2, S))), "can_start": Out(1),
            "tag": In(TAG_BITS), "base": In(FIELD), "span": In(FIELD),
            "cnt": In(FIELD).array(3), "stride": In(FIELD).array(3),
            "tile": In(TILE_BITS), "groups": In(cfg.groups), "ucast": In(1),
            "uaddr": In(node_address_layout(cfg)),
            "slot_busy": Out(S), "lane_busy": Out(cfg.lanes),
            "done": Out(1), "done_slot": Out(range(max(2, S))),
            "chk_lo": In(FIELD + 1), "chk_hi": In(FIELD + 1), "chk_hit": Out(1),
            # multicast manager
            "table": In(mask_layout(cfg)).array(cfg.groups),
            "lane_ready": In(cfg.lanes),
            "cons_en": Out(1), "cons_sel": Out(cfg.lanes),
            # unicast-lane destinations as they will be next cycle (the multicast
            # manager's member registers load them)
            "uaddr_next": Out(node_address_layout(cfg)).array(cfg.ucast_lanes),
            # buffer and network
            "rd": Out(read_req_signature(addr_bits, cfg.word_bits)),
            "rd_hold": Out(1),      # read latency 2: may read this cycle (superset of rd.valid)
            "node_id": In(node_address_layout(cfg)),
            "out": Out(stream.Signature(net_flit_layout(cfg))),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        G, U, S = cfg.groups, cfg.ucast_lanes, cfg.send_slots
        L = cfg.lanes
        SB = max(1, (S - 1).bit_length())
        flit_l = net_flit_layout(cfg)

        # flit FIFO with a side band: (mark = last flit of a SEND, its slot)
        m.submodules.fifo = fifo = SyncFIFO(width=flit_l.size + 1 + SB, depth=FIFO_DEPTH)
        m.d.comb += [self.out.payload.eq(fifo.r_data[:flit_l.size]),
                     self.out.valid.eq(fifo.r_rdy), fifo.r_en.eq(self.out.ready)]
        r_mark = fifo.r_data[flit_l.size]
        r_slot = fifo.r_data[flit_l.size + 1:]
        with m.If(fifo.r_rdy & self.out.ready & r_mark):
            m.d.comb += [self.done.eq(1), self.done_slot.eq(r_slot)]

        # per-lane command and stream state
        def lane_sigs(fmt, width):
            return [Signal(width, name=fmt.format(i)) for i in range(L)]
        act = lane_sigs("l{}_active", 1)
        act_d = lane_sigs("l{}_active_d", 1)     # active since the previous cycle (see PICK)
        rowleft = lane_sigs("l{}_rowleft", FIELD)  # words left in the lane's row at its next tile
        nw_next = lane_sigs("l{}_nw", TILE_BITS)   # size of the lane's next tile
        l_cnt = [lane_sigs("l{}_cnt%d" % k, FIELD) for k in range(3)]
        l_str = [lane_sigs("l{}_stride%d" % k, FIELD) for k in range(3)]
        l_tile = lane_sigs("l{}_tile", TILE_BITS)
        l_tag = lane_sigs("l{}_tag", TAG_BITS)
        l_slot = lane_sigs("l{}_slot", SB)
        k0, k1, k2 = (lane_sigs("l{}_k%d" % k, FIELD) for k in range(3))   # left - 1
        # ``kz[k][i]`` == (k_k of lane i == 0), kept in a register next to each counter
        # (timing: the wrap tests and the region-done test start at flip-flops)
        kz = [[Signal(name=f"l{i}_k{k}_zero", init=1) for i in range(L)] for k in range(3)]
        addr = lane_sigs("l{}_addr", FIELD)
        base1 = lane_sigs("l{}_base1", FIELD)
        base2 = lane_sigs("l{}_base2", FIELD)
        seq = lane_sigs("l{}_seq", SEQ_BITS)
        uaddr = [Signal(node_address_layout(cfg), name=f"u{u}_addr") for u in range(U)]
        uaddr_d = [Signal(node_address_layout(cfg), name=f"u{u}_addr_next") for u in range(U)]
        for u in range(U):
            m.d.comb += self.uaddr_next[u].eq(uaddr_d[u])
            m.d.sync += uaddr[u].eq(uaddr_d[u])
        m.d.comb += self.lane_busy.eq(Cat(*act))
        for i in range(L):
            m.d.sync += [act_d[i].eq(act[i]),
                         nw_next[i].eq(Mux(rowleft[i] < l_tile[i], rowleft[i], l_tile[i]))]

        # send slots: busy from start to the last flit's departure; region bounding box
        s_busy = [Signal(name=f"s{k}_busy") for k in range(S)]
        s_lo = [Signal(FIELD, name=f"s{k}_lo") for k in range(S)]
        s_hi = [Signal(FIELD, name=f"s{k}_hi") for k in range(S)]
        m.d.comb += self.slot_busy.eq(Cat(*s_busy))
        reading = [Signal(name=f"s{k}_reading") for k in range(S)]
        for k in range(S):
            m.d.comb += reading[k].eq(Cat(*[act[i] & (l_slot[i] == k) for i in range(L)]).any())
        m.d.comb += self.chk_hit.eq(Cat(*[reading[k] & (s_lo[k] <= self.chk_hi)
                                          & (self.chk_lo <= s_hi[k]) for k in range(S)]).any())
        with m.If(self.done):
            for k in range(S):
                with m.If(self.done_slot == k):
                    m.d.sync += s_busy[k].eq(0)

        # --- admission of a new SEND -------------------------------------------
        ufree = Cat(*[~act[G + u] for u in range(U)])
        same = Cat(*[act[G + u] & (uaddr[u].as_value() == self.uaddr.as_value())
                     for u in range(U)]).any()
        groups_free = ~(self.groups & Cat(*act[:G])).any()
        m.d.comb += self.can_start.eq(groups_free & (~self.ucast | (ufree.any() & ~same)))
        new_u = Signal(range(max(2, U)))
        for u in reversed(range(U)):
            with m.If(ufree[u]):
                m.d.comb += new_u.eq(u)

        def init_lane(i):
            m.d.sync += [act[i].eq(1), l_tile[i].eq(self.tile), l_tag[i].eq(self.tag),
                         l_slot[i].eq(self.start_slot), k0[i].eq(self.cnt[0] - 1), k1[i].eq(self.cnt[1] - 1),
                         k2[i].eq(self.cnt[2] - 1),
                         addr[i].eq(self.base), base1[i].eq(self.base),
                         base2[i].eq(self.base), seq[i].eq(0), rowleft[i].eq(self.cnt[0])]
            m.d.sync += [l_cnt[k][i].eq(self.cnt[k]) for k in range(3)]
            m.d.sync += [kz[k][i].eq(self.cnt[k] == 1) for k in range(3)]
            m.d.sync += [l_str[k][i].eq(self.stride[k]) for k in range(3)]

        with m.If(self.start):
            for k in range(S):
                with m.If(self.start_slot == k):
                    m.d.sync += [s_busy[k].eq(1), s_lo[k].eq(self.base), s_hi[k].eq(self.span)]
            for g in range(G):
                with m.If(self.groups[g]):
                    init_lane(g)
            with m.If(self.ucast):
                for u in range(U):
                    with m.If(new_u == u):
                        init_lane(G + u)
        for u in range(U):
            m.d.comb += uaddr_d[u].eq(Mux(self.start & self.ucast & (new_u == u), self.uaddr,
                                          uaddr[u]))

        # --- issue stage -----------------------------------------------------
        # Timing (cycle-identical restructuring, issue 20): the current lane is one-hot
        # (``cur_oh``); the read address of the current lane is kept in ``raddr`` (no lane
        # multiplexer in front of the bank arbiters); the FIFO room test reads one bit of
        # ``inflight`` (= FIFO level + ``s1_valid`` (+ ``s2_valid``), counted in a register); the head
        # flit's fields (tag, seq, size, destination) are selected by ``cur_oh`` in the
        # s1 cycle, so the lane pick ends in registers.
        cur_oh = Signal(L)
        left = Signal(TILE_BITS)        # words of the current tile still to issue
        lat2 = cfg.read_latency == 2
        if lat2:
            # read latency 2 (stop 32): the read address is the current lane's ``addr``
            # selected by ``cur_oh`` (registers -> AND-OR -> bank), no ``raddr`` loaded by
            # the pick; the tile size is taken in its first read (``first``); each lane's
            # generator steps on ``dcur[i] & space`` (``dcur``: registered DATA and current)
            first = Signal()
            dcur = [Signal(name=f"l{i}_dcur") for i in range(L)]
            nw_one = [Signal(name=f"l{i}_nw_one") for i in range(L)]
            for i in range(L):
                m.d.sync += nw_one[i].eq(Mux(rowleft[i] < l_tile[i], rowleft[i], l_tile[i]) == 1)
        else:
            raddr = Signal(self.addr_bits)  # == addr[current lane] while in DATA

        s1_valid = Signal()
        s1_head = Signal()
        s1_tail = Signal()
        s1_mark = Signal()
        s1_slot = Signal(SB)
        inflight = Signal(range(FIFO_DEPTH + 2))
        space = Signal()
        m.d.comb += space.eq(inflight < FIFO_DEPTH)
        issue = Signal()                # a head flit or a read enters s1 this cycle
        inflight_nx = Signal.like(inflight)
        m.d.comb += inflight_nx.eq(inflight + issue - (fifo.r_rdy & fifo.r_en))
        m.d.sync += inflight.eq(inflight_nx)

        lane_dest = [Signal(flit_l["dest"].shape, name=f"l{i}_dest") for i in range(L)]
        for g in range(G):
            m.d.comb += lane_dest[g].mcast.eq(self.table[g])
        for u in range(U):
            m.d.comb += lane_dest[G + u].ucast.eq(uaddr[u])
        # the current lane's fields (stable while it is current, see above)
        s1_hdr = Signal(data_header_layout())
        s1_mcast = Signal()
        s1_dest = Signal(flit_l["dest"].shape)
        m.d.comb += [s1_mcast.eq((cur_oh[:G]).any()),
                     s1_dest.as_value().eq(onehot_mux(cur_oh, lane_dest)),
                     s1_hdr.kind.eq(KIND_DATA), s1_hdr.tag.eq(onehot_mux(cur_oh, l_tag)),
                     s1_hdr.seq.eq(onehot_mux(cur_oh, seq)),
                     s1_hdr.nwords.eq(onehot_mux(cur_oh, nw_next))]

        m.d.sync += s1_valid.eq(issue)
        # the stage that meets the read data: s1 at read latency 1; at read latency 2 one
        # more register stage, s2, carries s1's fields (the head flit's fields as selected
        # in s1) while the word passes the bank's output register
        if lat2:
            w_valid, w_head, w_tail, w_mark = (Signal(name=f"s2_{n}")
                                               for n in ("valid", "head", "tail", "mark"))
            w_slot = Signal(SB, name="s2_slot")
            w_hdr = Signal(data_header_layout(), name="s2_hdr")
            w_mcast = Signal(name="s2_mcast")
            w_dest = Signal(flit_l["dest"].shape, name="s2_dest")
            m.d.sync += [w_valid.eq(s1_valid), w_head.eq(s1_head), w_tail.eq(s1_tail),
                         w_mark.eq(s1_mark), w_slot.eq(s1_slot), w_hdr.eq(s1_hdr),
                         w_mcast.eq(s1_mcast), w_dest.eq(s1_dest)]
        else:
            w_valid, w_head, w_tail, w_mark, w_slot = s1_valid, s1_head, s1_tail, s1_mark, s1_slot
            w_hdr, w_mcast, w_dest = s1_hdr, s1_mcast, s1_dest
        flit = Signal(flit_l)
        m.d.comb += [flit.head.eq(w_head), flit.tail.eq(w_tail), flit.mclass.eq(DATA_CLASS),
                     flit.mcast.eq(w_mcast), flit.dest.eq(w_dest), flit.src.eq(self.node_id),
                     flit.payload.eq(Mux(w_head, w_hdr.as_value(), self.rd.data)),
                     fifo.w_data.eq(Cat(flit.as_value(), w_mark, w_slot)),
                     fifo.w_en.eq(w_valid)]

        PICK, DATA = range(2)
        state = Signal(1)
        # ``rd_now``: the read of the word that enters s1 next cycle.  Read latency 1: the
        # read request, granted by the bank's round robin.  Read latency 2: SEND is first on
        # the read port (``rd_hold``), so its request is its grant, from registers.
        rd_now = Signal()
        if lat2:
            # ``rdh`` == DATA and FIFO room, as a register (computed from the next state and
            # the next ``inflight``): SEND's read request / ``rd_hold`` from one flip-flop
            rdh = Signal()
            m.d.comb += [self.rd.valid.eq(rdh), rd_now.eq(rdh), self.rd_hold.eq(rdh),
                         self.rd.addr.eq(onehot_mux(cur_oh, addr)[:self.addr_bits])]
        else:
            m.d.comb += [rd_now.eq(self.rd.grant), self.rd.addr.eq(raddr)]

        # next address of every lane's generator (from registers; a grant only selects)
        nxt_addr = [Signal(FIELD, name=f"l{i}_addr_next") for i in range(L)]
        for i in range(L):
            m.d.comb += nxt_addr[i].eq(Mux(~kz[0][i], addr[i] + l_str[0][i],
                                           Mux(~kz[1][i], base1[i] + l_str[1][i],
                                               base2[i] + l_str[2][i])))

        if not lat2:
            cur_next = Signal(self.addr_bits)     # the current lane's address after this one
            m.d.comb += cur_next.eq(onehot_mux(cur_oh, nxt_addr)[:self.addr_bits])
        # words left in the tile, this read included; ``last``: this read is the tile's last
        last = Signal()
        if lat2:
            # ``first``: the DATA cycle right after the pick, in which the tile's size is
            # the picked lane's ``nw_next`` (unchanged since the pick cycle: a lane's
            # ``rowleft`` moves at its picks only, >= 2 cycles apart; from the next cycle on
            # it counts this pick) and ``nw_one`` its (size == 1)
            left_now = Signal(TILE_BITS)
            m.d.comb += [left_now.eq(Mux(first, onehot_mux(cur_oh, nw_next), left)),
                         last.eq(Mux(first, onehot_mux(cur_oh, nw_one).any(), left == 1))]
        else:
            m.d.comb += last.eq(left == 1)
        # lanes that may be picked
        ready = [act[i] & act_d[i] & self.lane_ready[i] for i in range(L)]

        # the current lane's region ends with this tile: its slot and whether another lane
        # of the same SEND is still active, selected by AND-OR (one-hot ``cur_oh``), not by
        # the per-lane multiplexer chain below
        r_done = [kz[0][i] & kz[1][i] & kz[2][i] for i in range(L)]
        others = [Cat(*[act[j] & (l_slot[j] == l_slot[i]) for j in range(L) if j != i]).any()
                  for i in range(L)]
        cur_done = Signal()
        m.d.comb += cur_done.eq(onehot_mux(cur_oh, r_done))
        with m.If(state == PICK):
            # a lane is eligible from the second cycle it is active: the multicast
            # manager's registered ``lane_ready`` then covers its members, and its
            # ``nw_next`` its first tile; picks are >= 2 cycles apart (head + words), so
            # ``lane_ready`` and ``nw_next`` always include the previous pick.  The round
            # robin runs on registers; the FIFO room gates its result.
            grants, any_g = round_robin(m, ready, "lane", en=space)
            with m.If(any_g):
                for i in range(L):
                    with m.If(grants[i]):
                        m.d.sync += rowleft[i].eq(Mux(rowleft[i] == nw_next[i], l_cnt[0][i],
                                                      rowleft[i] - nw_next[i]))
                m.d.comb += [self.cons_en.eq(1), self.cons_sel.eq(Cat(*grants)), issue.eq(1)]
                m.d.sync += [cur_oh.eq(Cat(*grants)),
                             s1_head.eq(1), s1_tail.eq(0), s1_mark.eq(0)]
                if lat2:
                    # the tile's size and first address are read from the lane's registers
                    # in the DATA cycles (``first``), not selected by the grants here
                    m.d.sync += first.eq(1)
                else:
                    nw = Signal(TILE_BITS)
                    m.d.comb += nw.eq(onehot_mux(grants, nw_next))
                    m.d.sync += [left.eq(nw),
                                 raddr.eq(onehot_mux(grants, addr)[:self.addr_bits])]
                m.d.sync += state.eq(DATA)
                if lat2:
                    for i in range(L):
                        m.d.sync += dcur[i].eq(grants[i])
        def advance(i):
            # advance the 3-level address generator of lane i (the current lane, reading)
            cnt = [l_cnt[k][i] for k in range(3)]
            w0, w1 = kz[0][i], kz[1][i]
            m.d.sync += addr[i].eq(nxt_addr[i])
            with m.If(~w0):
                m.d.sync += [k0[i].eq(k0[i] - 1), kz[0][i].eq(k0[i] == 1)]
            with m.Elif(~w1):
                m.d.sync += [k0[i].eq(cnt[0] - 1), k1[i].eq(k1[i] - 1),
                             kz[0][i].eq(cnt[0] == 1), kz[1][i].eq(k1[i] == 1),
                             base1[i].eq(nxt_addr[i])]
            with m.Else():
                m.d.sync += [k0[i].eq(cnt[0] - 1), k1[i].eq(cnt[1] - 1),
                             k2[i].eq(k2[i] - 1),
                             kz[0][i].eq(cnt[0] == 1), kz[1][i].eq(cnt[1] == 1),
                             kz[2][i].eq(k2[i] == 1),
                             base1[i].eq(nxt_addr[i]), base2[i].eq(nxt_addr[i])]
            with m.If(last):
                m.d.sync += seq[i].eq(seq[i] + 1)
                with m.If(r_done[i]):   # region done
                    m.d.sync += act[i].eq(0)

        with m.Else():   # DATA
            if not lat2:
                m.d.comb += self.rd.valid.eq(space)
            if lat2:
                # the first DATA cycle takes the tile size whether or not it reads (a later
                # cycle's ``nw_next`` already counts this pick)
                m.d.sync += [first.eq(0), left.eq(left_now - rd_now)]
            with m.If(rd_now):
                m.d.comb += issue.eq(1)
                m.d.sync += [s1_head.eq(0), s1_tail.eq(last), s1_mark.eq(0)]
                if lat2:
                    with m.If(last):
                        m.d.sync += [dcur[i].eq(0) for i in range(L)]
                else:
                    m.d.sync += [left.eq(left - 1), raddr.eq(cur_next)]
                    for i in range(L):
                        with m.If(cur_oh[i]):
                            advance(i)
                with m.If(last & cur_done):
                    m.d.sync += [s1_mark.eq(~onehot_mux(cur_oh, others)),
                                 s1_slot.eq(onehot_mux(cur_oh, l_slot))]
                with m.If(last):
                    m.d.sync += state.eq(PICK)
        if lat2:
            # each lane's generator steps on its own registered enable (``dcur``: DATA and
            # current; the same cycles as ``cur_oh`` in DATA with the read issued)
            for i in range(L):
                with m.If(dcur[i] & space):
                    advance(i)
            data_nx = Mux(state == PICK, any_g, ~(rd_now & last))
            m.d.sync += rdh.eq(data_nx & (inflight_nx < FIFO_DEPTH))

        return m
