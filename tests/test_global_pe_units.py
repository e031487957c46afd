"""Global PE: golden-model unit tests (hand-computed values), parameter validation,
and an amaranth.sim test of the buffer arbitration (never loses a request)."""
import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from tessera.golden.global_pe import Command, GlobalPEModel, Tile, ewise_words, word_to_int
from tessera.hdl.global_pe.buffer import Buffer
from tessera.hdl.global_pe.packets import (EW_ADD, EW_MAX, EW_MUL, OP_EWISE, OP_GROUP, OP_RECV,
                                           OP_SEND, ST_BAD_ARG, ST_EMPTY_SET, ST_OK, GpeConfig,
                                           command_layout, consumer_index)
from tessera.params import ParamError
from tessera.registry import get
from tessera.tb.global_pe import scenarios as sc

CFG = GpeConfig()


def _model_with_data(n=64):
    m = GlobalPEModel(CFG)
    m.buf[:n] = (np.arange(n * 32).reshape(n, 32) % 251 - 125).astype(np.int8)
    return m


def test_send_addresses_tiles_and_lanes():
    m = _model_with_data()
    m.step(Command(OP_GROUP, tag=0, gidx=1, mask=(0b0101, 0b11)))   # chiplets 0, 2; nodes 0, 1
    m.step(Command(OP_SEND, tag=7, a=5, cnt=(5, 2, 1), stride=(1, 10, 0), tile=2, groups=0b10,
                   ucast=True, uaddr=((1, 1), (3, 4))))
    assert m.completions == [(0, ST_OK), (7, ST_OK)]
    w = {x: word_to_int(m.buf[x]) for x in range(32)}
    rows = [[5, 6], [7, 8], [9], [15, 16], [17, 18], [19]]     # row-aligned tiles of 2
    tiles = [Tile(7, k, tuple(w[x] for x in r)) for k, r in enumerate(rows)]
    assert sorted(m.packets) == [0, 1, 40, 41, consumer_index(CFG, (1, 1), (3, 4))]
    assert consumer_index(CFG, (1, 1), (3, 4)) == 3 * 20 + 4 * 4 + 3 == 79
    for c in m.packets:
        assert m.packets[c] == [tiles]


def test_send_three_levels():
    m = _model_with_data()
    m.step(Command(OP_SEND, tag=1, a=2, cnt=(2, 2, 2), stride=(3, 7, 20), tile=16, ucast=True))
    rows = [[2, 5], [9, 12], [22, 25], [29, 32]]
    assert m.packets[0] == [[Tile(1, k, tuple(word_to_int(m.buf[x]) for x in r))
                             for k, r in enumerate(rows)]]


def test_successive_sends_form_one_stream_per_destination():
    """Tiles of later SENDs to the same group / unicast node follow the earlier ones in
    one stream; a different group is a separate stream (it may interleave)."""
    m = _model_with_data()
    m.step(Command(OP_GROUP, tag=0, gidx=0, mask=(0b1, 0b11)))      # chiplet 0, nodes 0, 1
    m.step(Command(OP_GROUP, tag=1, gidx=1, mask=(0b1, 0b10)))      # chiplet 0, node 1
    m.step(Command(OP_SEND, tag=2, a=0, cnt=(2, 1, 1), stride=(1, 0, 0), tile=1, groups=0b01))
    m.step(Command(OP_SEND, tag=3, a=4, cnt=(1, 1, 1), tile=1, groups=0b10))
    m.step(Command(OP_SEND, tag=4, a=8, cnt=(1, 1, 1), tile=1, groups=0b01, ucast=True))
    w = lambda x: (word_to_int(m.buf[x]),)          # noqa: E731
    g0 = [Tile(2, 0, w(0)), Tile(2, 1, w(1)), Tile(4, 0, w(8))]
    assert m.packets[0] == [g0, [Tile(4, 0, w(8))]]                  # group 0, unicast
    assert m.packets[1] == [g0, [Tile(3, 0, w(4))]]                  # group 0, group 1
    assert [t for t, _ in m.completions] == [0, 1, 2, 3, 4]


