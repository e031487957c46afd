"""pe_node (issue 17): amaranth.sim of the PE + network interface against the
golden model (:mod:`tessera.golden.pe_node`) on seeded random scenarios (1x1 and
3x3, stride 1/2, roles ONLY/FIRST/MIDDLE/LAST, several tiles and runs, random
gaps on net_in and back-pressure on net_out), plus directed corners: loads
while running, psum credit exhaustion, a PE configuration error, bad packets,
register writes while running, and parameter validation."""
from __future__ import annotations

import pytest
from amaranth.sim import Simulator

from tessera.hdl.chiplet import packets as P
from tessera.hdl.chiplet.pe_node import PeNode, validate
from tessera.hdl.pe.config import ErrorCause, PEConfig, Role
from tessera.params import ParamError
from tessera.tb.chiplet import pe_node_env as E

import numpy as np

C = P.PeNodeConfig(**E.SMALL)


def simulate(env: E.Env, max_cycles=60000, dut=None, probe=None):
    dut = dut or PeNode(**E.SMALL)
    out = {}

    async def tb(ctx):
        ctx.set(dut.node_id, dut.node_id.shape().const({"node": {"x": E.ME[0], "y": E.ME[1]}}))
        for cyc in range(max_cycles):
            v, fl, rdy = env.drive()
            ctx.set(dut.net_in.valid, v)
            ctx.set(dut.net_in.payload.as_value(), fl)
            ctx.set(dut.net_out.ready, rdy)
            taken = v and ctx.get(dut.net_in.ready)
            fire = ctx.get(dut.net_out.valid) and rdy
            of = ctx.get(dut.net_out.payload.as_value()) if fire else 0
            if probe:
                probe(ctx, dut, cyc)
            await ctx.tick()
            env.sample(taken, fire, of)
            if env.finished():
                break
        out["cycles"] = env.cycle
        out["err"] = {k: ctx.get(getattr(dut.err, k)) for k in
                      ("load_busy", "cfg_busy", "bad_reg", "bad_packet", "data_overflow",
                       "psum_overflow", "credit_overflow")}
        out["running"] = ctx.get(dut.running)
        out["done_code"] = ctx.get(dut.done_code)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return out


def run_and_check(runs, seed=0, c=None, **kw):
    c = c or C
    env = E.Env(c, runs, seed=seed, **{k: v for k, v in kw.items() if k != "max_cycles"})
    out = simulate(env, dut=PeNode(**c.as_dict()),
                   **({"max_cycles": kw["max_cycles"]} if "max_cycles" in kw else {}))
    assert env.finished(), f"not finished after {out['cycles']} cycles (dones {env.dones})"
    errs = env.check()
    assert not errs, "\n".join(errs[:5])
    assert not any(out["err"].values()), out["err"]
    assert not out["running"]
    return env, out


@pytest.mark.parametrize("seed", [0, 1] + [pytest.param(s, marks=pytest.mark.slow)
                                          for s in range(2, 6)])   # 2..5 in make soak
def test_random(seed):
    run_and_check(E.scenario(C, seed), seed=seed)


@pytest.mark.parametrize("role", list(Role))
def test_roles(role):
    """Each role on 1x1, 3x3 stride 1 and 3x3 stride 2 tiles: three runs, 2-3 tiles each."""
    rng = np.random.default_rng(100 + int(role))
    runs = [E.build_run(C, rng, role=role, R=R, stride=st, ntiles=2 + (R == 3))
            for R, st in ((1, 1), (3, 1), (3, 2))]
    run_and_check(runs, seed=int(role))


