"""5-port input-buffered XY mesh router for the Simba NoC and NoP (Simba §3.1 "Simba interconnect").

* Ports N, E, S, W (inter-router links) and L (local ``lib.stream`` in/out).
  North is y-1, south is y+1, east is x+1.
* XY dimension-order routing.  ``level="noc"`` routes on node coordinates
  (with ``hier=True`` a packet for another chiplet goes to the gateway node
  ``(gw_x, gw_y)``, whose local port is the NoP router); ``level="nop"`` routes
  on chiplet coordinates and delivers to its local port (the gateway node).
  The route is computed when a head flit is written into the input buffer
  and stored next to it (5 bits), so allocation starts from registers.
* Input buffers: per input VC, one :class:`~tessera.hdl.sram.SRAM` of framing
  (head/tail/multicast/drop marks and the 5-bit route; ``buffer_flits`` deep,
  read one entry ahead into the front register); per input port, one SRAM of
  payloads and one of headers (class, multicast bit, destination, source:
  written for head flits only, one entry per stored packet) shared by the
  port's VCs (address = VC, slot: one flit is written per port and cycle and
  only the offered VC's front is read, so the RAM's read decoder is the VC
  multiplexer; read latency 1: the read register is the crossbar's input
  register); framing with an asynchronous read (``read_latency=0``); all
  DPR16X4 LUT RAM on ECP5, no reset.  A credit goes upstream when a flit
  leaves the buffer.  Body flits leave with their packet's header (the
  header bits a source puts on a body flit are not stored: don't-care on
  input; the golden model, the tb monitors, the Global PE and the chiplet
  read the header of head flits only).
* Pipeline (``ROUTER_CYCLES`` = 2 in ``golden/noc.py``): cycle 1 buffer write
  (route computed on the way in: look-ahead of this router's route, so no
  route stage); cycle 2 switch allocation from registered state (buffer front,
  credits, output VC owners, and each input VC's request: its output set is a
  register loaded with the next state's request, computed for both "front
  leaves" and "front stays" so the grant only drives the last 2:1 select; the
  multicast test runs on the token port's offered VC only, and the credit and
  output-VC updates come from the one-hot grants), whose grants and each port's
  offered flit are registered; cycle 3 switch traversal: the crossbar muxes the registered
  flits onto the output links (the link registers live in the mesh), so a
  hop is 2 router cycles + ``link_latency``.  A credit arriving from
  downstream counts in the cycle it arrives, so the credit round trip stays
  ``2*link_latency + 2`` cycles.
* Two-cycle switch allocation (``sa_stages=2``; an option: the blocks, ``RouterConfig``
  and the chiplet default to 1, see ``SA_STAGES`` in ``__init__.py``): what each input VC and port may do
  in a cycle -- unicast outputs that accept its front, outputs that accept it if a credit
  arrives in that cycle, whether its multicast can go, and the token port's multicast
  outputs -- is computed in the cycle before from the next state and registered, so the
  arbiters start from flip-flops and the cycle's grants only drive the last selects.  The
  next state is taken from registers and the buffer only (a flit written into the front
  slot, or a multicast tail written now, counts a cycle later), and the acceptance does
  not wait for the arbiters' winners: an output VC any request may take counts as taken
  (a credit used; owned unless every flit that may take it is a tail), exact when one VC
  requests the output or none does (the credit and owner registers are updated exactly).
  Costs: a router cycle more per hop (``router_cycles`` 3), a multicast head leaves 2
  cycles after its tail arrives, credit round trip ``2*link_latency + 3`` (a credit still
  counts in the cycle it arrives for a unicast flit; a cycle later for a multicast), and
  bad-input events reach ``errors`` a cycle later.
* Allocation loop over two cycles (``alloc_stages=2``, issue 20; an option, default 1 =
  the cycles above): the loop grant -> buffer pop -> next request is cut.  The arbiters'
  grants go straight into registers; each input VC's request is a 2:1 select between the
  front and the entry after it by a register loaded with its send (allocation sees the
  entry after the front if the front was sent in the previous cycle), and acceptance
  counts the previous cycle's (registered) grants on top of the output state.  In the next
  cycle (in parallel with the next allocation) the registered grants update buffers,
  credits, owners and the local queue and traverse the switch.  Unicast cycles per hop,
  the credit round trip (the credit goes at the grant) and single-flow rate are unchanged.
  (Stop 29 speculated instead: a VC that had requested assumed it was granted, and a grant
  on a wrong assumption was cancelled a cycle later.  Doomed requests kept winning the
  arbiters, whose pointers moved only past valid grants, and a 4x4 mesh at full load
  stopped delivering.)  A multicast head is allocated 3
  cycles after its tail is written (pending -> arm -> go, all from registers; see
  ``_spec_alloc``).  Bad-input events reach ``errors`` a cycle later.
* Unicast: wormhole; an output VC is held from head to tail.
* Multicast: cut-through.  The whole packet must be in the input buffer before
  it competes (the head is allocated the cycle after the tail was written), and
  it starts only when every branch's downstream VC has room
  for a maximum-length packet.  Replication is an XY tree (the branch set is
  computed from the destination mask *and the input port*, so every link
  carries one copy).  All branches take each flit in the same cycle (one read
  port per buffer); at most one multicast moves per cycle router-wide.  Taking
  all branches at once (nothing is held while waiting) keeps it free of
  hold-and-wait deadlock.
* Allocation: separable, input first.  Each input port offers one of its VCs,
  chosen the cycle before (a register: the next VC after the current one, in
  round-robin order, that could move then); one multicast may move per cycle
  router-wide, from the port holding the multicast token (a register: it stays
  only while that port has a multicast under way, i.e. its head went and its
  tail has not, otherwise it passes, in port order, to the next port with a
  multicast waiting or arriving, so a blocked multicast never holds up a ready
  one); every output arbitrates
  round-robin over the input ports (one-hot pointer, grant in two LUT levels).
  The crossbar has one input per port (a VC mux per port into the port's flit
  register) and each output only muxes the ports XY routing can send to it.
* Credit-based flow control per VC; a flit keeps its VC on every hop (so the
  packets of one source/destination flow stay in order).  The injection VC is
  chosen from the message class (class -> VC set; ``vcs >= classes`` is
  required, classes never share a VC) and a hash of the destination (unicast)
  or source (multicast).  The credit round trip is ``2*link_latency + 2``
  cycles (validated by the mesh).
* Local output: a 4-entry queue (LUT RAM) that space is reserved in at
  allocation; ``local_out`` is valid the cycle after traversal.
* Bad input (dropped and counted in ``errors``, saturating): head with a
  destination outside the mesh (or, in a two-level system, at a gateway node) / empty or out-of-range mask / class >=
  ``classes`` / an XY-illegal turn: whole packet dropped; body/tail flit without a head: dropped;
  packet longer than ``max_packet_flits``: truncated (the last allowed flit is
  turned into the tail, the rest is dropped; earlier flits may already be
  downstream under wormhole); head inside a packet: counted, carried on as a
  body flit; flit arriving at a full buffer (upstream credit violation):
  dropped.

Timing (issue 20; ECP5-85k CABGA381, ``python -m tessera.synth router mesh --grades 6,8``):
with one-cycle allocation (``sa_stages=1``) the router reaches 75.5 MHz at speed grade 6
(94.0 at grade 8; a 2x2 mesh 63.0), critical path multicast token -> go -> pop -> next
request.  With ``sa_stages=2`` the router reaches 75.2 MHz at grade 6 (97.5 at grade 8;
5,713 LUT4, 1,692 FF) and the 2x2 mesh 69.8 MHz: the one-cycle loop per input VC (its
front must be able to leave in consecutive cycles) remains, and the next cycle's
acceptance (conservative, from this cycle's requests) plus the multicast go registers are
as deep as the allocation they replace (router critical path: offered VC -> tail marks
-> owner/credit lookahead -> next front's multicast request -> multicast outputs, ~80 %
routing); in the mesh the input validation (destination check -> drop -> header memory
write enable) is now the longest path.  100 MHz at grade 6 is not reached.  Measured
take-apart (issue 20, grade 6, one-cycle allocation): with the multicast decision tied to 0
the router reaches 86.2 MHz (4,783 LUT4; path credit -> unicast acceptance -> output grant ->
pop -> tails counter, 10 LUT levels, 2.4 ns logic + 8.7 ns routing), so the multicast token
test costs ~2 ns and the unicast loop alone still misses; registering each port's offered
VC's request/head/tail (a VC-pick off the front of the loop, cycle-identical, commit 26a289a,
reverted) made it worse, 68.3 MHz: the next offered VC's pick lands behind the pop select.
"Deferred pop" (branch n23rtr, commit 78d824d, reverted; cycle-identical to this RTL on
legal traffic by a random cycle-by-cycle comparison, router sim tests pass): the buffer
state pops a granted front a cycle after its grant (front and next entry in registers with
their requests; allocation sees a 2:1 select by the registered grant), so no grant feeds
the buffer's next-state logic: 81.1 MHz (5,301 LUT4, 1,868 FF), path sent -> requested
front -> acceptance -> output arbiter (3 levels) -> port sent -> sent, 10 levels, ~80 %
routing (seed 2: 80.8 MHz, path input framing counter -> drop -> bad-input event sum ->
saturating ``errors`` counter, 12.4 ns; the sa_stages=2 pipeline registers those events)
-- the remaining one-cycle loop (a VC's front may leave in consecutive cycles, so its next
request waits for the arbiters) is as deep as before.  Adding registered credit
compares, head/body-split request registers and a one-hot multicast token (commit
ca141a1, reverted): 72.4 MHz (5,854 LUT4, 2,169 FF; path obusy -> ... -> sent).  With
ca141a1 and its harness invariants, noc_router_credits and noc_router_request_register
pass the base case (depth 20) but fail k-induction (the new registers need more
invariants; not written).  So 100 MHz at grade 6 needs the
allocation loop itself over two cycles (a VC's consecutive flits allocated from a
speculative or two-cycle-old grant), which changes cycles.

``alloc_stages=2`` (issue 20; an option, not the default).  Stop 29 built it with
speculation (each VC's next request assumed its last one was granted; a grant on a wrong
assumption was cancelled a cycle later) and P&R gave 82.2 MHz (7baf083) and 81.9 MHz
(32a62bd), but a 4x4 mesh at full load (1 VC x 4, 1-flit packets) stopped delivering
(0.044 flits/node/cycle).  Cause (stop 30; smallest case a 2x2 mesh, seed 1, cycle ~249,
``tests/test_noc_alloc2_sim.py::test_alloc2_full_load_keeps_delivering``): a doomed request
(one that speculated wrongly) still took part in arbitration and won; its grant was
cancelled, and the round-robin pointers moved only past valid grants, so at router (0,1)
the doomed requesters of alternate cycles won every arbitration and nothing moved again.
With doomed requests kept out of arbitration (1ae1855) the mesh delivers, 0.504 at
saturation (4x4, 1 VC x 4, 1-flit packets; below BookSim's 0.51: a VC that lost waits a
doomed cycle); P&R of 1ae1855: 78.2 MHz, 5,410 LUT4, path ``ohr`` -> commit -> write ->
header RAM, 9 levels, 12.8 ns (9.7 routing).  Since then every grant is valid, so the
commit stage cancels nothing and the speculation bit is replaced by the registered send
(exact: a loser retries the next cycle; the arbiters' pointers move past their grants at
once): saturation **0.606** (4x4, 1 VC x 4, 1-flit packets; 3.000 cycles/hop,
zero-load latency 12.31; ``bench/noc_throughput.py --quick --sa a2 --configs al2_1vc_x_4
--no-mcast``, commits 30fb605 and 6373101), the same as ``alloc_stages=1`` (0.603-0.606);
with 4-flit packets 0.470 (30fb605), 0.519 since an output VC released by last cycle's
tail counts free for every head (278f3aa).
P&R of 062fbe0 (the multicast token's "head arriving" term also taken before the local
input's ready; ``python -m tessera.synth router --param alloc_stages=2 --row
router@alloc_stages=2 --grades 6``, seed 1): **88.9 MHz**, 5,341 LUT4, 1,789 FF; critical
path ``ovc_r`` (output S's registered grant VC) -> last grant's VC match -> acceptance of
F1's request -> output arbiter (L6MUX chain) -> granted VC -> ``ovc_r``, 11 levels (4 in
one L6MUX/PFUMX tree), 11.3 ns (8.0 routing): the allocation loop itself.  Same netlist,
``--seed 2``: 91.2 MHz, the same path (9 levels, 11.0 ns, 8.1 routing).
Stop 31 (cycle-identical; per-cycle traces of every node's local ports equal to 3313ab1's
in 5 random-traffic runs: 2x2 and 3x3, 1 and 2 VCs, 1-flit full load, 4-flit full load,
mixed with multicast; ``tests/test_noc_alloc2_cycles.py`` pins one): the acceptance reads
a registered one-hot "output VC taken by last cycle's grant" (``tkv``, loaded from the
one-hot grant and each port's offered VC; an inverted copy ``tkan`` for the acceptance)
instead of the ``ovc_r`` compare, and registered compares of each credit counter with the
constants it is tested against (``crge``, from the counter's next state) instead of the
credit sum.  P&R seed 1 (c34fe1d): 86.0 MHz, 5,299 LUT4, 1,837 FF -- the allocation loop
is no longer the critical path: ``vsp`` -> ``local_in.ready`` -> input validation -> the
sum of the ten bad-input events -> ``err_events_r``, 11.6 ns (8.2 routing, 13 levels).  The error
events are now registered as bits and summed after the register (same cycles): seed 1
(d79b3c6) 84.5 MHz, 5,480 LUT4, 1,842 FF, path input VC occupancy ``mcnt`` -> full ->
packet-state checks -> header write enable -> header LUT RAM write port, 11.8 ns (8.6
routing, 9 levels); seed 2 **92.4 MHz**, path ``vsp`` of the local input's VC 0 ->
``local_in.ready`` -> local write -> F0's packet state -> F0's registered request, 10.8 ns
(8.4 routing).  Both are the input side: a flit is validated, written and turned into the
next request in its arrival cycle, 9-11 levels at ~75 % routing.  A 2x2 ``mesh`` of these
routers (c34fe1d, ``python -m tessera.synth mesh --param alloc_stages=2 --row
mesh@alloc_stages=2 --grades 6``): **75.1 MHz** (10,885 LUT4, 5,724 FF; default routers:
63.0), path the mesh's link register ``r1_1.in_n.flit`` -> destination/route checks ->
framing write -> header LUT RAM write port of router (1,1), 13.3 ns (10.2 routing): no
combinational path crosses a router boundary (links are registered); the input side is
what the mesh's placement stretches.  100 MHz needs the input side split too (e.g. the
validation from the link register a cycle ahead, or an input register stage: +1 cycle per
hop), not done.  Not the default: 100 MHz is not reached.
Stop 32 (cycle-identical: ``tests/test_noc_alloc2_cycles.py`` hash unchanged; per-node
traces of 4 more meshes/traffic mixes -- 2x2 and 3x3, 1 and 2 VCs, 1-flit and 4-flit full load,
mixed with multicast -- equal to stop 31's recorded hashes; a lone router under random input
with bad heads, bodies without heads, over-long packets, flits into full buffers and random
credits, every output compared per cycle against 93ee949's router, equal in 4 configurations
(default, 1 VC, 4 VCs, 1-flit packets); ``bench/noc_throughput.py --quick --sa a2 --configs
al2_1vc_x_4 --no-mcast`` (Verilator) unchanged: 0.606 / 0.519, 3.000 cycles/hop, zero-load
12.31): (a) the write side of ``alloc_stages=2`` as flat terms of registers and
the flit (no nested checks), ``mcnt == D`` registered (``mfull``), and the header memory
written for every head that opens a packet, kept or dropped (its write enable no longer
waits for the destination/route checks; a dropped head writes the free slot at ``hwr``);
ABC maps all cone inputs as arriving together, so an untimed input port's deep cone (the
flit's checks) also deepened the register paths that join it.  (b) ``link_lookahead``
(``RouterConfig``; ``Mesh`` turns it on with ``alloc_stages=2``): the sender computes its
neighbour's route and destination/route check (``la``, 6 link bits, ``_lookahead``: the
receiver's own functions with the neighbour's address) from its crossbar output, the mesh's
link register holds them, and the receiver writes them instead of decoding the flit after
the link register (``tests/test_noc_lookahead.py``: equal to the receiver's own checks for
random legal and bad heads).  The local input still checks in its arrival cycle.
P&R of (a) (a89cf2d; the standalone router has no upstream, so ``link_lookahead`` is off;
``python -m tessera.synth router --param alloc_stages=2 --grades 6 --seed N``): seed 1
**96.3 MHz** (84.5 before), 5,368 LUT4, 1,852 FF, path ``vsp`` -> the offered VC's requests
-> credit compares -> multicast pending/arm -> next offered VC ``cv``, 10 levels, 10.4 ns (7.4
routing); seed 2 **90.8 MHz** (92.4 before), path ``crge`` -> acceptance -> multicast mask ->
output arbiter -> grant -> ``vsp``, 9 levels, 11.0 ns (8.3 routing).  The input side left
both paths: what remains is the allocation cycle (acceptance + arbiters, and the offered-VC
pick behind the multicast token's pending/arm), within the 3.5-9 % seed spread of 100.
2x2 ``mesh`` with (a) and (b) (6c8308f; ``python -m tessera.synth mesh --param alloc_stages=2
--grades 6``): **84.5 MHz** (75.1 before), 10,650 LUT4, 5,762 FF; the link-register ->
checks -> header write path is gone; the path is now the mesh's credit link register of
router (0,0)'s output S -> (3.6 ns routing) -> acceptance (a credit counts in the cycle it
arrives) -> multicast mask -> output arbiter -> grant VC register, 8 levels, 11.8 ns (9.3
routing).  Not the default: 100 MHz is not reached (router 96.3 / 90.8, mesh 84.5).

Left out: adaptive routing, speculative/bypass pipelines, VC re-allocation
per hop, per-class ejection queues (the local output is one queue held from
head to tail), ECC.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..sram import SRAM
from .flit import MAX_MESH, address_layout, flit_layout

N, E, S, W, L = range(5)
PORTS = "nesw"           # network port names, index N..W
OPPOSITE = {N: S, S: N, E: W, W: E}
# XY (and XY-tree) turns: outputs a flit arriving on input p may take.  A packet moving in X
# never turns back, one moving in Y never turns into X; no U-turns.
_ALLOW = {L: (N, E, S, W, L), W: (E, S, N, L), E: (W, S, N, L), N: (S, L), S: (N, L)}
_LEGAL_IN = {o: tuple(p for p in range(5) if o in _ALLOW[p]) for o in range(5)}


def _bits(n: int) -> int:
    return max(1, (n - 1).bit_length())


def _nz(x):
    """x != 0 without Verilog's multi-bit logical-not idiom (lint-clean)."""
    return x.any()


