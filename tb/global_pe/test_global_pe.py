"""cocotb tests of the Global PE against the golden model (run via tessera.tb.runner).

Environment knobs: ``GPE_CMDS`` (random commands per run), ``GPE_OUT_READY``
(network-out ready probability), ``GPE_IN_IDLE``, ``GPE_SPAN``.
"""
from __future__ import annotations

import json
import os
import random

import cocotb

from tessera.golden.global_pe import Command, GlobalPEModel, ewise_words
from tessera.hdl.global_pe.decoder import CHECK_CYCLES
from tessera.hdl.global_pe.packets import (EW_ADD, EW_MAX, EW_MUL, OP_EWISE, OP_GROUP, OP_RECV,
                                           OP_SEND, ST_OK)
from tessera.tb.global_pe.env import GpeEnv
from tessera.tb.global_pe import scenarios as sc


# cycles after the command stream takes a RECV until its window is open (the decoder's checks
# plus the registered dispatch), so that packets sent then are not strays
RECV_OPEN = CHECK_CYCLES + 1

def _env_float(name, default):
    return float(os.environ.get(name, default))


class Runner:
    """Issues a command list to the DUT and keeps the golden model in step.

    A RECV is issued only when every earlier SEND / EWISE / GROUP has
    completed and a RECV slot is free (so the decoder dispatches it at once);
    its OUT packets are injected right after.  A later command that touches
    an open RECV window (or a RECV whose window overlaps an open one) waits
    for that RECV's completion, so the golden model's command order holds.
    """

    def __init__(self, env: GpeEnv, model: GlobalPEModel):
        self.env, self.model = env, model
        self.open_recv = []            # [(tag, lo, hi)]
        self.recv_issued = 0
        self._recv_tags = set()
        self.cmds = []                 # every command issued, in order (see step)

    def _done_tags(self):
        return {c["tag"] for c in self.env.cpl.items}

    async def _all_done(self):
        done = self._done_tags()
        await self.env.wait_until(lambda: len(self.env.cpl.items) >= self.issued,
                                  what=f"all completions; outstanding tags "
                                       f"{[t for t, _ in self.model.completions if t not in done]}")

    async def run(self, cmds):
        env = self.env
        slots = env.cfg.recv_slots
        for cmd in cmds:
            for tag, lo, hi in list(self.open_recv):
                if any(a < hi and lo < b for a, b in sc.regions(cmd)):
                    await env.wait_until(lambda: tag in self._done_tags(), what=f"RECV {tag}")
            if cmd.op == OP_RECV:
                # every non-RECV command done, fewer than `slots` RECVs open
                await env.wait_until(
                    lambda: len(self.env.cpl.items) - self._recv_done() >= self.issued
                    - self.recv_issued and self._open() < slots, what="RECV slot")
            self.open_recv = [r for r in self.open_recv if r[0] not in self._done_tags()]
            env.issue(cmd)
            env.dut._log.debug("issue %s", {k: v for k, v in cmd.__dict__.items()
                                            if k != "arrivals"})
            self.step(cmd)
            if cmd.op == OP_RECV:
                self.recv_issued += 1
                self._recv_tags.add(cmd.tag)
                await env.cmd.wait_idle()
                await env.clocks(RECV_OPEN)
                if self.model.completions[-1][1] == ST_OK:
                    self.open_recv.append((cmd.tag, cmd.a, cmd.a + cmd.cnt[0]))
                for src, addr, words in cmd.arrivals:
                    env.send_in(env.out_packet(src, addr, words))
        await self._all_done()

    @property
    def issued(self):
        return len(self.cmds)

    def step(self, cmd):
        """Account for a command issued to the DUT (by ``run`` or by the test itself)."""
        self.cmds.append(cmd)
        self.model.step(cmd)

    def _recv_done(self):
        return sum(1 for c in self.env.cpl.items if c["tag"] in self._recv_tags)

    def _open(self):
        done = self._done_tags()
        return sum(1 for t, _, _ in self.open_recv if t not in done)

    def check(self):
        """Completions: the golden set; the order the hardware guarantees (the EWISE
        unit's in command order, the decoder's own -- rejected commands and GROUP -- in
        command order; SENDs and RECVs finish at their own pace); every SEND completes
        only after its last tile; every consumer got exactly its golden streams."""
        env, model = self.env, self.model
        got = [(c["tag"], c["status"]) for c in env.cpl.items]
        env.check_equal(sorted(got), sorted(model.completions), "completions")
        cls = {}
        for cmd, (tag, st) in zip(self.cmds, model.completions):
            if st != ST_OK or cmd.op == OP_GROUP:
                cls[tag] = "decoder"
            elif cmd.op == OP_EWISE:
                cls[tag] = "ewise"
        for k in ("decoder", "ewise"):
            env.check_equal([g for g in got if cls.get(g[0]) == k],
                            [g for g in model.completions if cls.get(g[0]) == k],
                            f"{k} completion order")
        tags = [t for t, _ in model.completions]
        sends = {c.tag for c, (_, st) in zip(self.cmds, model.completions)
                 if c.op == OP_SEND and st == ST_OK and tags.count(c.tag) == 1}
        env.check_send_completions(model.dest_packets, sends)
        env.check_packets(model.dest_packets)
        # the banks' read/write collision mode is "undefined": the Global PE must never
        # read and write one word in the same cycle when the controller keeps the rules
        env.check_equal(int(env.dut.status.value.to_unsigned()) >> 3 & 1, 0, "rw_collision")

    def overtakes(self):
        """Completions of non-RECV commands that came before an earlier command's."""
        order = {t: i for i, (t, _) in enumerate(self.model.completions)}
        seq = [order[c["tag"]] for c in self.env.cpl.items if c["tag"] not in self._recv_tags]
        return sum(1 for i, x in enumerate(seq) if any(y > x for y in seq[:i]))


