"""Simba system model: the cross-partition hand-off of pipelined stages under the runtime's interrupt
barrier (rtcontrol.handoff, optim.pipeline_time / pipeline_block; issue 14, stop 31), hand-computed
from the sourced constants in simba_arch.json (the same units as tests/test_simba_runtime_control.py)."""
import pytest

from tessera.sim_models.simba import rtcontrol
from tessera.sim_models.simba.arch import load_arch
from tessera.sim_models.simba.chiplet_cycles import PRE_STOP21_TERMS, RTL_CONTROLLER
from tessera.sim_models.simba.layers import Layer
from tessera.sim_models.simba.model import LayerResult, Mapping, evaluate
from tessera.sim_models.simba.optim import pipeline_block, pipeline_time
from tessera.sim_models.simba.topology import chiplet_noc

# RTL terms and runtime terms off; RISC-V, NoC and PE clocks all 1.03 GHz: every unit is a PE cycle
A = load_arch(**PRE_STOP21_TERMS, **RTL_CONTROLLER)
NOC = chiplet_noc(A)
NOP = 20 * 1.03                        # nop_hop_ns x PE clock
LEGS = 2 * NOC.gpe_to_nop
OW = lambda h: 2.68 + 3 * LEGS + h * NOP          # one way: 2 GALS crossings + NoC legs + NoP hops
HANDLER = 21.0                                     # 7 to the handler + 6 instructions + claim/complete 4 + 4


def test_handoff_by_hand():
    """Two producer chiplets 2 and 1 NoP hops from the consumer's master: the farthest interrupt write
    one way after its issue slot (2), two handlers; then the master's release of its one other chiplet
    (1 hop: issue 2 + one way) and that controller's interrupt (7)."""
    want = (2 + OW(2)) + 2 * HANDLER + (2 + OW(1)) + 7
    assert rtcontrol.handoff(A, NOC, [2, 1], [0, 1]) == pytest.approx(want)
    # a one-chiplet consumer: its master triggers its own PEs, no release write
    assert rtcontrol.handoff(A, NOC, [3], [0]) == pytest.approx((2 + OW(3)) + HANDLER)
    # two releases (1 and 2 hops): the first waits for its write response (nMMIOs = 1)
    want2 = (2 + OW(1)) + HANDLER + (rtcontrol.mmio_rtt(A, LEGS, 1) + 2 + OW(2)) + 7
    assert rtcontrol.handoff(A, NOC, [1], [0, 2, 1]) == pytest.approx(want2)
    with pytest.raises(ValueError):
        rtcontrol.handoff(A, NOC, [0, 1], [0, 1])          # partitions must be disjoint


def test_pipeline_time_charges_the_handoff_and_the_whole_end_barrier():
    """a: 1000 cycles in 4 row-steps; b (3x3, needs 2 of a's rows = 1 step) 800 cycles of which its
    end barrier is 100.  Free: b starts at 250 and ends at max(250 + 800, 1000 + 800/4) = 1200.  With a
    hand-off of 50: b starts at 300; after a's last step b needs one step of its work (700/4) and its
    whole barrier (100): max(300 + 800, 1000 + 175 + 100) = 1275."""
    a = Layer("a", C=8, K=8, R=1, S=1, H=8, W=8)
    b = Layer("b", C=8, K=8, R=3, S=3, H=8, W=8, pad=1)
    ra = LayerResult("a", Mapping(1, 1, 1, 1, 1, 1, 1, 1, 2, 8), 1, 1000.0, 0.0, {}, [], sync_cycles=60.0)
    rb = LayerResult("b", Mapping(1, 1, 1, 1, 1, 1, 1, 1, 2, 8), 1, 800.0, 0.0, {}, [], sync_cycles=100.0)
    assert pipeline_time([(ra, a), (rb, b)]) == pytest.approx(1200.0)
    assert pipeline_time([(ra, a), (rb, b)], handoffs=[0.0, 50.0]) == pytest.approx(1275.0)
    # a long hand-off delays the start past the tail bound: 250 + 400 + 800
    assert pipeline_time([(ra, a), (rb, b)], handoffs=[0.0, 400.0]) == pytest.approx(1450.0)


