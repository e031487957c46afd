"""Simba PE node: the PE (:class:`tessera.hdl.pe.SimbaPE`) behind its network
interface (NI) on one NoC port.

Simba §3.1 "Simba PE" / "Simba interconnect": each PE has a router port; it
receives weights, activations (the Global PE's multicast) and partial sums,
and sends partial sums to the next PE of its reduction chain or output
activations to a Global PE.  Packet formats and the register map:
:mod:`.packets` (README table).  Block ``pe_node``.

What the NI does (packets on ``net_in``, one flit per cycle):

* ``CFG``: register write (map in :mod:`.packets`).  Writes other than
  ``clear`` while the node runs are ignored (sticky ``cfg_busy``).  ``start``
  runs ``ntiles`` tiles: 4 cycles later the PE's configuration check
  (``cfg_cause``) is sampled; an illegal configuration sends DONE with the
  PE's :class:`~tessera.hdl.pe.config.ErrorCause` as code and puts the node in
  *discard* mode (DATA and PSUM words are dropped with their credits returned,
  so no producer hangs) until the next ``start``/``clear``.
* ``WLOAD``/``PLOAD``: body flits -> the PE's ``w_load``/``p_load`` at
  (addr, row) auto-incrementing row-fastest, through one register stage (a
  beat reaches the PE the cycle after its flit); only while the node is not
  running, else the packet is consumed and ``load_busy`` set.
* ``DATA``: body words -> receive FIFO (an :class:`SRAM`, ``credit_window x
  max_tile`` words: the Global PE's credits guarantee space, so a DATA flit is
  never refused) -> the PE's ``i_load`` at consecutive addresses of the input
  region being filled; one ``CREDIT`` (count 1) to the packet's ``src`` when
  its last word has left the FIFO.  With ``credit_batch`` = n > 1 the NI
  coalesces: completed packets of one ``src`` are counted and acknowledged by
  one ``CREDIT`` (count = the packets counted) when n are counted, when a
  packet of another ``src`` completes, or ``CREDIT_FLUSH_CYCLES`` cycles
  after the last one was counted -- so the
  Global PE's NoC ejection port sees one credit flit per n packets per
  member instead of one per packet (a 16-member multicast of 5-flit DATA
  packets otherwise returns 16 credit flits per 5 flits sent, issue 17).  The
  flush timer bounds the delay, so a Global PE waiting for credits always gets
  them (n <= credit_window).  The word stream is cut into tiles of
  ``C1*H_in*W_in`` words (packets may span tiles).  DATA that arrives before
  ``start`` waits in the FIFO.
* ``PSUM``: beats (``psum_flits`` flits each) -> psum FIFO (``psum_window x
  psum_beats`` beats, reserved by the sender's credits) -> the PE's
  ``psum_in``; one ``PCREDIT`` to the packet's ``src`` when its last beat has
  left the FIFO.
* ``PCREDIT``: adds to this node's psum credits (``psum_window`` packets at
  reset; never reset by ``start``: credits in flight stay valid).
* anything else (unknown kind/ext, a body flit outside a packet, OUT/CREDIT
  kinds): consumed up to its tail, sticky ``bad_packet``.

Tile sequencing (input overlap): when a tile fits half the PE's input buffer
(``C1*H_in*W_in <= ibuf_words/2``, decided at ``start``) the NI alternates the
two halves (:func:`ibuf_plan`, the PE's ``ibuf_half`` LOWER/UPPER): tile t+1
is loaded into one half while tile t computes from the other, so the Global
PE's multicast overlaps compute; a larger tile uses the WHOLE buffer and is
loaded only while the PE is idle.  A region is filled from the FIFO while it
holds no tile waiting to start (double-buffered: also while its tile drains;
the PE's ``i_load`` refuses words for a half a tile still reads, so tile t+2
loads as soon as tile t has issued its last operation, not after its done);
the PE starts on the oldest full region as soon as it takes a start.  The PE's results (``out`` for LAST/ONLY, ``psum_out`` for
FIRST/MIDDLE) go to one staging FIFO and leave as packets that never span a
tile: ``OUT`` packets of up to ``out_words`` beats to ``out_dest`` with
addresses ``out_base + t*out_tile_stride + b`` (``out_words`` defaults to
the Global PE's ``max_tile``: the routers already carry ``max_tile + 1``-flit
DATA packets, and 16 beats per head flit keeps the header overhead at 6 %),
``PSUM`` packets of up to ``psum_beats`` beats to ``psum_dest`` (a packet
leaves only with a psum credit).  A packet starts only when all its beats are
staged, so the node never holds a router path while the PE computes.  After
the last tile's last packet: ``DONE`` (code 0) to ``done_dest``.

Message classes and deadlock freedom: bulk packets (DATA, PSUM, OUT, WLOAD,
PLOAD) in class 0 (the Global PE's ``DATA_CLASS``), one-flit control (CFG,
DONE, CREDIT, PCREDIT) in the highest class (:func:`.packets.node_class`).
The router's ejection port is shared by all classes (held head to tail), so
the argument is on the sinks: every sink on the chiplet takes every flit
addressed to it within a bounded time that does not depend on the network --
this NI (DATA and PSUM into space reserved by credits, loads into the idle
PE at one flit per cycle, everything else at once), the controller (always
ready), the Global PE (its network input waits only while a kept OUT word
waits for its bank's write grant, recv.py; the bank arbiters are
round-robin and grant a held request within (requesters) cycles, buffer.py),
the host on the gateway (the testbench sinks ``host_out``).  So no packet
of one class can wait at a sink for a packet of another class, and the NI's
``net_in`` never waits for its ``net_out``.  The classes then only keep the
credit loop's one-flit packets from queueing behind bulk data in the routers'
buffers.

Ports (``wiring.Component``; flits = :func:`~tessera.hdl.global_pe.packets.net_flit_layout`):

* ``net_in`` (In stream): flits from the router's local output.
* ``net_out`` (Out stream): flits to the router's local input (every packet
  is sent contiguously, head to tail).
* ``node_id`` (In): this node's address (``src`` of its packets; its
  ``chiplet`` is the chiplet of every destination register).
* ``running`` (Out): from ``start`` until the DONE flit is queued.
* ``err`` (Out, :func:`err_layout`): sticky error flags (reset / ``clear``).
* ``done_code`` (Out 8): code of the last DONE sent.
* ``tiles`` (Out 16): tiles the PE finished in the current/last run.
* ``pe_busy`` (Out): the PE is computing a tile.

Left out: register read-back, multicast psum (destinations on other chiplets: bit 31 of the
register, packets.dest_value), aborting a run, the PE's ``rst`` abort.
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from tessera.hdl.global_pe.packets import (KIND_CREDIT, KIND_DATA, KIND_OUT, GpeConfig,
                                           credit_layout, data_header_layout, net_flit_layout,
                                           node_address_layout, out_header_layout)
from tessera.hdl.pe.arith import lut_mul
from tessera.hdl.pe.config import Role
from tessera.hdl.pe.layouts import bits_for, psum_layout
from tessera.hdl.pe.pe import SimbaPE, validate_params as validate_pe
from tessera.hdl.sram import SRAM
from tessera.params import ParamError

from .packets import (CFG_FIELDS, DONE_OK, EXT_CFG, EXT_DONE, EXT_PCREDIT, EXT_PLOAD, EXT_PSUM,
                      EXT_WLOAD, KIND_EXT, PE_CFG_FIELDS, REGS, PeNodeConfig, cfg_layout,
                      ctrl_class, done_layout, load_head_layout, pcredit_layout,
                      pload_body_layout, psum_head_layout)

PREP_CYCLES = 4          # start -> configuration check (pipelined tile-size products settle)


def err_layout() -> data.StructLayout:
    return data.StructLayout({
        "load_busy": 1,      # WLOAD/PLOAD while running (consumed)
        "cfg_busy": 1,       # CFG write (not clear) while running (ignored)
        "bad_reg": 1,        # CFG to an unknown register
        "bad_packet": 1,     # unknown kind/ext, stray body flit, length mismatch, DATA > max_tile
        "data_overflow": 1,  # DATA word/packet with the receive FIFO full (credit violation)
        "psum_overflow": 1,  # PSUM beat/packet with the psum FIFO full (credit violation)
        "credit_overflow": 1,  # PCREDIT beyond psum_window
    })


def pow2_at_least(n: int) -> int:
    return 1 << max(1, (n - 1).bit_length())


def validate(c: PeNodeConfig) -> None:
    def need(cond, name, msg):
        if not cond:
            raise ParamError(name, msg)
    validate_pe(c.pe)
    need(c.word_bits == 8 * c.C0 == 8 * c.K0, "word_bits",
         f"must equal 8*C0 = 8*K0 (one flit = one input word = one output beat), got "
         f"word_bits={c.word_bits}, C0={c.C0}, K0={c.K0}")
    for k in ("node_mesh_x", "node_mesh_y", "chiplet_mesh_x", "chiplet_mesh_y"):
        need(1 <= getattr(c, k) <= 8, k, f"must be in 1..8, got {getattr(c, k)}")
    need(1 <= c.classes <= 8, "classes", f"must be in 1..8, got {c.classes}")
    need(1 <= c.credit_window <= 64, "credit_window", f"must be in 1..64, got {c.credit_window}")
    need(1 <= c.max_tile <= 255, "max_tile", f"must be in 1..255, got {c.max_tile}")
    need(1 <= c.psum_window <= 64, "psum_window", f"must be in 1..64, got {c.psum_window}")
    need(1 <= c.psum_beats <= 255, "psum_beats", f"must be in 1..255, got {c.psum_beats}")
    need(1 <= c.out_words <= 255, "out_words", f"must be in 1..255, got {c.out_words}")
    need(1 <= c.credit_batch <= c.credit_window, "credit_batch",
         f"must be in 1..credit_window={c.credit_window}, got {c.credit_batch}")


#: cycles without a completed DATA packet after which coalesced credits are sent (credit_batch > 1)
CREDIT_FLUSH_CYCLES = 16


def ibuf_plan(m, pe, dbl, slot):
    """The one place that knows the PE's input double buffer (hdl/pe/config.py
    ``ibuf_half``): a tile that fits half the input buffer (``dbl``) reads
    region ``slot`` (LOWER/UPPER, base ``slot * ibuf_words/2``) and the PE
    accepts ``i_load`` into the other half while it computes; a larger tile
    reads the WHOLE buffer (loads only while the PE is idle).  Returns the
    region's base word address (the NI fills region ``1 - slot``)."""
    from tessera.hdl.pe.config import IbufHalf
    half = pe.params.ibuf_words // 2
    m.d.comb += pe.cfg.ibuf_half.eq(Mux(dbl, Mux(slot, IbufHalf.UPPER, IbufHalf.LOWER),
                                        IbufHalf.WHOLE))
    return Mux(dbl & slot, half, 0)