@pytest.mark.parametrize("seed", [0, 1])
def test_credit_batch(seed):
    """credit_batch 3 of a 4-packet window: DATA credits coalesced (each CREDIT counts 1..3
    packets, fewer CREDIT packets than DATA packets, every packet acknowledged: the Global PE
    model's window is full again at the end, including after the idle flush), outputs as the
    golden model's."""
    cb = P.PeNodeConfig(**dict(E.SMALL, credit_window=4, credit_batch=3))
    rng = np.random.default_rng(40 + seed)
    runs = [E.build_run(cb, rng, role=Role.ONLY, R=3, stride=1, ntiles=3),
            E.build_run(cb, rng, role=Role.LAST, R=1, stride=1, ntiles=2)]
    env, out = run_and_check(runs, seed=seed, c=cb, in_gap=0.05, out_stall=0.1)
    data = sum(len(r["data"]) for r in runs)
    credits = [p for (d, k), v in env.got.items() if k == "CREDIT" for p in v]
    assert len(credits) < data, (len(credits), data)


def test_heavy_backpressure():
    """Output mostly stalled, input with long gaps; many tiles."""
    rng = np.random.default_rng(7)
    runs = [E.build_run(C, rng, role=Role.MIDDLE, R=1, stride=1, ntiles=4)]
    run_and_check(runs, seed=3, in_gap=0.6, out_stall=0.85)


def test_psum_credit_exhaustion_stalls():
    """A FIRST node whose downstream returns no PCREDIT for a long time sends
    exactly psum_window packets, then waits; nothing is lost when credits come."""
    rng = np.random.default_rng(11)
    runs = [E.build_run(C, rng, role=Role.FIRST, R=1, stride=1, ntiles=3,
                        cfg=PEConfig(R=1, S=1, C1=1, K1=2, P1=4, Q1=4, H_in=4, W_in=4,
                                     role=Role.FIRST))]
    env = E.Env(C, runs, seed=5, pcredit_hold=3000)
    seen = []

    def probe(ctx, dut, cyc):
        if 2000 < cyc < 2900:
            seen.append(len(env.got[(E.DOWN, "PSUM")]))
    out = simulate(env, probe=probe)
    assert set(seen) == {C.psum_window}, set(seen)      # stalled at the window
    assert env.finished() and not env.check()
    assert out["cycles"] > 3000


def test_config_error_done_code():
    """An illegal tile (IBUF_OVERFLOW) -> DONE with the PE's cause; DATA that
    arrives is discarded with its credits returned (the producer never hangs)."""
    cfg = PEConfig(R=1, S=1, C1=3, K1=1, P1=8, Q1=8, H_in=8, W_in=8, role=Role.ONLY)
    rng = np.random.default_rng(3)
    # build the run on a legal shape, then replace the config registers
    legal = PEConfig(R=1, S=1, C1=1, K1=1, P1=8, Q1=8, H_in=8, W_in=8, role=Role.ONLY)
    run = E.build_run(C, rng, cfg=legal, ntiles=2)
    regs = P.pe_node_registers(cfg, 2, psum_dest=E.DOWN, out_dest=E.GPE, done_dest=E.CTRL)
    run["ctrl"] = [x for x in run["ctrl"] if x[0] != "CFG"] + \
        [("CFG", E.CTRL, [P.cfg_payload(r, v)]) for r, v in regs]
    env, out = run_and_check([run], seed=2)
    assert env.golden.done_codes == [ErrorCause.IBUF_OVERFLOW]
    assert out["done_code"] == ErrorCause.IBUF_OVERFLOW
    assert len(env.got[(E.GPE, "CREDIT")]) == len(run["data"])
    assert not env.got[(E.GPE, "OUT")]


def _directed(extra_after_start, runs=None, seed=1):
    """One ONLY run; ``extra_after_start`` packets injected right after START."""
    rng = np.random.default_rng(21)
    runs = runs or [E.build_run(C, rng, role=Role.ONLY, R=3, stride=1, ntiles=2)]
    env = E.Env(C, runs, seed=seed, in_gap=0.0, out_stall=0.0)
    # hold the DATA back so the node is certainly running when the extra packets arrive
    env.ctrl[0] += extra_after_start
    out = simulate(env)
    return env, out


