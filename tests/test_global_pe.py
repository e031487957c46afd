"""Global PE: cocotb on Verilator against the golden model (one cached build).  The directed
cases run in one simulator process (tessera.tb.runner.run_case), each reported by name; the
testbench puts the buffer banks back to their power-on (zero) contents at each case's start."""
import pytest

from tessera.tb.runner import run, run_case

MODULE = "tessera.tb.global_pe.test_global_pe"
ENV = {}      # (the Verilator PCH make fix now lives in tessera.tb.runner)


@pytest.mark.cocotb
@pytest.mark.xdist_group("global_pe-directed")
@pytest.mark.parametrize("testcase", ["demo", "malformed_commands", "ewise_saturation",
                                      "credit_window_and_slow_group", "overlapping_sends",
                                      "maxpool_near_memory", "completion_fairness", "reset_mid_send",
                                      "protocol_errors", "recv_two_windows"])
def test_directed(request, testcase):
    run_case(request, "global_pe", {}, MODULE, testcase, seed=3, extra_env=ENV)


@pytest.mark.cocotb
@pytest.mark.parametrize("seed,out_ready,in_idle", [(1, 0.7, 0.2), (2, 1.0, 0.0), (3, 0.4, 0.5)])
def test_random(seed, out_ready, in_idle):
    run("global_pe", {}, MODULE, testcase="random_commands", seed=seed,
        extra_env={**ENV, "GPE_OUT_READY": str(out_ready), "GPE_IN_IDLE": str(in_idle)})


@pytest.mark.cocotb
def test_random_dense_hazards():
    """Regions packed into 48 words: EWISEs hit SEND regions in flight all the time."""
    run("global_pe", {}, MODULE, testcase="random_commands", seed=4,
        extra_env={**ENV, "GPE_CMDS": "40", "GPE_SPAN": "48"})


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("seed", range(10, 20))
def test_random_soak(seed):
    run("global_pe", {}, MODULE, testcase="random_commands", seed=seed,
        extra_env={**ENV, "GPE_CMDS": "80", "GPE_SPAN": "512"})


# A second parameter set: 2 banks, 64-bit words, 3x3 nodes on a 1x3 chiplet mesh,
# 3 groups (non-power-of-two: the out-of-range group index is testable), window 2,
# one RECV slot, 3 SENDs in flight (non-power-of-two slot count), one unicast lane.
SMALL = dict(words=512, word_bits=64, banks=2, node_mesh_x=3, node_mesh_y=3, chiplet_mesh_x=1,
             chiplet_mesh_y=3, groups=3, credit_window=2, max_tile=5, recv_slots=1,
             send_slots=3, ucast_lanes=1)


@pytest.mark.cocotb
@pytest.mark.slow  # soak: its own Verilator build (~19 CPU-s, make test budget); make test runs the default build
def test_small_config_random():
    run("global_pe", SMALL, MODULE, testcase="random_commands", seed=5,
        extra_env={**ENV, "GPE_CMDS": "30"})


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("testcase", ["malformed_commands", "ewise_saturation",
                                      "credit_window_and_slow_group", "overlapping_sends",
                                      "reset_mid_send", "protocol_errors", "recv_two_windows"])
def test_small_config_directed(testcase):
    run("global_pe", SMALL, MODULE, testcase=testcase, seed=5, extra_env=ENV)


@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("seed,out_ready,in_idle,cmds,span", [(4, 1.0, 0.0, 40, 48), (1, 0.7, 0.2, 30, 512)])
def test_read_latency_2_random(seed, out_ready, in_idle, cmds, span):
    """``read_latency=2`` (SEND one stage later, SEND first on the bank read port, EWISE
    operands in the cycles SEND leaves) against the golden model: dense hazards and a
    back-pressured run."""
    run("global_pe", {"read_latency": 2}, MODULE, testcase="random_commands", seed=seed,
        extra_env={**ENV, "GPE_CMDS": str(cmds), "GPE_SPAN": str(span),
                   "GPE_OUT_READY": str(out_ready), "GPE_IN_IDLE": str(in_idle)})


@pytest.mark.slow
@pytest.mark.cocotb
def test_ecp5_multipliers_random():
    """``mult_impl=ecp5`` (the ECP5 flow's choice: EWISE lane and decoder region multipliers
    as MULT18X18D primitives with their own registers, simulated with the primitive's
    behavioural model) at ``read_latency=2, ewise_stages=4`` against the golden model, dense
    hazards (EWISE add / mul / max with shifts, SEND region checks through the products)."""
    import json

    from tessera.export import generate, manifest
    from tessera.registry import get
    from tessera.tb.pe.vendor import run_text, with_models

    spec = get("global_pe")
    text, component, params = generate(spec, {"read_latency": 2, "ewise_stages": 4,
                                              "mult_impl": "ecp5"})
    assert text.count("MULT18X18D #(") == 32 + 3
    env = {"TESSERA_PARAMS": json.dumps(params), "TESSERA_SEED": "4", "TESSERA_BLOCK": "global_pe",
           "GPE_CMDS": "40", "GPE_SPAN": "48"}
    run_text("global_pe-ecp5", with_models(text, "ecp5"), "global_pe", MODULE,
             testcase="random_commands", env=env, manifest_doc=manifest(spec, params, component))