class SramFifo(wiring.Component):
    """Stream FIFO on an :class:`SRAM` (``depth`` words, power of two) plus an
    output register: capacity ``depth + 1``; one word per cycle in and out;
    a word written in cycle c can leave at c + 2.  ``level`` = words held.
    Timing (issue 20, pe_node on ECP5-85k grade 6, 76.6-86.7 MHz over three
    runs): the psum FIFO's read (the PE's ``psum_in.ready``) -> count is the
    critical path, 6 LUT levels but ~11 ns of routing (the PE's drain and this
    FIFO sit far apart); cut by the skid register behind the psum FIFO in
    :class:`_CreditedRx` (same cycles, same PCREDITs)."""

    def __init__(self, width: int, depth: int):
        assert depth >= 2 and depth & (depth - 1) == 0
        self.width, self.depth = width, depth
        super().__init__({"w": In(stream.Signature(width)), "r": Out(stream.Signature(width)),
                          "level": Out(range(depth + 2))})

    def elaborate(self, platform):
        m = Module()
        D = self.depth
        m.submodules.mem = mem = SRAM(D, self.width)
        wp, rp = Signal(range(D)), Signal(range(D))
        cnt = Signal(range(D + 1))
        ov = Signal()
        push = Signal()
        rd = Signal()
        nf = Signal(init=1)             # cnt != D, a register (timing, below)
        ne = Signal()                   # cnt != 0, a register
        lvl = Signal(range(D + 2))      # cnt + ov, a register
        m.d.comb += [self.w.ready.eq(nf), push.eq(self.w.valid & self.w.ready),
                     mem.w_en.eq(push), mem.w_addr.eq(wp), mem.w_data.eq(self.w.payload),
                     rd.eq(ne & (~ov | self.r.ready)),
                     mem.r_en.eq(rd), mem.r_addr.eq(rp),
                     self.r.valid.eq(ov), self.r.payload.eq(mem.r_data),
                     self.level.eq(lvl)]
        # cnt + push - rd as an up/down counter: cnt + 1 and cnt - 1 come from the
        # register alone and push / rd only select (timing: the PE's psum_in.ready
        # drives rd, the NI's packet decode drives push; neither goes through a carry
        # chain; same values)
        inc, dec = Signal.like(cnt), Signal.like(cnt)
        m.d.comb += [inc.eq(cnt + 1), dec.eq(cnt - 1)]
        m.d.sync += [cnt.eq(Mux(push == rd, cnt, Mux(push, inc, dec))),
                     ov.eq(rd | (ov & ~self.r.ready))]
        # w.ready = (cnt != D) as a register (``nf``), its next value from the register's
        # compare and push / rd only selecting (timing: w.ready selects the NI's packet
        # count, cnt / cnt + 1, in front of the receive side's credit compare; the
        # count compare was the first two LUT levels of that path; same values)
        m.d.sync += nf.eq(Mux(push == rd, nf, Mux(push, cnt != D - 1, 1)))
        # likewise cnt != 0 (``ne``: the read enable, the pointer and the counters behind
        # it) and level = cnt + ov = words written - words taken at ``r`` (``lvl``: the
        # staging FIFO's level is compared with the packet size in the NI's packet start;
        # no adder in front of it); same values
        popo = Signal()
        lvl_inc, lvl_dec = Signal.like(lvl), Signal.like(lvl)
        m.d.comb += [popo.eq(ov & self.r.ready), lvl_inc.eq(lvl + 1), lvl_dec.eq(lvl - 1)]
        m.d.sync += [ne.eq(Mux(push == rd, ne, Mux(push, 1, cnt != 1))),
                     lvl.eq(Mux(push == popo, lvl, Mux(push, lvl_inc, lvl_dec)))]
        with m.If(push):
            m.d.sync += wp.eq(wp + 1)
        with m.If(rd):
            m.d.sync += rp.eq(rp + 1)
        return m