def _z(x):
    return ~x.any()


def _bit(x, idx):
    """Variable bit select, lint-clean: (x >> idx)[0]."""
    return (x >> idx)[0]


def _lt_const(x, k):
    """x < k for a constant k, folded when constant."""
    if k <= 0:
        return Const(0, 1)
    if k >= (1 << len(x)):
        return Const(1, 1)
    return x < k


def _gt_const(x, k):
    """x > k for constant k."""
    if k >= (1 << len(x)) - 1:
        return Const(0, 1)
    if k < 0:
        return Const(1, 1)
    return x > k


def _eqc(x, k):
    return ~x.any() if k == 0 else (x == k)


def _pick(m, idx, items, name, width, attrs=None):
    """items[idx] as a full case statement with a default (no incomplete-case lint)."""
    out = Signal(width, name=name, attrs=attrs or {})
    with m.Switch(idx):
        for i, it in enumerate(items):
            with m.Case(i):
                m.d.comb += out.eq(it)
        with m.Default():
            m.d.comb += out.eq(0)
    return out


class RouterConfig:
    """Validated router parameters (shared by router, mesh and golden checks)."""

    def __init__(self, kx=4, ky=4, vcs=2, buffer_flits=4, max_packet_flits=4, payload_width=64,
                 classes=2, level="noc", hier=False, ckx=1, cky=1, gw_x=0, gw_y=0,
                 max_node=MAX_MESH, max_chiplet=MAX_MESH, err_width=16, sa_stages=1,
                 alloc_stages=1, link_lookahead=False):
        def bad(name, msg):
            err = ValueError(f"{name}: {msg}")
            err.param = name
            raise err
        if level not in ("noc", "nop"):
            bad("level", f"must be 'noc' or 'nop', got {level!r}")
        for name, v in (("max_node", max_node), ("max_chiplet", max_chiplet)):
            if not 1 <= v <= MAX_MESH:
                bad(name, f"must be in 1..{MAX_MESH}, got {v}")
        for name, v, hi in (("kx", kx, max_node), ("ky", ky, max_node),
                            ("ckx", ckx, max_chiplet), ("cky", cky, max_chiplet)):
            if not 1 <= v <= hi:
                bad(name, f"must be in 1..{hi}, got {v}")
        if not 1 <= vcs <= 4:
            bad("vcs", f"must be in 1..4, got {vcs}")
        if classes < 1:
            bad("classes", "must be >= 1")
        if vcs < classes:
            bad("vcs", f"{vcs} VCs < {classes} message classes: classes would share a VC "
                "(protocol deadlock); use vcs >= classes")
        if vcs % classes:
            bad("vcs", f"{vcs} VCs cannot be split evenly over {classes} message classes")
        if max_packet_flits < 1:
            bad("max_packet_flits", "must be >= 1")
        if buffer_flits < max_packet_flits:
            bad("buffer_flits", f"{buffer_flits} < max_packet_flits={max_packet_flits}: a "
                "multicast packet must fit in one input buffer (cut-through)")
        if not (0 <= gw_x < kx and 0 <= gw_y < ky):
            bad("gw_x", f"gateway ({gw_x},{gw_y}) outside the {kx}x{ky} chiplet mesh")
        if not 4 <= err_width <= 32:
            bad("err_width", "must be in 4..32")
        if sa_stages not in (1, 2):
            bad("sa_stages", f"must be 1 or 2, got {sa_stages}")
        if alloc_stages not in (1, 2):
            bad("alloc_stages", f"must be 1 or 2, got {alloc_stages}")
        if alloc_stages == 2 and sa_stages != 1:
            bad("alloc_stages", "alloc_stages=2 needs sa_stages=1 (two allocation pipelines)")
        if link_lookahead and alloc_stages != 2:
            bad("link_lookahead", "link_lookahead needs alloc_stages=2")
        self.kx, self.ky, self.vcs, self.depth = kx, ky, vcs, buffer_flits
        self.max_len, self.payload_width, self.classes = max_packet_flits, payload_width, classes
        self.level, self.hier, self.ckx, self.cky = level, hier, ckx, cky
        self.gw_x, self.gw_y = gw_x, gw_y
        self.max_node, self.max_chiplet, self.err_width = max_node, max_chiplet, err_width
        self.flit = flit_layout(payload_width, classes, (max_node, max_node),
                                (max_chiplet, max_chiplet))
        self.addr = address_layout((max_node, max_node), (max_chiplet, max_chiplet))
        self.vpc = vcs // classes      # class -> VC set of vpc VCs
        self.sa_stages = sa_stages
        self.alloc_stages = alloc_stages
        self.link_lookahead = bool(link_lookahead)

    @property
    def router_cycles(self) -> int:
        """Zero-load cycles a router adds to a head (buffer write .. allocation)."""
        return 1 + self.sa_stages

    @property
    def mcast_tail_cycles(self) -> int:
        """Cycles from a multicast tail's buffer write to its head's allocation."""
        return self.sa_stages + 2 * (self.alloc_stages - 1)

    @property
    def credit_rtt_extra(self) -> int:
        """Credit round trip minus 2*link_latency (cycles)."""
        return 1 + self.sa_stages

    def vc_of(self, mclass: int, h: int) -> int:
        """Injection VC of a packet of class ``mclass`` with hash ``h`` (Python mirror)."""
        return mclass * self.vpc + h % self.vpc

    @property
    def link(self):
        return link_signature(self)


def link_signature(cfg: RouterConfig) -> wiring.Signature:
    """One direction of a router-to-router link, seen from the sender."""
    return wiring.Signature({
        "valid": Out(1),
        "vc": Out(_bits(cfg.vcs)),
        "flit": Out(cfg.flit),
        "credit": In(cfg.vcs),
        # link_lookahead: the receiver's route (5 bits) and destination/route check (bit 5)
        # of the flit on the link, computed by the sender for its neighbour
        **({"la": Out(6)} if cfg.link_lookahead else {}),
    })


