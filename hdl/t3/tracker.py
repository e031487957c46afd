"""T3 wavefront Tracker (Pati et al., ASPLOS'24, §4.2.1; Fig 9(a)(b)).

Counts local, remote and DMA updates per wavefront (WF) output tile at the memory controller and,
when a tile has received ``threshold`` element-updates (``wf_tile_size x updates_per_element``, 2 for
ring reduce-scatter), emits a trigger ``(wg_id, wf_id, start address)`` and frees the entry.

Organisation (§4.2.1): ``sets`` sets indexed by the low bits of ``wg_id`` (wg_lsb), ``ways`` ways per
set, tagged by ``(wg_msb, wf_id)``; each way holds the smallest address seen (the tile's start
address; column-major tiles are not contiguous, so it is a running minimum) and an element counter.
The default 256 sets x 8 ways x 76 bits (48-bit VA, 16-bit counter, 8+3-bit tag, valid) is the
paper's 19 KB Tracker.

Micro-architecture (the golden model ``tessera.golden.t3.TrackerModel`` implements the same cycle
behaviour from this description).  The set memory is one :class:`tessera.hdl.sram.SRAM` word per
set (all ways; read latency ``read_latency``: 2 by default, the word passing the block RAM's
output register, or 1), so it maps to block RAM; six pipeline stages (five with read latency 1),
one item per cycle
(toward 100 MHz on ECP5: block-RAM read data goes straight into a register, the read-modify-write
loop is one stage and the 608-bit set write comes from registers; measured 82.1 MHz speed grade 6
at default parameters with a shifting victim FIFO, 96.6 MHz in ``t3_node`` with the ring below and
an unregistered push -- the victim FIFO's merge compare into its slot enables was the critical
path; the push is now registered, see below: 84.4 MHz, then the 48-bit address minimum of a
record landing in the cycle its tile's record is popped, through the head multiplexer into S1;
that compare is now made a cycle ahead: 83.5 MHz, the critical path the victim FIFO's head
multiplexer -> S0's set index -> the 17 block RAMs' read address, mostly routing; the head's
``wg`` is now a register of its own, ``r_wg``: 88.0 MHz, the critical path S2's set correction
and way select into ``s3_addr``; S2's hit select split by source: 88.6 MHz, the write-log
select; that select moved into S1 (``log_set``): 91.0 MHz, the overflow entries' tag compare
-> select -> ``s3_count``; that compare registered in S1 (``ohit_r``): 88.3 MHz (placement
variance), the critical path ``w4_way`` -> S3's hit/free correction for the S4 write -> count
compare -> decision -> ``w4_ovf_wr``; those vectors now enter S3 already corrected (computed
from the S3 decision of the item ahead, one cycle earlier): 89.1 MHz, the critical path S2's
tag compare of the memory word -> count select -> ``s3_count``; that compare now made in S1 on
the arriving read data (``h_mem``): 95.5 MHz (8,779 LUT4), the critical path ``s3_room`` ->
the count compare carry chain -> over/done -> the eviction decision -> the victim pointer's
enable, 2.6 ns logic + 7.9 ns routing; the decision is now flat, one term per action, the
miss actions (alloc / overflow / evict / requeue) without the hit-count compares they do not
need: not measured here (P&R budget), in ``t3_node`` 104.4 -> 109.6 MHz, whose critical path
is then ``s3_room`` -> count compare -> applied-hit -> overflow write -> ``s3_ofree`` (9.1 ns);
measured here at this state: 91.0 MHz (8,661 LUT4, 4,844 FF), the critical path the block
RAM -> S1's tag compare -> ``h_mem`` (5.8 ns DP16KD clock-to-out + 2.5 ns routing + 3 LUT
levels; 11.0 ns) -- every step cycle-identical.  Tried and reverted (cycle-identical, in the
branch history): the count compares made in S2 after the count select (``s3_gt``/``s3_eq``)
plus S1's tag compare in pairs of bits (one LUT level after the block RAM, S2 ANDs the
pairs): 85.4 MHz, the critical path ``f_log`` -> the pair AND -> count select -> compare
carry chain -> ``s3_gt_s`` (11.7 ns, 8.5 of it routing): a compare after the select lengthens
S2 more than it shortens S3.  Then the set memory read through its output register
(``read_latency=2``, the default: one more stage, SA, trigger at t+6, the write log one deeper;
``read_latency=1`` keeps the five-stage pipeline, trigger at t+5), the S1 tag compare then
starting from a register: 94.4 MHz (9,708 LUT4, 6,249 FF), the critical path S1's set-index
compares with the three logged writes -> log select -> tag compare -> ``h_logr``; those set
compares and the older logged sets' tag compares registered in SA: 83.6 MHz (9,573 LUT4), the
critical path
the victim FIFO's head (a 9-slot ring now: ``victims`` + 5) -> merge select -> record
multiplexer -> ``sa`` (12.0 ns, 9.7 of it routing); the item now assembled in SA from
registers and the popped slot: 96.0 MHz (8,432 LUT4, 6,289 FF, 17 DP16KD), the critical path
``s3_count`` -> count == room compare -> the S3 decision -> overflow write -> ``s3_ofree``
(10.4 ns, 8.3 of it routing; 6 LUT levels and a carry chain) -- the same path as ``t3_node``'s
at 109.6 MHz (9.1 ns there, before this change).  Tried and reverted (cycle-identical, both
proofs closing with the invariant extended to the new registers; branch n23trk's history, rows in
``build/bench/synth_tracker_n23.json``): S3's decision from registered compare bits (S2 compares
every candidate count with threshold - n, registered in S1, and selects the bits like the
count; the forwarded count is compared a cycle early, in the S3 of the item ahead, with
threshold - n(ahead) - n): 91.5 MHz (8,850 LUT4), the critical path S3's hit vector -> hit ->
decision -> requeue select -> ``w4_vrec`` (10.9 ns, 8.8 routing); plus the hit / free
OR-reductions and the forwarding flag registered, the victim record selected by the item's
kind: 81.6 MHz (seed 2: 89.2), the loop ``s3_shit`` -> decision -> next item's ``s3_shit`` /
``s3_fa`` (12.3 / 11.2 ns, 10.0 / 9.0 routing, 7 levels).  Fewer LUT levels in S3 did not
raise Fmax: every path is ~80 % routing, and S3's decision feeds the next item's pre-corrected
hit / free vectors (a one-cycle loop): registering their OR-reductions put the way select and
the reductions into that loop, which became the critical path on both seeds.  Then (branch
n24trk, cycle-identical, both proofs closing, rows in ``build/bench/synth_tracker_n24.json``):
variant A again with the victim record selected by the item's kind (a record is only ever
requeued, an input update only ever evicts), the loop registers' next state (``s3_hit`` /
``s3_free`` / ``s3_ohit`` / ``s3_ofree``) written per way as sums of products of registers (a
hit applied there and kept / freed, a miss allocated or evicted into it) instead of the
``Mux(nx_ss, ...)`` forms, ``v3 & ~n_over`` registered (``s3_kok``) and the forwarding flag
registered: 93.0 MHz seed 1 (the loop ``s3_hit`` -> ... -> ``s3_hit``, 10.8 ns, 8.1 routing, 8
levels), 82.7 MHz seed 2 (``s3_hit`` -> hit -> ``s3_fwd``, 12.1 ns, 9.9 routing, 7 levels; 8,958
LUT4); the registered forwarding flag is a loop through the hit OR-reduction (this item's
decision -> the item behind's flag, like variant B's reductions); it is again taken from the S4
registers, and the S2 / S3 items' set and tile matches are registered in S1 (``p_set`` /
``p_tag``): 102.5 / 94.2 / 103.2 MHz on seeds 1 / 2 / 3 (8,888 LUT4, 6,314 FF, 17 DP16KD); seeds
2 and 3: ``s3_hit`` -> hit -> the decision -> ``w4_set_wr`` (10.6 / 9.7 ns, 8.6 / 7.6 routing, 6
levels); seed 1: the critical path in S0: the victim FIFO's registered push ``vfifo.pe`` -> its
level + the items in flight < depth (``vic_ok``, two carry chains) -> ``upd.ready`` ->
``tcount`` (9.8 ns, 6.1 routing) -- S3's loop is off the critical path; next: ``vic_ok`` from a
register, as ``tcount`` is.  The read-latency-2 steps are cycle-identical to each other.  The
pipeline:

* After reset a sweep clears the set memory, one set per cycle (``upd.ready`` low for ``sets``
  cycles).
* S0: an *item* -- an input update or a victim record (below) -- enters and its set is read.
* SA (``read_latency=2`` only): the word passes the memory's output register; the item is
  assembled (an input update was registered in S0; a victim record's wg / wf come from the
  FIFO's head registers, the rest from the slot it was popped from, which nothing writes
  while the record is in SA); its set index is compared with the logged writes it will meet
  in S1 and the two older logged sets' ways with its tag (registered: S1 then selects from
  match bits and compares only the set its S4 write changes).
* S1: the set word arrives and is registered as it is, with its ways' tag compares against
  the item's tag; against that register S2 will need the
  sets written one and two (with SA: one, two and three) cycles before (a *write log*, which
  also covers the read that collided with a write) and this cycle's S3 item: the newest of the
  logged sets that wrote this item's set is selected here into one register (``log_set``)
  with its tag compares, and the S3 item's set/tag matches are registered, as are the S2
  item's (``p_set`` / ``p_tag``: S3's loop registers select with them).
* S2: the set as it is now: ``log_set`` or the memory word, with the way the S4 write of
  this cycle changes replaced; the hits in every way (the memory word's compared in S1) and in
  ``overflow`` fully-associative overflow entries (registers shared by all sets, tagged by set
  index and tag, compared in S1, also corrected for this cycle's write), and the hit entry's
  count and address are selected -- split by source, so that only an AND-OR over the memory
  word's ways lies between ``rd2`` and the S3 registers (the log / S4-write / overflow terms,
  all from registers, are OR-ed in last); every candidate count is compared with threshold -
  n (``room2``, registered in S1) and the compare bits are selected like the count.  The hit /
  free vectors are registered for S3 already corrected for the write of the item now in S3
  (its decision, made this cycle: per way, from registers, whether it applies a hit there and
  keeps or frees the entry, or allocates / evicts into it).
* S3: the count and address are corrected for the write of the item one ahead (in S4 now;
  same tile, from registers; its count compared with threshold - n(ahead) - n in the cycle
  before, ``pr``), then -- the decision from registered compare bits -- hit -> add the element
  count; the count reaching ``threshold``
  triggers and frees the entry; exceeding it is an over-count: the item is discarded, the error
  counter/flag is raised and the entry is unchanged.  Miss -> an item that alone reaches the
  threshold triggers without allocating, one that exceeds it is an over-count; otherwise it
  allocates the lowest free way of its set, else the lowest free overflow entry (``conflicts``
  counts these), else an input update *evicts* a victim way (round-robin pointer,
  ``evictions``): the item takes the way and the victim's tile leaves as a record ``(wg, wf,
  start address, count)`` that re-enters at S0 like an update carrying ``count`` elements; a
  victim record is requeued instead (below).  The decision is registered.
* S4: the set word (the set before the write with the item's way replaced) and the overflow
  entry are written, the trigger / victim record pushed into its FIFO, the counters updated.
  The victim FIFO's push is registered: the record is compared with the FIFO's slots in S4 and
  lands (appended, or merged into its tile's record) one cycle later, from registered match bits;
  until then it counts in the FIFO's level (room reservation) -- a victim record can re-enter
  at the earliest 2 cycles after its S4 (was 1).

Progress guarantee (a set conflict never blocks): nothing in the pipeline ever stalls -- every item
is applied in S3 ``read_latency`` + 2 cycles after S0 -- because space is reserved at S0: an item
enters only if the trigger FIFO (``trig_depth`` + ``pipe`` entries, ``pipe`` = 3 +
``read_latency``) and, for an input update, the victim FIFO (``victims`` + ``pipe``) have room for
every item in flight (SA, S1..S4).  Victim records re-enter every other
cycle (alternating with the input), so each is absorbed within 2 x its FIFO position + 2 cycles
while ``trig.ready`` is high.  Only input updates evict: a re-entering record that misses in a
full set goes back to the victim FIFO (*requeue*), and the FIFO keeps one record per tile (a
record pushed while its tile's record waits -- or is being read out -- merges into it: counts
added, smaller address kept).  So a tile's elements are in at most its entry, one waiting record
and one in flight, the pieces meet when a record re-enters while its tile is resident (an input
update of the tile makes it resident) or merge in the FIFO, and a record holding all of a tile's
elements triggers on re-entry without allocating: once a tile's last update is in, it triggers
(exactly once, with its smallest address) within a few FIFO rounds.  The input is held
(``stall``) only while the FIFO and the pipeline hold ``victims`` + ``pipe`` items, i.e. while
``victims`` or more distinct live tiles that were evicted wait -- a finite Tracker must refuse
input then (it cannot store more partial counts than it has entries) -- and with at most
``ways`` live tiles per set no eviction happens at all.  (With records evicting, as first built,
two live tiles in a one-way set could evict each other's records forever: found by
``tests/test_t3_tracker_sim.py``.)  Evictions, requeue, overflow entries and the victim FIFO are
our additions, not in the paper (which sizes the Tracker for a GEMM stage, §4.2.1).

Latency: an update accepted in cycle t that completes its tile makes ``trig.valid`` rise in cycle
t + 4 + ``read_latency``: t+6 by default (t+5 with ``read_latency=1``, the pipeline before the
output register; t+3 with the earlier three-stage pipeline, 55 MHz).  Left out: address translation, per-entry thresholds (one programmable threshold; clipped edge
tiles need per-entry thresholds), and the source field is carried but not used (all sources count
the same, §4.2.1; ``src`` = 3 is reserved for victim records: an input carrying it is requeued
rather than evicting); over-count detection sees only the entry, not a tile's victim records.
"""
from __future__ import annotations