async def _start(dut, **kw):
    env = GpeEnv(dut, **kw)
    await env.reset()
    return env


async def _random_run(dut, n_cmds, span, out_ready, in_idle, slow_frac=0.2):
    env = await _start(dut, out_ready=out_ready, in_idle=in_idle, cmd_idle=0.2, cpl_ready=0.5)
    rng = random.Random(env.seed)
    cfg = env.cfg
    for c in range(cfg.consumers):      # per-consumer credit-return delays
        env.delay[c] = (30, 120) if rng.random() < slow_frac else (1, rng.randint(2, 12))
    cmds = sc.random_sequence(rng, cfg, n_cmds=n_cmds, span=span)
    runner = Runner(env, GlobalPEModel(cfg))
    await runner.run(cmds)
    await env.clocks(20)
    runner.check()
    await env.check_credits_restored()
    env.check_equal(int(dut.status.value.to_unsigned()) & 1, 0, "credit_overflow flag")
    env.dut._log.info("%d commands, %d completions overtook an earlier command's",
                      len(cmds), runner.overtakes())
    return env, cmds


@cocotb.test()
async def random_commands(dut):
    """Random SEND/EWISE/RECV/GROUP/malformed sequence, random back-pressure and credit delays."""
    env, cmds = await _random_run(dut, int(os.environ.get("GPE_CMDS", "24")),
                                  int(os.environ.get("GPE_SPAN", "192")),
                                  _env_float("GPE_OUT_READY", 0.7), _env_float("GPE_IN_IDLE", 0.2))
    env.report("random_commands", commands=len(cmds))


@cocotb.test()
async def demo(dut):
    """make demo: groups across chiplets, load, multicast + unicast SEND, EWISE, read-back."""
    env = await _start(dut, out_ready=0.8, in_idle=0.1)
    rng = random.Random(env.seed)
    cfg = env.cfg
    cmds = sc.group_commands(rng, cfg)
    cmds.append(sc.load_command(rng, cfg, 10, 0, 64))
    cmds.append(Command(OP_SEND, tag=11, a=0, cnt=(8, 2, 1), stride=(1, 16, 0), tile=4,
                        groups=(1 << cfg.groups) - 1, ucast=True, uaddr=((1, 0), (2, 3))))
    cmds.append(Command(OP_EWISE, tag=12, a=0, b=16, c=32, cnt=(16, 1, 1), sub=EW_MUL, shift=3))
    cmds.append(Command(OP_EWISE, tag=13, a=32, b=48, c=32, cnt=(16, 1, 1), sub=EW_ADD, shift=0))
    cmds.append(sc.readback(cfg, 14, 0, 64))
    runner = Runner(env, GlobalPEModel(cfg))
    await runner.run(cmds)
    await env.clocks(10)
    runner.check()
    env.report("demo", what=f"{len(cmds)} commands (groups, load, multicast + unicast SEND, EWISE, "
                            "read-back): every packet, completion and word vs golden Global PE model")