class Router(wiring.Component):
    _CTL_SRAM = SRAM         # framing/route memory class (the formal harness probes its cells)

    def __init__(self, cfg: RouterConfig | None = None, **params):
        self.cfg = cfg = cfg or RouterConfig(**params)
        members = {
            "local_in": In(stream.Signature(cfg.flit)),
            "local_out": Out(stream.Signature(cfg.flit)),
            "my": In(cfg.addr),
            "errors": Out(cfg.err_width),
        }
        for i, name in enumerate(PORTS):
            members[f"in_{name}"] = In(cfg.link)
            members[f"out_{name}"] = Out(cfg.link)
        super().__init__(members)

    # --- combinational helpers -------------------------------------------------------
    def _mesh_dims(self):
        c = self.cfg
        return (c.kx, c.ky) if c.level == "noc" else (c.ckx, c.cky)

    def _dest_valid(self, m, f):
        """1 if the head flit's destination/class is legal for this network."""
        c = self.cfg
        ok = Signal(name="dest_ok")
        uc, mc = f.dest.ucast, f.dest.mcast
        node_ok_u = _lt_const(uc.node.x, c.kx) & _lt_const(uc.node.y, c.ky)
        chip_ok_u = _lt_const(uc.chiplet.x, c.ckx) & _lt_const(uc.chiplet.y, c.cky)
        nvalid = (1 << (c.kx * c.ky)) - 1
        cvalid = (1 << (c.ckx * c.cky)) - 1
        node_ok_m = _z(mc.nodes & ~Const(nvalid, len(mc.nodes))) & _nz(mc.nodes)
        chip_ok_m = _z(mc.chiplets & ~Const(cvalid, len(mc.chiplets))) & _nz(mc.chiplets)
        if c.level == "noc" and not c.hier:
            u_ok, m_ok = node_ok_u, node_ok_m
        else:
            # the gateway node is the NoP router's port, not a destination
            gw_u = _eqc(uc.node.x, c.gw_x) & _eqc(uc.node.y, c.gw_y)
            gw_m = mc.nodes[c.gw_y * c.kx + c.gw_x]
            u_ok = node_ok_u & chip_ok_u & ~gw_u
            m_ok = node_ok_m & chip_ok_m & ~gw_m
        cls_ok = _lt_const(f.mclass, c.classes)
        m.d.comb += ok.eq(cls_ok & Mux(f.mcast, m_ok, u_ok))
        return ok

    def _route(self, m, f, p, tag, me=None):
        """5-bit output mask for head flit ``f`` arriving on input port ``p`` (computed when
        the flit is written into the input buffer and stored next to it), and route_ok.
        ``me``: the (x, y) of the router the route is for (default this one's; the
        neighbour's for ``link_lookahead``)."""
        c = self.cfg
        kx, ky = self._mesh_dims()
        if me is None:
            me = self.my.node if c.level == "noc" else self.my.chiplet
        uc, mc = f.dest.ucast, f.dest.mcast
        out = Signal(5, name=f"route_{tag}")
        # unicast target in this mesh
        tx, ty = Signal(4, name=f"tx_{tag}"), Signal(4, name=f"ty_{tag}")
        if c.level == "noc":
            if c.hier:
                other = (uc.chiplet.x != self.my.chiplet.x) | (uc.chiplet.y != self.my.chiplet.y)
                m.d.comb += [tx.eq(Mux(other, c.gw_x, uc.node.x)),
                             ty.eq(Mux(other, c.gw_y, uc.node.y))]
            else:
                m.d.comb += [tx.eq(uc.node.x), ty.eq(uc.node.y)]
        else:
            m.d.comb += [tx.eq(uc.chiplet.x), ty.eq(uc.chiplet.y)]
        ucast = Signal(5, name=f"uroute_{tag}")
        with m.If(tx > me.x):
            m.d.comb += ucast.eq(1 << E)
        with m.Elif(tx < me.x):
            m.d.comb += ucast.eq(1 << W)
        with m.Elif(ty > me.y):
            m.d.comb += ucast.eq(1 << S)
        with m.Elif(ty < me.y):
            m.d.comb += ucast.eq(1 << N)
        with m.Else():
            m.d.comb += ucast.eq(1 << L)
        # multicast target set in this mesh (kx*ky bits)
        n = kx * ky
        tset = Signal(n, name=f"tset_{tag}")
        if c.level == "noc":
            if c.hier:
                mybit = Signal(name=f"mybit_{tag}")
                cidx = self.my.chiplet.y * c.ckx + self.my.chiplet.x
                m.d.comb += mybit.eq(_bit(mc.chiplets, cidx))
                cmask = Signal(c.ckx * c.cky, name=f"cmask_{tag}")
                m.d.comb += cmask.eq(mc.chiplets[:c.ckx * c.cky])
                others = _nz(cmask & ~(Const(1, c.ckx * c.cky) << cidx)[:c.ckx * c.cky])
                from_here = (f.src.chiplet.x == self.my.chiplet.x) & \
                            (f.src.chiplet.y == self.my.chiplet.y)
                gwbit = Const(1 << (c.gw_y * kx + c.gw_x), n)
                m.d.comb += tset.eq(Mux(mybit, mc.nodes[:n], 0) | Mux(others & from_here, gwbit, 0))
            else:
                m.d.comb += tset.eq(mc.nodes[:n])
        else:
            src_here = (f.src.chiplet.x == me.x) & (f.src.chiplet.y == me.y)
            cidx = me.y * kx + me.x
            selfbit = Signal(n, name=f"selfbit_{tag}")
            m.d.comb += selfbit.eq(Mux(src_here, (Const(1, n) << cidx)[:n], 0))
            m.d.comb += tset.eq(mc.chiplets[:n] & ~selfbit)
        east = Cat(*[tset[i] & _lt_const(me.x, i % kx) for i in range(n)]).any()
        west = Cat(*[tset[i] & _gt_const(me.x, i % kx) for i in range(n)]).any()
        south = Cat(*[tset[i] & _eqc(me.x, i % kx) & _lt_const(me.y, i // kx) for i in range(n)]).any()
        north = Cat(*[tset[i] & _eqc(me.x, i % kx) & _gt_const(me.y, i // kx) for i in range(n)]).any()
        here = _bit(tset, me.y * kx + me.x)
        # XY-tree subtree filter by input port
        allow = _ALLOW[p]
        amask = sum(1 << o for o in allow)
        mcast = Signal(5, name=f"mroute_{tag}")
        bits = [0] * 5
        bits[E], bits[W], bits[S], bits[N], bits[L] = east, west, south, north, here
        m.d.comb += mcast.eq(Cat(*[bits[o] if o in allow else Const(0, 1) for o in range(5)]))
        m.d.comb += out.eq(Mux(f.mcast, mcast, ucast & amask))
        # an XY-illegal unicast turn (or a multicast with no branch here) is a bad packet
        ok = Signal(name=f"route_ok_{tag}")
        m.d.comb += ok.eq(_nz(out))
        return out, ok

    # --- elaboration -----------------------------------------------------------------
    def elaborate(self, platform):
        c = self.cfg
        m = Module()
        V, D = c.vcs, c.depth
        cw = _bits(D + 1)          # counters 0..D
        NI = 5 * V                 # input VCs, index p*V+v
        FW = c.flit.size
        PW = c.payload_width
        RB = 9                     # entry framing: head, tail, mcast, drop, route (5)
        HW = FW - 2 - PW           # header: mclass, mcast, dest, src (head flits only)
        LQ = 4                     # local output queue entries

        def header_of(f):
            return Cat(f.mclass, f.mcast, f.dest.as_value(), f.src.as_value())

        in_links = [getattr(self, f"in_{n}") for n in PORTS]
        out_links = [getattr(self, f"out_{n}") for n in PORTS]
        err_events = []

        # per input VC state (control: reset; datapath: the buffer memories, no reset)
        fhead = [[None] * V for _ in range(5)]
        ftail = [[None] * V for _ in range(5)]
        fmc = [[None] * V for _ in range(5)]
        fdrop = [[None] * V for _ in range(5)]
        froute = [[None] * V for _ in range(5)]
        fv = [[Signal(name=f"fv_{p}_{v}") for v in range(V)] for p in range(5)]
        pop = [[Signal(name=f"pop_{p}_{v}") for v in range(V)] for p in range(5)]
        tails = [[Signal(_bits(D + 2), name=f"tails_{p}_{v}") for v in range(V)] for p in range(5)]
        self._mcnt = [[None] * V for _ in range(5)]      # for the formal harness
        self._vcstate = [[None] * V for _ in range(5)]
        self._fv, self._pop = fv, pop
        self._write = [[None] * V for _ in range(5)]
        self._req, self._fdrop = None, fdrop
        cv = [Signal(_bits(V), name=f"cv_{p}") for p in range(5)]     # offered VC per port
        port_pay, port_hdr = [None] * 5, [None] * 5    # offered VC's front payload / header
        active = [[Signal(5, name=f"active_{p}_{v}") for v in range(V)] for p in range(5)]
        in_mc = [[Signal(name=f"inmc_{p}_{v}") for v in range(V)] for p in range(5)]
        # the front's request, registered (next-state logic below; allocation starts from it):
        # unicast route / multicast branch set of the front flit, 0 if it cannot request
        ureq = [[Signal(5, name=f"ureq_{p}_{v}") for v in range(V)] for p in range(5)]
        mreq = [[Signal(5, name=f"mreq_{p}_{v}") for v in range(V)] for p in range(5)]
        self._ureq, self._mreq = ureq, mreq
        self._reqc = [[None] * V for _ in range(5)]     # the same, from the state (formal)

        def derive(fv_, fc_, tz_, act_, inmc_, tag):
            """(unicast, multicast) request of a front with framing ``fc_`` (a multicast
            head waits until its tail is in the buffer: ``tz_`` = no tail stored)."""
            hd, mc, dr, rt = fc_[0], fc_[2], fc_[3], fc_[4:RB]
            rq = Signal(5, name=f"rq_{tag}")
            im = Signal(name=f"im_{tag}")
            m.d.comb += [rq.eq(Mux(fv_ & ~dr, Mux(hd, Mux(mc & tz_, 0, rt), act_), 0)),
                         im.eq(Mux(hd, mc, inmc_))]
            return Mux(im, 0, rq), Mux(im, rq, 0)

        S2 = c.sa_stages == 2
        SP = c.alloc_stages == 2
        # two-stage allocation loop (alloc_stages=2): per input VC, ``vsp`` -- its front was
        # sent in the previous cycle (a register loaded with the send), so allocation sees
        # the entry after the front, and the state pops the front now
        vsp = [[Signal(name=f"vsp_{p}_{v}") for v in range(V)] for p in range(5)]
        self._sp = dict(vsp=vsp) if SP else None
        s2vc = [[None] * V for _ in range(5)]      # two-stage allocation: next-state requests
        mc_in = Signal(5, name="mc_in")            # a multicast head is written this cycle
        mc_in_terms = [[] for _ in range(5)]

        def inc(x):
            return Mux(x == D - 1, 0, x + 1) if D > 1 else Const(0, len(x))

        # ---------------- write side: validate, route (lookahead), buffer ----------------
        for p in range(5):
            if p == L:
                f = self.local_in.payload
                in_pkt_l = Signal(name="lin_pkt")
                cur_vc = Signal(_bits(V), name="lin_vc")
                # injection VC: class -> VC set, hash of destination (unicast) / source
                uc = f.dest.ucast
                h = Signal(8, name="lin_hash")
                m.d.comb += h.eq(Mux(f.mcast, f.src.node.x + f.src.node.y + f.src.chiplet.x
                                     + f.src.chiplet.y,
                                     uc.node.x + uc.node.y + uc.chiplet.x + uc.chiplet.y))
                vsel = Signal(_bits(V), name="lin_vsel")
                base = f.mclass * c.vpc
                hv = (h % c.vpc) if c.vpc > 1 else 0
                m.d.comb += vsel.eq(Mux(in_pkt_l, cur_vc, (base + hv)[:_bits(V)] if V > 1 else 0))
                valid = self.local_in.valid & self.local_in.ready
                vcin = vsel
                with m.If(valid):
                    m.d.sync += cur_vc.eq(vsel)
                    with m.If(f.head | in_pkt_l):
                        m.d.sync += in_pkt_l.eq(~f.tail)
                lin_space = []
            else:
                lk = in_links[p]
                f, valid, vcin = lk.flit, lk.valid, lk.vc
            dest_ok = Signal(name=f"dok_{p}")
            if c.link_lookahead and p != L:
                # the sender computed this router's route and checks from its own
                # registers in the cycle before (the link register holds them)
                route = Signal(5, name=f"route_{p}")
                m.d.comb += [route.eq(in_links[p].la[:5]), dest_ok.eq(in_links[p].la[5])]
            else:
                route, route_ok = self._route(m, f, p, f"{p}")
                m.d.comb += dest_ok.eq(self._dest_valid(m, f) & route_ok)
            pname = PORTS[p] if p != L else "l"
            # payloads and headers: one memory per port for all its VCs (address = VC, slot;
            # one flit is written per port and cycle, and only the offered VC's front is read,
            # so the LUT RAM's read decoder is the VC multiplexer); framing + route: one
            # memory per VC (each VC's next entry is read ahead into its front register)
            aw = _bits(max(2, D))
            pdepth = max(2, D) if V == 1 else V << aw
            mem = SRAM(pdepth, PW)
            hmem = SRAM(pdepth, HW)
            m.submodules[f"buf_{pname}"] = mem
            m.submodules[f"hdr_{pname}"] = hmem
            vw = [[] for _ in range(6)]            # per VC: write, wr, rd, hwrite, hwr, hrd
            for v in range(V):
                cmem = self._CTL_SRAM(max(2, D), RB, read_latency=0)
                m.submodules[f"ctl_{pname}{v}"] = cmem
                wr = Signal(aw, name=f"wr_{p}_{v}")
                rd = Signal(aw, name=f"rd_{p}_{v}")
                rd1 = Signal(aw, name=f"rd1_{p}_{v}", init=1 % max(2, D))     # rd + 1
                fc = Signal(RB, name=f"fctl_{p}_{v}")     # framing + route of the front entry
                hwr = Signal(aw, name=f"hwr_{p}_{v}")
                hrd = Signal(aw, name=f"hrd_{p}_{v}")
                mcnt = Signal(cw, name=f"mcnt_{p}_{v}")        # entries in the buffer
                self._mcnt[p][v] = mcnt
                we = Signal(name=f"we_{p}_{v}")
                m.d.comb += we.eq(valid & _eqc(vcin, v) if V > 1 else valid)
                in_pkt = Signal(name=f"inpkt_{p}_{v}")
                dropping = Signal(name=f"dropping_{p}_{v}")
                pcnt = Signal(_bits(c.max_len + 1), name=f"pcnt_{p}_{v}")
                whead = Signal(name=f"whead_{p}_{v}")
                wtail = Signal(name=f"wtail_{p}_{v}")
                wdrop = Signal(name=f"wdrop_{p}_{v}")
                err = Signal(name=f"err_{p}_{v}")
                if SP:
                    # (the front validly sent in the previous cycle leaves the buffer in this
                    # cycle; its slot counts as free, its credit went upstream at its grant)
                    full = Signal(name=f"full_{p}_{v}")
                    mfull = Signal(name=f"mfull_{p}_{v}")      # register: mcnt == D
                    m.d.comb += full.eq(mfull & ~vsp[p][v])
                else:
                    full = mcnt == D
                if p == L:
                    lin_space.append(~full if SP else mcnt != D)
                if SP:
                    # (alloc_stages=2: the write side as flat terms of registers and the
                    # flit, cycle-identical to the nested checks of alloc_stages=1 below,
                    # so the flit's late bits and the registered state meet in few LUT
                    # levels: s0 no packet open, sd dropping the open packet, sb inside
                    # a kept packet, trunc the next kept flit is the last allowed)
                    ok = Signal(name=f"wok_{p}_{v}")
                    m.d.comb += ok.eq(we & ~full)
                    s0, sd, sb = ~in_pkt, in_pkt & dropping, in_pkt & ~dropping
                    trunc = _eqc(pcnt, c.max_len - 1)
                    one = 1 if c.max_len == 1 else 0
                    m.d.comb += [
                        wdrop.eq(we & (full | (s0 & (~f.head | ~dest_ok)) | sd)),
                        whead.eq(f.head & ~(ok & sb)),
                        wtail.eq(f.tail | (ok & ((s0 & f.head & dest_ok & one) |
                                                 (sb & trunc)))),
                        err.eq(we & (full | (s0 & (~f.head | ~dest_ok |
                                                   (dest_ok & ~f.tail & one))) |
                                     (sb & (f.head | (~f.tail & trunc))))),
                    ]
                    with m.If(ok):
                        with m.If(s0):
                            with m.If(f.head & ~dest_ok):
                                m.d.sync += [in_pkt.eq(~f.tail), dropping.eq(~f.tail)]
                            with m.Elif(f.head):
                                m.d.sync += pcnt.eq(1)
                                if c.max_len == 1:
                                    with m.If(~f.tail):
                                        m.d.sync += [in_pkt.eq(1), dropping.eq(1)]
                                else:
                                    m.d.sync += [in_pkt.eq(~f.tail), dropping.eq(0)]
                        with m.Elif(sd):
                            with m.If(f.tail):
                                m.d.sync += [in_pkt.eq(0), dropping.eq(0)]
                        with m.Else():
                            m.d.sync += pcnt.eq(pcnt + 1)
                            with m.If(f.tail):
                                m.d.sync += in_pkt.eq(0)
                            with m.Elif(trunc):
                                m.d.sync += dropping.eq(1)
                else:
                    m.d.comb += [whead.eq(f.head), wtail.eq(f.tail)]
                    with m.If(we):
                        with m.If(full):
                            # upstream violated credits: drop, keep packet state
                            m.d.comb += [err.eq(1), wdrop.eq(1)]
                        with m.Elif(~in_pkt):
                            with m.If(~f.head):
                                m.d.comb += [err.eq(1), wdrop.eq(1)]
                            with m.Elif(~dest_ok):
                                m.d.comb += [err.eq(1), wdrop.eq(1)]
                                m.d.sync += [in_pkt.eq(~f.tail), dropping.eq(~f.tail)]
                            with m.Else():
                                m.d.sync += pcnt.eq(1)
                                if c.max_len == 1:
                                    m.d.comb += wtail.eq(1)
                                    with m.If(~f.tail):
                                        m.d.comb += err.eq(1)
                                        m.d.sync += [in_pkt.eq(1), dropping.eq(1)]
                                else:
                                    m.d.sync += [in_pkt.eq(~f.tail), dropping.eq(0)]
                        with m.Elif(dropping):
                            m.d.comb += wdrop.eq(1)
                            with m.If(f.tail):
                                m.d.sync += [in_pkt.eq(0), dropping.eq(0)]
                        with m.Else():
                            m.d.comb += whead.eq(0)
                            m.d.sync += pcnt.eq(pcnt + 1)
                            with m.If(f.head):
                                m.d.comb += err.eq(1)
                            with m.If(f.tail):
                                m.d.sync += in_pkt.eq(0)
                            with m.Elif(pcnt == c.max_len - 1):
                                # over-long: truncate here, drop the rest
                                m.d.comb += [wtail.eq(1)]
                                m.d.sync += dropping.eq(1)
                                m.d.comb += err.eq(1)
                err_events.append(err)
                write = Signal(name=f"write_{p}_{v}")
                m.d.comb += write.eq(we & ~full)
                hwrite = Signal(name=f"hwrite_{p}_{v}")
                m.d.comb += hwrite.eq(write & whead & ~wdrop)
                self._write[p][v] = write
                mc_in_terms[p].append(hwrite & f.mcast)
                wctl = Cat(whead, wtail, f.mcast, wdrop, route)
                if SP:
                    # alloc_stages=2.  The state is the buffer after the pops of the valid
                    # grants up to two cycles ago: the front entry ``fc`` (F0) and the one after
                    # it ``fc1`` (F1), each with its registered request and the packet state
                    # before it.  Allocation sees F1 if this VC's front was sent in the
                    # previous cycle (``vsp``, a register loaded with the send), else F0 -- a
                    # 2:1 select by a register.  The state pops F0 in the cycle after its
                    # grant (``vsp``) or at once if it is a dropped entry.
                    sr = vsp[p][v]
                    fc1 = Signal(RB, name=f"fctl1_{p}_{v}")
                    rd2 = Signal(aw, name=f"rd2_{p}_{v}", init=2 % max(2, D))
                    act0 = Signal(5, name=f"act0_{p}_{v}")       # packet state before F0
                    inmc0 = Signal(name=f"inmc0_{p}_{v}")
                    act1 = Signal(5, name=f"act1_{p}_{v}")       # ... before F1
                    inmc1 = Signal(name=f"inmc1_{p}_{v}")
                    u0, m0 = Signal(5, name=f"ureq0_{p}_{v}"), Signal(5, name=f"mreq0_{p}_{v}")
                    u1, m1 = Signal(5, name=f"ureq1_{p}_{v}"), Signal(5, name=f"mreq1_{p}_{v}")
                    m.d.comb += [cmem.w_en.eq(write), cmem.w_addr.eq(wr), cmem.w_data.eq(wctl),
                                 cmem.r_addr.eq(rd2)]
                    dpop = Signal(name=f"dpop_{p}_{v}")          # the state's pop (F0 leaves)
                    m.d.comb += dpop.eq(vsp[p][v] | (_nz(mcnt) & fc[3]))
                    fce = Signal(RB, name=f"fce_{p}_{v}")
                    m.d.comb += [fce.eq(Mux(sr, fc1, fc)),
                                 fv[p][v].eq(Mux(sr, _gt_const(mcnt, 1), _nz(mcnt))),
                                 ureq[p][v].eq(Mux(sr, u1, u0)), mreq[p][v].eq(Mux(sr, m1, m0)),
                                 active[p][v].eq(Mux(sr, act1, act0)),
                                 in_mc[p][v].eq(Mux(sr, inmc1, inmc0))]
                    fhead[p][v], ftail[p][v], fmc[p][v], fdrop[p][v] = \
                        fce[0], fce[1], fce[2], fce[3]
                    froute[p][v] = fce[4:RB]
                    mcnte = Signal(cw, name=f"mcnte_{p}_{v}")
                    m.d.comb += mcnte.eq(mcnt - vsp[p][v])
                    self._mcnt[p][v] = mcnte
                    f0tl = fc[1] & ~fc[3]                          # F0 is a (kept) tail
                    rde = Signal(aw, name=f"rde_{p}_{v}")
                    hrde = Signal(aw, name=f"hrde_{p}_{v}")
                    m.d.comb += [rde.eq(Mux(sr, rd1, rd)),
                                 hrde.eq(Mux(sr & f0tl, inc(hrd), hrd))]
                    # the header memory is written for every head that opens a packet,
                    # kept or not (a dropped head's write goes to the free slot at ``hwr``,
                    # which only a kept head claims), so its write enable does not wait
                    # for the destination/route checks
                    hwe = Signal(name=f"hwe_{p}_{v}")
                    m.d.comb += hwe.eq(write & f.head & ~in_pkt)
                    for lst, sig in zip(vw, (write, wr, rde, hwe, hwr, hrde)):
                        lst.append(sig)

                    def after(f, act, inmc):
                        hd, tl, mcb, dr, rt = f[0], f[1], f[2], f[3], f[4:RB]
                        return (Mux(~dr & hd, Mux(tl, 0, rt), Mux(~dr & tl, 0, act)),
                                Mux(~dr & hd, mcb, inmc))
                    tw = write & wtail & ~wdrop
                    lt = len(tails[p][v])
                    left = Signal(cw, name=f"left_{p}_{v}")        # entries left after the pop
                    m.d.comb += left.eq(mcnt - dpop)
                    fc0n = Signal(RB, name=f"fc0n_{p}_{v}")
                    fc1n = Signal(RB, name=f"fc1n_{p}_{v}")
                    m.d.comb += [fc0n.eq(Mux(_nz(left), Mux(dpop, fc1, fc), wctl)),
                                 fc1n.eq(Mux(_gt_const(left, 1), Mux(dpop, cmem.r_data, fc1),
                                             wctl))]
                    a_pop, i_pop = after(fc, act0, inmc0)
                    act0n = Signal(5, name=f"act0n_{p}_{v}")
                    inmc0n = Signal(name=f"inmc0n_{p}_{v}")
                    m.d.comb += [act0n.eq(Mux(dpop, a_pop, act0)),
                                 inmc0n.eq(Mux(dpop, i_pop, inmc0))]
                    a1n, i1n = after(fc0n, act0n, inmc0n)
                    tails_n = Signal(lt, name=f"tailsn_{p}_{v}")
                    tails1n = Signal(lt, name=f"tails1n_{p}_{v}")
                    m.d.comb += [tails_n.eq(tails[p][v] + tw - (dpop & f0tl)),
                                 tails1n.eq(tails_n - (fc0n[1] & ~fc0n[3]))]
                    mcnt_n = Signal(cw, name=f"mcntn_{p}_{v}")
                    m.d.comb += mcnt_n.eq(left + write)
                    m.d.sync += mfull.eq(mcnt_n == D)
                    u0n, m0n = derive(_nz(mcnt_n), fc0n, _z(tails_n), act0n, inmc0n, f"n0{p}_{v}")
                    u1n, m1n = derive(_gt_const(mcnt_n, 1), fc1n, _z(tails1n), a1n, i1n,
                                      f"n1{p}_{v}")
                    m.d.sync += [fc.eq(fc0n), fc1.eq(fc1n), mcnt.eq(mcnt_n),
                                 tails[p][v].eq(tails_n), act0.eq(act0n), inmc0.eq(inmc0n),
                                 act1.eq(a1n), inmc1.eq(i1n),
                                 u0.eq(u0n), m0.eq(m0n), u1.eq(u1n), m1.eq(m1n)]
                    with m.If(write):
                        m.d.sync += wr.eq(inc(wr))
                    with m.If(hwrite):
                        m.d.sync += hwr.eq(inc(hwr))
                    with m.If(dpop):
                        m.d.sync += [rd.eq(rd1), rd1.eq(rd2), rd2.eq(inc(rd2))]
                        with m.If(f0tl):
                            m.d.sync += hrd.eq(inc(hrd))
                    tze = _z(tails[p][v] - (sr & f0tl))
                    self._reqc[p][v] = derive(fv[p][v], fce, tze, active[p][v], in_mc[p][v],
                                              f"c{p}_{v}")
                    # (formal: F0's and F1's requests and F1's packet state from the state)
                    if not hasattr(self, "_a2chk"):
                        self._a2chk = {}
                    a1s = after(fc, act0, inmc0)
                    self._a2chk[(p, v)] = dict(
                        u0=u0, m0=m0, u1=u1, m1=m1, act1=act1, inmc1=inmc1, a1=a1s,
                        r0=derive(_nz(mcnt), fc, _z(tails[p][v]), act0, inmc0, f"k0{p}_{v}"),
                        r1=derive(_gt_const(mcnt, 1), fc1, _z(tails[p][v] - f0tl), a1s[0],
                                  a1s[1], f"k1{p}_{v}"))
                    self._vcstate[p][v] = dict(cmem=cmem, wr=wr, rd=rd, rd1=rd1, rd2=rd2, fc=fc,
                                               fc1=fc1, mcnt=mcnt, dropping=dropping,
                                               tails=tails[p][v], active=act0, in_mc=inmc0,
                                               act1=act1, in_mc1=inmc1, m0=m0, f0tl=f0tl,
                                               mfull=mfull)
                    if p != L:
                        # a credit goes back when a flit leaves the buffer: at its grant
                        upc = in_links[p].credit
                        m.d.comb += upc[v].eq(pop[p][v])
                    continue
                for lst, sig in zip(vw, (write, wr, rd, hwrite, hwr, hrd)):
                    lst.append(sig)
                m.d.comb += [cmem.w_en.eq(write), cmem.w_addr.eq(wr), cmem.w_data.eq(wctl),
                             cmem.r_addr.eq(rd1)]
                # the front's payload and header are asynchronous reads at the read pointers;
                # its framing and route are a register (allocation starts from flip-flops),
                # loaded from the entry after it on a pop or from the write into an empty slot
                fhead[p][v], ftail[p][v], fmc[p][v], fdrop[p][v] = fc[0], fc[1], fc[2], fc[3]
                froute[p][v] = fc[4:RB]
                m.d.comb += fv[p][v].eq(_nz(mcnt))
                # next front control with and without a pop, so the pop (the end of
                # switch allocation) is the last 2:1 select
                fc_pop = Signal(RB, name=f"fcpop_{p}_{v}")
                fc_hold = Signal(RB, name=f"fchold_{p}_{v}")
                m.d.comb += [fc_pop.eq(Mux(mcnt >= 2, cmem.r_data, wctl)),
                             fc_hold.eq(Mux(fv[p][v], fc, wctl))]
                m.d.sync += fc.eq(Mux(pop[p][v], fc_pop, fc_hold))
                self._vcstate[p][v] = dict(cmem=cmem, wr=wr, rd=rd, rd1=rd1, fc=fc, mcnt=mcnt,
                                           dropping=dropping, tails=tails[p][v],
                                           active=active[p][v], in_mc=in_mc[p][v])
                # registered request: the next state's request with and without a pop, so
                # the pop is again the last 2:1 select (same values as computing it from the
                # state each cycle; ``_reqc`` is that, for the formal equivalence check)
                tw = write & wtail & ~wdrop
                lt = len(tails[p][v])
                tz_hold = Signal(lt, name=f"tnh_{p}_{v}")
                tz_pop = Signal(lt, name=f"tnp_{p}_{v}")
                fv_hold = Signal(cw, name=f"mnh_{p}_{v}")
                fv_pop = Signal(cw, name=f"mnp_{p}_{v}")
                fhd, ftl, fmcb, fdr, frt = fc[0], fc[1], fc[2], fc[3], fc[4:RB]
                act_pop = Mux(~fdr & fhd, Mux(ftl, 0, frt), Mux(~fdr & ftl, 0, active[p][v]))
                inmc_pop = Mux(~fdr & fhd, fmcb, in_mc[p][v])
                if not S2:
                    m.d.comb += [tz_hold.eq(tails[p][v] + tw),
                                 tz_pop.eq(tails[p][v] + tw - (ftl & ~fdr)),
                                 fv_hold.eq(mcnt + write), fv_pop.eq(mcnt + write - 1)]
                    u_p, m_p = derive(_nz(fv_pop), fc_pop, _z(tz_pop), act_pop, inmc_pop,
                                      f"p{p}_{v}")
                    u_h, m_h = derive(_nz(fv_hold), fc_hold, _z(tz_hold), active[p][v],
                                      in_mc[p][v], f"h{p}_{v}")
                    self._reqc[p][v] = derive(fv[p][v], fc, _z(tails[p][v]), active[p][v],
                                              in_mc[p][v], f"c{p}_{v}")
                else:
                    # two-stage allocation: the next state's request is computed from
                    # registers and the buffer only (not from the flit being written), so a
                    # flit written into the front slot, or a multicast tail written now,
                    # counts one cycle later (``fresh`` / ``twd`` record that, for the formal
                    # equivalence check)
                    m.d.comb += [tz_hold.eq(tails[p][v]),
                                 tz_pop.eq(tails[p][v] - (ftl & ~fdr)),
                                 fv_hold.eq(mcnt), fv_pop.eq(mcnt - 1)]
                    u_p, m_p = derive(_nz(fv_pop), cmem.r_data, _z(tz_pop), act_pop, inmc_pop,
                                      f"p{p}_{v}")
                    u_h, m_h = derive(fv[p][v], fc, _z(tz_hold), active[p][v], in_mc[p][v],
                                      f"h{p}_{v}")
                    fresh = Signal(name=f"fresh_{p}_{v}")
                    twd = Signal(name=f"twd_{p}_{v}")
                    m.d.sync += [fresh.eq(write & Mux(pop[p][v], mcnt < 2, ~fv[p][v])),
                                 twd.eq(tw)]
                    cfr = derive(fv[p][v], fc, _z(tails[p][v] - twd), active[p][v],
                                 in_mc[p][v], f"c{p}_{v}")
                    self._reqc[p][v] = (Mux(fresh, 0, cfr[0]), Mux(fresh, 0, cfr[1]))
                    s2vc[p][v] = dict(u_p=u_p, m_p=m_p, u_h=u_h, m_h=m_h, hd_p=cmem.r_data[0],
                                      hd_h=fc[0], fresh=fresh, twd=twd)
                m.d.sync += [ureq[p][v].eq(Mux(pop[p][v], u_p, u_h)),
                             mreq[p][v].eq(Mux(pop[p][v], m_p, m_h))]
                with m.If(write):
                    m.d.sync += wr.eq(inc(wr))
                with m.If(hwrite):
                    m.d.sync += hwr.eq(inc(hwr))
                with m.If(pop[p][v]):
                    m.d.sync += [rd.eq(rd1), rd1.eq(inc(rd1))]
                    with m.If(ftail[p][v] & ~fdrop[p][v]):
                        # the header stays at the front until its packet's tail leaves
                        m.d.sync += hrd.eq(inc(hrd))
                m.d.sync += [
                    mcnt.eq(Mux(pop[p][v], mcnt + write - 1, mcnt + write)),
                    tails[p][v].eq(tails[p][v] + (write & wtail & ~wdrop)
                                   - (pop[p][v] & ftail[p][v] & ~fdrop[p][v])),
                ]
                if p != L:
                    # a credit goes back when a flit leaves the buffer
                    m.d.comb += in_links[p].credit[v].eq(pop[p][v])
            if SP:
                # (alloc_stages=2: a multicast head offered on the link or the local input,
                # before the VC select, the local input's ready and the full test, so the
                # token does not wait for them; one not taken or dropped only moves it on)
                m.d.comb += mc_in[p].eq((self.local_in.valid if p == L else valid)
                                        & f.head & f.mcast)
            else:
                m.d.comb += mc_in[p].eq(Cat(*mc_in_terms[p]).any())
            wrs, wps, rps, hws, hwps, hrps = vw
            if V == 1:
                wa, ra, hwa, hra = wps[0], rps[0], hwps[0], hrps[0]
            else:
                wa = Cat(_pick(m, vcin, wps, f"pwa_{p}", aw), vcin)
                ra = Cat(_pick(m, cv[p], rps, f"pra_{p}", aw), cv[p])
                hwa = Cat(_pick(m, vcin, hwps, f"phwa_{p}", aw), vcin)
                hra = Cat(_pick(m, cv[p], hrps, f"phra_{p}", aw), cv[p])
            m.d.comb += [mem.w_en.eq(Cat(*wrs).any()), mem.w_addr.eq(wa), mem.w_data.eq(f.payload),
                         mem.r_addr.eq(ra), mem.r_en.eq(1), hmem.r_en.eq(1),
                         hmem.w_en.eq(Cat(*hws).any()), hmem.w_addr.eq(hwa),
                         hmem.w_data.eq(header_of(f)), hmem.r_addr.eq(hra)]
            port_pay[p], port_hdr[p] = mem.r_data, hmem.r_data
            if p == L:
                m.d.comb += self.local_in.ready.eq(_pick(m, vsel, lin_space, "lin_space", 1))

        if SP:
            self._spec_alloc(m, dict(
                in_links=in_links, out_links=out_links, fhead=fhead, ftail=ftail, fv=fv,
                pop=pop, ureq=ureq, mreq=mreq, cv=cv, port_pay=port_pay, port_hdr=port_hdr,
                mc_in=mc_in, vsp=vsp, cw=cw, FW=FW, LQ=LQ))
            self._err_events = err_events
            self._errors(m, err_events, True)
            return m

        # ---------------- output state ----------------
        credits = [[Signal(cw, name=f"cred_{o}_{v}", init=D) for v in range(V)] for o in range(4)]
        obusy = [[Signal(name=f"obusy_{o}_{v}") for v in range(V)] for o in range(4)]
        self._credits, self._obusy = credits, obusy
        lbusy = Signal(name="lbusy")
        lq_res = Signal(range(LQ + 1), name="lq_res")      # granted, not yet popped
        lq_space = Signal(name="lq_space")
        m.d.comb += lq_space.eq(lq_res != LQ)
        self._lbusy, self._lq_space, self._cv = lbusy, lq_space, cv
        # a credit arriving this cycle counts at once (the credit round trip stays 2L+2)
        cr_nz = [[_nz(credits[o][v]) | out_links[o].credit[v] for v in range(V)]
                 for o in range(4)]
        cr_pkt = [[(credits[o][v] >= c.max_len) |
                   ((credits[o][v] == c.max_len - 1) & out_links[o].credit[v])
                   for v in range(V)] for o in range(4)]

        # ---------------- per input VC requests (from the registered request) -----------
        req = [[Signal(5, name=f"req_{p}_{v}") for v in range(V)] for p in range(5)]
        is_mc = [[Signal(name=f"ismc_{p}_{v}") for v in range(V)] for p in range(5)]
        mc_ok = Signal(NI, name="mc_ok")
        uni_ok = [Signal(NI, name=f"uni_ok_{o}") for o in range(5)]
        # acceptance of output o for a flit on VC v: a_u unicast (head / body), a_m multicast
        a_uh = [[lq_space & ~lbusy] * V] + [None] * 4
        a_ub = [[lq_space] * V] + [None] * 4
        a_mh = [[lq_space & ~lbusy] * V] + [None] * 4
        for o in range(4):
            a_uh[o + 1] = [cr_nz[o][v] & ~obusy[o][v] for v in range(V)]
            a_ub[o + 1] = [cr_nz[o][v] for v in range(V)]
            a_mh[o + 1] = [cr_pkt[o][v] & ~obusy[o][v] for v in range(V)]

        def acc(tbl, o, v):
            return tbl[0 if o == L else o + 1][v]

        for p in range(5):
            for v in range(V):
                i = p * V + v
                hd = fhead[p][v]
                u, mr = ureq[p][v], mreq[p][v]
                m.d.comb += [is_mc[p][v].eq(Mux(hd, fmc[p][v], in_mc[p][v])),
                             req[p][v].eq(u | mr)]
                okm = []
                for o in range(5):
                    if o == p and o != L:
                        a_u = a_m = Const(0, 1)
                    else:
                        a_u = Mux(hd, acc(a_uh, o, v), acc(a_ub, o, v))
                        a_m = Mux(hd, acc(a_mh, o, v), acc(a_ub, o, v))
                    okm.append(~mr[o] | a_m)
                    m.d.comb += uni_ok[o][i].eq(u[o] & a_u)
                m.d.comb += mc_ok[i].eq(_nz(mr) & Cat(*okm).all())

        if S2:
            # two-stage allocation: what each input VC / port may do in this cycle was decided
            # in the previous one (request and acceptance from the next state, the grants as
            # the last select) and sits in registers, so the arbiters start from flip-flops:
            # per VC ``s2_ru`` (unicast outputs that accept it), ``s2_rc`` (outputs that accept
            # it if a credit arrives in this cycle), ``s2_rm`` (its multicast can go); per port
            # the same for the VC it offers (``s2_pr``, ``s2_prc``, ``s2_pm``) and its multicast
            # branch set (``s2_pmr``)
            s2_ru = [[Signal(5, name=f"s2ru_{p}_{v}") for v in range(V)] for p in range(5)]
            s2_rc = [[Signal(5, name=f"s2rc_{p}_{v}") for v in range(V)] for p in range(5)]
            s2_rm = [[Signal(name=f"s2rm_{p}_{v}") for v in range(V)] for p in range(5)]
            s2_pr = [Signal(5, name=f"s2pr_{p}") for p in range(5)]
            s2_prc = [Signal(5, name=f"s2prc_{p}") for p in range(5)]
            s2_pm = Signal(5, name="s2pm")
            s2_pmr = [Signal(5, name=f"s2pmr_{p}") for p in range(5)]
            s2_wd = [[Signal(name=f"s2wd_{p}_{v}") for v in range(V)] for p in range(5)]
            self._s2 = dict(ru=s2_ru, rc=s2_rc, rm=s2_rm, pr=s2_pr, prc=s2_prc, pm=s2_pm,
                            pmr=s2_pmr, vc=s2vc)
            for p in range(5):
                for v in range(V):
                    m.d.sync += s2_wd[p][v].eq(self._write[p][v])

            def cin(o, v):
                return out_links[o].credit[v] if o != L else Const(0, 1)

        # ---------------- switch allocation (stage A) ----------------
        # 1. every input port offers one VC, chosen in the previous cycle (``cv``, a
        #    register: round-robin over the VCs that could move then), so the crossbar has
        #    one input per port; 2. one multicast per cycle router-wide (it takes all its
        #    branches at once); 3. per output round-robin over the input ports.
        p_mreq = [Signal(5, name=f"pmreq_{p}") for p in range(5)]   # offered VC's mcast branches
        cvn = [None] * 5                               # next cycle's offered VC per port
        p_hd = Signal(5, name="p_hd")                  # offered VC's front is a head
        p_req = [Signal(5, name=f"preq_{p}") for p in range(5)]
        p_uni = [Signal(5, name=f"puni_{o}") for o in range(5)]
        ptail = Signal(5, name="ptail")                # tail mark of each port's offered flit
        for p in range(5):
            # candidates for the next cycle's offer: VCs that could move now, or that get a
            # flit now (so a flit arriving at an idle VC is offered the cycle after)
            cand = Signal(V, name=f"vcand_{p}")
            if not S2:
                m.d.comb += cand.eq(Cat(*[mc_ok[p * V + v] | Cat(*[uni_ok[o][p * V + v]
                                                                 for o in range(5)]).any()
                                          | self._write[p][v]
                                          for v in range(V)]))
            else:
                # (a flit written last cycle is requestable from the next cycle)
                m.d.comb += cand.eq(Cat(*[s2_rm[p][v] | _nz(s2_ru[p][v]) |
                                          Cat(*[s2_rc[p][v][o] & cin(o, v)
                                                for o in range(4)]).any() | s2_wd[p][v]
                                          for v in range(V)]))
            cvn[p] = cv[p]
            if V > 1:
                # next offered VC: the first candidate after the current one (itself last)
                order = Signal(_bits(V), name=f"cvnext_{p}")
                with m.Switch(cv[p]):
                    for cur in range(V):
                        with m.Case(cur):
                            for k in reversed(range(1, V + 1)):
                                with m.If(cand[(cur + k) % V]):
                                    m.d.comb += order.eq((cur + k) % V)
                            with m.If(~cand.any()):
                                m.d.comb += order.eq(cur)
                    with m.Default():
                        m.d.comb += order.eq(0)
                m.d.sync += cv[p].eq(order)
                cvn[p] = order
            m.d.comb += [p_req[p].eq(_pick(m, cv[p], [req[p][v] for v in range(V)],
                                           f"preqv_{p}", 5)),
                         p_mreq[p].eq(_pick(m, cv[p], [mreq[p][v] for v in range(V)],
                                            f"pmreq_{p}", 5)),
                         p_hd[p].eq(_pick(m, cv[p], [fhead[p][v] for v in range(V)],
                                          f"phd_{p}", 1)),
                         ptail[p].eq(_pick(m, cv[p], [ftail[p][v] for v in range(V)],
                                           f"ptailv_{p}", 1))]
            for o in range(5):
                if not S2:
                    m.d.comb += p_uni[o][p].eq(_pick(m, cv[p], [uni_ok[o][p * V + v]
                                                                for v in range(V)],
                                                     f"pu_{p}_{o}", 1))
                else:
                    # a credit arriving now counts at once (a head / body that only lacked it)
                    ci = (_pick(m, cv[p], [cin(o, v) for v in range(V)], f"pci_{p}_{o}", 1)
                          if V > 1 else cin(o, 0))
                    m.d.comb += p_uni[o][p].eq(s2_pr[p][o] | (s2_prc[p][o] & ci))
        # one multicast per cycle router-wide: a token (register) names the port that may send
        # one; it stays while that port has a multicast packet under way and moves on (to
        # the next port with a multicast at its offered VC's front) when the port has none
        # pending or has just sent a multicast tail
        mc_tok = Signal(range(5), name="mc_tok")
        self._mc_tok = mc_tok
        mc_any = Signal(name="mc_any")
        mc_gnt = mc_tok
        # the token port's offered VC: its multicast branches, head bit and VC; it goes when
        # every branch accepts (the same test as mc_ok, on that one VC)
        mc_route = _pick(m, mc_tok, s2_pmr if S2 else p_mreq, "mc_route", 5)
        tok_hd = _pick(m, mc_tok, [p_hd[p] for p in range(5)], "mc_hd", 1)
        tok_vc = _pick(m, mc_tok, cv, "mc_vc", _bits(V)) if V > 1 else Const(0, 1)
        tok_ok = []
        for o in range(5):
            pk_h = _pick(m, tok_vc, [acc(a_mh, o, v) for v in range(V)], f"mcah_{o}", 1)
            pk_b = _pick(m, tok_vc, [acc(a_ub, o, v) for v in range(V)], f"mcab_{o}", 1)
            a = Mux(tok_hd, pk_h, pk_b)
            if o != L:
                a = a & ~_eqc(mc_tok, o)
            tok_ok.append(~mc_route[o] | a)
        if not S2:
            m.d.comb += mc_any.eq(_nz(mc_route) & Cat(*tok_ok).all())
        else:
            # the token port's multicast goes (one-hot by port) and the outputs it takes:
            # registers loaded with the next cycle's token and requests
            s2_go = Signal(5, name="s2go")
            s2_bymc = Signal(5, name="s2bymc")
            self._s2.update(go=s2_go, bymc=s2_bymc)
            m.d.comb += mc_any.eq(_nz(s2_go))
        mid_mc = Signal(5, name="mid_mc")              # a multicast packet under way
        pend_mc = Signal(5, name="pend_mc")            # a VC's front is a multicast flit
        want_mc = Signal(5, name="want_mc")            # ... or a multicast head comes in
        for p in range(5):
            m.d.comb += [
                mid_mc[p].eq(Cat(*[in_mc[p][v] & _nz(active[p][v]) for v in range(V)]).any()),
                pend_mc[p].eq(Cat(*[is_mc[p][v] & fv[p][v] & ~fdrop[p][v]
                                    for v in range(V)]).any()),
                want_mc[p].eq(pend_mc[p] | (mc_in[p] if not S2 else 0))]
        tok_next = Signal(range(5), name="mc_tok_next")
        with m.Switch(mc_tok):
            for cur in range(5):
                with m.Case(cur):
                    m.d.comb += tok_next.eq(cur)
                    for k in reversed(range(1, 5)):
                        with m.If(want_mc[(cur + k) % 5]):
                            m.d.comb += tok_next.eq((cur + k) % 5)
            with m.Default():
                m.d.comb += tok_next.eq(0)
        tok_tail = Signal(name="mc_tok_tail")
        m.d.comb += tok_tail.eq(mc_any & _pick(m, mc_tok, [ptail[p] for p in range(5)],
                                              "mc_tailp", 1))
        # the token stays only while its port's multicast is under way (a head that went and
        # its tail has not): the body then never waits for credits (the head reserved a whole
        # packet downstream).  A holder that cannot start one passes it on, so a blocked
        # multicast never keeps a ready one waiting (a cycle of such waits across routers
        # would deadlock).
        keep = Signal(name="mc_tok_keep")
        m.d.comb += keep.eq((_pick(m, mc_tok, [mid_mc[p] for p in range(5)], "mc_mid", 1) |
                             mc_any) & ~tok_tail)
        with m.If(~keep):
            m.d.sync += mc_tok.eq(tok_next)
        tok_n = Mux(keep, mc_tok, tok_next)          # next cycle's token
        take = Signal(5, name="take")                 # output granted this cycle
        src = [Signal(3, name=f"src_{o}") for o in range(5)]      # input port (for checks)
        sel = []                                      # crossbar select: index into _LEGAL_IN[o]
        psent = Signal(5, name="psent")
        sent_terms = [[(s2_go[p] if S2 else mc_any & _eqc(mc_gnt, p))] for p in range(5)]
        self._rrptr = []                              # (formal harness)
        ohs, bymc = [], []                            # one-hot unicast grant, multicast, per output
        for o in range(5):
            legal = _LEGAL_IN[o]
            by_mc = s2_bymc[o] if S2 else mc_any & mc_route[o]
            lreq = Cat(*[p_uni[o][p] for p in legal])
            prb = {}
            u_any, u_gnt, u_oh = self._rr(m, lreq, f"o{o}", enable=~by_mc, probe=prb)
            self._rrptr.append(prb["ptr"])
            mc_pos = _pick(m, mc_gnt, [legal.index(p) if p in legal else 0 for p in range(5)],
                           f"mcpos_{o}", len(u_gnt))
            so = Signal(len(u_gnt), name=f"sel_{o}")
            m.d.comb += [take[o].eq(by_mc | u_any), so.eq(Mux(by_mc, mc_pos, u_gnt)),
                         src[o].eq(_pick(m, so, list(legal), f"srcp_{o}", 3))]
            sel.append(so)
            ohs.append(u_oh)
            bymc.append(by_mc)
            for k, p in enumerate(legal):
                sent_terms[p].append(u_oh[k] & ~by_mc)
        for p in range(5):
            m.d.comb += psent[p].eq(Cat(*sent_terms[p]).any())
        sent = Signal(NI, name="sent")
        for i in range(NI):
            m.d.comb += sent[i].eq(psent[i // V] & (_eqc(cv[i // V], i % V) if V > 1 else 1))
        self._take, self._src, self._sent, self._req = take, src, sent, req
        self._err_events = err_events

        # grant bookkeeping (stage A): credits, output VC ownership, local queue space
        # (from the one-hot grants: and-or, not through the encoded select)
        tok_tl = _pick(m, mc_tok, [ptail[p] for p in range(5)], "mc_tl", 1)
        otail, ovc, tov = [], [], []
        for o in range(5):
            legal, oh, bm = _LEGAL_IN[o], ohs[o], bymc[o]
            ot = Signal(name=f"otail_{o}")
            m.d.comb += ot.eq(Mux(bm, tok_tl, Cat(*[oh[k] & ptail[p]
                                                     for k, p in enumerate(legal)]).any()))
            otail.append(ot)
            if V > 1:
                ov = Signal(_bits(V), name=f"ovcs_{o}")
                uv = 0
                for k, p in enumerate(legal):
                    uv = uv | Mux(oh[k], cv[p], 0)
                m.d.comb += ov.eq(Mux(bm, tok_vc, uv))
                ovc.append(ov)
                tov.append([(bm & _eqc(tok_vc, v)) |
                            (~bm & Cat(*[oh[k] & _eqc(cv[p], v) for k, p in enumerate(legal)]).any())
                            for v in range(V)])
            else:
                ovc.append(Const(0, 1))
                tov.append([take[o]])
        for o in range(4):
            for v in range(V):
                t = tov[o][v]
                m.d.sync += credits[o][v].eq(Mux(t, credits[o][v] - 1, credits[o][v])
                                             + out_links[o].credit[v])
                with m.If(t):
                    m.d.sync += obusy[o][v].eq(~otail[o])
        with m.If(take[L]):
            m.d.sync += lbusy.eq(~otail[L])

        # ---------------- switch traversal (stage T, the next cycle) ----------------
        # each port's offered flit is registered (no reset, loaded every cycle); the grants
        # are registered; the crossbar muxes the registered flits onto the outputs.
        # Body flits leave with their packet's header (the header a source puts on a body
        # flit is not stored).
        pflit = []
        for p in range(5):
            # payload and header: the port memories' registered reads (read latency 1, read
            # address = offered VC and its read pointer, the same cycle's front); head/tail
            # from the front registers
            hdr, pay = port_hdr[p], port_pay[p]
            hdt = _pick(m, cv[p], [Cat(fhead[p][v], ftail[p][v]) for v in range(V)],
                        f"phdt_{p}", 2)
            ht = Signal(2, name=f"pht_{p}", reset_less=True)
            m.d.sync += ht.eq(hdt)
            ff = c.flit(Signal(FW, name=f"pflit_{p}"))
            m.d.comb += [ff.head.eq(ht[0]), ff.tail.eq(ht[1]), ff.payload.eq(pay),
                         Cat(ff.mclass, ff.mcast, ff.dest.as_value(), ff.src.as_value()).eq(hdr)]
            pflit.append(ff)
        take_r = Signal(5, name="take_r")
        m.d.sync += take_r.eq(take)
        self._take_r = take_r
        for o in range(5):
            if o == L:
                lq_pop = self._out_stage(m, o, sel[o], pflit, take_r[L], out_links, LQ,
                                         lq_res=(lq_res, take[L]))
            else:
                self._out_stage(m, o, sel[o], pflit, take_r[o], out_links, LQ,
                                ovc_next=ovc[o])

        if S2:
            # next cycle's registered requests: acceptance of the next state (credits after
            # this cycle's grant and returned credit, output VC ownership after this cycle's
            # head/tail, local queue space), computed for "granted"/"not granted" so the
            # grant is the last select; then each VC's request for "front leaves"/"front
            # stays" (the pop is the last select); per port, the VC it offers next
            # The next cycle's acceptance must not wait for this cycle's arbitration (which
            # port won): it is computed from this cycle's requests, conservatively -- an
            # output VC that any request may take counts as taken (a credit used; owned
            # unless every flit that may take it is a tail), exactly when a single VC
            # requests the output (the arbiter then surely grants that VC) or none does.
            # The state registers (credits, owners) are updated exactly from the grants.
            tok_tl_e = _pick(m, mc_tok, [ptail[p] for p in range(5)], "s2_toktl", 1)
            cvis = [[(_eqc(cv[p], v) if V > 1 else Const(1, 1)) for v in range(V)]
                    for p in range(5)]
            acc2 = {}
            for o in range(5):
                legal = _LEGAL_IN[o]
                bm = s2_bymc[o]
                nv = 1 if o == L else V           # the local output has no VCs
                pos, dfn, atl = [], [], []
                for v in range(nv):
                    def vq(p):
                        return cvis[p][v] if o != L else Const(1, 1)
                    pos.append(Cat(*[(s2_pr[p][o] | s2_prc[p][o]) & vq(p) for p in legal]).any())
                    dfn.append(Cat(*[s2_pr[p][o] & vq(p) for p in legal]).any())
                    atl.append(Cat(*[~((s2_pr[p][o] | s2_prc[p][o]) & vq(p)) | ptail[p]
                                     for p in legal]).all())
                for v in range(nv):
                    mine = (_eqc(tok_vc, v) if (V > 1 and o != L) else Const(1, 1))
                    other = Cat(*[pos[w] for w in range(nv) if w != v]).any() if nv > 1 \
                        else Const(0, 1)
                    g_c = Signal(name=f"s2gc_{o}_{v}")
                    sure = Signal(name=f"s2sure_{o}_{v}")
                    tl = Signal(name=f"s2tl_{o}_{v}")
                    m.d.comb += [g_c.eq(Mux(bm, mine, pos[v])),
                                 sure.eq(Mux(bm, mine, dfn[v] & ~other)),
                                 tl.eq(Mux(bm, tok_tl_e, atl[v]))]
                    busy = lbusy if o == L else obusy[o][v]
                    ob = Mux(sure, ~tl, Mux(g_c, busy | ~tl, busy))
                    if o == L:
                        lsp = Signal(name="s2_lq_space")
                        m.d.comb += lsp.eq(Mux(take[L], (lq_res + 1 - lq_pop) != LQ,
                                               (lq_res - lq_pop) != LQ))
                        for w in range(V):
                            acc2[(L, w)] = (lsp & ~ob, lsp, lsp & ~ob, Const(0, 1), Const(0, 1))
                        continue
                    sc = Signal(cw + 1, name=f"s2sum_{o}_{v}")
                    m.d.comb += sc.eq(credits[o][v] + out_links[o].credit[v])
                    nz = Mux(g_c, sc >= 2, _nz(sc))
                    zz = Mux(g_c, sc == 1, _z(sc))
                    pk = Mux(g_c, sc >= c.max_len + 1, sc >= c.max_len)
                    acc2[(o, v)] = (nz & ~ob, nz, pk & ~ob, zz & ~ob, zz)
            go_n, gmr_n = [], []
            for p in range(5):
                nru, nrc, nrm, nmr = [], [], [], []
                for v in range(V):
                    d = s2vc[p][v]
                    outs = []
                    for u, mr, hd in ((d["u_p"], d["m_p"], d["hd_p"]),
                                      (d["u_h"], d["m_h"], d["hd_h"])):
                        ru, rc, okm = [], [], []
                        for o in range(5):
                            if o == p and o != L:
                                ru.append(Const(0, 1))
                                rc.append(Const(0, 1))
                                okm.append(~mr[o])
                                continue
                            auh, aub, amh, cuh, cub = acc2[(o, v)]
                            ru.append(u[o] & Mux(hd, auh, aub))
                            rc.append(u[o] & Mux(hd, cuh, cub))
                            okm.append(~mr[o] | Mux(hd, amh, aub))
                        outs.append((Cat(*ru), Cat(*rc), _nz(mr) & Cat(*okm).all()))
                    pp = pop[p][v]
                    a_ru = Signal(5, name=f"s2nru_{p}_{v}")
                    a_rc = Signal(5, name=f"s2nrc_{p}_{v}")
                    a_rm = Signal(name=f"s2nrm_{p}_{v}")
                    a_mr = Signal(5, name=f"s2nmr_{p}_{v}")
                    m.d.comb += [a_ru.eq(Mux(pp, outs[0][0], outs[1][0])),
                                 a_rc.eq(Mux(pp, outs[0][1], outs[1][1])),
                                 a_rm.eq(Mux(pp, outs[0][2], outs[1][2])),
                                 a_mr.eq(Mux(pp, d["m_p"], d["m_h"]))]
                    m.d.sync += [s2_ru[p][v].eq(a_ru), s2_rc[p][v].eq(a_rc),
                                 s2_rm[p][v].eq(a_rm)]
                    nru.append(a_ru)
                    nrc.append(a_rc)
                    nrm.append(a_rm)
                    nmr.append(a_mr)
                if V > 1:
                    m.d.sync += [s2_pr[p].eq(_pick(m, cvn[p], nru, f"s2ppr_{p}", 5)),
                                 s2_prc[p].eq(_pick(m, cvn[p], nrc, f"s2pprc_{p}", 5)),
                                 s2_pm[p].eq(_pick(m, cvn[p], nrm, f"s2ppm_{p}", 1)),
                                 s2_pmr[p].eq(_pick(m, cvn[p], nmr, f"s2ppmr_{p}", 5))]
                else:
                    m.d.sync += [s2_pr[p].eq(nru[0]), s2_prc[p].eq(nrc[0]),
                                 s2_pm[p].eq(nrm[0]), s2_pmr[p].eq(nmr[0])]
                pm_n = _pick(m, cvn[p], nrm, f"s2npm_{p}", 1) if V > 1 else nrm[0]
                pmr_n = _pick(m, cvn[p], nmr, f"s2npmr_{p}", 5) if V > 1 else nmr[0]
                go_n.append(_eqc(tok_n, p) & pm_n)
                gmr_n.append(pmr_n)
            m.d.sync += [s2_go.eq(Cat(*go_n)),
                         s2_bymc.eq(Cat(*[Cat(*[go_n[p] & gmr_n[p][o] for p in range(5)]).any()
                                          for o in range(5)]))]

        # ---------------- input VC state ----------------
        for p in range(5):
            for v in range(V):
                i = p * V + v
                m.d.comb += pop[p][v].eq(fv[p][v] & (fdrop[p][v] | sent[i]))
                with m.If(fv[p][v] & ~fdrop[p][v] & sent[i] & fhead[p][v]):
                    m.d.sync += [active[p][v].eq(Mux(ftail[p][v], 0, froute[p][v])),
                                 in_mc[p][v].eq(fmc[p][v])]
                with m.Elif(fv[p][v] & ~fdrop[p][v] & sent[i] & ftail[p][v]):
                    m.d.sync += active[p][v].eq(0)     # no packet under way (multicast token)

        self._errors(m, err_events, S2)
        return m

    def _errors(self, m, err_events, registered):
        """Saturating bad-input counter.  ``registered``: this cycle's bad-input events count
        in the next cycle, so the input-validation logic does not feed the counter's adder
        in the same cycle (the event bits are registered, and summed after the register:
        the sum of ten events was on the critical path of alloc_stages=2, 86.0 MHz)."""
        c = self.cfg
        total = Signal(_bits(len(err_events) + 1) + 1)
        if registered:
            ev_r = Signal(len(err_events), name="err_events_r")
            m.d.sync += ev_r.eq(Cat(*err_events))
            m.d.comb += total.eq(sum(ev_r[i] for i in range(len(err_events))))
        else:
            m.d.comb += total.eq(sum(err_events))
        errs = Signal(c.err_width)
        top = (1 << c.err_width) - 1
        nsum = Signal(c.err_width + 1)
        m.d.comb += nsum.eq(errs + total)
        m.d.sync += errs.eq(Mux(nsum > top, top, nsum))
        m.d.comb += self.errors.eq(errs)

    def _spec_alloc(self, m, e):
        """Allocation, bookkeeping and traversal of ``alloc_stages=2``: the allocation loop
        over two cycles.

        Cycle A (allocation): requests (each input VC's front, or the entry after it if the
        front was sent in the previous cycle: ``vsp``), acceptance and the output arbiters
        start from registers only: the output state (credits, owners, local-queue
        reservations) is the state after the grants up to two cycles ago, with the previous
        cycle's grants counted on top (a credit used, an owner taken or released -- a released
        owner is free only for the VC that sent the tail), and the arbiters' one-hot grants
        go straight into registers; the round-robin pointers move past them at once (the
        arbiter of ``noc_rr_arbiter_bound``).  Cycle B (commit, the next cycle, in parallel
        with the next allocation): the registered grants update the buffers, credits and
        owners, drive the links (switch traversal) and the local queue.  The credit upstream
        goes at the grant, so the credit round trip stays ``2*link_latency + 2``.

        Multicast (cut-through, one at a time router-wide): the token port's offered VC with
        a multicast head (its whole packet stored, the front not sent last cycle) is *pending*; the
        next cycle (only then), unicast heads are kept off the output VCs of its branches,
        and if it is still pending it *arms* when every branch accepts a whole packet (pessimistic
        acceptance as above); it goes in the cycle after (its branches taken ahead of the
        unicast arbiters, from registers), and its body flits follow one per cycle (a body
        flit for the local output waits for queue space).  The token stays one cycle at a
        port that has just become pending and otherwise moves on (a blocked multicast never
        holds it).  A multicast head is allocated 3 cycles after its tail is written (1
        with ``alloc_stages=1``)."""
        c = self.cfg
        V, D = c.vcs, c.depth
        cw, FW, LQ = e["cw"], e["FW"], e["LQ"]
        in_links, out_links = e["in_links"], e["out_links"]
        fhead, ftail, fv, pop = e["fhead"], e["ftail"], e["fv"], e["pop"]
        ureq, mreq, cv = e["ureq"], e["mreq"], e["cv"]
        vsp, mc_in = e["vsp"], e["mc_in"]
        NI = 5 * V
        vcb = _bits(V)

        def veq(x, v):
            return _eqc(x, v) if V > 1 else Const(1, 1)

        # ---------------- registers of the previous cycle's raw grants ----------------
        oh_r = [Signal(len(_LEGAL_IN[o]), name=f"ohr_{o}") for o in range(5)]
        take_r = Signal(5, name="take_r")          # raw grant of output o
        otail_r = Signal(5, name="otail_r")        # ... of a tail flit
        ovc_r = [Signal(vcb, name=f"ovc_r_{o}") for o in range(5)]
        # the previous cycle's grant of output o on VC v, one-hot (``take_r[o] & ovc_r[o] ==
        # v``, registered as such: the acceptance reads a flip-flop, not a VC compare); two
        # copies, one for the bookkeeping (credits, owners), one for the acceptance (stored
        # inverted, reset 1: Yosys merges identical registers)
        tkv_r = [[Signal(name=f"tkv_{o}_{v}") for v in range(V)] for o in range(4)]
        tkan_r = [[Signal(name=f"tkan_{o}_{v}", init=1) for v in range(V)] for o in range(4)]
        # ---------------- commit (stage B) ----------------
        # A doomed request does not take part in arbitration, so every raw grant is valid:
        # the commit stage takes the registered grants as they are (``vtake`` = ``take_r``,
        # ``vsp`` = the registered per-VC send), nothing is cancelled
        vtake = take_r                             # grant of output o (switch traversal)
        self._vtake = vtake

        # ---------------- output state (after the valid grants up to 2 cycles ago) -----
        credits = [[Signal(cw, name=f"cred_{o}_{v}", init=D) for v in range(V)] for o in range(4)]
        obusy = [[Signal(name=f"obusy_{o}_{v}") for v in range(V)] for o in range(4)]
        self._credits, self._obusy = credits, obusy
        lbusy = Signal(name="lbusy")
        lq_res = Signal(range(LQ + 1), name="lq_res")      # valid grants, not yet popped
        lq_pop = Signal(name="lq_pop")
        # the credit counters' compares with the constants the acceptance needs, registered
        # from the counters' next state (``crge[o][v][k]`` = credits >= k)
        kset = sorted({1, 2, c.max_len - 1, c.max_len, c.max_len + 1} - {0})
        crge = [[{k: Signal(name=f"crge{k}_{o}_{v}", init=int(D >= k)) for k in kset}
                 for v in range(V)] for o in range(4)]
        self._crge, self._tkv, self._tkan = crge, tkv_r, tkan_r
        for o in range(4):
            for v in range(V):
                t = tkv_r[o][v]
                cn = Signal(cw, name=f"credn_{o}_{v}")
                m.d.comb += cn.eq(credits[o][v] - t + out_links[o].credit[v])
                m.d.sync += credits[o][v].eq(cn)
                for k in kset:
                    m.d.sync += crge[o][v][k].eq(~_lt_const(cn, k))
                with m.If(t):
                    m.d.sync += obusy[o][v].eq(~otail_r[o])
        with m.If(vtake[L]):
            m.d.sync += lbusy.eq(~otail_r[L])
        m.d.sync += lq_res.eq(lq_res + vtake[L] - lq_pop)
        # acceptance, from registers: the previous cycle's raw grant counted (pessimistic)
        mask_r = [[Signal(name=f"mcmask_{o}_{v}") for v in range(V)] for o in range(4)]
        maskl_r = Signal(name="mcmask_l")
        lsp = Signal(name="lq_space")
        lob = Signal(name="lbusy_eff")
        m.d.comb += [lsp.eq((lq_res + take_r[L]) < LQ),
                     lob.eq(lbusy | (take_r[L] & ~otail_r[L]))]
        self._lbusy, self._lq_space, self._cv = lbusy, lsp, cv
        a_uh = [[(lsp, lbusy, take_r[L], maskl_r)] * V] + [None] * 4
        a_ub = [[lsp] * V] + [None] * 4
        a_mh = [[lsp & ~lob] * V] + [None] * 4
        for o in range(4):
            a_uh[o + 1], a_ub[o + 1], a_mh[o + 1] = [], [], []
            for v in range(V):
                tk = ~tkan_r[o][v]
                # credits + the credit arriving now >= k, from the registered compares
                inc = out_links[o].credit[v]
                ge = crge[o][v]

                def sge(k):
                    return ge[k] | ((ge[k - 1] if k > 1 else 1) & inc)
                nz = Signal(name=f"crnz_{o}_{v}")
                pk = Signal(name=f"crpk_{o}_{v}")
                ob = Signal(name=f"obeff_{o}_{v}")
                m.d.comb += [nz.eq(Mux(tk, sge(2), sge(1))),
                             pk.eq(Mux(tk, sge(c.max_len + 1), sge(c.max_len))),
                             ob.eq(obusy[o][v] | (tk & ~otail_r[o]))]
                a_uh[o + 1].append((nz, obusy[o][v], tk, mask_r[o][v]))
                a_ub[o + 1].append(nz)
                a_mh[o + 1].append(pk & ~ob)

        def acc(tbl, o, v):
            return tbl[0 if o == L else o + 1][v]

        # ---------------- multicast: go / burst (registers), pending, arm ----------------
        go_r = Signal(name="mc_go_r")              # an armed multicast head goes now
        burst_r = Signal(name="mc_burst")          # a multicast packet under way
        mport_r = Signal(range(5), name="mc_port")
        mvc_r = Signal(vcb, name="mc_vc")
        mroute_r = Signal(5, name="mc_route")
        mgo = Signal(name="mc_go")                 # a multicast flit goes this cycle
        m.d.comb += mgo.eq(go_r | (burst_r & (~mroute_r[L] | lsp)))
        by_mc = Signal(5, name="by_mc")
        m.d.comb += by_mc.eq(Mux(mgo, mroute_r, 0))
        msent = Signal(5, name="msent")
        for p in range(5):
            m.d.comb += msent[p].eq(mgo & _eqc(mport_r, p))
        mtail = _pick(m, mport_r, [_pick(m, mvc_r, [ftail[p][v] for v in range(V)],
                                         f"mtl_{p}", 1) if V > 1 else ftail[p][0]
                                   for p in range(5)], "mc_tail", 1)
        with m.If(mgo):
            m.d.sync += burst_r.eq(~mtail)
        # pending: the offered VC's front (not sent last cycle) is a multicast head whose whole
        # packet is stored (its multicast request is then its branch set)
        # (per port: the first VC with one, from the offered VC on)
        pm, pvc = [], []
        pmv = [[None] * V for _ in range(5)]
        for p in range(5):
            for v in range(V):
                st = self._vcstate[p][v]
                f0 = st["fc"]
                pmv[p][v] = Signal(5, name=f"mcpv_{p}_{v}")
                m.d.comb += pmv[p][v].eq(Mux(~vsp[p][v] & f0[0] & ~f0[3], st["m0"], 0))
            if V > 1:
                pv = Signal(vcb, name=f"mcpvc_{p}")
                with m.Switch(cv[p]):
                    for cur in range(V):
                        with m.Case(cur):
                            m.d.comb += pv.eq(cur)
                            for k in reversed(range(V)):
                                with m.If(_nz(pmv[p][(cur + k) % V])):
                                    m.d.comb += pv.eq((cur + k) % V)
                    with m.Default():
                        m.d.comb += pv.eq(0)
                pvc.append(pv)
                pm.append(_pick(m, pv, pmv[p], f"mcpend_{p}", 5))
            else:
                pvc.append(Const(0, 1))
                pm.append(pmv[p][0])
        mc_tok = Signal(range(5), name="mc_tok")
        self._mc_tok = mc_tok
        want = Signal(5, name="want_mc")
        for p in range(5):
            m.d.comb += want[p].eq(_nz(pm[p]) | mc_in[p])
        tok_next = Signal(range(5), name="mc_tok_next")
        with m.Switch(mc_tok):
            for cur in range(5):
                with m.Case(cur):
                    m.d.comb += tok_next.eq(cur)
                    for k in reversed(range(1, 5)):
                        with m.If(want[(cur + k) % 5]):
                            m.d.comb += tok_next.eq((cur + k) % 5)
            with m.Default():
                m.d.comb += tok_next.eq(0)
        pr = _pick(m, mc_tok, pm, "mc_pr", 5)
        tvc = _pick(m, mc_tok, pvc, "mc_tvc", vcb) if V > 1 else Const(0, 1)
        pend = Signal(name="mc_pend")
        pend_r = Signal(name="mc_pend_r")
        keep = Signal(name="mc_keep")
        m.d.comb += [pend.eq(_nz(pr)), keep.eq(pend & ~pend_r)]
        m.d.sync += [pend_r.eq(keep), mc_tok.eq(Mux(keep, mc_tok, tok_next))]
        # (only for the arm cycle: a pending multicast that cannot arm never keeps unicast
        # heads off its branches in consecutive cycles -- masking them for as long as it
        # waits would be hold-and-wait across routers, a deadlock)
        for o in range(4):
            for v in range(V):
                m.d.sync += mask_r[o][v].eq(keep & pr[o] & veq(tvc, v))
        m.d.sync += maskl_r.eq(keep & pr[L])
        okb = []
        for o in range(5):
            a = (_pick(m, tvc, [acc(a_mh, o, v) for v in range(V)], f"mcah_{o}", 1)
                 if V > 1 else acc(a_mh, o, 0))
            okb.append(~pr[o] | a)
        arm = Signal(name="mc_arm")
        m.d.comb += arm.eq(pend_r & pend & ~go_r & ~burst_r & Cat(*okb).all())
        m.d.sync += go_r.eq(arm)
        with m.If(arm):
            m.d.sync += [mport_r.eq(mc_tok), mvc_r.eq(tvc), mroute_r.eq(pr)]
        # the multicast's port offers its VC in the arm cycle (set in the first pending cycle)
        # and from the go cycle until its tail has gone; not for longer: a multicast waiting
        # for an output held by a packet on another VC of its own port would deadlock
        to_tvc = [_eqc(mc_tok, p) & (keep | arm) for p in range(5)]
        hold = [(go_r | burst_r) & _eqc(mport_r, p) for p in range(5)]

        # ---------------- unicast requests and acceptance ----------------
        req = [[Signal(5, name=f"req_{p}_{v}") for v in range(V)] for p in range(5)]
        uni_ok = [Signal(NI, name=f"uni_ok_{o}") for o in range(5)]
        for p in range(5):
            for v in range(V):
                i = p * V + v
                hd = fhead[p][v]
                u = ureq[p][v]
                m.d.comb += req[p][v].eq(u | mreq[p][v])
                for o in range(5):
                    if o == p and o != L:
                        continue
                    # a head needs the output VC free: taken last cycle (a registered grant,
                    # not yet in the owner register) by a head that is not a tail counts as
                    # busy, by a tail as free; otherwise the owner register
                    okc, busy, tk, msk = acc(a_uh, o, v)
                    ob = Mux(tk, ~otail_r[o], busy)
                    a_u = Mux(hd, okc & ~ob & ~msk, acc(a_ub, o, v))
                    m.d.comb += uni_ok[o][i].eq(u[o] & a_u)
        p_uni = [Signal(5, name=f"puni_{o}") for o in range(5)]
        ptail = Signal(5, name="ptail")
        for p in range(5):
            cand = Signal(V, name=f"vcand_{p}")
            m.d.comb += cand.eq(Cat(*[Cat(*[uni_ok[o][p * V + v] for o in range(5)]).any()
                                      | self._write[p][v] | _nz(pmv[p][v])
                                      for v in range(V)]))
            if V > 1:
                order = Signal(vcb, name=f"cvnext_{p}")
                with m.Switch(cv[p]):
                    for cur in range(V):
                        with m.Case(cur):
                            for k in reversed(range(1, V + 1)):
                                with m.If(cand[(cur + k) % V]):
                                    m.d.comb += order.eq((cur + k) % V)
                            with m.If(~cand.any()):
                                m.d.comb += order.eq(cur)
                    with m.Default():
                        m.d.comb += order.eq(0)
                m.d.sync += cv[p].eq(Mux(hold[p], cv[p], Mux(to_tvc[p], tvc, order)))
            m.d.comb += ptail[p].eq(_pick(m, cv[p], [ftail[p][v] for v in range(V)],
                                          f"ptailv_{p}", 1))
            for o in range(5):
                m.d.comb += p_uni[o][p].eq(_pick(m, cv[p], [uni_ok[o][p * V + v]
                                                            for v in range(V)],
                                                 f"pu_{p}_{o}", 1))

        # ---------------- output arbiters (raw grants, registered) ----------------
        take = Signal(5, name="take")
        src = [Signal(3, name=f"src_{o}") for o in range(5)]
        sel = []
        sent_terms = [[msent[p]] for p in range(5)]
        self._rrptr = []
        ohs = []
        for o in range(5):
            legal = _LEGAL_IN[o]
            lreq = Cat(*[p_uni[o][p] for p in legal])
            prb = {}
            # (every grant is valid: the pointer moves past it at once, as with
            # alloc_stages=1 -- the arbiter of noc_rr_arbiter_bound)
            u_any, u_gnt, u_oh = self._rr(m, lreq, f"o{o}", enable=~by_mc[o], probe=prb)
            self._rrptr.append(prb["ptr"])
            uoh = Signal(len(legal), name=f"uoh_{o}")
            m.d.comb += uoh.eq(Mux(by_mc[o], 0, u_oh))
            ohs.append(uoh)
            mc_pos = _pick(m, mport_r, [legal.index(p) if p in legal else 0 for p in range(5)],
                           f"mcpos_{o}", len(u_gnt))
            so = Signal(len(u_gnt), name=f"sel_{o}")
            m.d.comb += [take[o].eq(by_mc[o] | u_any), so.eq(Mux(by_mc[o], mc_pos, u_gnt)),
                         src[o].eq(_pick(m, so, list(legal), f"srcp_{o}", 3))]
            sel.append(so)
            for k, p in enumerate(legal):
                sent_terms[p].append(uoh[k])
            ot = Signal(name=f"otail_{o}")
            m.d.comb += ot.eq(Mux(by_mc[o], mtail, Cat(*[uoh[k] & ptail[p]
                                                          for k, p in enumerate(legal)]).any()))
            ov = Signal(vcb, name=f"ovcs_{o}")
            if V > 1:
                uv = 0
                for k, p in enumerate(legal):
                    uv = uv | Mux(uoh[k], cv[p], 0)
                m.d.comb += ov.eq(Mux(by_mc[o], mvc_r, uv))
            else:
                m.d.comb += ov.eq(0)
            m.d.sync += [oh_r[o].eq(uoh), ovc_r[o].eq(ov), otail_r[o].eq(ot)]
            # the grant's VC one-hot, from the one-hot grant and each port's offered VC
            for v in range(V if o != L else 0):
                tv = Signal(name=f"tkvn_{o}_{v}")
                if V > 1:
                    ut = Cat(*[uoh[k] & _eqc(cv[p], v) for k, p in enumerate(legal)]).any()
                    m.d.comb += tv.eq(Mux(by_mc[o], _eqc(mvc_r, v), ut))
                else:
                    m.d.comb += tv.eq(take[o])
                m.d.sync += [tkv_r[o][v].eq(tv), tkan_r[o][v].eq(~tv)]
        m.d.sync += take_r.eq(take)
        self._take_raw_r = take_r
        psent = Signal(5, name="psent")
        for p in range(5):
            m.d.comb += psent[p].eq(Cat(*sent_terms[p]).any())
        sent = Signal(NI, name="sent")
        for i in range(NI):
            m.d.comb += sent[i].eq(psent[i // V] & veq(cv[i // V], i % V))
        self._take, self._src, self._sent, self._req = take, src, sent, req
        self._take_r = vtake
        self._uniok, self._bymc = uni_ok, by_mc

        # ---------------- per input VC: doomed, live, valid send (the credit) ----------
        for p in range(5):
            for v in range(V):
                i = p * V + v
                st = self._vcstate[p][v]
                m.d.comb += pop[p][v].eq(sent[i] |
                                         (~vsp[p][v] & _nz(st["mcnt"]) & st["fc"][3]))
                m.d.sync += vsp[p][v].eq(sent[i])

        # ---------------- switch traversal (commit cycle) ----------------
        pflit = []
        for p in range(5):
            hdr, pay = e["port_hdr"][p], e["port_pay"][p]
            hdt = _pick(m, cv[p], [Cat(fhead[p][v], ftail[p][v]) for v in range(V)],
                        f"phdt_{p}", 2)
            ht = Signal(2, name=f"pht_{p}", reset_less=True)
            m.d.sync += ht.eq(hdt)
            ff = c.flit(Signal(FW, name=f"pflit_{p}"))
            m.d.comb += [ff.head.eq(ht[0]), ff.tail.eq(ht[1]), ff.payload.eq(pay),
                         Cat(ff.mclass, ff.mcast, ff.dest.as_value(), ff.src.as_value()).eq(hdr)]
            pflit.append(ff)
        for o in range(5):
            self._out_stage(m, o, sel[o], pflit, vtake[o], out_links, LQ, lq_pop,
                            None if o == L else ovc_r[o])


    def _out_stage(self, m, o, sel_o, pflit, take_o, out_links, LQ, lq_pop=None, ovc_o=None,
                   lq_res=None, ovc_next=None):
        """Switch traversal of output ``o`` (both allocation pipelines): the registered
        select picks the granted input's pipelined flit; the local output writes it into
        the ejection queue (``LQ`` entries, popped by ``local_out``; ``lq_res`` = (granted
        not yet popped counter, its increment) when the caller keeps one), every other
        output drives its link with VC ``ovc_o`` (or with a register of ``ovc_next``).  ``take_o``:
        a flit traverses now.  Returns the local queue's pop (created here unless given)."""
        c = self.cfg
        legal = _LEGAL_IN[o]
        sel_r = Signal(len(sel_o), name=f"sel_r_{o}")
        m.d.sync += sel_r.eq(sel_o)
        ofl = c.flit(Signal(c.flit.size, name=f"oflit_{o}"))
        with m.Switch(sel_r):
            for k, p in enumerate(legal[:-1]):
                with m.Case(k):
                    m.d.comb += ofl.eq(pflit[p])
            with m.Default():
                m.d.comb += ofl.eq(pflit[legal[-1]])
        if o != L:
            if ovc_next is not None:
                ovc_o = Signal(_bits(self.cfg.vcs), name=f"ovc_r_{o}")
                m.d.sync += ovc_o.eq(ovc_next)
            lk = out_links[o]
            m.d.comb += [lk.valid.eq(take_o), lk.flit.eq(ofl), lk.vc.eq(ovc_o)]
            if c.link_lookahead:
                m.d.comb += lk.la.eq(self._lookahead(m, ofl, o))
            return
        lq = SRAM(LQ, c.flit.size, read_latency=0)
        m.submodules.lq = lq
        lq_wr = Signal(range(LQ), name="lq_wr")
        lq_rd = Signal(range(LQ), name="lq_rd")
        lq_n = Signal(range(LQ + 1), name="lq_n")   # flits in the queue
        if lq_pop is None:
            lq_pop = Signal(name="lq_pop")
        m.d.comb += [lq.w_en.eq(take_o), lq.w_addr.eq(lq_wr), lq.w_data.eq(ofl),
                     lq.r_addr.eq(lq_rd),
                     self.local_out.valid.eq(_nz(lq_n)),
                     self.local_out.payload.eq(lq.r_data),
                     lq_pop.eq(self.local_out.valid & self.local_out.ready)]
        with m.If(take_o):
            m.d.sync += lq_wr.eq(lq_wr + 1)
        with m.If(lq_pop):
            m.d.sync += lq_rd.eq(lq_rd + 1)
        m.d.sync += lq_n.eq(lq_n + take_o - lq_pop)
        if lq_res is not None:
            res, inc = lq_res
            m.d.sync += res.eq(res + inc - lq_pop)
        return lq_pop

    def _neighbour(self, m, o):
        """(x, y) of the neighbour on output ``o`` (don't care past the mesh edge)."""
        c = self.cfg
        me = self.my.node if c.level == "noc" else self.my.chiplet
        dx, dy = {N: (0, -1), E: (1, 0), S: (0, 1), W: (-1, 0)}[o]
        nb = type("Coord", (), {})()
        nb.x = Signal(len(me.x), name=f"nbx_{o}")
        nb.y = Signal(len(me.y), name=f"nby_{o}")
        m.d.comb += [nb.x.eq((me.x + dx)[:len(me.x)]), nb.y.eq((me.y + dy)[:len(me.y)])]
        return nb

    def _lookahead(self, m, f, o):
        """``link_lookahead``: the route and the destination/route check (``Cat(route, ok)``)
        that the neighbour on output ``o`` computes for flit ``f`` arriving on its input
        ``OPPOSITE[o]`` -- the same functions, with the neighbour's address."""
        rt, rok = self._route(m, f, OPPOSITE[o], f"la{o}", me=self._neighbour(m, o))
        return Cat(rt, self._dest_valid(m, f) & rok)

    @staticmethod
    def _rr(m, req, tag, enable=1, probe=None, update=True):
        """Round-robin arbiter: first request at or after the pointer (a one-hot register:
        two LUT levels from requests to grant); the pointer moves past the grant when a grant
        is used (``enable``).  Returns (any grant, grant index, one-hot grant)."""
        n = len(req)
        ptr = Signal(n, name=f"rrptr_{tag}", init=1)
        gnt = Signal(range(n), name=f"gnt_{tag}")
        goh = Signal(n, name=f"gntoh_{tag}")
        any_ = Signal(name=f"gany_{tag}")
        m.d.comb += any_.eq(req.any() & enable)
        for i in range(n):
            # i wins if it requests and no request lies cyclically from the pointer up to it
            blocked = []
            for k in range(n):
                ahead = [(k + j) % n for j in range((i - k) % n)]
                if ahead:
                    blocked.append(ptr[k] & Cat(*[req[j] for j in ahead]).any())
            m.d.comb += goh[i].eq(req[i] & ~Cat(*blocked).any() if blocked else req[i])
        for i in range(1, n):
            with m.If(goh[i]):
                m.d.comb += gnt.eq(i)
        if update:      # (else the caller moves the pointer)
            with m.If(any_):
                m.d.sync += ptr.eq(Cat(goh[n - 1], goh[:n - 1]) if n > 1 else 1)
        if probe is not None:
            probe["ptr"] = ptr                  # for the formal harness
        return any_, gnt, goh
