"""Random and directed command sequences for the Global PE testbench and bench.

Pure functions of (config, rng): the same list drives the DUT and the golden
model.  Regions used by random sequences stay inside ``[0, span)`` so a
final read-back SEND of ``[0, span)`` shows every change.
"""
from __future__ import annotations

import random

from tessera.golden.global_pe import Command
from tessera.hdl.global_pe.packets import (EW_ADD, EW_MAX, EW_MUL, OP_EWISE, OP_GROUP, OP_RECV,
                                           OP_SEND, GpeConfig)

HOST = 1            # consumer index of the read-back node (chiplet 0, node (1, 0))


def sim_flit(lay, cfg: GpeConfig, head, tail, ci, payload):
    """A data-class (mclass 1), unicast flit constant of the Global PE's ``net_in`` layout ``lay``
    from consumer ``ci`` (chiplet-major index), for amaranth.sim benches."""
    c, n = divmod(ci, cfg.nodes)
    return lay.const({"head": head, "tail": tail, "mclass": 1, "mcast": 0,
                      "src": {"node": {"x": n % cfg.node_mesh_x, "y": n // cfg.node_mesh_x},
                              "chiplet": {"x": c % cfg.chiplet_mesh_x,
                                          "y": c // cfg.chiplet_mesh_x}},
                      "payload": payload})


def random_word(rng: random.Random, cfg: GpeConfig, extreme=0.3) -> int:
    """A buffer word of int8 lanes; with probability ``extreme`` a lane is -128/127/-1/0."""
    out = 0
    for j in range(cfg.word_bits // 8):
        if rng.random() < extreme:
            b = rng.choice([0x80, 0x7F, 0xFF, 0x00, 0x81])
        else:
            b = rng.getrandbits(8)
        out |= b << (8 * j)
    return out


def random_mask(rng, cfg: GpeConfig, max_consumers=16, max_chiplets=4):
    k = rng.randint(1, min(cfg.chiplets, max_chiplets))
    chips = rng.sample(range(cfg.chiplets), k)
    per = max(1, min(cfg.nodes, max_consumers // k))
    nodes = rng.sample(range(cfg.nodes), rng.randint(1, per))
    return sum(1 << c for c in chips), sum(1 << n for n in nodes)


def recv_arrivals(rng, cfg: GpeConfig, a, n, producers, max_pkt=8):
    """OUT packets covering [a, a+n) from random producers, in shuffled order."""
    pkts = []
    x = a
    while x < a + n:
        k = min(rng.randint(1, max_pkt), a + n - x)
        pkts.append((rng.choice(producers), x, [random_word(rng, cfg) for _ in range(k)]))
        x += k
    rng.shuffle(pkts)
    return pkts


def members(cfg, mask):
    return [c * cfg.nodes + n for c in range(cfg.chiplets) if mask[0] >> c & 1
            for n in range(cfg.nodes) if mask[1] >> n & 1]


def group_commands(rng, cfg, tag0=0):
    cmds = []
    for g in range(cfg.groups):
        cmds.append(Command(OP_GROUP, tag=(tag0 + g) & 0xFF, gidx=g, mask=random_mask(rng, cfg)))
    return cmds


def load_command(rng, cfg, tag, a, n):
    mask = random_mask(rng, cfg)
    return Command(OP_RECV, tag=tag, a=a, cnt=(n, 1, 1), mask=mask,
                   arrivals=recv_arrivals(rng, cfg, a, n, members(cfg, mask)))


def random_send(rng, cfg, tag, span):
    for _ in range(100):
        cnt = [rng.randint(1, 6), rng.randint(1, 4), rng.randint(1, 3)]
        if rng.random() < 0.3:
            cnt = [rng.randint(1, 24), 1, 1]
        stride = [rng.randint(0, 3), rng.randint(0, 40), rng.randint(0, 100)]
        last = sum((c - 1) * s for c, s in zip(cnt, stride))
        if last < span:
            break
    else:
        cnt, stride, last = [4, 1, 1], [1, 0, 0], 3
    a = rng.randint(0, span - 1 - last)
    groups = rng.getrandbits(cfg.groups)
    ucast = rng.random() < 0.4 or groups == 0
    uaddr = (((rng.randrange(cfg.chiplet_mesh_x), rng.randrange(cfg.chiplet_mesh_y)),
              (rng.randrange(cfg.node_mesh_x), rng.randrange(cfg.node_mesh_y))))
    return Command(OP_SEND, tag=tag, a=a, cnt=tuple(cnt), stride=tuple(stride),
                   tile=rng.randint(1, cfg.max_tile), groups=groups, ucast=ucast, uaddr=uaddr)


def random_ewise(rng, cfg, tag, span):
    n = rng.randint(1, 16)
    a = rng.randint(0, span - n)
    b = rng.randint(0, span - n)
    c = rng.choice([a, b, rng.randint(0, span - n)])
    for src in (a, b):
        if c != src and abs(c - src) < n:
            c = a
    if c != b and abs(c - b) < n:
        c = b if a == b else a
    if (c != a and abs(c - a) < n) or (c != b and abs(c - b) < n):
        c, b = a, a
    return Command(OP_EWISE, tag=tag, a=a, b=b, c=c, cnt=(n, 1, 1),
                   sub=rng.choice([EW_ADD, EW_MUL, EW_MAX]), shift=rng.randint(0, 9))


def malformed(cfg: GpeConfig, tag0=0x80):
    """One command per malformed class (status, command)."""
    from tessera.hdl.global_pe.packets import ST_BAD_ARG, ST_BAD_OP, ST_BAD_REGION, ST_EMPTY_SET
    W = cfg.words
    t = iter(range(tag0, tag0 + 64))
    ok_send = dict(cnt=(2, 1, 1), stride=(1, 0, 0), tile=2, ucast=True)
    out = [
        (ST_BAD_OP, Command(5, tag=next(t))),
        (ST_BAD_OP, Command(7, tag=next(t))),
        (ST_BAD_ARG, Command(OP_SEND, tag=next(t), **{**ok_send, "tile": 0})),
        (ST_BAD_ARG, Command(OP_SEND, tag=next(t), **{**ok_send, "tile": cfg.max_tile + 1})),
        (ST_BAD_ARG, Command(OP_SEND, tag=next(t), **{**ok_send, "cnt": (2, 0, 1)})),
        (ST_BAD_REGION, Command(OP_SEND, tag=next(t), a=W - 1, **ok_send)),
        (ST_BAD_REGION, Command(OP_SEND, tag=next(t), a=0, cnt=(2, 2, 2), stride=(1, 1, W - 1),
                                tile=1, ucast=True)),
        (ST_BAD_REGION, Command(OP_SEND, tag=next(t), a=W, cnt=(1, 1, 1), tile=1, ucast=True)),
        (ST_EMPTY_SET, Command(OP_SEND, tag=next(t), cnt=(2, 1, 1), stride=(1, 0, 0), tile=1)),
        (ST_BAD_ARG, Command(OP_RECV, tag=next(t), a=0, cnt=(0, 1, 1), mask=(1, 1))),
        (ST_BAD_REGION, Command(OP_RECV, tag=next(t), a=W - 2, cnt=(3, 1, 1), mask=(1, 1))),
        (ST_EMPTY_SET, Command(OP_RECV, tag=next(t), a=0, cnt=(1, 1, 1), mask=(1, 0))),
        (ST_EMPTY_SET, Command(OP_RECV, tag=next(t), a=0, cnt=(1, 1, 1), mask=(0, 1))),
        (ST_BAD_ARG, Command(OP_EWISE, tag=next(t), sub=3, a=0, b=1, c=2, cnt=(1, 1, 1))),
        (ST_BAD_ARG, Command(OP_EWISE, tag=next(t), sub=0, a=0, b=1, c=2, cnt=(0, 1, 1))),
        (ST_BAD_REGION, Command(OP_EWISE, tag=next(t), a=W - 1, b=0, c=8, cnt=(2, 1, 1))),
        (ST_BAD_REGION, Command(OP_EWISE, tag=next(t), a=0, b=W - 1, c=8, cnt=(2, 1, 1))),
        (ST_BAD_REGION, Command(OP_EWISE, tag=next(t), a=0, b=8, c=W - 1, cnt=(2, 1, 1))),
        (ST_BAD_REGION, Command(OP_EWISE, tag=next(t), a=0, b=8, c=1, cnt=(2, 1, 1))),
        (ST_BAD_REGION, Command(OP_EWISE, tag=next(t), a=0, b=8, c=7, cnt=(2, 1, 1))),
        (ST_EMPTY_SET, Command(OP_GROUP, tag=next(t), gidx=0, mask=(0, 3))),
        (ST_EMPTY_SET, Command(OP_GROUP, tag=next(t), gidx=0, mask=(1, 0))),
    ]
    # a unicast node outside the mesh (if the coordinate field can express one)
    for dim, where in ((cfg.node_mesh_y, lambda v: ((0, 0), (0, v))),
                       (cfg.node_mesh_x, lambda v: ((0, 0), (v, 0))),
                       (cfg.chiplet_mesh_x, lambda v: ((v, 0), (0, 0))),
                       (cfg.chiplet_mesh_y, lambda v: ((0, v), (0, 0)))):
        if dim & (dim - 1):           # not a power of two: dim itself fits the field
            out.append((ST_BAD_ARG, Command(OP_SEND, tag=next(t), uaddr=where(dim), **ok_send)))
            break
    if cfg.groups & (cfg.groups - 1):
        out.append((ST_BAD_ARG, Command(OP_GROUP, tag=next(t), gidx=cfg.groups, mask=(1, 1))))
    return out


def random_sequence(rng, cfg: GpeConfig, n_cmds=20, span=256):
    """Groups, a RECV that loads [0, span), random SEND/EWISE/RECV/GROUP/malformed
    commands, and a read-back SEND of [0, span) to HOST."""
    cmds = group_commands(rng, cfg)
    tag = len(cmds)
    cmds.append(load_command(rng, cfg, tag, 0, span))
    tag += 1
    bad = malformed(cfg)
    for _ in range(n_cmds):
        r = rng.random()
        if r < 0.5:
            cmds.append(random_send(rng, cfg, tag, span))
        elif r < 0.75:
            cmds.append(random_ewise(rng, cfg, tag, span))
        elif r < 0.85:
            n = rng.randint(1, 24)
            cmds.append(load_command(rng, cfg, tag, rng.randint(0, span - n), n))
        elif r < 0.9:
            cmds.append(Command(OP_GROUP, tag=tag, gidx=rng.randrange(cfg.groups),
                                mask=random_mask(rng, cfg)))
        else:
            _, c = rng.choice(bad)
            c = Command(**{**c.__dict__, "tag": tag})
            cmds.append(c)
        tag = (tag + 1) & 0xFF
    cmds.append(readback(cfg, tag, 0, span))
    return cmds


def readback(cfg, tag, a, n):
    x, y = HOST % cfg.node_mesh_x, HOST // cfg.node_mesh_x
    return Command(OP_SEND, tag=tag, a=a, cnt=(n, 1, 1), stride=(1, 0, 0),
                   tile=cfg.max_tile, ucast=True, uaddr=((0, 0), (x, y)))


def regions(cmd: Command):
    """Word intervals [lo, hi) a command reads or writes (for ordering against RECVs)."""
    if cmd.op == OP_SEND:
        last = cmd.a + sum((c - 1) * s for c, s in zip(cmd.cnt, cmd.stride))
        return [(cmd.a, last + 1)]
    if cmd.op == OP_EWISE:
        n = cmd.cnt[0]
        return [(cmd.a, cmd.a + n), (cmd.b, cmd.b + n), (cmd.c, cmd.c + n)]
    if cmd.op == OP_RECV:
        return [(cmd.a, cmd.a + cmd.cnt[0])]
    return []