def test_wload_while_running_sets_flag():
    wl = P.wload_packets([{"addr": 0, "row": r, "data": [1] * 8} for r in range(3)], 8)[0]
    env, out = _directed([("WLOAD", E.HOST, wl)])
    assert out["err"]["load_busy"] == 1
    # the weights in the PE were not touched: results still match the golden model
    # (whose run uses the buffers as they were at start)
    assert env.finished() and not env.check()


def test_cfg_while_running_ignored():
    env, out = _directed([("CFG", E.CTRL, [P.cfg_payload(P.REGS["ntiles"], 9)]),
                          ("CFG", E.CTRL, [P.cfg_payload(40, 1)])])
    assert out["err"]["cfg_busy"] == 1 and out["err"]["bad_reg"] == 1
    # the write was ignored: the run still ran 2 tiles (golden's ntiles is the snapshot at start)
    assert env.finished() and not env.check()


def test_bad_packets_consumed():
    bad = [("DATA", E.HOST, [3 << 2 | 0, 1, 2]),     # ext 3 (BARRIER) to a PE node
           ("DATA", E.HOST, [2, 5, 6])]               # an OUT packet to a PE node
    env, out = _directed(bad)
    assert out["err"]["bad_packet"] == 1
    assert env.finished() and not env.check()


def test_params_validated():
    for name, v in (("word_bits", 128), ("psum_beats", 0), ("credit_window", 0), ("out_words", 256)):
        with pytest.raises(ParamError, match=name):
            validate(P.PeNodeConfig(**{**E.SMALL, name: v}))


def _overlap_cycles(cfg, ntiles=3, seed=4):
    rng = np.random.default_rng(seed)
    runs = [E.build_run(C, rng, cfg=cfg, ntiles=ntiles)]
    env = E.Env(C, runs, seed=seed, in_gap=0.0, out_stall=0.0)
    n = [0]

    def probe(ctx, dut, cyc):
        il = dut.pe.i_load
        if ctx.get(il.valid) and ctx.get(il.ready) and ctx.get(dut.pe.busy):
            n[0] += 1
    simulate(env, dut=PeNode(**E.SMALL), probe=probe)
    assert env.finished() and not env.check()
    return n[0], env.cycle


def test_input_overlap():
    """A tile that fits half the input buffer is loaded while the previous one
    computes (words enter the PE while it is busy); a larger tile is not."""
    small = PEConfig(R=3, S=3, C1=1, K1=1, P1=4, Q1=4, H_in=6, W_in=6, role=Role.ONLY)    # 36 words
    big = PEConfig(R=1, S=1, C1=2, K1=1, P1=6, Q1=6, H_in=6, W_in=6, role=Role.ONLY)      # 72 > 64
    n_small, _ = _overlap_cycles(small)
    n_big, _ = _overlap_cycles(big)
    assert n_small >= 36, n_small          # at least one whole tile loaded during compute
    assert n_big == 0, n_big


# ---------------------------------------------------------------------------- cocotb
@pytest.mark.cocotb
def test_cocotb_verilator_random_scenarios():
    """The exported Verilog under Verilator: seeded random scenarios vs the golden model."""
    from tessera.tb.runner import run
    run("pe_node", E.SMALL, "tessera.tb.chiplet.test_pe_node", testcase="random_scenarios",
        seed=3, public="top", opt="-O0")


def test_register_table_matches_packets():
    """The README's pe_node register table names the registers of packets.REGS."""
    import re
    from pathlib import Path
    readme = (Path(P.__file__).parent / "README.md").read_text()
    rows = {n: int(r) for r, n in re.findall(r"^\| (\d+) \| `(\w+)` \|", readme, re.M)}
    assert rows == P.REGS
    cfg = PEConfig(R=1, S=3, C1=5, K1=7, P1=9, Q1=3, H_in=11, W_in=13, stride=2, pad_top=0,
                   pad_left=2, role=Role.MIDDLE, relu=True, pool=False, shift=17)
    assert P.unpack_pe_cfg(P.pack_pe_cfg(cfg)) == cfg
    regs = dict(P.pe_node_registers(cfg, 5, (1, 2), (0, 4), 7, 9, (1, 4)))
    assert regs[P.REGS["ntiles"]] == 5 and regs[P.REGS["psum_dest"]] == 1 | 2 << 8
    assert list(regs)[-1] == P.REGS["start"]


