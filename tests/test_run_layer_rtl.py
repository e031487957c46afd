"""A compiled layer pass on the RTL chiplet (cocotb/Verilator, 2x2 PEs, small buffers): every
output byte equals the numpy reference, no error flag, and the RTL's NoC flit counter equals
the chiplet model's count (within the host's last CREDIT, still in flight when the count is
read), also under random host back-pressure and gaps.  One CREDIT per DATA packet
(``credit_batch=1``) so the count is exact: coalesced credits (the chiplet default) depend on
the NI's idle flush; they run in tests/test_chiplet_top.py and the bench."""
import pytest

from tessera.golden import chiplet as gc
from tessera.hdl.chiplet.compiler import ConvLayer, PEMapping, compile_layer
from tessera.tb.chiplet.run_layer import SUITE_CFG

CFG = SUITE_CFG     # shared with tests/test_chiplet_top.py's cocotb test: one chiplet build
CASES = [  # chain + multicast + padding; stride 2 with spatial split
    ("chain_mcast", ConvLayer("t", C=16, K=16, R=3, S=3, H=8, W=8, stride=1, pad=1),
     PEMapping(2, 2, 1, 1, 2, 4), 0.0, 1.0),
    ("s2_backpressure", ConvLayer("v", C=8, K=16, R=3, S=3, H=9, W=9, stride=2, pad=1),
     PEMapping(2, 1, 2, 1, 2, 2), 0.3, 0.6),
]


@pytest.mark.cocotb
@pytest.mark.parametrize("name,L,m,gap,ready", CASES, ids=[c[0] for c in CASES])
def test_compiled_pass_on_rtl(name, L, m, gap, ready):
    from tessera.sim_models.simba.chiplet_cycles import pass_cycles
    from tessera.tb.chiplet.run_layer import run_pass
    T = gc.layer_tensors(L, 5)
    ref = gc.reference(L, T)
    ps = compile_layer(L, m, CFG, T)[0]
    vals, valid = gc.expected_words(ps, ref)
    r = run_pass(ps, CFG, seed=7, in_gap=gap, out_ready=ready, sim="verilator", opt="-O0")
    got = r["words"]
    assert got.shape == vals.shape and (got[valid] == vals[valid]).all()
    st = r["status"]
    assert st["done"] == 1 and st["error"] == 0 and st["timeout"] == 0
    assert st["pe_error"] == 0 and st["noc_err"] == 0 and st["gpe_status"] == 0 and st["stray"] == 0
    model = pass_cycles(ps, CFG)
    assert 0 <= model["noc_flits"] - r["noc_flits"] <= 1
    assert r["cycles"] > 0