from types import SimpleNamespace

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from tessera.hdl.sram import SRAM

SRC_LOCAL, SRC_REMOTE, SRC_DMA = 0, 1, 2
SRC_VICTIM = 3          # internal: a victim record re-entering


def update_layout(wg_width=16, wf_width=3, addr_width=48, n_width=8) -> data.StructLayout:
    return data.StructLayout({"wg": wg_width, "wf": wf_width, "addr": addr_width, "n": n_width,
                              "src": 2})


def trigger_layout(wg_width=16, wf_width=3, addr_width=48) -> data.StructLayout:
    return data.StructLayout({"wg": wg_width, "wf": wf_width, "addr": addr_width})


def _log2(x: int) -> int:
    return (x - 1).bit_length()


def check_tracker_params(sets, ways, wg_width, wf_width, addr_width, count_width, n_width,
                         overflow, trig_depth, victims=4, read_latency=2):
    if read_latency not in (1, 2):
        raise ValueError(f"read_latency must be 1 or 2, got {read_latency}")
    if sets < 1 or sets & (sets - 1):
        raise ValueError(f"sets must be a power of two, got {sets}")
    if _log2(sets) > wg_width:
        raise ValueError(f"sets={sets} needs more wg_id bits than wg_width={wg_width}")
    for name, v, lo in (("ways", ways, 1), ("wf_width", wf_width, 1), ("addr_width", addr_width, 1),
                        ("count_width", count_width, 1), ("n_width", n_width, 1),
                        ("overflow", overflow, 0), ("trig_depth", trig_depth, 1),
                        ("victims", victims, 1)):
        if v < lo:
            raise ValueError(f"{name} must be >= {lo}, got {v}")