def test_ewise_arithmetic_by_hand():
    a = np.array([-128, 127, 100, -7, 5, -1], dtype=np.int8)
    b = np.array([-128, 127, -100, 3, 5, -1], dtype=np.int8)
    assert list(ewise_words(a, b, EW_ADD, 0)) == [-128, 127, 0, -4, 10, -2]
    assert list(ewise_words(a, b, EW_ADD, 1)) == [-128, 127, 0, -2, 5, -1]
    assert list(ewise_words(a, b, EW_MUL, 0)) == [127, 127, -128, -21, 25, 1]
    assert list(ewise_words(a, b, EW_MUL, 7)) == [127, 126, -79, -1, 0, 0]
    assert list(ewise_words(a, b, EW_MAX, 2)) == [-32, 31, 25, 0, 1, -1]


def test_ewise_in_place_and_overlap_rule():
    m = _model_with_data()
    before = m.buf.copy()
    m.step(Command(OP_EWISE, tag=1, a=0, b=8, c=0, cnt=(8, 1, 1), sub=EW_ADD))
    assert (m.buf[:8] == ewise_words(before[:8], before[8:16], EW_ADD, 0)).all()
    m.step(Command(OP_EWISE, tag=2, a=0, b=8, c=4, cnt=(8, 1, 1), sub=EW_ADD))
    assert m.completions[-1] == (2, 2)      # BAD_REGION: partial overlap
    assert (m.buf[8:] == before[8:]).all()


def test_malformed_hand_list_matches_golden():
    m = GlobalPEModel(CFG)
    for status, cmd in sc.malformed(CFG):
        before = m.buf.copy()
        m.step(cmd)
        assert m.completions[-1] == (cmd.tag, status), cmd
        assert (m.buf == before).all() and not m.packets


def test_recv_window_and_strays():
    m = GlobalPEModel(CFG)
    m.step(Command(OP_RECV, tag=3, a=10, cnt=(3, 1, 1), mask=(1, 0b10),
                   arrivals=[(1, 11, [5, 6]), (0, 10, [9]), (1, 9, [7, 8])]))
    assert m.completions == [(3, ST_OK)]
    assert [word_to_int(m.buf[x]) for x in (9, 10, 11, 12)] == [0, 8, 5, 6]
    assert m.flags["stray_word"] == 1


def test_empty_group_is_empty_set():
    m = GlobalPEModel(CFG)
    m.step(Command(OP_SEND, tag=1, a=0, cnt=(1, 1, 1), tile=1, groups=1))
    m.step(Command(OP_SEND, tag=2, a=0, cnt=(1, 1, 1), tile=0, groups=1))
    assert m.completions == [(1, ST_EMPTY_SET), (2, ST_BAD_ARG)]


def test_command_fields_match_layout():
    names = set()

    def walk(layout, prefix=""):
        for name, f in layout:
            if hasattr(f.shape, "__iter__") and not isinstance(f.shape, int):
                try:
                    walk(f.shape, prefix + name + ".")
                    continue
                except TypeError:
                    pass
            names.add(prefix + name)
    walk(command_layout(CFG))
    assert set(Command(OP_SEND).fields()) == names


@pytest.mark.parametrize("assign,name", [(["banks=3"], "banks"), (["words=1002"], "words"),
                                         (["word_bits=100"], "word_bits"),
                                         (["send_slots=0"], "send_slots"),
                                         (["ucast_lanes=5"], "ucast_lanes")])
def test_bad_parameters(assign, name):
    spec = get("global_pe")
    with pytest.raises(ParamError) as err:
        spec.elaborate_checked(spec.resolve(assign))
    assert name in str(err.value)


