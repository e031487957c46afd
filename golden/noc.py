"""Golden model of the Simba NoC / NoP (Simba §3.1 "Simba interconnect"), written from the spec.

For a traffic trace it gives what each node must receive (exactly once;
unicast packets of one source/destination pair and message class in order; classes are
independent virtual networks and may overtake each other), the XY path of every
unicast packet, the multicast XY tree (union of the XY paths, so every link
carries one copy) and the zero-load latency.

Conventions (shared with ``hdl/noc/flit.py``): node (x, y), index ``y*kx + x``;
north is y-1, south y+1.  Two-level system: a packet for another chiplet goes
by XY on the source NoC to the gateway node, by XY on the NoP to the
destination chiplet, then by XY on that chiplet's NoC; a multicast forks on the
NoP (XY tree over the chiplet mask, without the source chiplet) and on every
NoC (XY tree over the node mask, plus the gateway on the source chiplet when
other chiplets are named).

Timing spec (design choices stated in ``hdl/noc/router.py``): a router costs
``ROUTER_CYCLES`` = 2 cycles (input-buffer write; switch allocation, then switch
traversal onto the link), a link ``L`` cycles, every local output queue 1 cycle
(ejection at a node; the gateway<->NoP hand-over).  Multicasts are cut-through:
at each router the head is allocated the cycle after the tail is written into
the buffer and traverses the cycle after that, so a router costs
``max(ROUTER_CYCLES, flits + MCAST_TAIL_CYCLES)`` for a multicast.  With switch
allocation over two cycles (router parameter ``sa_stages`` = 2, issue 20) every
router costs one cycle more (:func:`router_cycles_of`: 3) and a multicast head
leaves one cycle later after its tail (:func:`mcast_tail_cycles_of`: 2).  With the
allocation loop over two cycles (router parameter ``alloc_stages`` = 2, issue 20) a unicast
router still costs ``ROUTER_CYCLES``; a multicast head is allocated 3 cycles after its tail
is written (it is pending one cycle, arms when every branch accepts a whole packet, and
goes in the cycle after: :func:`mcast_tail_cycles_of` 3).
Left out: contention (the golden model only gives zero-load timing).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

Coord = tuple  # (x, y)
ROUTER_CYCLES = 2    # was 1 before the router was pipelined (issue 20)
MCAST_TAIL_CYCLES = 1    # multicast head leaves this long after the tail arrives (was 0)


def router_cycles_of(sa_stages: int = 1, alloc_stages: int = 1) -> int:
    """Zero-load router cycles with ``sa_stages`` cycles of switch allocation (1: the
    chiplet's router, ROUTER_CYCLES; 2: the pipelined one).  ``alloc_stages`` = 2 (the
    allocation loop over two cycles) does not change a unicast head's router cycles."""
    return ROUTER_CYCLES + sa_stages - 1


def mcast_tail_cycles_of(sa_stages: int = 1, alloc_stages: int = 1) -> int:
    """Cycles from a multicast tail's arrival to its head's allocation."""
    return MCAST_TAIL_CYCLES + sa_stages - 1 + 2 * (alloc_stages - 1)


def xy_path(src: Coord, dst: Coord) -> list:
    """Routers visited by XY routing from src to dst, both included."""
    x, y = src
    path = [(x, y)]
    while x != dst[0]:
        x += 1 if dst[0] > x else -1
        path.append((x, y))
    while y != dst[1]:
        y += 1 if dst[1] > y else -1
        path.append((x, y))
    return path


def xy_links(src: Coord, dst: Coord) -> list:
    p = xy_path(src, dst)
    return list(zip(p[:-1], p[1:]))


def hops(src: Coord, dst: Coord) -> int:
    return abs(src[0] - dst[0]) + abs(src[1] - dst[1])


def mcast_tree(src: Coord, dests) -> set:
    """Directed links of the XY multicast tree (union of XY paths)."""
    links = set()
    for d in dests:
        links.update(xy_links(src, d))
    return links


def broadcast_min_links(kx: int, ky: int) -> int:
    """Minimum link traversals to reach every other node of a kx*ky mesh (a spanning tree)."""
    return kx * ky - 1