class _RegSets(wiring.Component):
    """Register file with the :class:`SRAM` ports (read latency 1 or 2; a same-cycle write is
    not seen), for set memories of 1 kbit or less."""

    def __init__(self, depth, width, read_latency=1):
        self.depth, self.read_latency = depth, read_latency
        ab = max(1, (max(2, depth) - 1).bit_length())
        super().__init__({"w_en": In(1), "w_addr": In(ab), "w_data": In(width), "r_en": In(1),
                          "r_addr": In(ab), "r_data": Out(width)})
        # state (not ports; the formal harness reads it)
        self.regs = [Signal(width, name=f"set{i}", reset_less=True) for i in range(depth)]

    def elaborate(self, platform):
        m = Module()
        regs = self.regs
        rd = self.r_data
        if self.read_latency == 2:           # the output register (loads every cycle)
            rd = Signal(len(self.r_data), name="rd1", reset_less=True)
            self.rd1 = rd                    # state (the formal harness reads it)
            m.d.sync += self.r_data.eq(rd)
        with m.If(self.r_en):
            with m.Switch(self.r_addr):
                for i, r in enumerate(regs):
                    with m.Case(i):
                        m.d.sync += rd.eq(r)
        for i, r in enumerate(regs):
            with m.If(self.w_en & (self.w_addr == i)):
                m.d.sync += r.eq(self.w_data)
        return m


class _RegFIFO(wiring.Component):
    """First-word-fall-through FIFO in registers, the :class:`amaranth.lib.fifo.SyncFIFO` ports
    used here (``w_en``/``w_data``, ``r_en``/``r_data``/``r_rdy``, ``level``); for tiny depths."""

    def __init__(self, width, depth):
        self.width, self.depth = width, depth
        super().__init__({"w_en": In(1), "w_data": In(width), "r_en": In(1), "r_data": Out(width),
                          "r_rdy": Out(1), "level": Out(range(depth + 1))})
        self.q = [Signal(width, name=f"q{i}") for i in range(depth)]    # state (formal reads it)

    def elaborate(self, platform):
        m = Module()
        q = self.q
        pop = self.r_en & self.r_rdy
        m.d.comb += [self.r_rdy.eq(self.level != 0), self.r_data.eq(q[0])]
        after = self.level - pop                 # entries kept
        for i in range(self.depth):
            nxt = q[i + 1] if i + 1 < self.depth else q[i]
            with m.If(self.w_en & (after == i)):
                m.d.sync += q[i].eq(self.w_data)
            with m.Elif(pop):
                m.d.sync += q[i].eq(nxt)
        m.d.sync += self.level.eq(self.level + self.w_en - pop)
        return m


class _VictimFIFO(wiring.Component):
    """First-word-fall-through FIFO of victim records in registers that keeps one record per
    tile: a record pushed while another of its tile waits merges into it (counts added, smaller
    address kept) instead of taking a slot -- into the one read out, if it is popped in the
    cycle the push lands.  A ring of slots with a valid bit each (records never move, so a
    push updates slots in place).  The push is registered: a record written in cycle c is
    compared with the slots in c (corrected for the push landing in c and the pop of c) and
    lands -- appended or merged, from registered match bits -- in c+1.  Ports as
    :class:`_RegFIFO`; ``level`` counts the slots in use plus a push not landed yet."""

    def __init__(self, layout, depth):
        self.layout, self.depth = layout, depth
        super().__init__({"w_en": In(1), "w_data": In(layout), "r_en": In(1),
                          "r_data": Out(layout), "r_rdy": Out(1),
                          "level": Out(range(depth + 1)),
                          "pending": Out(1),
                          # r_data.wg from a register (timing: the Tracker's set-memory
                          # read address, routed to every block RAM, starts here)
                          "r_wg": Out(layout["wg"].width),
                          # r_data.wf from a register, and the head slot (one-hot): a
                          # reader may take the popped record from the slot a cycle later
                          "r_wf": Out(layout["wf"].width), "r_1h": Out(depth)})
        # state (not ports; the formal harness reads it)
        D = depth
        self.q = [Signal(layout, name=f"q{i}") for i in range(D)]
        self.valid = Signal(D, name="valid")
        self.head, self.tail = Signal(range(D), name="head"), Signal(range(D), name="tail")
        self.used = Signal(range(D + 1), name="used")
        # the registered push: record, it merges into slot pm (one-hot) or appends (pa)
        self.pe, self.pa = Signal(name="pe"), Signal(name="pa")
        self.pd = Signal(layout, name="pd")
        self.pm = Signal(D, name="pm")
        self.plt = Signal(D, name="plt")
        self.hwg = Signal(layout["wg"].width, name="hwg")
        self.hwf = Signal(layout["wf"].width, name="hwf")

    def elaborate(self, platform):
        m = Module()
        D = self.depth
        q, valid, head, tail, used = self.q, self.valid, self.head, self.tail, self.used
        w = self.w_data
        pe, pa, pd, pm = self.pe, self.pa, self.pd, self.pm
        head_1h, tail_1h = Signal(D), Signal(D)
        for i in range(D):
            m.d.comb += [head_1h[i].eq(head == i), tail_1h[i].eq(tail == i)]
        pop = self.r_en & self.r_rdy

        def same_tile(a, b):
            return (a.wg == b.wg) & (a.wf == b.wf)
        # match of the record written now against the slots as they will be next cycle
        match = Signal(D)
        follows = pe & pa & same_tile(pd, w)          # lands in tail this cycle, same tile
        for i in range(D):
            m.d.comb += match[i].eq(Mux(follows, tail_1h[i],
                                        valid[i] & same_tile(q[i], w) & ~(pop & head_1h[i])))
        m.d.sync += [pe.eq(self.w_en), pd.eq(w), pm.eq(match), pa.eq(~match.any())]
        # the address minimum of a landing merge, compared one cycle ahead (timing: the
        # 48-bit compare is off the read-out path): plt[i] = pd.addr < q[i].addr as they
        # will be next cycle -- slot i then holds the landing record (append), the merge
        # of it (min: both compares), or what it holds now
        lt_p = w.addr < pd.addr
        plt = self.plt
        for i in range(D):
            lt_q = w.addr < q[i].addr
            m.d.sync += plt[i].eq(Mux(pe & pa & tail_1h[i], lt_p,
                                      Mux(pe & pm[i], lt_p & lt_q, lt_q)))

        merged = []
        for i in range(D):
            mq = Signal(self.layout, name=f"merged{i}")
            m.d.comb += [mq.eq(q[i]), mq.n.eq(q[i].n + pd.n),
                         mq.addr.eq(Mux(plt[i], pd.addr, q[i].addr))]
            merged.append(mq)
        hq = Const(0, len(q[0].as_value()))
        hm = Const(0, len(q[0].as_value()))
        for i in range(D):
            hq = hq | Mux(head_1h[i], q[i].as_value(), 0)
            hm = hm | Mux(head_1h[i], merged[i].as_value(), 0)
        # a record landing in the cycle its tile's record is popped merges into the popped one
        m.d.comb += [self.r_rdy.eq(used != 0),                 # = valid.any()
                     self.r_data.eq(Mux(pe & (pm & head_1h).any(), hm, hq))]
        append = pe & pa
        for i in range(D):
            with m.If(append & tail_1h[i]):
                m.d.sync += [q[i].eq(pd), valid[i].eq(1)]
            with m.Else():
                with m.If(pe & pm[i]):
                    m.d.sync += q[i].eq(merged[i])
                with m.If(pop & head_1h[i]):
                    m.d.sync += valid[i].eq(0)
        # the head slot's wg and wf as registers: the next head (head + 1 on a pop) is the
        # slot the landing record appends to, or keeps its wg / wf (a merge changes neither)
        head1_1h = Cat(head_1h[-1], head_1h[:-1]) if D > 1 else head_1h
        for field, reg in (("wg", self.hwg), ("wf", self.hwf)):
            at, at1 = Const(0, len(reg)), Const(0, len(reg))
            for i in range(D):
                at = at | Mux(head_1h[i], q[i][field], 0)
                at1 = at1 | Mux(head1_1h[i], q[i][field], 0)
            stay = Mux(append & (tail_1h & head_1h).any(), pd[field], at)
            adv = Mux(append & (tail_1h & head1_1h).any(), pd[field], at1)
            m.d.sync += reg.eq(Mux(pop, adv, stay))
        m.d.comb += [self.r_wg.eq(self.hwg), self.r_wf.eq(self.hwf), self.r_1h.eq(head_1h)]
        with m.If(append):
            m.d.sync += tail.eq(Mux(tail == D - 1, 0, tail + 1))
        with m.If(pop):
            m.d.sync += head.eq(Mux(head == D - 1, 0, head + 1))
        m.d.sync += used.eq(used + append - pop)
        m.d.comb += [self.level.eq(used + pe), self.pending.eq(pe)]
        return m


