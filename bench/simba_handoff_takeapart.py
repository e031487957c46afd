"""Issue 14 stop 31: take the pipelining hand-off (rtcontrol.handoff, optim.pipeline_time) apart under the
interrupt barrier (ctrl_irq_barrier = 1): the hand-off alone (a stage's sync spread over its steps as before
stop 31) vs the whole end barrier alone (hand-off 0), headline at 150 samples per layer, seed 0.
``--per-step`` instead runs a sensitivity, not a model claim: a hand-off for every producer row-step the
consumer reads (row-level flow control through the controllers rather than the Global PE's multicast
manager), i.e. the consumer cannot finish before its start + producer steps x hand-off.
Usage: nice -n 10 .venv/bin/python bench/simba_handoff_takeapart.py [--per-step] [--net-samples 150]
       -> build/bench/simba_handoff_takeapart.json / simba_handoff_takeapart_per_step_<N>.json
"""
import json, sys
from tessera.sim_models.simba import rtcontrol, optim
from tessera.sim_models.simba.arch import load_arch
from tessera.sim_models.simba.layers import load_network
from tessera.sim_models.simba.network import run_network
arch = load_arch().with_(ctrl_irq_barrier=1)
layers = load_network("resnet50")
orig_h, orig_pt = rtcontrol.handoff, optim.pipeline_time
out = {}
NS = int(sys.argv[sys.argv.index("--net-samples") + 1]) if "--net-samples" in sys.argv else 150
def run(tag):
    r = run_network(layers, arch, 32, "all", NS, seed=0, jobs=2)
    f = arch.pe_clock_ghz * 1e6
    a, u = r["total_cycles"] / f, r["total_uniform_cycles"] / f
    out[tag] = dict(all_ms=a, uniform_ms=u, speedup=u / a - 1, pipelined_blocks=len(r["pipelined_blocks"]),
                    net_samples=NS)
    print(tag, out[tag], flush=True)
# (a) hand-off only: the stage's sync spread over its steps as before
def pt_no_tail(stages, side=(), moves=None, handoffs=None):
    if not handoffs:
        return orig_pt(stages, side, moves, handoffs)
    start = fin = 0.0
    for i, (res, layer) in enumerate(stages):
        t = res.latency_cycles
        if i == 0:
            start, fin = 0.0, t
        else:
            pr, pl = stages[i - 1]
            f, ps = optim._first_fraction(pr, pl, layer); _, st = optim._first_fraction(res, layer, layer)
            mv, lat = moves[i] if moves else (0.0, 0.0)
            start = start + f * max(pr.latency_cycles, mv) + lat + handoffs[i]
            fin = max(start + t, fin + lat + mv / ps + t / st)
    return max([fin] + [s.latency_cycles for s in side])
def pt_per_step(stages, side=(), moves=None, handoffs=None):
    t0 = orig_pt(stages, side, moves, handoffs)
    if not handoffs:
        return t0
    start, worst = 0.0, t0
    for i, (res, layer) in enumerate(stages):
        if i == 0:
            continue
        pr, pl = stages[i - 1]
        f, ps = optim._first_fraction(pr, pl, layer)
        mv, lat = moves[i] if moves else (0.0, 0.0)
        start = start + f * max(pr.latency_cycles, mv) + lat + handoffs[i]
        worst = max(worst, start + ps * handoffs[i])
    return worst
if "--per-step" in sys.argv:
    optim.pipeline_time = pt_per_step
    run("hand-off per producer row-step (sensitivity)")
    json.dump(out, open(f"build/bench/simba_handoff_takeapart_per_step_{NS}.json", "w"), indent=1)
    sys.exit(0)
optim.pipeline_time = pt_no_tail
run("handoff only")
optim.pipeline_time = orig_pt
rtcontrol.handoff = lambda *a, **k: 0.0
run("whole end barrier only")
json.dump(out, open("build/bench/simba_handoff_takeapart.json", "w"), indent=1)