@cocotb.test()
async def malformed_commands(dut):
    """Every malformed class completes with its status and touches nothing."""
    env = await _start(dut, out_ready=0.9)
    cfg = env.cfg
    rng = random.Random(env.seed)
    cmds = sc.group_commands(rng, cfg)
    cmds.append(sc.load_command(rng, cfg, 20, 0, 32))
    bad = sc.malformed(cfg)
    cmds += [c for _, c in bad]
    cmds.append(sc.readback(cfg, 21, 0, 32))
    runner = Runner(env, GlobalPEModel(cfg))
    await runner.run(cmds)
    await env.clocks(10)
    runner.check()
    got = {c["tag"]: c["status"] for c in env.cpl.items}
    for status, c in bad:                       # golden checks agree with the hand list
        env.check_equal(got[c.tag], status, f"status of malformed tag {c.tag:#x}")
    # only the legal read-back produced traffic (check_packets also rejects extra tiles)
    env.check_equal(sum(len(v) for v in env.received.values()),
                    -(-32 // cfg.max_tile), "packets: read-back only")
    env.report("malformed_commands")


@cocotb.test()
async def ewise_saturation(dut):
    """EWISE add/mul/max with extreme operands and every shift, bit-exact."""
    env = await _start(dut)
    cfg = env.cfg
    rng = random.Random(env.seed)
    lanes = cfg.word_bits // 8
    ext = [-128, -127, -1, 0, 1, 127, 126, -64, 64]
    words = []
    for i in range(16):
        words.append(sum(((rng.choice(ext) if rng.random() < 0.7 else rng.randint(-128, 127))
                          & 0xFF) << (8 * j) for j in range(lanes)))
    cmds = sc.group_commands(rng, cfg)
    cmds.append(Command(OP_RECV, tag=30, a=0, cnt=(16, 1, 1), mask=(1, 2),
                        arrivals=[(1, 0, words[:7]), (1, 7, words[7:])]))
    tag = 31
    for sub in (EW_ADD, EW_MUL, EW_MAX):
        for shift in (0, 1, 4, 7, 15):
            cmds.append(Command(OP_EWISE, tag=tag, a=0, b=8, c=16 + (tag - 31) * 8,
                                cnt=(8, 1, 1), sub=sub, shift=shift))
            tag += 1
    cmds.append(sc.readback(cfg, tag, 0, 16 + 15 * 8))
    runner = Runner(env, GlobalPEModel(cfg))
    await runner.run(cmds)
    await env.clocks(10)
    runner.check()
    # a hand-computed lane: (-128) * (-128) >> 0 saturates to 127; 127 + 127 >> 1 = 127
    import numpy as np
    a = np.array([-128, 127, -128, 100], dtype=np.int8)
    b = np.array([-128, 127, 127, -100], dtype=np.int8)
    env.check_equal(list(ewise_words(a, b, EW_MUL, 0)), [127, 127, -128, -128], "mul sat")
    env.check_equal(list(ewise_words(a, b, EW_ADD, 1)), [-128, 127, -1, 0], "add shift")
    env.report("ewise_saturation")


@cocotb.test()
async def credit_window_and_slow_group(dut):
    """A consumer that holds its credits gets exactly credit_window tiles; a slow group
    holds back only itself; credits returned later release the rest."""
    env = await _start(dut)
    cfg = env.cfg
    W = cfg.credit_window
    rng = random.Random(env.seed)
    N = cfg.nodes
    fast = (1, 0b1111 & ((1 << N) - 1))                      # chiplet 0, nodes 0..3
    slow = (1 << (cfg.chiplets - 1), 0b11 << (N - 2))        # last chiplet, last 2 nodes
    both = (1 | 1 << (cfg.chiplets - 1), 0b10)               # node 1 of both: also in fast
    cmds = [Command(OP_GROUP, tag=0, gidx=0, mask=fast),
            Command(OP_GROUP, tag=1, gidx=1, mask=slow)]
    if cfg.groups > 2:                                       # a node in two groups
        cmds.append(Command(OP_GROUP, tag=4, gidx=2, mask=both))
    cmds.append(sc.load_command(rng, cfg, 2, 0, 64))
    runner = Runner(env, GlobalPEModel(cfg))
    await runner.run(cmds)
    slow_nodes = env.members(*slow)
    fast_nodes = env.members(*fast)
    for c in slow_nodes:
        env.delay[c] = None                        # hold credits
    tiles = 16
    lanes_of = {c: sum(c in env.members(*cmd.mask) for cmd in cmds if cmd.op == OP_GROUP)
                for c in fast_nodes}
    send = Command(OP_SEND, tag=3, a=0, cnt=(tiles * 2, 1, 1), stride=(1, 0, 0), tile=2,
                   groups=(1 << min(cfg.groups, 3)) - 1)
    env.issue(send)
    runner.step(send)
    await env.wait_until(lambda: all(len(env.received[c]) == tiles * lanes_of[c]
                                     for c in fast_nodes)
                         and all(len(env.received[c]) == W for c in slow_nodes), limit=5000,
                         what="fast group done, slow group at its window")
    await env.clocks(200)
    for c in slow_nodes:
        env.check_equal(len(env.received[c]), W, f"slow consumer {c} tiles while holding")
    env.check_equal(len(env.cpl.items), len(cmds), "SEND not complete while slow group waits")
    for _ in range(tiles):
        for c in slow_nodes:
            env.release(c)
        await env.clocks(rng.randint(5, 40))
    for c in slow_nodes:
        env.delay[c] = (1, 3)
        env.release(c)
    await env.wait_cpl(len(cmds) + 1, limit=20000)
    await env.clocks(50)
    runner.check()
    env.report("credit_window_and_slow_group")


@cocotb.test()
async def overlapping_sends(dut):
    """SENDs overlap: with SEND #1's slow group out of credits, a later SEND to a fast
    group, a unicast SEND and an EWISE that does not touch SEND #1's region start and
    complete at their own pace; a GROUP rewrite of the slow group and an EWISE that
    would overwrite words SEND #1 has yet to read wait for SEND #1."""
    env = await _start(dut)
    cfg = env.cfg
    W = cfg.credit_window
    rng = random.Random(env.seed)
    N = cfg.nodes
    slow = (1 << (cfg.chiplets - 1), 0b11 << (N - 2))        # last chiplet, last 2 nodes
    fast = (1, 0b1111 & ((1 << N) - 1))                      # chiplet 0, nodes 0..3
    model = GlobalPEModel(cfg)
    runner = Runner(env, model)
    await runner.run([Command(OP_GROUP, tag=0, gidx=0, mask=slow),
                      Command(OP_GROUP, tag=1, gidx=1, mask=fast),
                      sc.load_command(rng, cfg, 2, 0, 64)])
    tile = min(4, cfg.max_tile)
    words = 8 * tile                                         # 8 tiles > any window here

    def send(tag, groups=0, ucast=False, uaddr=((0, 0), (0, 0)), a=0):
        return Command(OP_SEND, tag=tag, a=a, cnt=(words, 1, 1), stride=(1, 0, 0), tile=tile,
                       groups=groups, ucast=ucast, uaddr=uaddr)

    def cpl_cycle(tag):
        hits = [cy for t, cy, _ in env.cpl_seen if t == tag]
        return hits[0] if hits else None

    async def issue(cmd):
        await env.cmd.wait_idle()
        t0 = env.cycles
        env.issue(cmd)
        runner.step(cmd)
        return t0

    # the fast SEND alone: the reference pace
    t0 = await issue(send(10, groups=0b10))
    await env.wait_until(lambda: cpl_cycle(10) is not None, limit=5000, what="SEND 10 alone")
    alone = cpl_cycle(10) - t0

    slow_nodes = env.members(*slow)
    for c in slow_nodes:
        env.delay[c] = None                                  # slow consumers hold credits
    await issue(send(20, groups=0b01))
    await env.wait_until(lambda: all(len(env.received[c]) == W for c in slow_nodes),
                         limit=5000, what="slow group at its window")
    t_fast = await issue(send(21, groups=0b10))
    await env.wait_until(lambda: cpl_cycle(21) is not None, limit=5000,
                         what="fast SEND behind the stalled one")
    paced = cpl_cycle(21) - t_fast
    env.dut._log.info("fast SEND alone %d cycles, behind a stalled SEND %d", alone, paced)
    env.check_equal(paced <= alone + 2, True,
                    f"fast SEND keeps its pace ({paced} vs {alone} cycles alone)")
    x, y = 2 % cfg.node_mesh_x, 2 // cfg.node_mesh_x          # a fast node, by unicast
    await issue(send(22, ucast=True, uaddr=((0, 0), (x, y)), a=words))
    await issue(Command(OP_EWISE, tag=23, a=words, b=words + 16, c=2 * words + 16,
                        cnt=(16, 1, 1), sub=EW_ADD, shift=1))    # clear of SEND 20's words
    await issue(Command(OP_GROUP, tag=24, gidx=1, mask=fast))     # the fast lane is free
    await env.wait_until(lambda: all(cpl_cycle(t) is not None for t in (22, 23, 24)),
                         limit=5000, what="commands behind the stalled SEND complete")
    env.check_equal(cpl_cycle(20), None, "stalled SEND not complete")

    # must wait for the stalled SEND: a rewrite of its group (episode 1), then an EWISE
    # overwriting words it has yet to read (episode 2); each alone behind a stall
    slow2 = (slow[0], 0b111 << (N - 3))                      # the slow nodes and one more

    async def stall_then(tag_send, blocked_cmd, holders, free_cmds=(), a=0):
        for c in holders:
            env.delay[c] = None
        if tag_send != 20:
            before = {c: len(env.received[c]) for c in holders}
            await issue(send(tag_send, groups=0b01, a=a))
            await env.wait_until(lambda: all(len(env.received[c]) == before[c] + W
                                             for c in holders), limit=5000,
                                 what=f"SEND {tag_send} at the window")
        for cmd in free_cmds:                      # clear of the stalled SEND: complete
            await issue(cmd)
            await env.wait_until(lambda: cpl_cycle(cmd.tag) is not None, limit=2000,
                                 what=f"command {cmd.tag} beside the stalled SEND")
        await issue(blocked_cmd)
        await env.clocks(300)
        for t in (tag_send, blocked_cmd.tag):
            env.check_equal(cpl_cycle(t), None, f"command {t} waits for the stalled SEND")
        t_release = env.cycles
        for c in holders:
            env.delay[c] = (1, 3)
            env.release(c)
        await env.wait_until(lambda: all(cpl_cycle(t) is not None
                                         for t in (tag_send, blocked_cmd.tag)),
                             limit=5000, what=f"stalled SEND {tag_send} and command "
                                              f"{blocked_cmd.tag}")
        # (the blocked command may complete a few cycles before the SEND: it needs only
        # the SEND's reads / its lane done, the SEND's completion waits for its last flit)
        env.check_equal(cpl_cycle(blocked_cmd.tag) > t_release, True,
                        f"command {blocked_cmd.tag} completes after the stall ends")

    for c in slow_nodes:
        env.check_equal(len(env.received[c]), W, f"slow consumer {c} within its window")
    await stall_then(20, Command(OP_GROUP, tag=25, gidx=0, mask=slow2), slow_nodes)
    # SEND 27/31 read [8, 8 + words - 1]; EWISE destinations at the edges of that box
    lo, hi = 8, 8 + words - 1

    def ew(tag, c, n):
        return Command(OP_EWISE, tag=tag, a=2 * words, b=2 * words + 16, c=c, cnt=(n, 1, 1),
                       sub=EW_MAX, shift=0)
    await stall_then(27, ew(29, 0, lo + 1), env.members(*slow2), a=lo,
                     free_cmds=[ew(28, hi + 1, 8)])       # ends at base: waits; past span: free
    await stall_then(31, ew(32, hi, 8), env.members(*slow2), a=lo)   # starts at span: waits
    await runner.run([sc.readback(cfg, 40, 0, 3 * words)])
    await env.clocks(20)
    runner.check()
    await env.check_credits_restored()
    env.report("overlapping_sends", fast_alone=alone, fast_behind_stall=paced)


@cocotb.test()
async def maxpool_near_memory(dut):
    """2x2/2 max pooling near memory, as the controller issues it: EWISE max of row
    pairs, EWISE max of neighbouring words, then a SEND whose stride-2 address level
    picks the pooled words.  Checked against an independent numpy max pool."""
    import numpy as np
    env = await _start(dut, out_ready=0.8)
    cfg = env.cfg
    rng = random.Random(env.seed)
    H, W = 4, 6                                      # pixels; one word = int8 channels
    T, P = 64, 96                                    # scratch regions
    load = sc.load_command(rng, cfg, 1, 0, H * W)
    cmds = [load]
    for i in range(H // 2):                          # vertical: T row i = max(row 2i, 2i+1)
        cmds.append(Command(OP_EWISE, tag=2 + i, a=2 * i * W, b=(2 * i + 1) * W, c=T + i * W,
                            cnt=(W, 1, 1), sub=EW_MAX))
    cmds.append(Command(OP_EWISE, tag=10, a=T, b=T + 1, c=P, cnt=(H // 2 * W - 1, 1, 1),
                        sub=EW_MAX))                 # horizontal: P[k] = max(T[k], T[k+1])
    x, y = sc.HOST % cfg.node_mesh_x, sc.HOST // cfg.node_mesh_x
    cmds.append(Command(OP_SEND, tag=11, a=P, cnt=(W // 2, H // 2, 1), stride=(2, W, 0),
                        tile=min(W // 2, cfg.max_tile), ucast=True, uaddr=((0, 0), (x, y))))
    runner = Runner(env, GlobalPEModel(cfg))
    await runner.run(cmds)
    await env.clocks(10)
    runner.check()
    # independent reference: numpy max pool of the loaded feature map
    nb = cfg.word_bits // 8
    fmap = np.zeros((H * W, nb), dtype=np.int8)
    for _, addr, words in load.arrivals:
        for k, w in enumerate(words):
            fmap[addr + k] = np.frombuffer(int(w).to_bytes(nb, "little"), dtype=np.int8)
    ref = fmap.reshape(H // 2, 2, W // 2, 2, nb).max(axis=(1, 3)).reshape(-1, nb)
    got = [np.frombuffer(int(w).to_bytes(nb, "little"), dtype=np.int8)
           for t in env.received[sc.HOST] if t.tag == 11 for w in t.words]
    env.check_equal(len(got), len(ref), "pooled words")
    for k, (g, r) in enumerate(zip(got, ref)):
        env.check_equal(g.tolist(), r.tolist(), f"pooled word {k}")
    env.report("maxpool_near_memory")


@cocotb.test()
async def completion_fairness(dut):
    """Under heavy ``cpl`` back-pressure a stream of short SENDs does not starve other
    completions: a rejected command's completion leaves within one round of the merge."""
    env = await _start(dut, cpl_ready=0.2)
    cfg = env.cfg
    x, y = sc.HOST % cfg.node_mesh_x, sc.HOST // cfg.node_mesh_x
    runner = Runner(env, GlobalPEModel(cfg))
    cmds = [Command(OP_SEND, tag=1 + k, a=k, cnt=(1, 1, 1), tile=1, ucast=True,
                    uaddr=((0, 0), (x, y))) for k in range(6)]
    cmds.append(Command(7, tag=100))                              # BAD_OP
    cmds += [Command(OP_SEND, tag=8 + k, a=k, cnt=(1, 1, 1), tile=1, ucast=True,
                     uaddr=((0, 0), (x, y))) for k in range(60)]
    await runner.run(cmds)
    await env.clocks(10)
    runner.check()
    order = [c["tag"] for c in env.cpl.items]
    sources = cfg.recv_slots + cfg.send_slots + 2
    env.check_equal(order.index(100) <= 7 + sources, True,
                    f"rejected command's completion at position {order.index(100)}")
    env.report("completion_fairness")


@cocotb.test()
async def reset_mid_send(dut):
    """Reset during a long multicast SEND; afterwards the PE works from a clean state
    (full credit windows, empty group table)."""
    env = await _start(dut, out_ready=0.8)
    cfg = env.cfg
    rng = random.Random(env.seed)
    cmds = sc.group_commands(rng, cfg)
    cmds.append(sc.load_command(rng, cfg, 9, 0, 64))
    runner = Runner(env, GlobalPEModel(cfg))
    await runner.run(cmds)
    env.issue(Command(OP_SEND, tag=10, a=0, cnt=(64, 4, 1), stride=(1, 0, 0),
                      tile=min(8, cfg.max_tile),
                      groups=(1 << cfg.groups) - 1, ucast=True))
    await env.wait_until(lambda: env.out_flits > 100, what="SEND under way")
    dut.rst.value = 1
    env.cmd.clear()
    await env.clocks(3)
    env.reset_model()
    env.cpl.items.clear()
    dut.net_in__valid.value = 0
    dut.rst.value = 0
    await env.clocks(2)
    # after reset the group table is empty: a multicast SEND is EMPTY_SET
    model = GlobalPEModel(cfg)           # fresh golden: empty buffer contents are not
    cmds = [Command(OP_SEND, tag=40, a=0, cnt=(1, 1, 1), tile=1, groups=1)]  # relied upon
    hold = sc.HOST
    env.delay[hold] = None
    cmds.append(Command(OP_RECV, tag=41, a=0, cnt=(8, 1, 1), mask=(1, 1),
                        arrivals=[(0, 0, [sc.random_word(rng, cfg) for _ in range(8)])]))
    cmds.append(sc.readback(cfg, 42, 0, 8))
    cmds[-1].tile = 1
    runner = Runner(env, model)
    await runner.run(cmds[:2])
    env.issue(cmds[2])
    runner.step(cmds[2])
    # the host holds credits: exactly a full window of tiles arrives
    await env.wait_until(lambda: len(env.received[hold]) == cfg.credit_window, limit=3000,
                         what="full credit window after reset")
    await env.clocks(100)
    env.check_equal(len(env.received[hold]), cfg.credit_window, "tiles within fresh window")
    env.delay[hold] = (1, 2)
    env.release(hold)
    await env.wait_cpl(3, limit=5000)
    runner.check()
    env.report("reset_mid_send")


async def _timed(env, cmd):
    """Issue one command; return (issue cycle, completion cycle)."""
    n = len(env.cpl.items)
    await env.cmd.wait_idle()
    t0 = env.cycles
    env.issue(cmd)
    await env.wait_cpl(n + 1, limit=100000)
    return t0, env.cycles


@cocotb.test()
async def bench_bandwidth(dut):
    """bench/gpe_bandwidth.py: steady-state rates with consumers keeping up (credit
    return 1-2 cycles, network always ready).  Writes JSON to $GPE_BENCH_OUT."""
    env = await _start(dut, out_ready=1.0, in_idle=0.0)
    cfg = env.cfg
    rng = random.Random(env.seed)
    for c in range(cfg.consumers):
        env.delay[c] = (1, 2)
    words = int(os.environ.get("GPE_BENCH_WORDS", "1024"))
    tile = cfg.max_tile
    out = {"words": words, "tile_words": tile, "credit_window": cfg.credit_window}

    # RECV: one producer streams back-to-back OUT packets of `tile` words
    arrivals = [(0, a, [sc.random_word(rng, cfg, 0) for _ in range(min(tile, words - a))])
                for a in range(0, words, tile)]
    recv = Command(OP_RECV, tag=1, a=0, cnt=(words, 1, 1), mask=(1, 1), arrivals=arrivals)
    model = GlobalPEModel(cfg)
    model.step(recv)
    env.issue(recv)
    await env.cmd.wait_idle()
    await env.clocks(RECV_OPEN)
    t0 = env.cycles
    for src, addr, ws in arrivals:
        env.send_in(env.out_packet(src, addr, ws))
    await env.wait_cpl(1)
    out["recv_cycles"] = env.cycles - t0
    out["recv_words_per_cycle"] = words / out["recv_cycles"]

    async def send(tag, **kw):
        cmd = Command(OP_SEND, tag=tag, a=0, cnt=(words, 1, 1), stride=(1, 0, 0), tile=tile, **kw)
        model.step(cmd)
        env.first_out = None
        f0 = env.out_flits
        t_issue, t_done = await _timed(env, cmd)
        flits = env.out_flits - f0
        return flits, env.last_out - env.first_out + 1, t_done - t_issue

    flits, busy, total = await send(2, ucast=True, uaddr=((1, 1), (3, 4)))
    out.update(send_unicast_flits=flits, send_unicast_cycles=busy,
               send_unicast_flits_per_cycle=flits / busy,
               send_unicast_cycles_incl_command=total)
    g = Command(OP_GROUP, tag=3, gidx=0, mask=(0b1111, 0b1111))   # 4 nodes x 4 chiplets
    model.step(g)
    await _timed(env, g)
    flits, busy, total = await send(4, groups=1)
    out.update(send_multicast_consumers=16, send_multicast_flits=flits,
               send_multicast_cycles=busy, send_multicast_flits_per_cycle=flits / busy,
               send_multicast_cycles_incl_command=total)

    n = min(256, words // 4)
    for tag, (a, b, c, name) in enumerate([(0, n + 1, 2 * n + 2, "ewise"),
                                           (0, n, 2 * n, "ewise_same_bank")], start=5):
        cmd = Command(OP_EWISE, tag=tag, a=a, b=b, c=c, cnt=(n, 1, 1), sub=EW_MUL, shift=4)
        model.step(cmd)
        t_issue, t_done = await _timed(env, cmd)
        out[f"{name}_cycles_incl_command"] = t_done - t_issue
        out[f"{name}_bytes_per_cycle"] = n * cfg.word_bits // 8 / (t_done - t_issue)
    out["ewise_words"] = n

    # a slow group (credits return after 200 cycles) next to a fast one in one SEND
    N = cfg.nodes
    fast, slow = (1, 0b1111), (1 << (cfg.chiplets - 1), 0b11 << (N - 2))
    for tag, gidx, mask in ((7, 1, fast), (8, 2, slow)):
        g = Command(OP_GROUP, tag=tag, gidx=gidx, mask=mask)
        model.step(g)
        await _timed(env, g)
    for c in env.members(*slow):
        env.delay[c] = (200, 200)
    m_words = 256
    fast_nodes = env.members(*fast)
    for tag, groups, key in ((9, 0b010, "fast_alone"), (10, 0b110, "fast_with_slow")):
        cmd = Command(OP_SEND, tag=tag, a=0, cnt=(m_words, 1, 1), stride=(1, 0, 0), tile=tile,
                      groups=groups)
        model.step(cmd)
        before = len(env.received[fast_nodes[0]])
        slow_before = len(env.received[env.members(*slow)[0]])
        t0 = env.cycles
        await env.cmd.wait_idle()
        env.issue(cmd)
        await env.wait_until(lambda: len(env.received[fast_nodes[0]]) - before == m_words // tile,
                             what="fast group tiles")
        out[f"send_{key}_cycles"] = env.cycles - t0
        out[f"send_{key}_slow_tiles_meanwhile"] = (len(env.received[env.members(*slow)[0]])
                                                   - slow_before)
        await env.wait_cpl(len(model.completions), limit=100000)
    out["send_slow_group_credit_delay"] = 200
    out["send_fast_group_slowdown_with_slow_group"] = (out["send_fast_with_slow_cycles"]
                                                      / out["send_fast_alone_cycles"])
    # the same fast SEND issued right behind a SEND to the slow group alone: the SENDs
    # overlap, the fast one is not held back by the earlier one's slow consumers
    slow_cmd = Command(OP_SEND, tag=11, a=0, cnt=(m_words, 1, 1), stride=(1, 0, 0), tile=tile,
                       groups=0b100)
    fast_cmd = Command(OP_SEND, tag=12, a=0, cnt=(m_words, 1, 1), stride=(1, 0, 0), tile=tile,
                       groups=0b010)
    model.step(slow_cmd)
    model.step(fast_cmd)
    before = len(env.received[fast_nodes[0]])
    await env.cmd.wait_idle()
    t0 = env.cycles
    env.issue(slow_cmd)
    env.issue(fast_cmd)
    await env.wait_until(lambda: len(env.received[fast_nodes[0]]) - before == m_words // tile,
                         what="fast group tiles")
    out["send_fast_behind_slow_send_cycles"] = env.cycles - t0
    await env.wait_until(lambda: {11, 12} & {c["tag"] for c in env.cpl.items},
                         what="first of the two completions")
    tags_done = [c["tag"] for c in env.cpl.items]
    out["send_fast_behind_slow_send_completed_first"] = (12 in tags_done
                                                         and 11 not in tags_done)
    out["send_fast_group_slowdown_behind_slow_send"] = (out["send_fast_behind_slow_send_cycles"]
                                                       / out["send_fast_alone_cycles"])
    await env.wait_cpl(len(model.completions), limit=100000)
    # everything the DUT sent is what the golden model says
    got = [(c["tag"], c["status"]) for c in env.cpl.items]
    env.check_equal(sorted(got), sorted(model.completions), "completions")
    env.check_packets(model.dest_packets)
    path = os.environ.get("GPE_BENCH_OUT")
    if path:
        with open(path, "w") as fh:
            json.dump(out, fh, indent=2)
    env.report("bench_bandwidth", **{k: v for k, v in out.items() if "per_cycle" in k})


@cocotb.test()
async def protocol_errors(dut):
    """Stray OUT words (non-producer, outside the window), malformed flits and excess
    credits are dropped / clamped, flagged in ``status``, and change nothing else."""
    env = await _start(dut, out_ready=0.9, in_idle=0.1)
    cfg = env.cfg
    W = cfg.credit_window
    rng = random.Random(env.seed)
    env.check_equal(int(dut.status.value.to_unsigned()), 0, "status after reset")
    word = lambda: sc.random_word(rng, cfg)      # noqa: E731
    # malformed flits first: no RECV is open, nothing may be written
    hdr = int(0)
    bad = [
        [(env.flit(0, 1, 1, word()), None)],                            # body without head
        [(env.flit(1, 1, 1, 0), None)],                                 # kind 0
        [(env.flit(1, 0, 1, 0), None), (env.flit(0, 1, 1, word()), None)],   # kind 0, 2 flits
        [(env.flit(1, 1, ((0, 0), (0, cfg.node_mesh_y)), 3 | 1 << 2), None)],  # src off-mesh
    ]
    for p in bad:
        env.send_in(p)
    await env.wait_until(lambda: not env.in_cur and not env.in_packets and not env.in_valid,
                         what="bad flits consumed")
    await env.clocks(3)
    env.check_equal(int(dut.status.value.to_unsigned()), 0b100, "bad_flit only")
    arrivals = [(2, 16, [word()]),                 # not a producer
                (1, 14, [word(), word()]),         # before the window
                (1, 16, [word() for _ in range(5)]),
                (1, 21, [word() for _ in range(3)]),
                (1, 24, [word()])]                 # after the window (RECV already done)
    cmds = [Command(OP_RECV, tag=1, a=16, cnt=(8, 1, 1), mask=(1, 0b10), arrivals=arrivals)]
    model = GlobalPEModel(cfg)
    runner = Runner(env, model)
    await runner.run(cmds)
    await env.wait_until(lambda: not env.in_cur and not env.in_packets and not env.in_valid,
                         what="strays consumed")
    await env.clocks(3)
    env.check_equal(int(dut.status.value.to_unsigned()), 0b110, "stray_word + bad_flit")
    env.check_equal(model.flags["stray_word"], 1, "golden stray flag")
    # excess credits: consumer 5 returns credits it never used -> clamped, flagged
    env.send_in(env.credit_packet(5, 3))
    await env.clocks(10)
    env.check_equal(int(dut.status.value.to_unsigned()), 0b111, "credit_overflow")
    env.delay[5] = None
    x, y = 5 % cfg.node_mesh_x, 5 // cfg.node_mesh_x
    send = Command(OP_SEND, tag=2, a=16, cnt=(8, 1, 1), stride=(1, 0, 0), tile=1, ucast=True,
                   uaddr=((0, 0), (x, y)))
    env.issue(send)
    runner.step(send)
    await env.clocks(150)
    env.check_equal(len(env.received[5]), W, "clamped window")
    env.delay[5] = (1, 2)
    env.release(5)
    readback = sc.readback(cfg, 3, 0, 32)
    await runner.run([readback])
    await env.clocks(10)
    runner.check()
    env.report("protocol_errors")


@cocotb.test()
async def recv_two_windows(dut):
    """Two RECV windows open at once (overlapping producer sets), their OUT packets
    shuffled together and interleaved with a multicast SEND; then a read-back."""
    env = await _start(dut, out_ready=0.8, in_idle=0.3)
    cfg = env.cfg
    rng = random.Random(env.seed)
    model = GlobalPEModel(cfg)
    runner = Runner(env, model)
    await runner.run(sc.group_commands(rng, cfg) + [sc.load_command(rng, cfg, 9, 128, 32)])
    slots = min(cfg.recv_slots, 2)
    m1 = (1, 0b0111)
    m2 = (1 | 1 << (cfg.chiplets - 1), 0b0110)
    recvs = []
    for k, (a, mask) in enumerate([(0, m1), (64, m2)][:slots]):
        arr = sc.recv_arrivals(rng, cfg, a, 32, sc.members(cfg, mask), max_pkt=4)
        recvs.append(Command(OP_RECV, tag=20 + k, a=a, cnt=(32, 1, 1), mask=mask, arrivals=arr))
    for c in recvs:
        env.issue(c)
        runner.step(c)
        runner.recv_issued += 1
        runner._recv_tags.add(c.tag)
    send = Command(OP_SEND, tag=30, a=128, cnt=(8, 4, 1), stride=(1, 8, 0), tile=3,
                   groups=(1 << cfg.groups) - 1)
    env.issue(send)
    runner.step(send)
    await env.cmd.wait_idle()
    await env.clocks(4)
    pkts = [p for c in recvs for p in c.arrivals]
    rng.shuffle(pkts)
    for src, addr, words in pkts:
        env.send_in(env.out_packet(src, addr, words))
    await runner._all_done()
    await runner.run([sc.readback(cfg, 40, 0, 160)])
    await env.clocks(10)
    runner.check()
    env.check_equal(int(dut.status.value.to_unsigned()), 0, "no strays")
    env.report("recv_two_windows")