def _fifo(width, depth):
    # tiny FIFOs (<= 4 entries, or <= 64 bits in all) in registers, others in (LUT) RAM
    if depth <= 4 or width * depth <= 64:
        return _RegFIFO(width, depth)
    return fifo.SyncFIFO(width=width, depth=depth)


class Tracker(wiring.Component):
    """See module docstring.  Ports: ``upd`` (sink), ``trig`` (source), ``threshold`` (config),
    ``err_count``/``error`` (over-counts), ``conflicts`` (overflow allocations), ``evictions``
    (victim evictions), ``stall`` (input held because the victim FIFO has no room),
    ``occupancy`` (valid entries), ``busy`` (clear sweep running)."""

    def __init__(self, sets=256, ways=8, wg_width=16, wf_width=3, addr_width=48, count_width=16,
                 n_width=8, overflow=4, trig_depth=4, victims=4, read_latency=2):
        check_tracker_params(sets, ways, wg_width, wf_width, addr_width, count_width, n_width,
                             overflow, trig_depth, victims, read_latency)
        self.sets, self.ways, self.n_ovf, self.trig_depth = sets, ways, overflow, trig_depth
        self.read_latency = read_latency
        self.pipe = 3 + read_latency         # items in flight after S0: FIFO room for each
        self.victims = victims
        self.wg_width, self.wf_width, self.addr_width = wg_width, wf_width, addr_width
        self.count_width, self.n_width = count_width, n_width
        self.set_bits = _log2(sets)
        self.tag_width = wg_width - self.set_bits + wf_width
        self.entry_layout = data.StructLayout({"valid": 1, "tag": self.tag_width,
                                               "addr": addr_width, "count": count_width})
        self.ovf_layout = data.StructLayout({"valid": 1, "set": max(1, self.set_bits),
                                             "tag": self.tag_width, "addr": addr_width,
                                             "count": count_width})
        self.ulayout = update_layout(wg_width, wf_width, addr_width, n_width)
        self.tlayout = trigger_layout(wg_width, wf_width, addr_width)
        # internal item: an input update or a victim record (n = the victim's count)
        self.ilayout = update_layout(wg_width, wf_width, addr_width, max(n_width, count_width))
        super().__init__({
            "upd": In(stream.Signature(self.ulayout)),
            "trig": Out(stream.Signature(self.tlayout)),
            "threshold": In(count_width),
            "err_count": Out(16),
            "error": Out(1),
            "conflicts": Out(16),
            "evictions": Out(16),
            "stall": Out(1),
            "occupancy": Out(range(sets * ways + overflow + 1)),
            "busy": Out(1),
        })
        # observation points for the formal harness (not ports)
        self.f_idle = Signal()               # nothing in flight, both FIFOs empty
        self.f_apply_valid = Signal()        # an item is applied (S3) this cycle
        self.f_vfifo_level = Signal(range(victims + self.pipe + 1))
        self.f_vfifo_pop = Signal()

    def elaborate(self, platform):
        m = Module()
        W, P, sb = self.ways, self.n_ovf, self.set_bits
        Pv = max(P, 1)
        E = self.entry_layout
        RL, PIPE = self.read_latency, self.pipe
        if self.sets * E.size * W > 1024:
            m.submodules.sets = mem = SRAM(max(2, self.sets), E.size * W, read_latency=RL)
        else:                                # small: registers, same ports and read latency
            m.submodules.sets = mem = _RegSets(self.sets, E.size * W, read_latency=RL)
        set_layout = data.ArrayLayout(E, W)
        TD, VD = self.trig_depth + PIPE, self.victims + PIPE
        m.submodules.tfifo = tf = _fifo(self.tlayout.size, TD)
        m.submodules.vfifo = vf = _VictimFIFO(self.ilayout, VD)
        ovf = [Signal(self.ovf_layout, name=f"ovf{j}") for j in range(P)]

        def set_index(wg):
            return wg[:sb] if sb else Const(0, 1)

        def tag_of(it):
            return Cat(it.wf, it.wg[sb:])

        def hits(st, tag):
            return Cat(*[st[i].valid & (st[i].tag == tag) for i in range(W)])

        def frees(st):
            return Cat(*[~st[i].valid for i in range(W)])

        # ---- reset sweep -------------------------------------------------------------------
        clearing = Signal(init=1)
        clr_idx = Signal(range(self.sets))
        with m.If(clearing):
            m.d.sync += clr_idx.eq(clr_idx + 1)
            with m.If(clr_idx == self.sets - 1):
                m.d.sync += clearing.eq(0)
        m.d.comb += self.busy.eq(clearing)

        # ---- pipeline registers --------------------------------------------------------------
        v1, v2, v3, v4 = Signal(), Signal(), Signal(), Signal()
        s1, s2, s3 = Signal(self.ilayout), Signal(self.ilayout), Signal(self.ilayout)
        # read_latency=2: SA, the stage while the word passes the memory's output register
        va, sa = (Signal(name="va"), Signal(self.ilayout, name="sa")) if RL == 2 else (None, None)
        sa_vic = sa_1h = None                # (sa is assembled in SA: see S0)
        vpre = [va] if RL == 2 else []       # valid bits of the stages before S1
        # S4: the decision of the item that left S3, written this cycle
        w4_set_wr, w4_ovf_wr = Signal(), Signal()   # a set way / an overflow entry is written
        w4_idx = Signal(max(1, sb))
        w4_way = Signal(W)                   # which way (one-hot)
        w4_ovf = Signal(Pv)                  # which overflow entry (one-hot)
        w4_ent = Signal(E)                   # the entry written (valid = still live)
        w4_base = Signal(set_layout)         # the set before this write
        w4_trig, w4_err, w4_alloc, w4_oalloc, w4_evict, w4_free = (Signal(name=f"w4_{n}") for n in (
            "trig", "err", "alloc", "oalloc", "evict", "free"))
        w4_requeue = Signal()                # a victim record goes back to the FIFO
        w4_tword = Signal(self.tlayout)
        w4_vrec = Signal(self.ilayout)
        full4 = Signal(set_layout)           # the set as written this cycle
        for i in range(W):
            m.d.comb += full4[i].eq(Mux(w4_way[i], w4_ent, w4_base[i]))
        # write log: the sets written one and two (three with read_latency=2) cycles ago (the
        # read of S0 misses them) (S1 keeps the newest for S2 in ``log_set``: the S2 write log
        # is a register)
        wl0_wr = Signal()
        wl0_idx = Signal(max(1, sb))
        wl0_set = Signal(set_layout)
        m.d.sync += [wl0_wr.eq(w4_set_wr & ~clearing), wl0_idx.eq(w4_idx), wl0_set.eq(full4)]
        if RL == 2:                          # the write before wl0's
            wl1_wr = Signal()
            wl1_idx = Signal(max(1, sb))
            wl1_set = Signal(set_layout)
            m.d.sync += [wl1_wr.eq(wl0_wr & ~clearing), wl1_idx.eq(wl0_idx), wl1_set.eq(wl0_set)]

        # ---- S0: input or victim re-entry, set read ---------------------------------------
        inflight = sum(v.as_unsigned() for v in vpre) + v1 + v2 + v3 + v4
        # trigger-FIFO room: tcount = tf.level + inflight, kept in a register (its next
        # value from the next level and valid bits) so that take_vic -- which selects the
        # set-memory read address -- comes from registers through two LUT levels
        tcount = Signal(range(TD + PIPE + 1))
        trig_ok = tcount < TD
        vic_ok = (vf.level + inflight) < VD
        vturn = Signal()                     # victim FIFO gets every other cycle
        m.d.sync += vturn.eq(~vturn)
        vic_turn = vf.r_rdy & vturn
        take_vic = Signal()
        m.d.comb += [take_vic.eq(~clearing & vic_turn & trig_ok),
                     self.upd.ready.eq(~clearing & trig_ok & vic_ok & ~vic_turn),
                     self.stall.eq(~clearing & ~vic_ok),
                     vf.r_en.eq(take_vic)]
        s0 = Signal(self.ilayout)
        s0_upd = Signal(self.ilayout)        # the input update, widened
        m.d.comb += [s0_upd.wg.eq(self.upd.payload.wg), s0_upd.wf.eq(self.upd.payload.wf),
                     s0_upd.addr.eq(self.upd.payload.addr), s0_upd.n.eq(self.upd.payload.n),
                     s0_upd.src.eq(self.upd.payload.src)]
        m.d.comb += s0.eq(Mux(take_vic, vf.r_data, s0_upd))
        enter = take_vic | (self.upd.valid & self.upd.ready)
        if RL == 2:
            # the item is assembled in SA (timing: the victim FIFO's head multiplexer and merge
            # select are off the S0 path): an input update is registered; a victim record's
            # wg / wf come from the FIFO's head registers and the rest from its slot, read a
            # cycle after the pop (the slot keeps the popped record, merged if a push landed
            # into it in the pop cycle, and nothing writes it while the record is in SA)
            sa_upd = Signal(self.ilayout, name="sa_upd")
            sa_vic = Signal(name="sa_vic")
            sa_wg, sa_wf = Signal.like(s0.wg, name="sa_wg"), Signal.like(s0.wf, name="sa_wf")
            sa_1h = Signal(vf.depth, name="sa_1h")
            m.d.sync += [va.eq(enter), sa_upd.eq(s0_upd), sa_vic.eq(take_vic),
                         sa_wg.eq(Mux(take_vic, vf.r_wg, self.upd.payload.wg)),
                         sa_wf.eq(Mux(take_vic, vf.r_wf, self.upd.payload.wf)),
                         sa_1h.eq(vf.r_1h),
                         v1.eq(va & ~clearing), s1.eq(sa)]
            slot = Const(0, self.ilayout.size)
            for i in range(vf.depth):
                slot = slot | Mux(sa_1h[i], vf.q[i].as_value(), 0)
            m.d.comb += [sa.eq(Mux(sa_vic, slot, sa_upd.as_value())),
                         sa.wg.eq(sa_wg), sa.wf.eq(sa_wf)]
        else:
            m.d.sync += [v1.eq(enter), s1.eq(s0)]
        tf_push = tf.w_en & tf.w_rdy if hasattr(tf, "w_rdy") else tf.w_en
        m.d.sync += tcount.eq(tf.level + tf_push - (tf.r_en & tf.r_rdy)
                              + enter
                              + Mux(clearing, 0, sum(v.as_unsigned() for v in vpre)
                                    + v1 + v2 + v3))
        # (the read address from the victim FIFO's registered head wg: the same value as
        # s0.wg, one LUT level before the block RAMs)
        m.d.comb += [mem.r_en.eq(1),
                     mem.r_addr.eq(set_index(Mux(take_vic, vf.r_wg, self.upd.payload.wg)))]

        # ---- S1: set data arrives (registered as it is); the corrections S2 will need -------
        idx1, tag1 = set_index(s1.wg), tag_of(s1)
        rd2 = Signal(set_layout)
        f_log, f_w4, t_w4 = Signal(), Signal(), Signal()
        log_set = Signal(set_layout)         # the newest write-log set, for S2
        h_mem = Signal(W)                    # hits(rd2, S2's tag), registered with rd2
        h_logr, fr_log = Signal(W), Signal(W)
        # in S2, the write log's wl1 / wl0 are today's wl0 / S4 write, S4 is today's S3 item;
        # the newer of the two that wrote this set is selected here (timing: S2 sees one
        # registered set word besides the memory's)
        if RL == 2:
            # the item's set index and tag compared with the logged writes one cycle ahead, in
            # SA (timing: S1's log select then starts from registered match bits, and only
            # this cycle's S4 write is tag-compared in S1): in S1, wl1 / wl0 / the S4 write are
            # SA's wl0 / S4 write / S3 item, the S3 item's write decided in SA's cycle
            idxa, taga = set_index(sa.wg), tag_of(sa)
            e_w0, e_w1, e_w2 = Signal(), Signal(), Signal()     # set matches in S1
            hl1, hl2, fl1, fl2 = Signal(W), Signal(W), Signal(W), Signal(W)
            m.d.sync += [e_w0.eq(set_index(s3.wg) == idxa), e_w1.eq(w4_idx == idxa),
                         e_w2.eq(wl0_idx == idxa),
                         hl1.eq(hits(full4, taga)), fl1.eq(frees(full4)),
                         hl2.eq(hits(wl0_set, taga)), fl2.eq(frees(wl0_set))]
            n_wl0 = w4_set_wr & e_w0
            n_wl1 = wl0_wr & e_w1
            n_wl2 = wl1_wr & e_w2
            old_set = set_layout(Mux(n_wl1, wl0_set, wl1_set))   # the newest before S4's
            old_hits, old_frees = Mux(n_wl1, hl1, hl2), Mux(n_wl1, fl1, fl2)
            f_log_n = n_wl0 | n_wl1 | n_wl2
        else:
            n_wl1 = wl0_wr & (wl0_idx == idx1)
            n_wl0 = w4_set_wr & (w4_idx == idx1)
            old_set = set_layout(wl0_set)
            old_hits, old_frees = hits(old_set, tag1), frees(old_set)
            f_log_n = n_wl0 | n_wl1
        m.d.sync += [
            rd2.eq(mem.r_data),
            # the memory word's tag compares, made on the read data as it arrives (timing:
            # S2's count select then starts from registered hit bits)
            h_mem.eq(hits(set_layout(mem.r_data), tag1)),
            f_log.eq(f_log_n),
            log_set.eq(Mux(n_wl0, full4, old_set)),
            h_logr.eq(Mux(n_wl0, hits(full4, tag1), old_hits)),
            fr_log.eq(Mux(n_wl0, frees(full4), old_frees)),
            f_w4.eq(v3 & (set_index(s3.wg) == idx1)), t_w4.eq(tag_of(s3) == tag1),
            v2.eq(v1 & ~clearing), s2.eq(s1)]
        # the S2 item's set / tile compared with the item ahead of it (S3) one cycle early, here
        # with the S2 item (timing: S3's loop registers select with these from registers)
        p_set, p_tag = Signal(), Signal()
        m.d.sync += [p_set.eq(v2 & ~clearing & (set_index(s2.wg) == idx1)),
                     p_tag.eq(tag_of(s2) == tag1)]
        # threshold - n of the item entering S2 (``room2``: S2 compares every candidate count
        # with it, from registers), and threshold - n(S3) - n(S2) of the pair entering S3 / S2
        # (``pr``: in S3 the item ahead's count is compared with it, for the item behind it,
        # whose count is then the one the item ahead writes).  Signed: n may exceed the
        # threshold (an over-count; room2 is used only when it does not).
        room2 = Signal(self.count_width)
        NW = max(self.count_width, len(s1.n)) + 2
        pr = Signal(signed(NW))
        pr_a, pr_b = Signal(signed(NW)), Signal(signed(NW))
        m.d.comb += [pr_a.eq(room2), pr_b.eq(s1.n)]
        m.d.sync += [room2.eq(self.threshold - s1.n), pr.eq(pr_a - pr_b)]
        # overflow-entry tag compares for S2, against the entries as they will be then (this
        # cycle's S4 write applied; timing: off the S2 select path)
        ohit_r = Signal(Pv)
        for j in range(P):
            m.d.sync += ohit_r[j].eq(Mux(w4_ovf_wr & w4_ovf[j],
                                         w4_ent.valid & (w4_idx == idx1) & (w4_ent.tag == tag1),
                                         ovf[j].valid & (ovf[j].set == idx1) & (ovf[j].tag == tag1)))

        # ---- S2: the set as it is (write log, then the S4 write), tag compare, hit selection ---
        idx2, tag2 = set_index(s2.wg), tag_of(s2)
        base2 = Signal(set_layout)           # every write before this cycle's
        hit_b, free_b = Signal(W), Signal(W)
        with m.If(f_log):                    # (also the read that collided with that write)
            m.d.comb += [base2.eq(log_set), hit_b.eq(h_logr), free_b.eq(fr_log)]
        with m.Else():
            m.d.comb += [base2.eq(rd2), hit_b.eq(h_mem), free_b.eq(frees(rd2))]
        c4 = f_w4 & w4_set_wr                # this cycle's write is to this set
        ent2 = Signal(set_layout)
        hit2, free2 = Signal(W), Signal(W)
        for i in range(W):
            ov = c4 & w4_way[i]
            m.d.comb += [ent2[i].eq(Mux(ov, w4_ent, base2[i])),
                         hit2[i].eq(Mux(ov, w4_ent.valid & t_w4, hit_b[i])),
                         free2[i].eq(Mux(ov, ~w4_ent.valid, free_b[i]))]
        ohit2, ofree2 = Signal(Pv), Signal(Pv)
        ocnt2 = [Signal(self.count_width, name=f"ocnt2_{j}") for j in range(P)]
        oaddr2 = [Signal(self.addr_width, name=f"oaddr2_{j}") for j in range(P)]
        for j in range(P):
            ov = w4_ovf_wr & w4_ovf[j]
            m.d.comb += [
                ohit2[j].eq(Mux(ov, w4_ent.valid & f_w4 & t_w4, ohit_r[j])),
                ofree2[j].eq(Mux(ov, ~w4_ent.valid, ~ovf[j].valid)),
                ocnt2[j].eq(Mux(ov, w4_ent.count, ovf[j].count)),
                oaddr2[j].eq(Mux(ov, w4_ent.addr, ovf[j].addr))]
        # the hit entry's count and address, = OR_i(hit2[i] & ent2[i]) | overflow, split by
        # source (timing: only the memory word's tag compare and an AND-OR over its ways lie
        # between rd2 and s3_count/s3_addr; the write log, this cycle's S4 write and the
        # overflow entries -- all registers -- are selected beside it and OR-ed in last)
        ov_w = Signal(W)                     # ways this cycle's S4 write replaces
        m.d.comb += ov_w.eq(Mux(c4, w4_way, 0))
        h_rd = Signal(W)                     # hits in the memory word (when it is the newest)
        m.d.comb += h_rd.eq(h_mem & ~ov_w & Mux(f_log, 0, (1 << W) - 1))
        h_log = Signal(W)                    # hits in the write log's newest set
        m.d.comb += h_log.eq(h_logr & ~ov_w & Mux(f_log, (1 << W) - 1, 0))
        w4_hit2 = c4 & w4_ent.valid & t_w4   # the S4 write leaves this tile in a way
        sel_count = Mux(w4_hit2, w4_ent.count, 0)
        sel_addr = Mux(w4_hit2, w4_ent.addr, 0)
        for i in range(W):
            sel_count = sel_count | Mux(h_log[i], log_set[i].count, 0)
            sel_addr = sel_addr | Mux(h_log[i], log_set[i].addr, 0)
        for j in range(P):
            sel_count = sel_count | Mux(ohit2[j], ocnt2[j], 0)
            sel_addr = sel_addr | Mux(ohit2[j], oaddr2[j], 0)
        for i in range(W):
            sel_count = Mux(h_rd[i], rd2[i].count, 0) | sel_count
            sel_addr = Mux(h_rd[i], rd2[i].addr, 0) | sel_addr
        # the hit count compared with threshold - n: every candidate compared (from registers,
        # in parallel), the compare bits selected with the same hit bits (timing: no compare
        # after the count select here, none in S3's decision)
        g_w4, e_w4 = w4_ent.count > room2, w4_ent.count == room2
        sel_gt, sel_eq = w4_hit2 & g_w4, w4_hit2 & e_w4
        for i in range(W):
            sel_gt = sel_gt | (h_log[i] & (log_set[i].count > room2))
            sel_eq = sel_eq | (h_log[i] & (log_set[i].count == room2))
        for j in range(P):
            ov = w4_ovf_wr & w4_ovf[j]
            sel_gt = sel_gt | (ohit2[j] & Mux(ov, g_w4, ovf[j].count > room2))
            sel_eq = sel_eq | (ohit2[j] & Mux(ov, e_w4, ovf[j].count == room2))
        for i in range(W):
            sel_gt = (h_rd[i] & (rd2[i].count > room2)) | sel_gt
            sel_eq = (h_rd[i] & (rd2[i].count == room2)) | sel_eq
        # the item ahead (in S3 now) is written in S4 while this one is in S3: flags for S3
        same_set2 = p_set                    # = v3 & (set_index(s3.wg) == idx2)
        same_tile2 = p_set & p_tag           # = same_set2 & (tag_of(s3) == tag2)

        s3_base = Signal(set_layout)
        s3_hit, s3_free = Signal(W), Signal(W)
        s3_ohit, s3_ofree = Signal(Pv), Signal(Pv)
        s3_count, s3_addr = Signal(self.count_width), Signal(self.addr_width)
        s3_same_set, s3_same_tile = Signal(), Signal()
        # v3 & ~s3_n_over (timing: the decision starts from one register)
        s3_kok = Signal()
        # the count compares, registered: the selected count vs threshold - n (s3_gt / s3_eq),
        # and the count the item ahead writes vs threshold - n (s3_fgt / s3_feq, from S3 below)
        s3_gt, s3_eq, s3_fgt, s3_feq = (Signal(name=f"s3_{x}") for x in ("gt", "eq", "fgt", "feq"))
        s3_room0 = Signal()                         # n == threshold
        s3_n_over = Signal()                        # n > threshold: over-count even on a miss
        m.d.sync += [s3_gt.eq(sel_gt), s3_eq.eq(sel_eq), s3_room0.eq(s2.n == self.threshold),
                     s3_n_over.eq(s2.n > self.threshold),
                     s3_kok.eq(v2 & ~clearing & ~(s2.n > self.threshold))]
        # (s3_hit / s3_free / s3_ohit / s3_ofree are registered below, after the S3 decision:
        # already corrected for the write of the item now in S3)
        m.d.sync += [v3.eq(v2 & ~clearing), s3.eq(s2), s3_base.eq(ent2),
                     s3_count.eq(sel_count), s3_addr.eq(sel_addr),
                     s3_same_set.eq(same_set2), s3_same_tile.eq(same_tile2)]

        # ---- S3: correct for the write of the item ahead (now in S4), count, decide -----------
        idx3, tag3 = set_index(s3.wg), tag_of(s3)
        ss = s3_same_set & w4_set_wr
        fwd = s3_same_tile & (w4_set_wr | w4_ovf_wr) & w4_ent.valid  # ahead left this tile live
        kok = s3_kok                         # = v3 & ~s3_n_over
        # the hit / free vectors as they are now (the S4 write already applied: registered so,
        # see below; timing: the decision starts from registers)
        hit_v, free_v, ohit_v, ofree_v = s3_hit, s3_free, s3_ohit, s3_ofree
        base = Signal(set_layout)            # the set as it is now
        for i in range(W):
            m.d.comb += base[i].eq(Mux(ss & w4_way[i], w4_ent, s3_base[i]))
        shit, ohit = hit_v.any(), ohit_v.any()
        hit = shit | ohit
        # the hit entry's count/address is the S4 write's (fwd) or the one selected in S2; the
        # comparisons and sums run on both candidates in parallel, then select
        cnt_f, cnt_s = w4_ent.count, s3_count
        new_cnt = Signal(len(s3.n) + 1)
        m.d.comb += new_cnt.eq(Mux(hit, Mux(fwd, cnt_f + s3.n, cnt_s + s3.n), s3.n))
        lt_f, lt_s = s3.addr < w4_ent.addr, s3.addr < s3_addr
        new_min = Signal(self.addr_width)
        m.d.comb += new_min.eq(Mux(hit & ~Mux(fwd, lt_f, lt_s), Mux(fwd, w4_ent.addr, s3_addr),
                                   s3.addr))
        old_gt = Mux(fwd, s3_fgt, s3_gt)                      # cnt_old > threshold - n
        old_eq = Mux(fwd, s3_feq, s3_eq)                      # cnt_old == threshold - n
        over = s3_n_over | (hit & old_gt)                     # cnt_old + n > threshold
        done = ~s3_n_over & Mux(hit, old_eq, s3_room0)        # cnt_old + n == threshold
        # for the item behind (in S2): the count this item leaves (new_cnt, written in S4: the
        # item behind's forwarded count) + its n > threshold, i.e. this item's old count (0 on
        # a miss) > threshold - n - n_behind (``pr``); registered (timing: S3's decision
        # starts from compare bits)
        m.d.sync += [s3_fgt.eq(Mux(hit, Mux(fwd, cnt_f > pr, cnt_s > pr), pr < 0)),
                     s3_feq.eq(Mux(hit, Mux(fwd, cnt_f == pr, cnt_s == pr), pr == 0))]
        free_1h = Signal(W)
        m.d.comb += free_1h.eq(free_v & -free_v)            # lowest free way
        ofree_1h = Signal(Pv)
        m.d.comb += ofree_1h.eq(ofree_v & -ofree_v)
        vptr = Signal(W, init=1)             # round-robin victim way (one-hot)
        act_trig, act_err, act_free, act_upd = Signal(), Signal(), Signal(), Signal()
        act_alloc, act_oalloc, act_evict, act_requeue = Signal(), Signal(), Signal(), Signal()
        # the decision, flat: one term per action (timing: the miss actions -- allocate,
        # overflow-allocate, requeue, evict -- need none of the hit-count compares)
        miss_go = kok & ~hit & ~s3_room0     # a miss that neither triggers nor errs
        h_ok = kok & hit & ~old_gt           # a hit applied (trigger or update; = v3 & hit & ~over)
        fa, foa = free_v.any(), ofree_v.any() & (P > 0)
        is_rec = s3.src == SRC_VICTIM                       # a record does not evict: requeued
        m.d.comb += [act_err.eq(v3 & over), act_trig.eq(v3 & ~over & done),
                     act_free.eq(h_ok & old_eq), act_upd.eq(h_ok & ~old_eq),
                     act_alloc.eq(miss_go & fa), act_oalloc.eq(miss_go & ~fa & foa),
                     act_requeue.eq(miss_go & ~fa & ~foa & is_rec),
                     act_evict.eq(miss_go & ~fa & ~foa & ~is_rec)]
        # which slot this item writes (from the hit/free vectors only; the victim way when no
        # way is free -- written only on an eviction)
        way_1h = Signal(W)
        ovf_1h = Signal(Pv)
        m.d.comb += [way_1h.eq(Mux(shit, hit_v, Mux(free_v.any(), free_1h, vptr))),
                     ovf_1h.eq(Mux(ohit, ohit_v, ofree_1h))]
        set_wr = (h_ok & shit) | act_alloc | act_evict          # (h_ok = act_free | act_upd)
        ovf_wr = (h_ok & ohit & ~shit) | act_oalloc
        live = ~act_free
        new_entry = Signal(E)
        m.d.comb += [new_entry.valid.eq(live), new_entry.tag.eq(tag3),
                     new_entry.addr.eq(new_min), new_entry.count.eq(new_cnt)]
        # eviction: the victim way's tile leaves as a record that re-enters through S0
        victim = Signal(E)
        vacc = Const(0, E.size)
        for i in range(W):
            vacc = vacc | Mux(vptr[i], base[i].as_value(), 0)
        m.d.comb += victim.eq(vacc)
        vrec = Signal(self.ilayout)
        # (selected by the item's kind, not by the decision: a record is only ever requeued,
        # an input update only ever evicts; timing: the record is off the decision path)
        with m.If(is_rec):
            m.d.comb += [vrec.eq(s3), vrec.src.eq(SRC_VICTIM)]
        with m.Else():
            m.d.comb += [vrec.wf.eq(victim.tag[:self.wf_width]),
                         vrec.wg.eq(Cat(idx3[:sb], victim.tag[self.wf_width:]) if sb
                                    else victim.tag[self.wf_width:]),
                         vrec.addr.eq(victim.addr), vrec.n.eq(victim.count),
                         vrec.src.eq(SRC_VICTIM)]
        # the item in S2 enters S3 with its hit / free vectors corrected for this item's write
        # (which is S4's when it is in S3; same values as correcting them there from w4_*,
        # one cycle earlier -- timing: w4_way -> hit -> decision was the critical path)
        # Written per way as sums of products of registers (the same values as
        # Mux(nx_ss, (hit2 & ~way_1h) | Mux(nx_live, way_1h, 0), hit2) etc. with nx_ss = same_set2
        # & set_wr, nx_live = same_tile2 & live; timing: no OR-reduction feeds a mux select
        # and no decision signal feeds a wide select in this one-cycle loop).  Way i is written
        # by a hit applied there (hu: stays live, hf: freed) or by a miss allocating / evicting
        # into it (ma: live); overflow entry j likewise (ohu, ohf, oma).
        nofree = ~fa & ~foa
        keep_i = kok & ~old_gt                          # a hit applied
        ss2, st2 = same_set2 & ~clearing, same_tile2 & ~clearing
        hu, hf, ma = Signal(W), Signal(W), Signal(W)
        for i in range(W):
            m.d.comb += [hu[i].eq(hit_v[i] & keep_i & ~old_eq),
                         hf[i].eq(hit_v[i] & keep_i & old_eq),
                         ma[i].eq(miss_go & (free_1h[i] | (nofree & ~is_rec & vptr[i])))]
        wr_i = hu | hf | ma                             # = way_1h & set_wr
        m.d.sync += [
            s3_hit.eq((hit2 & ~Mux(ss2, wr_i, 0)) | Mux(st2, hu | ma, 0)),
            s3_free.eq((free2 & ~Mux(ss2, wr_i, 0)) | Mux(ss2, hf, 0))]
        if P:
            ohu, ohf, oma = Signal(P), Signal(P), Signal(P)
            for j in range(P):
                m.d.comb += [ohu[j].eq(ohit_v[j] & ~shit & keep_i & ~old_eq),
                             ohf[j].eq(ohit_v[j] & ~shit & keep_i & old_eq),
                             oma[j].eq(miss_go & ~fa & ofree_1h[j])]
            ow_j = ohu | ohf | oma                      # = ovf_1h & ovf_wr
            m.d.sync += [
                s3_ohit.eq((ohit2 & ~Mux(clearing, 0, ow_j)) | Mux(st2, ohu | oma, 0)),
                s3_ofree.eq((ofree2 & ~Mux(clearing, 0, ow_j)) | Mux(clearing, 0, ohf))]
        with m.If(act_evict):
            m.d.sync += vptr.eq(Cat(vptr[-1], vptr[:-1]) if W > 1 else vptr)
        trig_word = Signal(self.tlayout)
        m.d.comb += [trig_word.wg.eq(s3.wg), trig_word.wf.eq(s3.wf), trig_word.addr.eq(new_min)]
        m.d.sync += [v4.eq(v3 & ~clearing),
                     w4_set_wr.eq(set_wr & ~clearing), w4_ovf_wr.eq(ovf_wr & ~clearing),
                     w4_idx.eq(idx3), w4_way.eq(way_1h), w4_ovf.eq(ovf_1h), w4_ent.eq(new_entry),
                     w4_base.eq(base), w4_trig.eq(act_trig), w4_err.eq(act_err),
                     w4_alloc.eq(act_alloc), w4_oalloc.eq(act_oalloc), w4_evict.eq(act_evict),
                     w4_requeue.eq(act_requeue),
                     w4_free.eq(act_free), w4_tword.eq(trig_word), w4_vrec.eq(vrec)]

        # ---- S4: write the set and the overflow entry, push trigger / victim, count -----------
        with m.If(clearing):
            m.d.comb += [mem.w_addr.eq(clr_idx), mem.w_data.eq(0), mem.w_en.eq(1)]
        with m.Else():
            m.d.comb += [mem.w_addr.eq(w4_idx), mem.w_data.eq(full4), mem.w_en.eq(w4_set_wr)]
        for j in range(P):
            with m.If(clearing):
                m.d.sync += ovf[j].valid.eq(0)
            with m.Elif(w4_ovf_wr & w4_ovf[j]):
                m.d.sync += [ovf[j].valid.eq(w4_ent.valid), ovf[j].set.eq(w4_idx),
                             ovf[j].tag.eq(w4_ent.tag), ovf[j].addr.eq(w4_ent.addr),
                             ovf[j].count.eq(w4_ent.count)]
        m.d.comb += [vf.w_data.eq(w4_vrec), vf.w_en.eq(w4_evict | w4_requeue),
                     tf.w_data.eq(w4_tword), tf.w_en.eq(w4_trig)]
        m.d.comb += [self.trig.valid.eq(tf.r_rdy), self.trig.payload.eq(tf.r_data),
                     tf.r_en.eq(self.trig.ready)]

        # counters
        err, conf, evc = Signal(16), Signal(16), Signal(16)
        occ = Signal(range(self.sets * W + P + 1))
        with m.If(w4_err & (err != 0xFFFF)):
            m.d.sync += err.eq(err + 1)
        with m.If(w4_oalloc & (conf != 0xFFFF)):
            m.d.sync += conf.eq(conf + 1)
        with m.If(w4_evict & (evc != 0xFFFF)):
            m.d.sync += evc.eq(evc + 1)
        with m.If(w4_alloc | w4_oalloc):
            m.d.sync += occ.eq(occ + 1)
        with m.Elif(w4_free):
            m.d.sync += occ.eq(occ - 1)
        m.d.comb += [self.err_count.eq(err), self.error.eq(err != 0), self.conflicts.eq(conf),
                     self.evictions.eq(evc), self.occupancy.eq(occ)]
        m.d.comb += [self.f_idle.eq((inflight == 0) & ~tf.r_rdy & ~vf.r_rdy & ~vf.pending),
                     self.f_apply_valid.eq(v3), self.f_vfifo_level.eq(vf.level),
                     self.f_vfifo_pop.eq(take_vic)]
        # the state and pipeline, for the formal harness's invariants (hdl/t3/formal.py)
        self.fv = SimpleNamespace(
            mem=mem, tf=tf, vf=vf, ovf=ovf, clearing=clearing, vptr=vptr,
            v=(*vpre, v1, v2, v3, v4), s=(*([sa] if RL == 2 else []), s1, s2, s3),
            wlog=[(wl0_wr, wl0_idx, wl0_set)] + ([(wl1_wr, wl1_idx, wl1_set)] if RL == 2 else []),
            rd2=rd2, sa_vic=sa_vic if RL == 2 else None, sa_1h=sa_1h if RL == 2 else None,
            w4_set_wr=w4_set_wr, w4_ovf_wr=w4_ovf_wr, w4_idx=w4_idx,
            w4_ovf=w4_ovf, w4_ent=w4_ent, full4=full4, w4_trig=w4_trig, w4_err=w4_err,
            w4_evict=w4_evict, w4_requeue=w4_requeue, w4_tword=w4_tword, w4_vrec=w4_vrec,
            tcount=tcount, set_layout=set_layout, set_index=set_index, tag_of=tag_of,
            # the registered count compares (S2 -> S3) and their operands
            room2=room2, pr=pr, s3_gt=s3_gt, s3_eq=s3_eq, s3_fgt=s3_fgt, s3_feq=s3_feq,
            s3_room0=s3_room0, s3_count=s3_count, s3_hit_any=hit, s3_fwd=fwd, s3_kok=s3_kok,
            p_set=p_set, p_tag=p_tag, s3_same_tile=s3_same_tile, s3_n_over=s3_n_over)
        return m