class _CreditedRx(wiring.Component):
    """Receive side of a credit loop: element FIFO (``depth``) + packet FIFO
    (``window`` entries of {src, element count}); ``credit`` is valid while the
    oldest packet's elements have all left ``r`` (or were dropped).  A skid
    register between the FIFO and ``r`` keeps ``r.ready`` off the FIFO's
    read/count (timing) without changing ``r``'s cycles or the credits.
    The oldest packet's entry is held in a head register and ``credit.valid``
    is a register computed a cycle ahead (timing: no packet-FIFO read and no
    count compare in front of the credit arbitration; same cycles as
    ``head valid & popped >= head count`` computed in the cycle).  Measured
    (grade 6, seed 1): 81.8 MHz (78.1 before, within the seed spread); the
    path then: the element FIFO's count -> ``w.ready`` -> the NI's packet
    count (``cnt + w.ready``, an adder) -> the next-head count compare ->
    ``credit.valid``.  With the NI's count a select of ``cnt``/``cnt + 1``
    registers: 83.5 MHz, the same path less the adder (the FIFO's ``cnt != depth``
    compare, 4.2 ns of routing, then the count mux and the compare).  With
    ``w.ready`` a register (:class:`SramFifo` ``nf``): 82.0 MHz (within the seed
    spread) and the path is no longer here: the NI's WLOAD decode (``ld_left``) ->
    ``net_in.ready`` -> the PE's weight-buffer write enables, 12.2 ns, ~10 ns of it
    routing to the 16 block RAMs.  The packet count is now ``pkt.count + pkt_inc``
    (the NI's ``cnt`` and its late ``w.ready``), and ``pkt_inc`` selects among compares
    made with each.  With that and the WLOAD/PLOAD beat register (stop 30's main, P&R
    on stop 31): 87.4 MHz, 11,027 LUT4, 8,505 FF; the path is no longer on the receive
    side: the ``cfg_word`` register -> the H_in*W_in LUT product's 4 adder levels (shared
    by Yosys with the PE's own check product) -> ``n_hw``, 11.4 ns.  ``n_hw`` now has two
    register stages: 87.5 MHz (stop 32, seed 1), 10,926 LUT4, 8,476 FF; that path is gone
    and the critical path left the node's own logic: the PE's PPU, ``t1`` -> 3.7 ns route
    -> a MULT18X18D used combinationally (3.9 ns) -> 3.3 ns route -> ``ylo``; with
    ``mult_impl=ecp5`` those registers are now the DSP's own (ppu.py).  Then (stop 32, seed
    1): 82.1 MHz, 10,939 LUT4, 7,692 FF, the PPU path gone; the path: the fill region
    ``fs`` -> the PE's ``i_load.ready`` (``il_ok``) -> the ``fill == tw_last`` compare ->
    ``fill``, 12.2 ns, 10.0 of it routing; the compare and ``fill + 1`` are now registers
    (``fill_last``, ``fill_p1``; not measured)."""

    def __init__(self, width: int, depth: int, window: int, src_layout, cnt_bits: int):
        self.window = window
        self.ent = data.StructLayout({"src": src_layout, "count": cnt_bits})
        self.fdepth = depth
        super().__init__({
            "w": In(stream.Signature(width)),            # ready = space
            "pkt": In(stream.Signature(self.ent)),       # packet end (ready = space)
            "pkt_inc": In(1),        # the packet's count is pkt.count + 1 (timing, below)
            "r": Out(stream.Signature(width)),
            "credit": Out(stream.Signature(src_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = fifo = SramFifo(len(self.w.payload), self.fdepth)
        wiring.connect(m, wiring.flipped(self.w), fifo.w)
        # skid register between the FIFO and ``r`` (timing: ``r.ready`` -- the PE's
        # drain, psum_in.ready -- loads only the skid, never the FIFO's read/count;
        # the FIFO sees ready = skid empty, a register).  ``r`` shows the FIFO's head
        # while the skid is empty and the skid first otherwise: the beats and the
        # cycles ``r`` shows them are those of the FIFO alone (a beat waits in the
        # skid exactly as long as it would have waited at the FIFO's head), and the
        # credits below count at ``r``, so no PCREDIT moves
        sk_v = Signal()
        sk_d = Signal(len(self.r.payload))
        m.d.comb += [self.r.valid.eq(fifo.r.valid | sk_v),
                     self.r.payload.eq(Mux(sk_v, sk_d, fifo.r.payload)),
                     fifo.r.ready.eq(~sk_v)]
        with m.If(sk_v):
            with m.If(self.r.ready):
                m.d.sync += sk_v.eq(0)
        with m.Elif(fifo.r.valid & ~self.r.ready):
            m.d.sync += [sk_v.eq(1), sk_d.eq(fifo.r.payload)]
        # packet entries: the oldest in a head register (hv, head), the rest in a FIFO
        # behind it; n = entries held (head + FIFO), pkt.ready = space for ``window``
        W = self.window
        m.submodules.pk = pk = SyncFIFO(width=self.ent.size, depth=W)
        n = Signal(range(W + 1))
        hv = Signal()
        head = Signal(self.ent)
        wen = Signal(self.ent)
        # the entry written: count = pkt.count + pkt_inc (the NI's element count and
        # whether its last element is written in this cycle, the FIFO's late w.ready):
        # pkt_inc only selects the sum or the count, and below it selects among compares
        # made with each (timing: no count mux in front of the credit compares)
        wc = self.pkt.payload.count
        wc1 = Signal.like(wc)
        m.d.comb += [wc1.eq(wc + 1), wen.src.eq(self.pkt.payload.src),
                     wen.count.eq(Mux(self.pkt_inc, wc1, wc)), self.pkt.ready.eq(n != W)]
        push = self.pkt.valid & self.pkt.ready
        nxt = self.ent(pk.r_data)                    # second-oldest entry (pk.r_rdy)
        popped = Signal(range(self.fdepth + 2))    # elements popped since the head packet began
        pop = self.r.valid & self.r.ready
        # credit.valid = hv & (popped >= head.count), as a register (``complete``): its
        # next value is computed for each of take / pop (late: the credit arbitration
        # and the reader's ready), which only select
        complete = Signal()
        m.d.comb += [self.credit.valid.eq(complete), self.credit.payload.eq(head.src)]
        take = self.credit.valid & self.credit.ready
        # the head after this cycle: kept (no take), else the FIFO's next entry, else a
        # packet pushed this cycle goes straight to the (empty or freed) head
        w_to_head = push & (~hv | (take & ~pk.r_rdy))
        m.d.comb += [pk.w_data.eq(wen), pk.w_en.eq(push & ~w_to_head),
                     pk.r_en.eq(take & pk.r_rdy)]
        m.d.sync += n.eq(n + push - take)
        with m.If(take):
            m.d.sync += [hv.eq(pk.r_rdy | push), head.eq(Mux(pk.r_rdy, nxt, wen))]
        with m.Elif(~hv):
            m.d.sync += [hv.eq(push), head.eq(wen)]
        # popped + pop - (take ? count : 0): the four sums from popped and the head
        # count alone, ``pop`` (the PE's psum_in.ready) and ``take`` (the credit's
        # output arbitration) only select (timing: no carry chain behind either)
        p1, pc, pc1 = Signal.like(popped), Signal.like(popped), Signal.like(popped)
        m.d.comb += [p1.eq(popped + 1), pc.eq(popped - head.count), pc1.eq(popped - head.count + 1)]
        m.d.sync += popped.eq(Mux(take, Mux(pop, pc1, pc), Mux(pop, p1, popped)))
        # next complete per (take, pop): the next head's count against the next popped
        # (the entry written now: x >= wc + pkt_inc, i.e. x > wc or x >= wc by pkt_inc)
        def ge_wen(x):
            return Mux(self.pkt_inc, x > wc, x >= wc)
        rdy_keep = hv | push                               # no take: head, else written
        rdy_take = pk.r_rdy | push                         # take (hv): FIFO's next, else written
        c00, c01, c10, c11 = Signal(), Signal(), Signal(), Signal()
        m.d.comb += [c00.eq(rdy_keep & Mux(hv, popped >= head.count, ge_wen(popped))),
                     c01.eq(rdy_keep & Mux(hv, p1 >= head.count, ge_wen(p1))),
                     c10.eq(rdy_take & Mux(pk.r_rdy, pc >= nxt.count, ge_wen(pc))),
                     c11.eq(rdy_take & Mux(pk.r_rdy, pc1 >= nxt.count, ge_wen(pc1)))]
        m.d.sync += complete.eq(Mux(take, Mux(pop, c11, c10), Mux(pop, c01, c00)))
        return m


class PeNode(wiring.Component):
    """Simba PE + network interface on one NoC port (contract: module docstring).

    Parameters: :class:`~.packets.PeNodeConfig` (PE parameters, ``word_bits``,
    mesh sizes and ``classes`` of the flit layout, ``credit_window``/``max_tile``
    of the Global PE, ``psum_window``, ``psum_beats``, ``out_words``).

    Ports (``clk``/``rst`` implicit; flits = ``net_flit_layout`` of the Global PE
    packets with this node's ``word_bits``, meshes and ``classes``):

    * ``net_in`` (In stream of flits): from the router's local output; always
      ready (WLOAD/PLOAD body flits follow the PE's load ready, which is high
      whenever the node is not running, the only time loads are taken).
    * ``net_out`` (Out stream of flits): to the router's local input;
      registered; each packet contiguous head..tail.
    * ``node_id`` (In, node address layout): this node's chiplet and (x, y);
      ``src`` of every packet, DONE's ``node``, chiplet of every destination.
    * ``running`` (Out 1): from the ``start`` write until DONE is queued.
    * ``err`` (Out, :func:`err_layout`): sticky protocol-error flags.
    * ``done_code`` (Out 8): code of the last DONE (0 or the PE ErrorCause).
    * ``tiles`` (Out 16): tiles the PE has finished in the current/last run.
    * ``pe_busy`` (Out 1): the PE is computing (for utilisation counters).
    """

    def __init__(self, **params):
        self.c = c = PeNodeConfig(**params)
        validate(c)
        self.gcfg = GpeConfig(word_bits=c.word_bits, node_mesh_x=c.node_mesh_x,
                              node_mesh_y=c.node_mesh_y, chiplet_mesh_x=c.chiplet_mesh_x,
                              chiplet_mesh_y=c.chiplet_mesh_y, classes=c.classes,
                              credit_window=c.credit_window, max_tile=c.max_tile)
        self.pe = SimbaPE(**vars(c.pe))               # every PEParams field, by name
        flit = net_flit_layout(self.gcfg)
        super().__init__({
            "net_in": In(stream.Signature(flit)),
            "net_out": Out(stream.Signature(flit)),
            "node_id": In(node_address_layout(self.gcfg)),
            "running": Out(1),
            "err": Out(err_layout()),
            "done_code": Out(8),
            "tiles": Out(16),
            "pe_busy": Out(1),
        })

    def elaborate(self, platform):
        c, g = self.c, self.gcfg
        p = c.pe
        m = Module()
        m.submodules.pe = pe = self.pe
        WB = c.word_bits
        K0, AW = c.K0, c.acc_width
        PB = K0 * AW                              # psum beat bits
        NF = c.psum_flits
        addr_l = node_address_layout(g)
        ctrl = ctrl_class(c.classes)
        err = Signal(err_layout())
        m.d.comb += self.err.eq(err)

        # ---------------- registers ---------------------------------------------------
        cfg_word = Signal(96)
        ntiles = Signal(16)
        psum_dest, out_dest, done_dest = Signal(32), Signal(32), Signal(32)   # dest_value()
        out_base, out_stride = Signal(16), Signal(16)
        off = 0
        for f in PE_CFG_FIELDS:
            w = CFG_FIELDS[f]
            m.d.comb += getattr(pe.cfg, f).eq(cfg_word[off:off + w])
            off += w
        cf = pe.cfg
        # (registered: the registers are written only while the node is idle, and every
        # use of to_ppu is while running, PREP_CYCLES after the last write)
        to_ppu = Signal()
        m.d.sync += to_ppu.eq((cf.role == Role.LAST) | (cf.role == Role.ONLY))
        # tile sizes (pipelined LUT products; stable PREP_CYCLES after the last write)
        # (timing: H_in*W_in in two register stages, was one: its 4 adder levels after the
        # cfg register were pe_node's 87.4 MHz path; tile_words is read at prep == 1 and
        # through tw_last from the first running cycle, so its one cycle of slack is used)
        hw = lut_mul(m, cf.H_in, cf.W_in, 2, "n_hw")
        tile_words = lut_mul(m, hw, cf.C1, 2, "n_words")          # input words per tile
        pq = lut_mul(m, cf.P1, cf.Q1, 1, "n_pq")
        beats_all = lut_mul(m, pq, cf.K1, 2, "n_beats")
        tile_beats = Signal(24)                                      # result beats per tile
        m.d.sync += tile_beats.eq(Mux(to_ppu & cf.pool, beats_all >> 2, beats_all))

        # ---------------- run state -----------------------------------------------------
        running = Signal()
        prep = Signal(range(PREP_CYCLES + 1))
        discard = Signal()
        done_pend = Signal()
        done_code = Signal(8)
        m.d.comb += [self.running.eq(running | (prep != 0)), self.done_code.eq(done_code),
                     self.pe_busy.eq(pe.busy)]
        active = Signal()             # running or preparing (register writes refused)
        m.d.comb += active.eq(running | (prep != 0))
        start_req = Signal()          # CFG write of ``start`` accepted (comb)
        clear_req = Signal()

        # ---------------- input decoder ---------------------------------------------------
        ni = self.net_in
        f = ni.payload
        S_HEAD, S_WLOAD, S_PLOAD, S_DATA, S_PSUM, S_DROP = range(6)
        st = Signal(3, init=S_HEAD)
        src = Signal(addr_l)
        ld_addr = Signal(16)
        ld_row = Signal(4)
        ld_left = Signal(17)
        cnt = Signal(16)                # elements pushed in the current DATA / PSUM packet
        cnt1 = Signal(16)               # cnt + 1, a register (timing: the packet's count
        #                                 is a select by the FIFO's ready, no adder)
        pj = Signal(range(max(2, NF)))  # flit within a psum beat
        asm = Signal(max(1, WB * (NF - 1)))

        m.submodules.drx = drx = _CreditedRx(WB, pow2_at_least(c.credit_window * c.max_tile),
                                             c.credit_window, addr_l, 16)
        m.submodules.prx = prx = _CreditedRx(PB, pow2_at_least(c.psum_window * c.psum_beats),
                                             c.psum_window, addr_l, 16)
        pcredits = Signal(range(c.psum_window + 1), init=c.psum_window)
        pc_in = Signal()              # a PCREDIT flit adds its count this cycle
        pc_take = Signal()

        hdr_ext = cfg_layout()(f.payload[:cfg_layout().size])
        hdr_cfg = hdr_ext
        hdr_ld = load_head_layout()(f.payload[:load_head_layout().size])
        hdr_data = data_header_layout()(f.payload[:data_header_layout().size])
        hdr_pc = pcredit_layout()(f.payload[:pcredit_layout().size])
        is_ext = hdr_ext.kind == KIND_EXT

        m.d.comb += ni.ready.eq(1)
        # loads: the PE takes one beat per cycle while idle (w_load/p_load ready = ~busy)
        # (timing: the decoded beat goes through a register stage, ``lq``, to the PE's
        # w_load / p_load, so the WLOAD decode -- ld_left, net_in -- is not in front of
        # the weight buffer's write enables (82.0 MHz path, ~10 ns of routing to its 16
        # block RAMs).  A beat reaches the PE one cycle after its flit; loads are taken
        # only while the node is idle, long before a start reaches the PE (PREP_CYCLES),
        # and net_in.ready = stage free = the PE's ready while the PE is idle.)
        wl, pl = pe.w_load, pe.p_load
        pld = pload_body_layout()(f.payload[:pload_body_layout().size])
        wl_d, pl_d = Signal.like(wl.payload), Signal.like(pl.payload)     # decoded beat
        dv_w, dv_p = Signal(), Signal()
        m.d.comb += [wl_d.addr.eq(ld_addr), wl_d.row.eq(ld_row),
                     wl_d.data.eq(f.payload[:8 * c.C0]),
                     pl_d.addr.eq(ld_addr), pl_d.row.eq(ld_row),
                     pl_d.bias.eq(pld.bias), pl_d.scale.eq(pld.scale)]
        lq_v, lq_w = Signal(), Signal()        # a beat held for w_load (lq_w) / p_load
        lq_wp, lq_pp = Signal.like(wl.payload), Signal.like(pl.payload)
        lq_free = Signal()
        m.d.comb += [wl.valid.eq(lq_v & lq_w), pl.valid.eq(lq_v & ~lq_w),
                     wl.payload.eq(lq_wp), pl.payload.eq(lq_pp),
                     lq_free.eq(~lq_v | Mux(lq_w, wl.ready, pl.ready))]
        with m.If(lq_free):
            m.d.sync += [lq_v.eq(dv_w | dv_p), lq_w.eq(dv_w), lq_wp.eq(wl_d), lq_pp.eq(pl_d)]

        def ld_advance():
            with m.If(ld_row == K0 - 1):
                m.d.sync += [ld_row.eq(0), ld_addr.eq(ld_addr + 1)]
            with m.Else():
                m.d.sync += ld_row.eq(ld_row + 1)
            m.d.sync += ld_left.eq(ld_left - 1)

        def end_packet():
            with m.If(f.tail):
                m.d.sync += st.eq(S_HEAD)

        with m.If(ni.valid):
            with m.If(st == S_HEAD):
                m.d.sync += [src.eq(f.src), cnt.eq(0), cnt1.eq(1), pj.eq(0)]
                with m.If(~f.head):
                    m.d.sync += err.bad_packet.eq(1)
                    with m.If(~f.tail):
                        m.d.sync += st.eq(S_DROP)
                with m.Elif(is_ext & (hdr_ext.ext == EXT_CFG) & f.tail):
                    reg, val = hdr_cfg.reg, hdr_cfg.value
                    with m.If(reg == REGS["clear"]):
                        m.d.comb += clear_req.eq(1)
                    with m.Elif(reg >= len(REGS)):
                        m.d.sync += err.bad_reg.eq(1)
                    with m.Elif(active):
                        m.d.sync += err.cfg_busy.eq(1)
                    with m.Elif(reg == REGS["start"]):
                        m.d.comb += start_req.eq(1)
                    for name, sig, lo in (("pe_cfg0", cfg_word, 0), ("pe_cfg1", cfg_word, 32),
                                          ("pe_cfg2", cfg_word, 64), ("ntiles", ntiles, 0),
                                          ("psum_dest", psum_dest, 0), ("out_dest", out_dest, 0),
                                          ("out_base", out_base, 0),
                                          ("out_tile_stride", out_stride, 0),
                                          ("done_dest", done_dest, 0)):
                        with m.If(~active & (reg == REGS[name])):
                            w = min(32, len(sig) - lo)
                            m.d.sync += sig[lo:lo + w].eq(val[:w])
                with m.Elif(is_ext & (hdr_ext.ext == EXT_PCREDIT) & f.tail):
                    m.d.comb += pc_in.eq(1)
                with m.Elif(is_ext & ((hdr_ext.ext == EXT_WLOAD) | (hdr_ext.ext == EXT_PLOAD))):
                    m.d.sync += [ld_addr.eq(hdr_ld.addr), ld_row.eq(hdr_ld.row),
                                 ld_left.eq(hdr_ld.count)]
                    with m.If(active):
                        m.d.sync += err.load_busy.eq(1)
                        with m.If(~f.tail):
                            m.d.sync += st.eq(S_DROP)
                    with m.Elif(f.tail):
                        with m.If(hdr_ld.count != 0):
                            m.d.sync += err.bad_packet.eq(1)
                    with m.Else():
                        m.d.sync += st.eq(Mux(hdr_ext.ext == EXT_WLOAD, S_WLOAD, S_PLOAD))
                with m.Elif(is_ext & (hdr_ext.ext == EXT_PSUM)):
                    with m.If(f.tail):           # empty packet: its credit still goes back
                        m.d.comb += [prx.pkt.valid.eq(1), prx.pkt.payload.src.eq(f.src),
                                     prx.pkt.payload.count.eq(0)]
                        with m.If(~prx.pkt.ready):
                            m.d.sync += err.psum_overflow.eq(1)
                    with m.Else():
                        m.d.sync += st.eq(S_PSUM)
                with m.Elif(hdr_data.kind == KIND_DATA):
                    with m.If(hdr_data.nwords > c.max_tile):
                        m.d.sync += err.bad_packet.eq(1)
                    with m.If(f.tail):
                        m.d.comb += [drx.pkt.valid.eq(1), drx.pkt.payload.src.eq(f.src),
                                     drx.pkt.payload.count.eq(0)]
                        with m.If(~drx.pkt.ready):
                            m.d.sync += err.data_overflow.eq(1)
                    with m.Else():
                        m.d.sync += st.eq(S_DATA)
                with m.Else():
                    m.d.sync += err.bad_packet.eq(1)
                    with m.If(~f.tail):
                        m.d.sync += st.eq(S_DROP)
            with m.Elif(f.head):
                # a head inside a packet: the packet in progress is cut here
                m.d.sync += err.bad_packet.eq(1)
            for state, load in ((S_WLOAD, dv_w), (S_PLOAD, dv_p)):   # WLOAD / PLOAD bodies
                with m.If(st == state):
                    with m.If(ld_left == 0):
                        m.d.sync += err.bad_packet.eq(1)
                    with m.Else():
                        m.d.comb += load.eq(1)
                        m.d.comb += ni.ready.eq(lq_free)
                        with m.If(lq_free):
                            ld_advance()
                    with m.If(ni.ready & f.tail):
                        m.d.sync += st.eq(S_HEAD)
                        with m.If(ld_left > 1):
                            m.d.sync += err.bad_packet.eq(1)
            with m.If(st == S_DATA):
                m.d.comb += [drx.w.valid.eq(1), drx.w.payload.eq(f.payload)]
                with m.If(drx.w.ready):
                    m.d.sync += [cnt.eq(cnt1), cnt1.eq(cnt1 + 1)]
                with m.Else():
                    m.d.sync += err.data_overflow.eq(1)
                with m.If(f.tail):
                    m.d.comb += [drx.pkt.valid.eq(1), drx.pkt.payload.src.eq(src),
                                 drx.pkt.payload.count.eq(cnt), drx.pkt_inc.eq(drx.w.ready)]
                    with m.If(~drx.pkt.ready):
                        m.d.sync += err.data_overflow.eq(1)
                end_packet()
            with m.If(st == S_PSUM):
                last_flit = pj == NF - 1
                with m.If(last_flit):
                    m.d.sync += pj.eq(0)
                    m.d.comb += [prx.w.valid.eq(1),
                                 prx.w.payload.eq(Cat(asm[:WB * (NF - 1)] if NF > 1 else Const(0, 0),
                                                      f.payload)[:PB])]
                    with m.If(prx.w.ready):
                        m.d.sync += [cnt.eq(cnt1), cnt1.eq(cnt1 + 1)]
                    with m.Else():
                        m.d.sync += err.psum_overflow.eq(1)
                with m.Else():
                    m.d.sync += pj.eq(pj + 1)
                    if NF > 1:
                        m.d.sync += asm.eq(Cat(asm[WB:], f.payload))
                with m.If(f.tail):
                    with m.If(~last_flit):
                        m.d.sync += err.bad_packet.eq(1)
                    m.d.comb += [prx.pkt.valid.eq(1), prx.pkt.payload.src.eq(src),
                                 prx.pkt.payload.count.eq(cnt),
                                 prx.pkt_inc.eq(last_flit & prx.w.ready)]
                    with m.If(~prx.pkt.ready):
                        m.d.sync += err.psum_overflow.eq(1)
                end_packet()
            with m.If(st == S_DROP):
                end_packet()

        # psum credits of this node (toward its downstream PE)
        # (timing: the sums with and without a take, from the register and the flit's
        # count field; the decoded PCREDIT (pc_in) and the late pc_take -- net_out.ready
        # through the packet arbitration -- only select.  pc_take implies pcredits != 0.)
        pc_sum = Signal(range(2 * c.psum_window + 256))
        pc_sum1 = Signal(range(2 * c.psum_window + 256))
        m.d.comb += [pc_sum.eq(pcredits + hdr_pc.count), pc_sum1.eq(pcredits + hdr_pc.count - 1)]
        pc_over, pc_over1 = pc_sum > c.psum_window, pc_sum1 > c.psum_window
        with m.If(pc_in & Mux(pc_take, pc_over1, pc_over)):
            m.d.sync += [pcredits.eq(c.psum_window), err.credit_overflow.eq(1)]
        with m.Else():
            m.d.sync += pcredits.eq(Mux(pc_in, Mux(pc_take, pc_sum1, pc_sum),
                                        Mux(pc_take, pcredits - 1, pcredits)))

        with m.If(clear_req):
            m.d.sync += [err.eq(0), discard.eq(0)]

        # ---------------- input tiles: receive FIFO -> PE input buffer --------------------
        slots = 2
        dbl = Signal()                  # this run double-buffers (tile <= half the buffer)
        full = Signal(slots)            # region holds a whole tile not yet started
        busy_s = Signal(slots)          # region being computed
        fs = Signal(range(max(2, slots)))   # region being filled
        ss = Signal(range(max(2, slots)))   # next region to start
        rs = Signal(range(max(2, slots)))   # region the PE computes (released on done)
        fill = Signal(bits_for(p.ibuf_words) + 1)
        filled_tiles = Signal(16)
        started = Signal(16)
        done_tiles = Signal(16)
        m.d.comb += self.tiles.eq(done_tiles)

        il = pe.i_load
        tw_last = Signal(len(tile_words))          # tile_words - 1 (registered; stable in prep)
        m.d.sync += tw_last.eq(tile_words - 1)
        # a region is filled while it holds no tile waiting to start; double-buffered, also
        # while its tile still runs: the PE's i_load takes a word only into a half no tile
        # still issuing operations reads (PE contract), so the next-but-one tile loads while
        # that tile drains instead of after its done; a WHOLE region waits for the done
        fs_free = ~Mux(fs, full[1] | (busy_s[1] & ~dbl), full[0] | (busy_s[0] & ~dbl))
        fill_en = running & fs_free & (filled_tiles != ntiles)
        # the PE starts on region ss; the configuration check (prep) sees WHOLE
        ibuf_plan(m, pe, dbl & running, ss)
        # fill region's base + fill, without an adder: the upper half's base is the top
        # address bit, and a double-buffered tile fits its half (fill < ibuf_words/2)
        IBB = bits_for(p.ibuf_words)
        m.d.comb += [il.payload.addr.eq(Cat(fill[:IBB - 1], fill[IBB - 1] | (dbl & fs))),
                     il.payload.data.eq(drx.r.payload),
                     il.valid.eq(drx.r.valid & fill_en),
                     drx.r.ready.eq(Mux(discard, 1, il.ready & fill_en))]
        set_full = Signal(slots)
        clr_full = Signal(slots)
        set_busy = Signal(slots)
        clr_busy = Signal(slots)
        # (timing: fill == tw_last and fill + 1 are registers, fill_last / fill_p1, so the
        # PE's late i_load.ready only selects; stop 32 P&R 82.1 MHz: fs -> the PE's il_ok
        # -> the fill == tw_last compare -> fill, 12.2 ns.  tw_last is stable while running;
        # prep == 1 sets them from tile_words, which is valid then)
        fill_last = Signal()
        fill_p1 = Signal(len(fill), init=1)
        with m.If(il.valid & il.ready):
            with m.If(fill_last):
                m.d.sync += [fill.eq(0), filled_tiles.eq(filled_tiles + 1),
                             fill_p1.eq(1), fill_last.eq(tw_last == 0)]
                m.d.comb += set_full.eq(1 << fs)
                m.d.sync += fs.eq(fs ^ dbl)
            with m.Else():
                m.d.sync += [fill.eq(fill_p1), fill_p1.eq(fill_p1 + 1),
                             fill_last.eq(fill_p1 == tw_last)]
        # start the PE on the oldest full region as soon as it takes a start: when
        # idle, or (double-buffered, same cfg but ibuf_half) while the previous
        # tile drains -- the PE's back-to-back start (``start_ready``)
        go = Signal()
        m.d.comb += go.eq(running & Mux(ss, full[1], full[0]) & pe.start_ready)
        m.d.comb += pe.start.eq(go)
        with m.If(go):
            m.d.comb += [clr_full.eq(1 << ss), set_busy.eq(1 << ss)]
            m.d.sync += [started.eq(started + 1), ss.eq(ss ^ dbl)]
        with m.If(pe.done):
            m.d.comb += clr_busy.eq(1 << rs)
            m.d.sync += [done_tiles.eq(done_tiles + 1), rs.eq(rs ^ dbl)]
        m.d.sync += [full.eq((full | set_full) & ~clr_full),
                     busy_s.eq((busy_s & ~clr_busy) | set_busy)]     # done and go in one cycle

        # ---------------- partial sums in ------------------------------------------------
        m.d.comb += [pe.psum_in.payload.eq(prx.r.payload),
                     pe.psum_in.valid.eq(prx.r.valid & ~discard),
                     prx.r.ready.eq(Mux(discard, 1, pe.psum_in.ready))]

        # ---------------- results: staging FIFO -> packets ------------------------------
        m.submodules.stage = stg = SramFifo(max(PB, WB),
                                            pow2_at_least(2 * max(c.out_words, c.psum_beats)))
        m.d.comb += [stg.w.valid.eq(Mux(to_ppu, pe.out.valid, pe.psum_out.valid)),
                     stg.w.payload.eq(Mux(to_ppu, pe.out.payload.as_value(),
                                          pe.psum_out.payload.as_value())),
                     pe.out.ready.eq(to_ppu & stg.w.ready),
                     pe.psum_out.ready.eq(~to_ppu & stg.w.ready)]
        left = Signal(24)               # beats of the current tile not yet packetised
        t_out = Signal(16)              # tiles whose results have all been sent
        tile_addr = Signal(16)
        # tile_addr + out_stride, registered (timing: no adder behind the packet start;
        # tile_addr changes only when a packet starts or at the end of prep, and the next
        # packet starts 2 or more cycles later)
        next_tile = Signal(16)
        m.d.sync += next_tile.eq(tile_addr + out_stride)
        baddr = Signal(16)              # GPE address of the next OUT beat
        in_pkt = Signal()
        k = Signal(8)                   # beats of the packet still to send
        j = Signal(range(max(2, NF)))
        n_pkt = Signal(8)
        maxp = Mux(to_ppu, c.out_words, c.psum_beats)
        # (timing: n_pkt = min(left, maxp) registered.  ``left`` changes only when a
        # packet starts -- in_pkt is then high for >= 1 cycle -- or at the end of prep --
        # the staging FIFO is still empty -- so no packet could start in the cycle
        # after; ``left_new`` keeps it so: cycles are those of the comb min.)
        left_new = Signal()
        m.d.sync += [n_pkt.eq(Mux(left < maxp, left, maxp)), left_new.eq(0)]
        pkt_ready = (running & ~in_pkt & ~left_new & (t_out != ntiles) & (stg.level >= n_pkt)
                     & (to_ppu | (pcredits != 0)))

        # ---------------- network out -----------------------------------------------------
        # output register (full throughput: loads whenever it is empty or drained)
        no = self.net_out
        # (the flit's fields as separate signals: every bit of them is driven)
        fl_head, fl_tail, fl_mclass = Signal(), Signal(), Signal(len(no.payload.mclass))
        # DATA credits: one CREDIT per packet (credit_batch 1), or coalesced (module docstring)
        cr_valid, cr_ready = Signal(), Signal()
        cr_dest = Signal(addr_l)
        cr_count = Signal(8)
        if c.credit_batch == 1:
            m.d.comb += [cr_valid.eq(drx.credit.valid), cr_dest.eq(drx.credit.payload),
                         cr_count.eq(1), drx.credit.ready.eq(cr_ready)]
        else:
            nb = c.credit_batch
            pend = Signal(range(nb + 1))
            pend_src = Signal(addr_l)
            idle = Signal(range(CREDIT_FLUSH_CYCLES + 1))
            same = Signal()
            m.d.comb += same.eq(drx.credit.payload.as_value() == pend_src.as_value())
            # send the count when full, on another source's packet, or after the idle time
            m.d.comb += [cr_valid.eq((pend == nb) | ((pend != 0) & (
                             (drx.credit.valid & ~same) | (idle == CREDIT_FLUSH_CYCLES)))),
                         cr_dest.eq(pend_src), cr_count.eq(pend)]
            absorb = Signal()
            m.d.comb += absorb.eq(drx.credit.valid & ~cr_valid & ((pend == 0) | same))
            m.d.comb += drx.credit.ready.eq(absorb)
            with m.If(cr_valid & cr_ready):
                m.d.sync += [pend.eq(0), idle.eq(0)]
            with m.Elif(absorb):
                m.d.sync += [pend.eq(pend + 1), pend_src.eq(drx.credit.payload), idle.eq(0)]
            with m.Elif((pend != 0) & (idle != CREDIT_FLUSH_CYCLES)):
                m.d.sync += idle.eq(idle + 1)
        fl_dest = Signal(addr_l)
        fl_payload = Signal(WB)
        ob_valid, ob_ready = Signal(), Signal()
        m.d.comb += ob_ready.eq(~no.valid | no.ready)
        with m.If(ob_ready):
            m.d.sync += [no.valid.eq(ob_valid), no.payload.head.eq(fl_head),
                         no.payload.tail.eq(fl_tail), no.payload.mclass.eq(fl_mclass),
                         no.payload.mcast.eq(0), no.payload.dest.eq(fl_dest.as_value()),
                         no.payload.src.eq(self.node_id), no.payload.payload.eq(fl_payload)]

        def dest_reg(reg):
            # bit 31: the chiplet in [23:16] (package, packets.dest_value), else this chiplet
            return [fl_dest.chiplet.x.eq(Mux(reg[31], reg[16:20], self.node_id.chiplet.x)),
                    fl_dest.chiplet.y.eq(Mux(reg[31], reg[20:24], self.node_id.chiplet.y)),
                    fl_dest.node.x.eq(reg[:8]), fl_dest.node.y.eq(reg[8:16])]

        # DONE condition: every tile started, finished and sent
        fin = running & ~in_pkt & (t_out == ntiles) & (started == ntiles) & ~busy_s.any() & ~full.any()
        with m.If(fin):
            m.d.sync += [running.eq(0), done_pend.eq(1), done_code.eq(DONE_OK)]

        with m.If(in_pkt):
            last_flit = j == NF - 1
            m.d.comb += [ob_valid.eq(stg.r.valid), fl_head.eq(0), fl_mclass.eq(0),
                         *dest_reg(Mux(to_ppu, out_dest, psum_dest))]
            with m.If(to_ppu):
                m.d.comb += [fl_payload.eq(stg.r.payload[:WB]), fl_tail.eq(k == 1),
                             stg.r.ready.eq(ob_ready)]
            with m.Else():
                slices = [stg.r.payload[WB * i:WB * (i + 1)] for i in range(NF)]
                sel = slices[-1]
                for i in range(NF - 2, -1, -1):
                    sel = Mux(j == i, slices[i], sel)
                m.d.comb += [fl_payload.eq(sel), fl_tail.eq((k == 1) & last_flit),
                             stg.r.ready.eq(ob_ready & last_flit)]
            with m.If(ob_valid & ob_ready):
                with m.If(to_ppu | last_flit):
                    m.d.sync += [k.eq(k - 1), j.eq(0)]
                    with m.If(k == 1):
                        m.d.sync += in_pkt.eq(0)
                with m.Else():
                    m.d.sync += j.eq(j + 1)
        with m.Elif(cr_valid):
            crp = Signal(credit_layout())
            m.d.comb += [crp.kind.eq(KIND_CREDIT), crp.count.eq(cr_count)]
            m.d.comb += [ob_valid.eq(1), fl_head.eq(1), fl_tail.eq(1), fl_mclass.eq(ctrl),
                         fl_dest.eq(cr_dest), fl_payload.eq(crp), cr_ready.eq(ob_ready)]
        with m.Elif(prx.credit.valid):
            m.d.comb += [ob_valid.eq(1), fl_head.eq(1), fl_tail.eq(1), fl_mclass.eq(ctrl),
                         fl_dest.eq(prx.credit.payload),
                         fl_payload.eq(pcredit_layout().const(
                             {"kind": KIND_EXT, "ext": EXT_PCREDIT, "count": 1})),
                         prx.credit.ready.eq(ob_ready)]
        with m.Elif(done_pend):
            dn = Signal(done_layout((c.node_mesh_x, c.node_mesh_y)))
            m.d.comb += [dn.kind.eq(KIND_EXT), dn.ext.eq(EXT_DONE), dn.node.eq(self.node_id.node),
                         dn.code.eq(done_code)]
            m.d.comb += [ob_valid.eq(1), fl_head.eq(1), fl_tail.eq(1), fl_mclass.eq(ctrl),
                         *dest_reg(done_dest), fl_payload.eq(dn)]
            with m.If(ob_ready):
                m.d.sync += done_pend.eq(0)
        with m.Elif(pkt_ready):
            oh = Signal(out_header_layout())
            ph = Signal(psum_head_layout())
            m.d.comb += [oh.kind.eq(KIND_OUT), oh.addr.eq(baddr), oh.nwords.eq(n_pkt),
                         ph.kind.eq(KIND_EXT), ph.ext.eq(EXT_PSUM), ph.nbeats.eq(n_pkt)]
            m.d.comb += [ob_valid.eq(1), fl_head.eq(1), fl_tail.eq(0), fl_mclass.eq(0),
                         *dest_reg(Mux(to_ppu, out_dest, psum_dest)),
                         fl_payload.eq(Mux(to_ppu, oh.as_value(), ph.as_value()))]
            with m.If(ob_ready):
                m.d.sync += [in_pkt.eq(1), k.eq(n_pkt), j.eq(0)]
                m.d.comb += pc_take.eq(~to_ppu)
                m.d.sync += left_new.eq(1)
                with m.If(left == n_pkt):
                    m.d.sync += [t_out.eq(t_out + 1), left.eq(tile_beats),
                                 tile_addr.eq(next_tile), baddr.eq(next_tile)]
                with m.Else():
                    m.d.sync += [left.eq(left - n_pkt), baddr.eq(baddr + n_pkt)]

        # ---------------- start / prep / configuration check -----------------------------
        with m.If(start_req):
            m.d.sync += [prep.eq(PREP_CYCLES), discard.eq(0)]
        with m.If(prep != 0):
            m.d.sync += prep.eq(prep - 1)
            with m.If(prep == 1):
                m.d.sync += [fill_p1.eq(1), fill_last.eq((tile_words - 1)[:len(tw_last)] == 0)]
                m.d.sync += [fill.eq(0), filled_tiles.eq(0), started.eq(0), done_tiles.eq(0),
                             full.eq(0), fs.eq(0), ss.eq(0), rs.eq(0), t_out.eq(0),
                             left.eq(tile_beats), dbl.eq(tile_words <= p.ibuf_words // 2),
                             tile_addr.eq(out_base), baddr.eq(out_base)]
                m.d.sync += left_new.eq(1)
                with m.If(pe.cfg_cause != 0):
                    m.d.sync += [done_pend.eq(1), done_code.eq(pe.cfg_cause), discard.eq(1)]
                with m.Else():
                    m.d.sync += running.eq(1)
        return m
