"""Command decoder: validation and dispatch of SEND / RECV / EWISE / GROUP.

Simba §3.1 ("Simba controller" configures the Global PE; the Global PE
reports completion).  One command is taken from the command stream into a
register; the next cycle it is checked and, if legal, dispatched when its
unit can take it:

* commands leave the register in order (a command that cannot start yet
  holds back the ones behind it), but run concurrently once started:
* SEND starts when the SEND engine can take it (every lane it needs idle, a
  send slot free: ``send_ok``) and no EWISE is running (an EWISE may be
  writing what the SEND reads);
* EWISE starts when the EWISE unit is free and no SEND still reading has a
  region overlapping the EWISE destination (``ewise_ok``);
* GROUP waits until the lane of the group it rewrites is idle
  (``group_ok``), then writes the group table;
* RECV only needs a free RECV slot: it opens its window and runs in the
  background, so the controller can issue RECV, then the SENDs that make
  the PEs produce the outputs;
* a rejected command completes at once (``own_free``: the decoder's one
  completion register).

So the buffer contents and every destination's tile stream are those of
executing the commands one by one in command order (RECV aside: its words
land when the producers send them; keeping SENDs and EWISEs off an open
window is the controller's job); completions are tagged and come when each
command finishes, not in command order.

Checks, in this order (the first failing one is the status; a failing
command completes with it and changes nothing):

1. opcode not SEND/RECV/EWISE/GROUP -> BAD_OP
2. BAD_ARG: SEND ``tile`` = 0 or > ``max_tile``, a count = 0, or a unicast
   node outside the meshes; RECV count = 0; EWISE ``sub`` = 3 or count = 0;
   GROUP index >= groups.
3. BAD_REGION: SEND ``a + sum((cnt_k - 1) * stride_k) >= words``; RECV or
   EWISE region ``x + count > words`` for any region; EWISE destination
   overlapping a source without being identical to it.
4. EMPTY_SET: SEND with no lane, or a selected group whose chiplet or node
   mask is empty; RECV / GROUP mask with no chiplet or no node.

Pipeline (for >= 100 MHz on ECP5): the checks take :data:`CHECK_CYCLES`
cycles in the command register -- ``cnt_k - 1`` is registered, then the three
region products ``(cnt_k - 1) * stride_k`` (one 16x16
:class:`~tessera.hdl.pe.mult.RegMult` cell each, whose operand register loads
``cnt_k - 1`` and ``stride_k`` every cycle and whose product register is this
stage's: with ``mult_impl=ecp5`` both inside the MULT18X18D; only for this bounds
check; address generation uses adders), then the clipped products' two pair sums, then the status, the
region's last address ``span`` and the EWISE destination's last address
``c_last`` -- and a dispatch decision is registered too: ``start_*``,
``table_we`` and ``own_cpl`` pulse the cycle after it (the units latch ``q``,
which holds still until the edge that ends that cycle).  A command therefore
leaves the register 5 cycles after it entered it and reaches its unit 6
cycles after (was 1 and 1 before any pipelining, 4 and 5 with the multiply
and clip in one cycle); back-to-back commands are taken one per 6 cycles.

Left out: command queueing beyond one register, dispatch out of order.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from tessera.hdl.pe.mult import RegMult

from .packets import (FIELD, OP_EWISE, OP_GROUP, OP_RECV, OP_SEND, ST_BAD_ARG, ST_BAD_OP,
                      ST_BAD_REGION, ST_EMPTY_SET, ST_OK, GpeConfig, command_layout, mask_layout)


CHECK_CYCLES = 4      # cnt - 1, products, clip + pair sums, status / span: each registered


class Decoder(wiring.Component):
    def __init__(self, cfg: GpeConfig):
        self.cfg = cfg
        super().__init__({
            "cmd": In(stream.Signature(command_layout(cfg))),
            "q": Out(command_layout(cfg)),            # the held command (fields for the units)
            "table": In(mask_layout(cfg)).array(cfg.groups),
            "send_ok": In(1), "ewise_ok": In(1), "group_ok": In(1), "recv_free": In(1),
            "own_free": In(1),
            "span": Out(FIELD),                       # last address of a SEND region
            "c_last": Out(FIELD + 1),                 # last address of an EWISE destination
            "start_send": Out(1), "start_ewise": Out(1), "start_recv": Out(1),
            "table_we": Out(1),
            "own_cpl": Out(1), "own_status": Out(3),  # completion issued by the decoder itself
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        full = Signal()
        q = Signal(command_layout(cfg))
        m.d.comb += self.q.eq(q)
        age = Signal(range(CHECK_CYCLES + 1))        # cycles the command has been held
        m.d.comb += self.cmd.ready.eq(~full)
        with m.If(self.cmd.valid & ~full):
            m.d.sync += [q.eq(self.cmd.payload), full.eq(1), age.eq(0)]
        with m.Elif(full & (age != CHECK_CYCLES)):
            m.d.sync += age.eq(age + 1)
        checked = Signal()
        m.d.comb += checked.eq(full & (age == CHECK_CYCLES))

        W = 2 * FIELD + 2

        def empty(mask):
            return ~mask.chiplets.any() | ~mask.nodes.any()

        # --- checks ---------------------------------------------------------
        c = [q.cnt0, q.cnt1, q.cnt2]
        s = [q.stride0, q.stride1, q.stride2]
        # stage 1: cnt_k - 1 (so the multiplier's inputs are registers); stage 2: products
        # (one MULT18X18D each, registered output, nothing else in the cycle); stage 3: products
        # clipped to FIELD + 1 bits (anything >= 2**FIELD is out of range anyway) and two pair
        # sums; stage 4 (below): their sum -> status
        P = FIELD + 1
        # (stages 1 and 2 are a RegMult cell's operand and product registers: its operand
        # register loads ``cnt_k - 1`` and ``stride_k`` every cycle; the stride is stable from
        # the cycle after the command is taken, so the product two cycles after that is the
        # command's; with mult_impl=ecp5 both registers sit inside the MULT18X18D)
        full_p = [Signal(W, name=f"prod{k}_full") for k in range(3)]
        prod = [Signal(P, name=f"prod{k}") for k in range(3)]
        for k in range(3):
            m.submodules[f"mul{k}"] = mul = RegMult(FIELD + 1, cfg.mult_impl)
            m.d.comb += [mul.a.eq((c[k] - 1)[:FIELD]), mul.b.eq(s[k]),
                         full_p[k].eq(mul.p.as_unsigned())]
            m.d.comb += prod[k].eq(Mux(full_p[k][FIELD:].any(), (1 << FIELD), full_p[k][:FIELD]))
        pair = [Signal(P + 1, name=f"pair{k}") for k in range(2)]
        m.d.sync += [pair[0].eq(prod[0] + prod[1]), pair[1].eq(prod[2] + q.a)]
        span = Signal(P + 2)
        m.d.comb += span.eq(pair[0] + pair[1])
        u = q.uaddr
        send_arg = (~q.tile.any() | (q.tile > cfg.max_tile) | ~q.cnt0.any() | ~q.cnt1.any()
                    | ~q.cnt2.any()
                    | (q.ucast & ((u.node.x >= cfg.node_mesh_x) | (u.node.y >= cfg.node_mesh_y)
                                  | (u.chiplet.x >= cfg.chiplet_mesh_x)
                                  | (u.chiplet.y >= cfg.chiplet_mesh_y))))
        m.d.sync += [self.span.eq(span[:FIELD]), self.c_last.eq(q.c + q.cnt0 - 1)]
        send_region = span >= cfg.words
        grp_empty = Cat(*[q.groups[g] & empty(self.table[g]) for g in range(cfg.groups)]).any()
        send_empty = (~q.groups.any() & ~q.ucast) | grp_empty

        def out_of(x, n):
            return (x + n) > cfg.words

        recv_arg = ~q.cnt0.any()
        recv_region = out_of(q.a, q.cnt0)
        recv_empty = empty(q.mask)

        def partial_overlap(src, dst, n):
            # dst != src and |dst - src| < n
            return (dst != src) & (dst < src + n) & (src < dst + n)

        ew_arg = (q.sub == 3) | ~q.cnt0.any()
        ew_region = (out_of(q.a, q.cnt0) | out_of(q.b, q.cnt0) | out_of(q.c, q.cnt0)
                     | partial_overlap(q.a, q.c, q.cnt0) | partial_overlap(q.b, q.c, q.cnt0))
        grp_arg = q.gidx >= cfg.groups

        status = Signal(3)          # stage 2: registered (from q and the products)
        status_c = Signal(3)
        m.d.sync += status.eq(status_c)
        with m.If(q.op == OP_SEND):
            with m.If(send_arg):
                m.d.comb += status_c.eq(ST_BAD_ARG)
            with m.Elif(send_region):
                m.d.comb += status_c.eq(ST_BAD_REGION)
            with m.Elif(send_empty):
                m.d.comb += status_c.eq(ST_EMPTY_SET)
        with m.Elif(q.op == OP_RECV):
            with m.If(recv_arg):
                m.d.comb += status_c.eq(ST_BAD_ARG)
            with m.Elif(recv_region):
                m.d.comb += status_c.eq(ST_BAD_REGION)
            with m.Elif(recv_empty):
                m.d.comb += status_c.eq(ST_EMPTY_SET)
        with m.Elif(q.op == OP_EWISE):
            with m.If(ew_arg):
                m.d.comb += status_c.eq(ST_BAD_ARG)
            with m.Elif(ew_region):
                m.d.comb += status_c.eq(ST_BAD_REGION)
        with m.Elif(q.op == OP_GROUP):
            with m.If(grp_arg):
                m.d.comb += status_c.eq(ST_BAD_ARG)
            with m.Elif(empty(q.mask)):
                m.d.comb += status_c.eq(ST_EMPTY_SET)
        with m.Else():
            m.d.comb += status_c.eq(ST_BAD_OP)
        m.d.comb += self.own_status.eq(status)

        # --- dispatch (decision registered: the pulses come the next cycle) -----
        m.d.sync += [self.own_cpl.eq(0), self.start_send.eq(0), self.start_ewise.eq(0),
                     self.start_recv.eq(0), self.table_we.eq(0)]
        with m.If(checked):
            with m.If(status != ST_OK):
                with m.If(self.own_free):
                    m.d.sync += [self.own_cpl.eq(1), full.eq(0)]
            with m.Elif(q.op == OP_SEND):
                with m.If(self.send_ok):
                    m.d.sync += [self.start_send.eq(1), full.eq(0)]
            with m.Elif(q.op == OP_EWISE):
                with m.If(self.ewise_ok):
                    m.d.sync += [self.start_ewise.eq(1), full.eq(0)]
            with m.Elif(q.op == OP_RECV):
                with m.If(self.recv_free):
                    m.d.sync += [self.start_recv.eq(1), full.eq(0)]
            with m.Else():       # GROUP
                with m.If(self.group_ok & self.own_free):
                    m.d.sync += [self.table_we.eq(1), self.own_cpl.eq(1), full.eq(0)]
        return m