def test_buffer_arbitration_never_loses():
    """3 read + 2 write requesters hammer a 4-bank buffer; every request is granted
    within 3 cycles of contention, reads return the last written value; a read and a
    write of one word granted in the same cycle raise ``collision`` the next cycle (the SRAM's
    collision mode is "undefined": that read's value is not checked)."""
    dut = Buffer(words=32, width=16, banks=4, n_read=3, n_write=2)
    rng = random.Random(5)
    shadow = {}
    stats = {"reads": 0, "writes": 0, "max_wait": 0, "collisions": 0}

    async def bench(ctx):
        rd_pend = [None] * 3
        wr_pend = [None] * 2
        rd_wait = [0] * 3
        wr_wait = [0] * 2
        expect_rd = [None] * 3
        prev_coll = False
        for cycle in range(600):
            for i in range(2):
                if wr_pend[i] is None and rng.random() < 0.6:
                    # avoid two writers on one address in flight (last-writer order is
                    # then arbitration-dependent)
                    a = rng.randrange(32)
                    while any(p and p[0] == a for p in wr_pend):
                        a = rng.randrange(32)
                    wr_pend[i] = (a, rng.getrandbits(16))
                p = wr_pend[i]
                ctx.set(dut.wr[i].valid, p is not None)
                if p:
                    ctx.set(dut.wr[i].addr, p[0])
                    ctx.set(dut.wr[i].data, p[1])
            for i in range(3):
                if rd_pend[i] is None and rng.random() < 0.7:
                    rd_pend[i] = rng.randrange(32)
                ctx.set(dut.rd[i].valid, rd_pend[i] is not None)
                if rd_pend[i] is not None:
                    ctx.set(dut.rd[i].addr, rd_pend[i])
            rg = [ctx.get(dut.rd[i].grant) for i in range(3)]
            wg = [ctx.get(dut.wr[i].grant) for i in range(2)]
            # a read sees the memory before this cycle's writes, unless one of them
            # writes the same word (undefined, flagged)
            snapshot = dict(shadow)
            written = {wr_pend[i][0] for i in range(2) if wg[i]}
            coll = any(rg[i] and rd_pend[i] in written for i in range(3))
            assert ctx.get(dut.collision) == prev_coll, cycle     # flagged a cycle later
            prev_coll = coll
            stats["collisions"] += coll
            for i in range(3):
                if rg[i]:
                    expect_rd[i] = None if rd_pend[i] in written else snapshot.get(rd_pend[i])
                    stats["max_wait"] = max(stats["max_wait"], rd_wait[i])
                    rd_pend[i], rd_wait[i] = None, 0
                    stats["reads"] += 1
                elif rd_pend[i] is not None:
                    rd_wait[i] += 1
                else:
                    expect_rd[i] = None
            for i in range(2):
                if wg[i]:
                    shadow[wr_pend[i][0]] = wr_pend[i][1]
                    stats["max_wait"] = max(stats["max_wait"], wr_wait[i])
                    wr_pend[i], wr_wait[i] = None, 0
                    stats["writes"] += 1
                elif wr_pend[i] is not None:
                    wr_wait[i] += 1
            got_grant = [bool(g) for g in rg]
            await ctx.tick()
            for i in range(3):
                assert ctx.get(dut.rd[i].data_valid) == got_grant[i]
                if got_grant[i] and expect_rd[i] is not None:
                    assert ctx.get(dut.rd[i].data) == expect_rd[i], (cycle, i)
                if not got_grant[i]:
                    expect_rd[i] = None
        # bound: at most (requesters - 1) cycles lost per request on a busy bank
        assert stats["max_wait"] <= 2, stats   # round robin: <= requesters - 1
        assert stats["reads"] > 500 and stats["writes"] > 400 and stats["collisions"] > 10, stats

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def test_buffer_write_requester_0_first():
    """``wr_first`` (the Global PE's RECV port): write requester 0 is granted in the cycle
    it asks, whatever the others do; writer 1 is granted exactly when writer 0 leaves its
    bank alone (writer 1 never loses a request; it waits only behind writer 0); every
    write lands (read back at the end)."""
    dut = Buffer(words=32, width=16, banks=4, n_read=1, n_write=2, wr_first=True)
    rng = random.Random(9)
    shadow = {}
    stats = {"w0": 0, "w1": 0, "w1_waits": 0}

    async def bench(ctx):
        pend = [None, None]
        for cycle in range(500):
            for i in range(2):
                if pend[i] is None and rng.random() < (0.7 if i == 0 else 0.8):
                    a = rng.randrange(32)
                    if i == 1 and pend[0] is not None and rng.random() < 0.5:
                        a = (pend[0][0] + 4 * rng.randrange(1, 8)) % 32   # same bank as 0
                    while pend[1 - i] and pend[1 - i][0] == a:
                        a = rng.randrange(32)
                    pend[i] = (a, rng.getrandbits(16))
                ctx.set(dut.wr[i].valid, pend[i] is not None)
                if pend[i]:
                    ctx.set(dut.wr[i].addr, pend[i][0])
                    ctx.set(dut.wr[i].data, pend[i][1])
            g = [ctx.get(dut.wr[i].grant) for i in range(2)]
            assert g[0] == (pend[0] is not None), cycle
            same = pend[0] is not None and pend[1] is not None and pend[0][0] % 4 == pend[1][0] % 4
            assert g[1] == (pend[1] is not None and not same), cycle
            stats["w1_waits"] += same
            for i in range(2):
                if g[i]:
                    shadow[pend[i][0]] = pend[i][1]
                    stats[f"w{i}"] += 1
                    pend[i] = None
            await ctx.tick()
        ctx.set(dut.wr[0].valid, 0)
        ctx.set(dut.wr[1].valid, 0)
        for a, v in shadow.items():
            ctx.set(dut.rd[0].valid, 1)
            ctx.set(dut.rd[0].addr, a)
            await ctx.tick()
            assert ctx.get(dut.rd[0].data) == v, a
        ctx.set(dut.rd[0].valid, 0)
        assert stats["w0"] > 250 and stats["w1"] > 250 and stats["w1_waits"] > 50, stats

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def test_buffer_read_first_latency2():
    """``rd_first`` with ``read_latency=2`` (the Global PE's SEND port): read requester 0
    is granted whenever it asks (``rd_hold`` high, as the SEND engine guarantees); the other
    readers are granted only in cycles with ``rd_hold`` low, round robin per bank (wait
    <= 1 cycle among themselves then); every read returns its word two cycles after
    the grant (``data_valid`` with it), also when a word is read back-to-back."""
    dut = Buffer(words=32, width=16, banks=4, n_read=3, n_write=1, rd_first=True,
                 read_latency=2)
    rng = random.Random(13)
    mem = [rng.getrandbits(16) for _ in range(32)]
    stats = {"r0": 0, "other": 0, "held": 0}

    async def bench(ctx):
        for a, v in enumerate(mem):
            ctx.set(dut.wr[0].valid, 1)
            ctx.set(dut.wr[0].addr, a)
            ctx.set(dut.wr[0].data, v)
            await ctx.tick()
        ctx.set(dut.wr[0].valid, 0)
        pend = [None] * 3
        expect = []          # (cycle due, requester, value)
        for cycle in range(500):
            hold = rng.random() < 0.4
            for i in range(3):
                if pend[i] is None and rng.random() < (0.5 if i == 0 else 0.8):
                    pend[i] = rng.randrange(32)
            if not hold:
                pend[0] = None                   # requester 0 asks only under rd_hold
            ctx.set(dut.rd_hold, hold)
            for i in range(3):
                ctx.set(dut.rd[i].valid, pend[i] is not None)
                if pend[i] is not None:
                    ctx.set(dut.rd[i].addr, pend[i])
            g = [ctx.get(dut.rd[i].grant) for i in range(3)]
            assert g[0] == (pend[0] is not None), cycle
            for i in (1, 2):
                if hold:
                    assert not g[i], cycle
                elif pend[i] is not None:
                    other = pend[3 - i]
                    if other is None or other % 4 != pend[i] % 4:
                        assert g[i], cycle           # alone on its bank: granted at once
            assert not (g[1] and g[2] and pend[1] % 4 == pend[2] % 4), cycle
            stats["held"] += hold and any(p is not None for p in pend[1:])
            for i in range(3):
                if g[i]:
                    expect.append((cycle + 2, i, mem[pend[i]]))
                    stats["r0" if i == 0 else "other"] += 1
                    pend[i] = None
            await ctx.tick()
            for i in range(3):
                due = [e for e in expect if e[0] == cycle + 1 and e[1] == i]
                assert ctx.get(dut.rd[i].data_valid) == bool(due), (cycle, i)
                if due:
                    assert ctx.get(dut.rd[i].data) == due[0][2], (cycle, i)
            expect = [e for e in expect if e[0] > cycle + 1]
        assert stats["r0"] > 100 and stats["other"] > 300 and stats["held"] > 100, stats

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def test_cli_rejects_inconsistent_parameters(tmp_path):
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "tessera.cli", "verilog", "global_pe", "--param",
                        "words=1002", "--out", str(tmp_path / "x")], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip() == ("tessera verilog: error: parameter 'words': "
                                "must be a multiple of banks (4)")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("rl,stages", [(1, 3), (2, 3), (2, 4)])