def mask_to_coords(mask: int, kx: int, ky: int) -> list:
    return [(i % kx, i // kx) for i in range(kx * ky) if mask >> i & 1]


def coords_to_mask(coords, kx: int) -> int:
    m = 0
    for x, y in coords:
        m |= 1 << (y * kx + x)
    return m


def router_cost(flits: int = 1, multicast: bool = False, router_cycles: int = ROUTER_CYCLES,
                tail_cycles: int = MCAST_TAIL_CYCLES) -> int:
    """Zero-load cycles one router adds to a packet's head (cut-through multicast: the head
    waits for the tail)."""
    return max(router_cycles, flits + tail_cycles) if multicast else router_cycles


def zero_load_latency(h: int, link_latency: int = 1, flits: int = 1, multicast: bool = False,
                      router_cycles: int = ROUTER_CYCLES, sa_stages: int | None = None,
                      alloc_stages: int = 1) -> int:
    """Cycles from the source's local-input handshake of the head to the head being valid at
    the destination's local output, on one mesh with no contention (``sa_stages`` /
    ``alloc_stages`` given: the router and multicast-tail cycles of that pipeline)."""
    tail = MCAST_TAIL_CYCLES
    if sa_stages is not None or alloc_stages != 1:
        sa = 1 if sa_stages is None else sa_stages
        router_cycles = router_cycles_of(sa, alloc_stages)
        tail = mcast_tail_cycles_of(sa, alloc_stages)
    routers = h + 1
    return routers * router_cost(flits, multicast, router_cycles, tail) + h * link_latency + 1


@dataclass(frozen=True)
class Packet:
    """One packet of a trace.  Addresses are (chiplet(x,y), node(x,y)); single-level meshes use
    chiplet (0, 0).  ``dests`` for a multicast: (chiplet mask, node mask)."""
    pid: int
    src: tuple
    mcast: bool
    dest: tuple           # unicast: (chiplet, node); multicast: (chiplet_mask, node_mask)
    flits: int = 1
    mclass: int = 0


@dataclass
class System:
    """Mesh geometry: ``kx*ky`` nodes per chiplet, ``ckx*cky`` chiplets, gateway node."""
    kx: int
    ky: int
    ckx: int = 1
    cky: int = 1
    gw: Coord = (0, 0)
    noc_link: int = 1
    nop_link: int = 4
    sa_stages: int = 1      # switch allocation cycles of every router (router_cycles_of)
    alloc_stages: int = 1   # allocation loop cycles of every router (mcast_tail_cycles_of)

    def destinations(self, pkt: Packet) -> list:
        """Every (chiplet, node) that must receive pkt exactly once."""
        if not pkt.mcast:
            return [pkt.dest]
        cm, nm = pkt.dest
        if self.ckx * self.cky == 1:
            cm = 1
        chips = mask_to_coords(cm, self.ckx, self.cky)
        nodes = mask_to_coords(nm, self.kx, self.ky)
        return [(c, n) for c in chips for n in nodes]

    def route(self, src, dst) -> list:
        """Hierarchical XY route as a list of (level, chiplet, from, to) link hops."""
        (sc, sn), (dc, dn) = src, dst
        if sc == dc:
            return [("noc", sc, a, b) for a, b in xy_links(sn, dn)]
        out = [("noc", sc, a, b) for a, b in xy_links(sn, self.gw)]
        out += [("nop", None, a, b) for a, b in xy_links(sc, dc)]
        out += [("noc", dc, a, b) for a, b in xy_links(self.gw, dn)]
        return out

    def tree(self, pkt: Packet) -> set:
        """Set of links a packet traverses (a multicast: the union of its XY routes)."""
        links = set()
        for d in self.destinations(pkt):
            links.update(self.route(pkt.src, d))
        return links

    def latency(self, src, dst, flits=1, multicast=False) -> int:
        (sc, sn), (dc, dn) = src, dst
        if sc == dc:
            return zero_load_latency(hops(sn, dn), self.noc_link, flits, multicast,
                                     sa_stages=self.sa_stages, alloc_stages=self.alloc_stages)
        h1, hp, h2 = hops(sn, self.gw), hops(sc, dc), hops(self.gw, dn)
        routers = (h1 + 1) + (hp + 1) + (h2 + 1)
        links = (h1 + h2) * self.noc_link + hp * self.nop_link
        queues = 3          # gateway -> NoP, NoP -> gateway, final ejection
        return routers * router_cost(
            flits, multicast, router_cycles_of(self.sa_stages, self.alloc_stages),
            mcast_tail_cycles_of(self.sa_stages, self.alloc_stages)) + links + queues


def expected_deliveries(system: System, packets) -> dict:
    """{(chiplet, node): [pid, ...]} in an order consistent with per-(src,dst) unicast order."""
    out = defaultdict(list)
    for p in packets:
        for d in system.destinations(p):
            out[d].append(p.pid)
    return dict(out)


def check_deliveries(system: System, packets, received: dict) -> dict:
    """Compare received {(chiplet,node): [pid in arrival order]} with the spec.
    Returns counts {lost, duplicated, misrouted, reordered} (all 0 when correct)."""
    by_id = {p.pid: p for p in packets}
    exp = expected_deliveries(system, packets)
    lost = dup = mis = reord = 0
    for node in set(exp) | set(received):
        want = defaultdict(int)
        for pid in exp.get(node, []):
            want[pid] += 1
        got = defaultdict(int)
        for pid in received.get(node, []):
            got[pid] += 1
        for pid in set(want) | set(got):
            w, g = want.get(pid, 0), got.get(pid, 0)
            if w == 0:
                mis += g
            elif g < w:
                lost += w - g
            elif g > w:
                dup += g - w
        # unicast order per source
        last, seen = {}, set()
        for pid in received.get(node, []):
            p = by_id.get(pid)
            if p is None or p.mcast or pid in seen:
                continue
            seen.add(pid)
            key = (p.src, p.mclass)
            if key in last and last[key] > pid:
                reord += 1
            last[key] = max(pid, last.get(key, -1))
    return {"lost": lost, "duplicated": dup, "misrouted": mis, "reordered": reord}
