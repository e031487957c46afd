"""Multicast manager: group table and per-consumer credit windows.

Simba §3.1 "Simba global PE": "a multicast manager that oversees these
producer-consumer relationships".  Each consumer (every node of every
chiplet in the addressable meshes) owns a credit counter initialised to
``credit_window`` at reset: the number of tiles it may still receive.  A
tile sent to a lane (a multicast group or a unicast destination)
decrements the counter of every member; a CREDIT packet from a consumer adds
its count back.  A lane is ``ready`` only when *every* member has at least
one credit, so a tile never goes to a consumer without credit; lanes are
independent, so a slow consumer holds back only the lanes it belongs to; a
node may belong to several groups (its one counter is shared, as its input
buffer is).

Credit returns beyond the window are clamped to the window and raise the
sticky ``overflow`` flag (a protocol error of the consumer).

Timing (for >= 100 MHz on ECP5): ``lane_ready`` is a register (each lane's
"all members have credit" of the previous cycle), so the SEND engine's lane
picker starts from flip-flops.  The take (``cons_en``, one-hot ``cons_sel``)
is registered here and reaches the counters one cycle after the pick, so
the pick's grant ends in flip-flops (no path from the lane picker to the
consumer counters); ``lane_ready`` subtracts that pending take, so it is the
same, cycle for cycle, as if the counters had been updated in the cycle of
the pick.  That is exact because a lane is picked at most every second cycle
(a head flit, then at least one word) and a newly started lane waits one
cycle (see :mod:`.send`); a credit return shows one cycle later
(conservative).  The member bitmaps are registers, loaded from the next
value of the group table and of the unicast destinations (``uaddr`` is the
value the SEND engine's unicast-lane registers take next), so they equal
the combinational decode of the current values.  A unicast lane's member is
decoded by comparing the node's coordinates (no index arithmetic).
Overflow is checked on the counter with the pending take applied: legal
returns never overflow; a return beyond the window in the cycle of a pick
is flagged (the unregistered version let that one pass).  ``credits``
(observability) shows a take one cycle later.  The credit return arrives as
one register copy per group of consumers (:mod:`.recv`, ``cr_g_*``); with
small counters (credit and clipped count <= ``SMALL_TABLE_BITS`` bits, e.g. the
default window 4: 3 + 3) the counter's next value and overflow flags are a
table of the (credit, count) bits computed in Python from the same arithmetic
(LUT logic, no adder and compare carry chains: the stop-30 critical path).

Left out: reconfiguring windows at run time, per-group windows.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .packets import GpeConfig, mask_layout, node_address_layout
from .recv import CR_GROUP, cr_clip, cr_groups


SMALL_TABLE_BITS = 8    # credit + count bits up to which the counter update is a table


class MulticastManager(wiring.Component):
    def __init__(self, cfg: GpeConfig):
        self.cfg = cfg
        ml = mask_layout(cfg)
        self.cbits = cfg.credit_window.bit_length()
        super().__init__({
            # group table write (from the command decoder)
            "tw_en": In(1), "tw_idx": In(range(max(2, cfg.groups))), "tw_mask": In(ml),
            "table": Out(ml).array(cfg.groups),
            # unicast lane destinations: the value the SEND engine's registers take next
            "uaddr": In(node_address_layout(cfg)).array(cfg.ucast_lanes),
            # credit return (from the network-in unit)
            # (one register copy per group of CR_GROUP consumers: en, index in the group,
            # count clipped to cr_clip; see recv.RecvUnit)
            "cr_g_en": In(cr_groups(cfg)),
            "cr_g_local": In(range(CR_GROUP)).array(cr_groups(cfg)),
            "cr_g_count": In(cr_clip(cfg).bit_length()).array(cr_groups(cfg)),
            # the SEND engine takes one tile for a lane
            "cons_en": In(1), "cons_sel": In(cfg.lanes),     # one-hot lane
            "lane_ready": Out(cfg.lanes),
            "overflow": Out(1),
            "credits": Out(self.cbits).array(cfg.consumers),   # observability
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        table = [Signal(mask_layout(cfg), name=f"group{g}") for g in range(cfg.groups)]
        table_d = [Signal(mask_layout(cfg), name=f"group{g}_next") for g in range(cfg.groups)]
        for g in range(cfg.groups):
            m.d.comb += [self.table[g].eq(table[g]),
                         table_d[g].eq(Mux(self.tw_en & (self.tw_idx == g), self.tw_mask, table[g]))]
            m.d.sync += table[g].eq(table_d[g])

        # member bitmaps per lane: registers, decoded from the next table / destinations
        members = []
        for g in range(cfg.groups):
            bits = Signal(cfg.consumers, name=f"members{g}")
            for c in range(cfg.chiplets):
                for n in range(cfg.nodes):
                    m.d.sync += bits[c * cfg.nodes + n].eq(table_d[g].chiplets[c]
                                                           & table_d[g].nodes[n])
            members.append(bits)
        for k in range(cfg.ucast_lanes):
            ubits = Signal(cfg.consumers, name=f"members_ucast{k}")
            u = self.uaddr[k]
            for cy in range(cfg.chiplet_mesh_y):
                for cx in range(cfg.chiplet_mesh_x):
                    for ny in range(cfg.node_mesh_y):
                        for nx in range(cfg.node_mesh_x):
                            i = (cy * cfg.chiplet_mesh_x + cx) * cfg.nodes + ny * cfg.node_mesh_x + nx
                            m.d.sync += ubits[i].eq((u.chiplet.x == cx) & (u.chiplet.y == cy)
                                                    & (u.node.x == nx) & (u.node.y == ny))
            members.append(ubits)

        credit = [Signal(self.cbits, init=cfg.credit_window, name=f"credit{i}")
                  for i in range(cfg.consumers)]
        ovf_seen = [Signal(name=f"overflow{i}") for i in range(cfg.consumers)]   # sticky
        # the take, registered: applied to the counters one cycle after the pick
        take = Signal(cfg.lanes, name="take_q")
        m.d.sync += take.eq(self.cons_sel & self.cons_en.replicate(cfg.lanes))
        sel = Signal(cfg.consumers)
        terms = [members[lane] & take[lane].replicate(cfg.consumers)
                 for lane in range(cfg.lanes)]
        or_all = terms[0]
        for t in terms[1:]:
            or_all = or_all | t
        m.d.comb += sel.eq(or_all)
        # credit left once the pending take is applied: >= 2, or 1 and not taken now
        has = Signal(cfg.consumers)
        m.d.comb += has.eq(Cat(*[Mux(sel[i], credit[i] > 1, credit[i].any())
                                 for i, _ in enumerate(credit)]))
        for lane in range(cfg.lanes):
            m.d.sync += self.lane_ready[lane].eq(~(members[lane] & ~has).any())
        # per consumer: both candidate next values (with and without the pending take)
        # are computed from registers only; the registered take just selects
        W = cfg.credit_window
        nb = cr_clip(cfg).bit_length()
        small = self.cbits + nb <= SMALL_TABLE_BITS
        table = {}
        if small:
            # every (credit, count) pair: the kept / taken next value and overflow flags,
            # with the arithmetic of the wide form below (up - 1 wraps as there)
            cmask = (1 << self.cbits) - 1
            for c in range(1 << self.cbits):
                for r in range(1 << nb):
                    up = c + r
                    table[c | r << self.cbits] = (W if up > W else up & cmask,
                                                   W if up > W + 1 else (up - 1) & cmask,
                                                   int(up > W), int(up > W + 1))
        for i in range(cfg.consumers):
            m.d.comb += self.credits[i].eq(credit[i])
            dec = Signal(name=f"dec{i}")
            hit = Signal(name=f"ret{i}")                     # the credit return is ours
            g = i // CR_GROUP
            m.d.comb += [dec.eq(sel[i]),
                         hit.eq(self.cr_g_en[g] & (self.cr_g_local[g] == i % CR_GROUP))]
            # with the return added (the group's copy of the count, no per-consumer gating
            # in front; ``hit`` selects last, in parallel with the sum)
            # (the count is clipped to W + 2 by RECV, recv.cr_clip: only its low bits are added)
            cnt = self.cr_g_count[g]
            ovf0, ovf1 = Signal(name=f"ovf_keep{i}"), Signal(name=f"ovf_take{i}")
            n0, n1 = Signal(self.cbits, name=f"next_keep{i}"), Signal(self.cbits, name=f"next_take{i}")
            r0, r1 = Signal(self.cbits, name=f"ret_keep{i}"), Signal(self.cbits, name=f"ret_take{i}")
            v0, v1 = Signal(name=f"ret_ovf_keep{i}"), Signal(name=f"ret_ovf_take{i}")
            if small:
                # up = credit + count and its compares as a table of the (credit, count)
                # bits: LUT logic, no carry chains (the stop-30 path was add -> compare)
                with m.Switch(Cat(credit[i], cnt)):
                    for key, (a0, a1, b0, b1) in table.items():
                        with m.Case(key):
                            m.d.comb += [r0.eq(a0), r1.eq(a1), v0.eq(b0), v1.eq(b1)]
            else:
                up = Signal(max(self.cbits, nb) + 1, name=f"up{i}")       # credit + returned
                m.d.comb += [up.eq(credit[i] + cnt),
                             r0.eq(Mux(up > W, W, up)), r1.eq(Mux(up > W + 1, W, up - 1)),
                             v0.eq(up > W), v1.eq(up > W + 1)]
            m.d.comb += [ovf0.eq(hit & v0), ovf1.eq(hit & v1),
                         n0.eq(Mux(hit, r0, credit[i])),
                         n1.eq(Mux(hit, r1, credit[i] - 1))]
            m.d.sync += credit[i].eq(Mux(dec, n1, n0))
            with m.If(Mux(dec, ovf1, ovf0)):
                m.d.sync += ovf_seen[i].eq(1)
        m.d.comb += self.overflow.eq(Cat(*ovf_seen).any())
        self.dbg = {"overflow": ovf_seen}        # (for tests: the per-consumer sticky flags)
        return m