def test_ewise_pipeline_against_golden_under_write_backpressure(rl, stages):
    """The EWISE unit (operand -> raw -> shift/saturate -> write queue) on a real banked
    buffer, amaranth.sim: random add / mul / max with random shifts on extreme int8
    values (saturation both ways), in place and to a third region, while a second
    writer hammers the same banks (EWISE writes wait: the queue must neither overflow
    nor drop), results equal the golden ``ewise_words``."""
    from amaranth.hdl import Module
    from amaranth.lib.wiring import connect

    from tessera.golden.global_pe import int_to_word
    from tessera.hdl.global_pe.ewise import EwiseUnit

    cfg = GpeConfig(words=64, word_bits=64, banks=4, read_latency=rl, ewise_stages=stages)
    nb = cfg.word_bits // 8
    m = Module()
    m.submodules.buf = buf = Buffer(words=64, width=64, banks=4, n_read=3, n_write=3,
                                    read_latency=rl)
    m.submodules.ew = ew = EwiseUnit(cfg, 6)
    connect(m, ew.rda, buf.rd[1])
    connect(m, ew.rdb, buf.rd[2])
    connect(m, ew.wr, buf.wr[1])
    rng = random.Random(11)
    ext = [-128, -127, -1, 0, 1, 126, 127]
    mem = np.array([[rng.choice(ext) if rng.random() < 0.6 else rng.randint(-128, 127)
                     for _ in range(nb)] for _ in range(64)], dtype=np.int8)
    log = {"ops": 0, "stalled": 0, "full": 0}

    async def bench(ctx):
        for x in range(64):                        # preload through write port 0
            ctx.set(buf.wr[0].valid, 1)
            ctx.set(buf.wr[0].addr, x)
            ctx.set(buf.wr[0].data, word_to_int(mem[x]))
            await ctx.tick()
        ctx.set(buf.wr[0].valid, 0)
        for op in range(12):
            n = rng.randint(1, 15)
            a = rng.randrange(0, 16 - n)
            b = a + 17 if rng.random() < 0.7 else rng.randrange(16, 32 - n + 1)  # 17: other bank
            c = rng.choice([a, b, rng.randrange(32, 48 - n + 1)])
            sub, shift = rng.choice([EW_ADD, EW_MUL, EW_MAX]), rng.choice([0, 0, 1, 3, 7, 15])
            ctx.set(ew.sub, sub)
            ctx.set(ew.shift, shift)
            for port, v in ((ew.a, a), (ew.b, b), (ew.c, c), (ew.n, n)):
                ctx.set(port, v)
            ctx.set(ew.start, 1)
            await ctx.tick()
            ctx.set(ew.start, 0)
            mem[c:c + n] = ewise_words(mem[a:a + n].copy(), mem[b:b + n].copy(), sub, shift)
            for cycle in range(400):
                # two interfering writers: rewrite words of 48..63 in the bank the
                # EWISE writes to, with their own value (the EWISE gets 1 write in 3)
                for k in (0, 2):
                    x = 48 + ctx.get(ew.wr.addr) % 4 + 4 * rng.randrange(4)
                    ctx.set(buf.wr[k].valid, rng.random() < 0.95)
                    ctx.set(buf.wr[k].addr, x)
                    ctx.set(buf.wr[k].data, word_to_int(mem[x]))
                if ctx.get(ew.wr.valid) and not ctx.get(ew.wr.grant):
                    log["stalled"] += 1
                log["full"] += ctx.get(ew.wq_level) >= 3
                done = ctx.get(ew.done)
                await ctx.tick()
                if done:
                    break
            else:
                raise AssertionError(f"EWISE {op} did not finish")
            ctx.set(buf.wr[0].valid, 0)
            ctx.set(buf.wr[2].valid, 0)
            log["ops"] += 1
        for x in range(64):                        # read back through read port 0
            ctx.set(buf.rd[0].valid, 1)
            ctx.set(buf.rd[0].addr, x)
            await ctx.tick()
            ctx.set(buf.rd[0].valid, 0)
            for _ in range(rl - 1):
                await ctx.tick()
            assert ctx.get(buf.rd[0].data) == word_to_int(mem[x]), (x, mem[x])
        assert ctx.get(buf.collision) == 0

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert log["ops"] == 12 and log["stalled"] > 40 and log["full"] > 10, log