def test_data_beyond_credit_window_flagged():
    """A producer that ignores the credit window (sends 8 packets with room for 2)
    overflows the receive FIFO: sticky data_overflow, the flits are still consumed."""
    rng = np.random.default_rng(13)
    cfg = PEConfig(R=3, S=3, C1=1, K1=2, P1=4, Q1=4, H_in=6, W_in=6, role=Role.ONLY)
    runs = [E.build_run(C, rng, cfg=cfg, ntiles=4)]
    greedy = P.PeNodeConfig(**{**E.SMALL, "credit_window": 16})
    env = E.Env(greedy, runs, seed=1, in_gap=0.0, out_stall=0.0)
    accepted = [0]

    def probe(ctx, dut, cyc):
        accepted[0] += ctx.get(dut.net_in.ready) == 0
    out = simulate(env, max_cycles=1500, probe=probe)
    assert out["err"]["data_overflow"] == 1
    assert accepted[0] == 0                     # net_in never stalled


def test_pcredit_beyond_window_flagged():
    """PCREDIT counts add to the node's psum credits; a credit beyond ``psum_window``
    sets the sticky ``credit_overflow`` (the credits saturate at the window), a
    count of 0 does not."""
    from tessera.tb.chiplet.pe_node_env import pack_fields
    dut = PeNode(**E.SMALL)
    lay = E.flit_layout(C)

    def pcredit(count):
        pl = pack_fields(P.pcredit_layout(), kind=P.KIND_EXT, ext=P.EXT_PCREDIT, count=count)
        return E.packet_flits(lay, C, "PCREDIT", E.ME, E.DOWN, [pl])[0]

    def clear():
        pl = pack_fields(P.cfg_layout(), kind=P.KIND_EXT, ext=P.EXT_CFG, reg=P.REGS["clear"],
                         value=0)
        return E.packet_flits(lay, C, "CFG", E.ME, E.DOWN, [pl])[0]
    got = []

    async def tb(ctx):
        ctx.set(dut.node_id, dut.node_id.shape().const({"node": {"x": E.ME[0], "y": E.ME[1]}}))
        ctx.set(dut.net_out.ready, 1)
        # at reset the node holds psum_window credits; None: clear the sticky flags
        for count in (0, 1, None, 0, 0, 255, None, 0):
            ctx.set(dut.net_in.valid, 1)
            ctx.set(dut.net_in.payload.as_value(), clear() if count is None else pcredit(count))
            await ctx.tick()
            ctx.set(dut.net_in.valid, 0)
            await ctx.tick()
            got.append(ctx.get(dut.err.credit_overflow))
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert got == [0, 1, 0, 0, 0, 1, 0, 0], got


