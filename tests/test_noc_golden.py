"""Golden NoC model against hand-computed values (XY paths, trees, latency, delivery check)."""
from tessera.golden import noc as G


def test_xy_path_and_hops():
    assert G.xy_path((0, 0), (2, 1)) == [(0, 0), (1, 0), (2, 0), (2, 1)]
    assert G.xy_path((3, 3), (1, 2)) == [(3, 3), (2, 3), (1, 3), (1, 2)]
    assert G.xy_path((1, 1), (1, 1)) == [(1, 1)]
    assert G.hops((0, 0), (3, 3)) == 6


def test_broadcast_tree_is_minimal_spanning_tree():
    for k in (2, 4, 6):
        nodes = [(x, y) for x in range(k) for y in range(k)]
        for src in [(0, 0), (k // 2, k // 2), (k - 1, 0)]:
            tree = G.mcast_tree(src, nodes)
            assert len(tree) == G.broadcast_min_links(k, k) == k * k - 1
            # every node but the source has exactly one incoming tree link
            heads = [b for _, b in tree]
            assert sorted(heads) == sorted(n for n in nodes if n != src)


def test_zero_load_latency():
    # 2 cycles per router + L per link + 1 for the ejection queue
    assert G.zero_load_latency(0) == 3
    assert G.zero_load_latency(3, link_latency=1) == 12
    assert G.zero_load_latency(3, link_latency=4) == 21
    # cut-through multicast: every router on the path waits for the tail, then allocates
    # and traverses (4 flits: the head leaves 5 cycles after it arrived; was 4)
    assert G.zero_load_latency(2, 1, flits=4, multicast=True) == 3 * 5 + 2 + 1
    assert G.zero_load_latency(2, 1, flits=1, multicast=True) == G.zero_load_latency(2, 1)


def test_two_level_routes_and_latency():
    s = G.System(kx=2, ky=2, ckx=2, cky=2, gw=(0, 0), noc_link=1, nop_link=4)
    r = s.route(((0, 0), (1, 1)), ((1, 1), (1, 0)))
    assert [h[0] for h in r] == ["noc", "noc", "nop", "nop", "noc"]
    # 2 NoC hops to gw, 2 NoP hops, 1 NoC hop: routers 3+3+2 (2 cycles each), links 3*1 + 2*4,
    # 3 queues
    assert s.latency(((0, 0), (1, 1)), ((1, 1), (1, 0))) == 2 * 8 + 11 + 3
    p = G.Packet(1, ((0, 0), (1, 0)), True, (0b1010, 0b0110), 1)
    assert sorted(s.destinations(p)) == sorted([((1, 0), (1, 0)), ((1, 0), (0, 1)),
                                                ((1, 1), (1, 0)), ((1, 1), (0, 1))])


def test_check_deliveries_counts_each_fault():
    s = G.System(kx=2, ky=2)
    pk = [G.Packet(1, ((0, 0), (0, 0)), False, ((0, 0), (1, 1))),
          G.Packet(2, ((0, 0), (0, 0)), False, ((0, 0), (1, 1))),
          G.Packet(3, ((0, 0), (1, 0)), True, (1, 0b0011))]
    ok = {((0, 0), (1, 1)): [1, 2], ((0, 0), (0, 0)): [3], ((0, 0), (1, 0)): [3]}
    assert G.check_deliveries(s, pk, ok) == {"lost": 0, "duplicated": 0, "misrouted": 0,
                                             "reordered": 0}
    bad = {((0, 0), (1, 1)): [2, 1, 1], ((0, 0), (0, 1)): [3]}
    assert G.check_deliveries(s, pk, bad) == {"lost": 2, "duplicated": 1, "misrouted": 1,
                                              "reordered": 1}


def test_zero_load_latency_two_cycle_allocation():
    """sa_stages=2 (an option of the router/mesh blocks): a router cycle more per hop, and a
    multicast head leaves 2 cycles after its tail arrives; sa_stages=1 is the chiplet's."""
    assert G.router_cycles_of(1) == G.ROUTER_CYCLES == 2 and G.router_cycles_of(2) == 3
    assert G.zero_load_latency(0, sa_stages=1) == G.zero_load_latency(0) == 3
    assert G.zero_load_latency(0, sa_stages=2) == 4
    assert G.zero_load_latency(3, link_latency=1, sa_stages=2) == 4 * 3 + 3 + 1
    assert G.zero_load_latency(2, 1, flits=4, multicast=True, sa_stages=2) == 3 * 6 + 2 + 1
    assert G.System(2, 2, sa_stages=2).latency(((0, 0), (0, 0)), ((0, 0), (1, 1))) == 3 * 3 + 2 + 1


def test_zero_load_latency_two_cycle_allocation_loop():
    """alloc_stages=2 (the allocation loop over two cycles, an option): a unicast router
    costs the same 2 cycles; a multicast head is allocated 3 cycles after its tail is written
    (pending, arm, go) instead of 1."""
    assert G.router_cycles_of(1, 2) == G.ROUTER_CYCLES
    assert G.mcast_tail_cycles_of(1, 2) == G.MCAST_TAIL_CYCLES + 2 == 3
    assert G.zero_load_latency(3, alloc_stages=2) == G.zero_load_latency(3) == 4 * 2 + 3 + 1
    assert G.zero_load_latency(0, flits=1, multicast=True, alloc_stages=2) == 4 + 1
    assert G.zero_load_latency(2, 1, flits=4, multicast=True, alloc_stages=2) == 3 * 7 + 2 + 1
    assert G.System(2, 2, alloc_stages=2).latency(((0, 0), (0, 0)), ((0, 0), (1, 1)),
                                                  multicast=True) == 3 * 4 + 2 + 1