def _ewise_writes(stages, rl=2, ops=((EW_MUL, 0, 17, 34, 13, 3), (EW_ADD, 34, 1, 34, 9, 0),
                                     (EW_MAX, 2, 3, 50, 5, 1))):
    """EWISE unit on a banked buffer (amaranth.sim), no other requester: every write grant
    as (cycle, address, data) and every ``done`` cycle, for EWISEs ``(sub, a, b, c, n,
    shift)`` started one after the other (each right after the previous one's done)."""
    from amaranth.hdl import Module
    from amaranth.lib.wiring import connect

    from tessera.hdl.global_pe.ewise import EwiseUnit

    cfg = GpeConfig(words=64, word_bits=64, banks=4, read_latency=rl, ewise_stages=stages)
    m = Module()
    m.submodules.buf = buf = Buffer(words=64, width=64, banks=4, n_read=3, n_write=2,
                                    read_latency=rl)
    m.submodules.ew = ew = EwiseUnit(cfg, 6)
    connect(m, ew.rda, buf.rd[1])
    connect(m, ew.rdb, buf.rd[2])
    connect(m, ew.wr, buf.wr[1])
    rng = random.Random(3)
    init = [rng.getrandbits(64) for _ in range(64)]
    writes, dones = [], []

    async def bench(ctx):
        for x in range(64):
            ctx.set(buf.wr[0].valid, 1)
            ctx.set(buf.wr[0].addr, x)
            ctx.set(buf.wr[0].data, init[x])
            await ctx.tick()
        ctx.set(buf.wr[0].valid, 0)
        cycle = 0
        for sub, a, b, c, n, shift in ops:
            for port, v in ((ew.sub, sub), (ew.shift, shift), (ew.a, a), (ew.b, b), (ew.c, c),
                            (ew.n, n), (ew.start, 1)):
                ctx.set(port, v)
            await ctx.tick()
            ctx.set(ew.start, 0)
            cycle += 1
            for _ in range(100):
                if ctx.get(ew.wr.grant):
                    writes.append((cycle, ctx.get(ew.wr.addr), ctx.get(ew.wr.data)))
                done = ctx.get(ew.done)
                await ctx.tick()
                cycle += 1
                if done:
                    dones.append(cycle)
                    break

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return writes, dones


@pytest.mark.parametrize("rl", [1, 2])
def test_ewise_stages_4_is_one_cycle_later(rl):
    """``ewise_stages=4`` (the shift result registered before saturate): with the writes
    granted, every EWISE write leaves exactly one cycle later (same words, same order,
    still one per cycle: the queue is one word deeper) and each EWISE is done one cycle
    later; the EWISEs here are started back to back, so the k-th is k cycles later."""
    w3, d3 = _ewise_writes(3, rl)
    w4, d4 = _ewise_writes(4, rl)
    assert len(w3) == 13 + 9 + 5 and len(d3) == 3
    shift = [1] * 13 + [2] * 9 + [3] * 5
    assert w4 == [(c + s, a, d) for (c, a, d), s in zip(w3, shift)]
    assert d4 == [c + k + 1 for k, c in enumerate(d3)]