def _rx_trace(dut, rx: bool, cycles=600, seed=3):
    """(cycle, r.valid, r.payload) of a receive FIFO under random writes and random
    ``r.ready``; ``rx``: ``dut`` is a _CreditedRx (packets of 3 words announced, credits
    taken at random), else a bare SramFifo.  Returns the trace and the credits seen."""
    import random
    rnd, rnd_cr = random.Random(seed), random.Random(seed + 1)
    tr, credits = [], []

    async def tb(ctx):
        word = 0
        for cyc in range(cycles):
            wv = rnd.random() < 0.6
            rr = rnd.random() < 0.45
            ctx.set(dut.w.valid, wv)
            ctx.set(dut.w.payload, word & 0xFF)
            ctx.set(dut.r.ready, rr)
            if rx:
                ctx.set(dut.pkt.valid, wv and ctx.get(dut.w.ready) and word % 3 == 2)
                assert ctx.get(dut.pkt.ready)
                ctx.set(dut.pkt.payload.src, (word // 3) & 0xF)
                ctx.set(dut.pkt.payload.count, 3)
                cr = rnd_cr.random() < 0.7
                ctx.set(dut.credit.ready, cr)
                if cr and ctx.get(dut.credit.valid):
                    credits.append((cyc, ctx.get(dut.credit.payload)))
            v = ctx.get(dut.r.valid)
            tr.append((cyc, v, ctx.get(dut.r.payload) if v else None, v and rr))
            if wv and ctx.get(dut.w.ready):
                word += 1
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return tr, credits


def test_psum_rx_skid_keeps_fifo_cycles():
    """The receive side's skid register (timing: ``r.ready`` loads only the skid) shows
    on ``r`` the same beats in the same cycles as the FIFO alone, under random
    writes and back-pressure, and a packet's credit follows the ``r`` handshake of its
    last word (so no PCREDIT moves)."""
    from tessera.hdl.chiplet.pe_node import SramFifo, _CreditedRx
    ref, _ = _rx_trace(SramFifo(8, 8), rx=False)
    got, credits = _rx_trace(_CreditedRx(8, 8, 16, 4, 4), rx=True)
    assert got == ref, next((g, r) for g, r in zip(got, ref) if g != r)
    # credit j is valid from the cycle after the r handshake of word 3j + 2 on
    taken = [c for c, v, _, t in got if t]
    assert len(credits) == len(taken) // 3 >= 20, (len(credits), len(taken))
    for j, (cyc, src) in enumerate(credits):
        assert src == j & 0xF and cyc > taken[3 * j + 2], (j, cyc, taken[3 * j + 2])


@pytest.mark.parametrize("window", [1, 2, 4])
def test_rx_credit_cycle_exact(window):
    """A packet's credit is valid exactly while it is the oldest packet held and all its
    words have left ``r`` (the rule ``head valid & popped >= head count`` evaluated in
    the cycle; the NI's credit packets depend on it cycle for cycle), with ``pkt.ready``
    = fewer than ``window`` packets held, under random writes, empty packets, random
    ``r.ready`` and random credit back-pressure (the credit register is computed a cycle
    ahead: a late or stale credit, or a wrong source, fails); about half the packets
    announce their count as ``count - 1`` plus ``pkt_inc`` (the NI's form)."""
    import random
    from tessera.hdl.chiplet.pe_node import _CreditedRx
    dut = _CreditedRx(8, 8, window, 4, 4)
    rnd, rnd_inc = random.Random(11 + window), random.Random(31 + window)
    seen = {"credits": 0, "cycles_valid": 0}

    async def tb(ctx):
        q, popped, src = [], 0, 0
        size = left = rnd.randrange(4)              # words of the packet being written
        for cyc in range(900):
            valid_ref = bool(q) and popped >= q[0][1]
            assert ctx.get(dut.credit.valid) == valid_ref, (cyc, q, popped)
            if valid_ref:
                assert ctx.get(dut.credit.payload) == q[0][0], (cyc, q)
                seen["cycles_valid"] += 1
            assert ctx.get(dut.pkt.ready) == (len(q) < window), (cyc, len(q))
            # the packet's entry is written with its last word (an empty packet alone)
            end = left <= 1
            want = rnd.random() < 0.6 and (not end or len(q) < window)
            ctx.set(dut.w.valid, want and size > 0)
            ctx.set(dut.w.payload, cyc & 0xFF)
            wrote = want and (size == 0 or ctx.get(dut.w.ready))
            ctx.set(dut.pkt.valid, wrote and end)
            ctx.set(dut.pkt.payload.src, src)
            # the count as count + pkt_inc (the NI's form) in about half the packets
            inc = size > 0 and rnd_inc.random() < 0.5
            ctx.set(dut.pkt.payload.count, size - inc)
            ctx.set(dut.pkt_inc, inc)
            rr, cr = rnd.random() < 0.5, rnd.random() < 0.5
            ctx.set(dut.r.ready, rr)
            ctx.set(dut.credit.ready, cr)
            pop = ctx.get(dut.r.valid) and rr
            take = valid_ref and cr
            await ctx.tick()
            popped += pop
            if take:
                popped -= q.pop(0)[1]
                seen["credits"] += 1
            if wrote and end:
                q.append((src, size))
                src = (src + 1) & 0xF
                size = left = rnd.randrange(4)
            elif wrote:
                left -= 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert seen["credits"] >= 50, seen


@pytest.mark.parametrize("depth", [2, 8])
def test_sram_fifo_ready_and_level(depth):
    """SramFifo against a queue model (capacity ``depth`` words behind the output
    register): the words leave in order, ``level`` = words written minus words read,
    and ``w.ready`` is high exactly while fewer than ``depth`` words wait behind the
    output register (``level - r.valid < depth``) -- every cycle, under random writes
    and random back-pressure that fill and drain it (``w.ready`` is a register computed
    a cycle ahead: a stale or wrong full flag fails)."""
    import random
    from tessera.hdl.chiplet.pe_node import SramFifo
    dut = SramFifo(8, depth)
    rnd = random.Random(5 + depth)
    seen = {"full_cycles": 0, "words": 0}

    async def tb(ctx):
        q, word = [], 0
        for cyc in range(700):
            phase = (cyc // 60) % 2              # alternately filling and draining
            wv = rnd.random() < (0.9 if phase == 0 else 0.3)
            rr = rnd.random() < (0.2 if phase == 0 else 0.8)
            ctx.set(dut.w.valid, wv)
            ctx.set(dut.w.payload, word & 0xFF)
            ctx.set(dut.r.ready, rr)
            rv = ctx.get(dut.r.valid)
            assert ctx.get(dut.level) == len(q), (cyc, len(q))
            assert ctx.get(dut.w.ready) == (len(q) - rv < depth), (cyc, len(q), rv)
            seen["full_cycles"] += not ctx.get(dut.w.ready)
            if rv:
                assert ctx.get(dut.r.payload) == q[0], (cyc, q[:2])
            push = wv and ctx.get(dut.w.ready)
            await ctx.tick()
            if rv and rr:
                q.pop(0)
                seen["words"] += 1
            if push:
                q.append(word & 0xFF)
                word += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert seen["full_cycles"] >= 20 and seen["words"] >= 150, seen


def test_load_beat_reaches_pe_one_cycle_after_its_flit():
    """WLOAD / PLOAD body flits reach the PE's ``w_load`` / ``p_load`` through one
    register stage (timing: no load decode in front of the weight buffer's write
    enables): every beat is handed to the PE exactly one cycle after its flit is taken
    on ``net_in``, with the packet's auto-incrementing (addr, row) and the flit's data,
    and nothing else is, under random gaps on ``net_in``."""
    import random
    from tessera.hdl.global_pe.packets import pack_fields
    dut = PeNode(**E.SMALL)
    lay = E.flit_layout(C)
    K0 = C.K0
    wbeats = [{"addr": 3 + i // K0, "row": i % K0, "data": [(7 * i + j) & 0xFF for j in range(C.C0)]}
              for i in range(2 * K0 + 3)]
    pbeats = [{"addr": 1 + i // K0, "row": i % K0, "bias": 100 + i, "scale": 5 + i}
              for i in range(K0 + 2)]
    flits = []
    for pk in P.wload_packets(wbeats, K0, max_body=64):
        flits += E.packet_flits(lay, C, "WLOAD", E.ME, E.HOST, pk)
    for pk in P.pload_packets(pbeats, K0, max_body=64):
        flits += E.packet_flits(lay, C, "PLOAD", E.ME, E.HOST, pk)
    rnd = random.Random(9)
    taken, wl_seen, pl_seen = [], [], []

    async def tb(ctx):
        ctx.set(dut.node_id, dut.node_id.shape().const({"node": {"x": E.ME[0], "y": E.ME[1]}}))
        ctx.set(dut.net_out.ready, 1)
        i = 0
        for cyc in range(200):
            v = i < len(flits) and rnd.random() < 0.7
            ctx.set(dut.net_in.valid, v)
            ctx.set(dut.net_in.payload.as_value(), flits[i] if v else 0)
            for port, seen in ((dut.pe.w_load, wl_seen), (dut.pe.p_load, pl_seen)):
                if ctx.get(port.valid) and ctx.get(port.ready):
                    seen.append((cyc, ctx.get(port.payload)))
            if v and ctx.get(dut.net_in.ready):
                taken.append(cyc)
                i += 1
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert len(taken) == len(flits)
    nw = len(P.wload_packets(wbeats, K0, max_body=64)[0])
    w_cycles = [c + 1 for c in taken[1:nw]]                   # body flits of the WLOAD
    p_cycles = [c + 1 for c in taken[nw + 1:]]                 # body flits of the PLOAD
    assert [c for c, _ in wl_seen] == w_cycles, (wl_seen[:3], w_cycles[:3])
    assert [c for c, _ in pl_seen] == p_cycles, (pl_seen[:3], p_cycles[:3])
    for (_, got), b in zip(wl_seen, wbeats):
        data = sum(v << (8 * j) for j, v in enumerate(b["data"]))
        assert (got["addr"], got["row"], got["data"].as_bits()) == (b["addr"], b["row"], data), (got, b)
    for (_, got), b in zip(pl_seen, pbeats):
        assert (got["addr"], got["row"], got["bias"], got["scale"]) == \
            (b["addr"], b["row"], b["bias"], b["scale"]), (got, b)


def test_tile_size_ready_when_start_follows_cfg_at_once():
    """The tile-size products (H_in*W_in in two register stages, then *C1) settle within
    PREP_CYCLES: the PE configuration words written last, ``start`` in the next cycle
    (no gaps), a tile larger than half the input buffer (``dbl`` = 0; from reset the
    stale product is 0, which would mean ``dbl`` = 1) -- outputs as the golden model's.
    Red with ``n_hw`` at 4 stages (3 still settles in time; 2 is the RTL's)."""
    rng = np.random.default_rng(9)
    cfg = PEConfig(R=3, S=3, C1=2, K1=1, P1=4, Q1=4, H_in=6, W_in=6, role=Role.ONLY)
    assert cfg.C1 * cfg.H_in * cfg.W_in > C.pe.ibuf_words // 2
    run = E.build_run(C, rng, role=Role.ONLY, ntiles=2, cfg=cfg)
    pe_words = {P.cfg_payload(P.REGS[f"pe_cfg{i}"], v) for i, v in enumerate(
        (P.pack_pe_cfg(cfg) >> s) & 0xFFFFFFFF for s in (0, 32, 64))}
    ctrl = run["ctrl"]
    start = ctrl[-1]
    last = [x for x in ctrl[:-1] if x[0] == "CFG" and x[2][0] in pe_words]
    assert len(last) == 3
    run["ctrl"] = [x for x in ctrl[:-1] if x not in last] + last + [start]
    run_and_check([run], in_gap=0.0, out_stall=0.0)


def test_one_word_tiles_fill_last_from_prep():
    """One-word input tiles (C1*H_in*W_in = 1, tw_last = 0): the registered
    ``fill == tw_last`` (``fill_last``) must already be true after prep, from
    ``tile_words``; outputs as the golden model's."""
    rng = np.random.default_rng(21)
    cfg = PEConfig(R=1, S=1, C1=1, K1=1, P1=1, Q1=1, H_in=1, W_in=1, role=Role.ONLY)
    run = E.build_run(C, rng, role=Role.ONLY, ntiles=3, cfg=cfg)
    run_and_check([run], in_gap=0.0, out_stall=0.0)
