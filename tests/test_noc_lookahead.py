"""``link_lookahead`` (``alloc_stages=2``, issue 20): the route and destination/route check
a sender computes for its neighbour (``Router._lookahead``) must equal what the neighbour
computes itself from the flit (``_route`` + ``_dest_valid``, the path without lookahead),
for every output and any head flit -- legal, outside the mesh, bad class, empty or
out-of-range multicast masks, other chiplets, XY-illegal turns.  This is the receiver's
write-side input in a mesh, so any difference is a cycle (or route) difference.
Random flits through amaranth.sim; a few seconds."""
import random

import pytest
from amaranth.hdl import Cat, Module, Signal
from amaranth.sim import Simulator

from tessera.hdl.noc.router import E, N, OPPOSITE, S, W, Router, RouterConfig

DIRS = {N: (0, -1), E: (1, 0), S: (0, 1), W: (-1, 0)}


def _harness(cfg, xy, chip):
    """Sender at ``xy`` (node coords for noc, chiplet coords for nop); one receiver per
    output at the neighbouring position."""
    m = Module()
    snd = Router(cfg)
    snd._MustUse__silence = True
    flit = Signal(cfg.flit.size, name="flit")
    f = cfg.flit(flit)
    outs = []

    def place(r, pos):
        if cfg.level == "noc":
            m.d.comb += [r.my.node.x.eq(pos[0]), r.my.node.y.eq(pos[1]),
                         r.my.chiplet.x.eq(chip[0]), r.my.chiplet.y.eq(chip[1])]
        else:
            m.d.comb += [r.my.chiplet.x.eq(pos[0]), r.my.chiplet.y.eq(pos[1]),
                         r.my.node.x.eq(cfg.gw_x), r.my.node.y.eq(cfg.gw_y)]
    place(snd, xy)
    for o, (dx, dy) in DIRS.items():
        nb = (xy[0] + dx, xy[1] + dy)
        kx, ky = (cfg.kx, cfg.ky) if cfg.level == "noc" else (cfg.ckx, cfg.cky)
        if not (0 <= nb[0] < kx and 0 <= nb[1] < ky):
            continue
        rcv = Router(cfg)
        rcv._MustUse__silence = True
        place(rcv, nb)
        la = snd._lookahead(m, f, o)
        rt, rok = rcv._route(m, f, OPPOSITE[o], f"rx{o}")
        own = Cat(rt, rcv._dest_valid(m, f) & rok)
        a, b = Signal(6, name=f"la_{o}"), Signal(6, name=f"own_{o}")
        m.d.comb += [a.eq(la), b.eq(own)]
        outs.append((o, a, b))
    return m, flit, outs


def _random_flit(cfg, rng):
    """Raw flit bits, biased towards in-range coordinates (about half are legal)."""
    bits = rng.getrandbits(cfg.flit.size)
    lay = cfg.flit
    def setf(bits, path, val):
        off, width = 0, None
        layout = lay
        for name in path:
            fld = layout[name]
            off += fld.offset
            layout, width = fld.shape, fld.width
        mask = ((1 << width) - 1) << off
        return (bits & ~mask) | ((val << off) & mask)
    kx, ky = cfg.kx, cfg.ky
    if rng.random() < 0.7:
        bits = setf(bits, ("dest", "ucast", "node", "x"), rng.randrange(kx + 1))
        bits = setf(bits, ("dest", "ucast", "node", "y"), rng.randrange(ky + 1))
        bits = setf(bits, ("dest", "ucast", "chiplet", "x"), rng.randrange(cfg.ckx + 1))
        bits = setf(bits, ("dest", "ucast", "chiplet", "y"), rng.randrange(cfg.cky + 1))
        bits = setf(bits, ("src", "chiplet", "x"), rng.randrange(cfg.ckx))
        bits = setf(bits, ("src", "chiplet", "y"), rng.randrange(cfg.cky))
        bits = setf(bits, ("mclass",), rng.randrange(cfg.classes + 1))
        if rng.random() < 0.5:       # a multicast with in-range (maybe empty) masks
            bits = setf(bits, ("mcast",), 1)
            bits = setf(bits, ("dest", "mcast", "nodes"), rng.getrandbits(kx * ky))
            bits = setf(bits, ("dest", "mcast", "chiplets"),
                        rng.getrandbits(cfg.ckx * cfg.cky))
    return bits


CFGS = [
    dict(kx=4, ky=4, alloc_stages=2, link_lookahead=True),
    dict(kx=3, ky=2, vcs=1, classes=1, alloc_stages=2, link_lookahead=True),
    dict(kx=2, ky=2, hier=True, ckx=2, cky=2, gw_x=1, gw_y=0, alloc_stages=2,
         link_lookahead=True),
    dict(kx=2, ky=2, level="nop", ckx=3, cky=3, alloc_stages=2, link_lookahead=True),
]


@pytest.mark.parametrize("kw", CFGS, ids=["noc4x4", "noc3x2_1vc", "hier", "nop3x3"])
def test_lookahead_equals_receivers_own_checks(kw):
    cfg = RouterConfig(**kw)
    rng = random.Random(7)
    kx, ky = (cfg.kx, cfg.ky) if cfg.level == "noc" else (cfg.ckx, cfg.cky)
    positions = sorted({(0, 0), (kx - 1, ky - 1), (kx // 2, ky // 2), (kx - 1, 0)})
    chip = (1, 0) if cfg.hier else (0, 0)
    checked = [0, 0]
    for xy in positions:
        m, flit, outs = _harness(cfg, xy, chip)
        sim = Simulator(m)

        async def tb(ctx):
            for _ in range(100):
                ctx.set(flit, _random_flit(cfg, rng))
                await ctx.delay(1e-9)
                for o, a, b in outs:
                    va, vb = ctx.get(a), ctx.get(b)
                    assert va == vb, (kw, xy, o, hex(ctx.get(flit)), va, vb)
                    checked[0] += 1
                    checked[1] += va >> 5
        sim.add_testbench(tb)
        sim.run()
    # the random flits exercise both outcomes of the check
    assert 0.05 * checked[0] < checked[1] < 0.95 * checked[0], checked


def test_lookahead_needs_alloc_stages_2():
    with pytest.raises(ValueError, match="link_lookahead needs alloc_stages=2"):
        RouterConfig(link_lookahead=True)