def test_pipeline_block_hands_off_at_each_consumer_partitions_master():
    """Three stages with one partition size each (2, 2, 4 chiplets) bound in snake order on the 6x6
    mesh: (0, 1), (2, 3), (4, 5, 11, 10).  Stage 2's master is chiplet 2 (hop sums tie, the first):
    producers 0, 1 at 2, 1 hops, one release (chiplet 3, 1 hop).  Stage 3's master is 4 (hop sums all
    4, the first): producers 2, 3 at 2, 1 hops, releases to 5, 10 (1 hop, serial round trips) and 11
    (2 hops).  The block's latency is pipeline_time with these hand-offs (or the shared-link bound);
    without the interrupt barrier no hand-off is charged."""
    import numpy as np
    from tessera.sim_models.simba.interlayer import link_loads, move_bytes, move_time
    from tessera.sim_models.simba.topology import mesh
    hops = mesh(6, 6).hops
    layers = [Layer("x2a", C=64, K=64, R=1, S=1, H=14, W=14), Layer("x2b", C=64, K=64, R=3, S=3, H=14, W=14, pad=1),
              Layer("x2c", C=64, K=256, R=1, S=1, H=14, W=14)]
    maps = [Mapping(kc=2, cc=1, pc=1, qc=1, kp=4, cp=4, pp=1, qp=1, p1=7, q1=7),
            Mapping(kc=2, cc=1, pc=1, qc=1, kp=4, cp=4, pp=1, qp=1, p1=7, q1=7),
            Mapping(kc=4, cc=1, pc=1, qc=1, kp=4, cp=4, pp=1, qp=1, p1=7, q1=7)]
    on = A.with_(ctrl_irq_barrier=1, pipeline_handoff=0)      # one hand-off per stage (default is 1)
    per = [{mp.n_chiplets: evaluate(l, on, mp)} for l, mp in zip(layers, maps)]
    t, plan = pipeline_block(layers, per, on, 32)
    assert [p[2] for p in plan] == [(0, 1), (2, 3), (4, 5, 11, 10)]
    assert list(hops[4, [4, 5, 11, 10]]) == [0, 1, 2, 1]
    h2 = (2 + OW(2)) + 2 * HANDLER + (2 + OW(1)) + 7
    h3 = (2 + OW(2)) + 2 * HANDLER + (rtcontrol.mmio_rtt(A, LEGS, 1) * 2 + 2 + OW(2)) + 7
    res = [p[3] for p in plan]
    stages = list(zip(res, layers))
    moves, shared = [(0.0, 0.0)], np.sum([np.asarray(r.link_bytes) for r in res], axis=0)
    for i in (1, 2):
        mb = move_bytes(layers[i - 1], res[i - 1], layers[i], res[i], on)
        moves.append(move_time(mb, on))
        shared = shared + link_loads(mb, on)
    bound = float(shared.max()) / on.nop_link_bytes_per_cycle
    assert t == pytest.approx(max(pipeline_time(stages, moves=moves, handoffs=[0.0, h2, h3]), bound))
    assert t > max(pipeline_time(stages, moves=moves), bound)
    # pipeline_handoff 1 (the default since stop 30): the same hand-offs, one per producer row-step
    t_r, _ = pipeline_block(layers, per, on.with_(pipeline_handoff=1), 32)
    assert t_r == pytest.approx(max(pipeline_time(stages, moves=moves, handoffs=[0.0, h2, h3], per_step=True), bound))
    # barrier off: the same block without hand-offs
    per_off = [{mp.n_chiplets: evaluate(l, A, mp)} for l, mp in zip(layers, maps)]
    t_off, plan_off = pipeline_block(layers, per_off, A, 32)
    st_off = list(zip([p[3] for p in plan_off], layers))
    assert t_off == pytest.approx(max(pipeline_time(st_off, moves=moves), bound))


def test_pipeline_handoff_per_row_step():
    """pipeline_handoff 1: a hand-off per producer row-step (a has 4), taken one after another.  With a
    400-cycle hand-off b starts at 250 + 400 = 650; the last of a's 4 hand-offs is done 3 x 400 later,
    then b's last step (700/4) and its barrier (100): 650 + 1200 + 175 + 100 = 2125 (one per stage: 1450)."""
    a = Layer("a", C=8, K=8, R=1, S=1, H=8, W=8)
    b = Layer("b", C=8, K=8, R=3, S=3, H=8, W=8, pad=1)
    ra = LayerResult("a", Mapping(1, 1, 1, 1, 1, 1, 1, 1, 2, 8), 1, 1000.0, 0.0, {}, [], sync_cycles=60.0)
    rb = LayerResult("b", Mapping(1, 1, 1, 1, 1, 1, 1, 1, 2, 8), 1, 800.0, 0.0, {}, [], sync_cycles=100.0)
    assert pipeline_time([(ra, a), (rb, b)], handoffs=[0.0, 400.0], per_step=True) == pytest.approx(2125.0)
    # a small hand-off hides behind b's own work: 300 + 800
    assert pipeline_time([(ra, a), (rb, b)], handoffs=[0.0, 50.0], per_step=True) == pytest.approx(1275.0)
    assert load_arch().pipeline_handoff == 1 and load_arch().ctrl_irq_barrier == 1      # X5r, default since stop 30
    from tessera.sim_models.simba.arch import ArchError
    with pytest.raises(ArchError):
        A.with_(pipeline_handoff=2)


def test_pipeline_block_uses_the_per_step_switch():
    """The same block with a slow NoP (2 us per hop, so the hand-offs outweigh the stages' work): one
    hand-off per producer row-step (pipeline_handoff 1) is slower than one per stage."""
    layers = [Layer("x2a", C=64, K=64, R=1, S=1, H=14, W=14), Layer("x2b", C=64, K=64, R=3, S=3, H=14, W=14, pad=1)]
    mp = Mapping(kc=2, cc=1, pc=1, qc=1, kp=4, cp=4, pp=1, qp=1, p1=2, q1=7)
    big = A.with_(ctrl_irq_barrier=1, pipeline_handoff=0, nop_hop_ns=2000.0)
    per = [{2: evaluate(l, big, mp)} for l in layers]
    t0, _ = pipeline_block(layers, per, big, 32)
    t1, _ = pipeline_block(layers, per, big.with_(pipeline_handoff=1), 32)
    assert t1 > t0
