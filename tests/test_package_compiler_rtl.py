"""A compiled package pass on the RTL package (cocotb/Verilator, 2x2 chiplets of 2x2 PEs,
small buffers): every output byte equals the numpy reference, no error flag, the RTL's NoP
flit counter near the model's count.  Skipped while the package RTL (hdl/package/package.py
``Package`` + tb/package/package.py) is not in the tree."""
import pytest

from tessera.golden import chiplet as gc
from tessera.golden import package as gp
from tessera.hdl.package.compiler import compile_package, small_package
from tessera.sim_models.simba.layers import Layer
from tessera.sim_models.simba.model import Mapping

CASES = [("K2C2_chain_across", Layer("kc", 16, 16, 3, 3, 6, 6, 1, 1), Mapping(2, 2, 1, 1, 1, 1, 1, 1, 2, 3))]


@pytest.mark.cocotb
@pytest.mark.slow                    # own Verilator build (~15 min on the shared machine): make soak
@pytest.mark.parametrize("name,L,m", CASES, ids=[c[0] for c in CASES])
def test_package_pass_on_rtl(name, L, m):
    from tessera.run_package import rtl_runner
    runner = rtl_runner()
    if runner is None:
        pytest.skip("package RTL not in this tree (hdl/package/package.py Package, tb/package/package.py)")
    pkg = small_package(2, 2)
    T = gc.layer_tensors(L, 5)
    pp = compile_package(L, m, pkg, T)
    r = runner(pp, seed=7, sim="verilator", opt="-O0")
    cmp_ = gp.compare(pp, r["windows"], gc.reference(L, T))
    assert cmp_["bit_exact"], f"{cmp_['mismatches']} bytes differ"
    st = r["status"]
    assert st["error"] == 0 and st["timeout"] == 0 and st["bar_err"] == 0 and st["nop_err"] == 0
    assert all(c > 0 for c in r["chiplet_cycles"]) and r["cycles"] >= max(r["chiplet_cycles"]) - 2
    from tessera.sim_models.simba.package_cycles import package_cycles
    assert abs(package_cycles(pp)["nop_flits"] - r["nop_flits"]) <= 8
