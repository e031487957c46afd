"""NoC block parameters are validated with one-line errors naming the parameter."""
import pytest

from tessera.params import ParamError
from tessera.registry import get


@pytest.mark.parametrize("block,params,name,text", [
    ("mesh", {"buffer_flits": 2}, "buffer_flits", "credit round trip"),
    ("mesh", {"link_latency": 4, "buffer_flits": 8, "sa_stages": 1}, "buffer_flits",
     "2*link_latency+2 = 10"),
    # two-cycle allocation: one cycle more of credit round trip
    ("mesh", {"buffer_flits": 4, "sa_stages": 2}, "buffer_flits",
     "2*link_latency+3 = 5 cycles (sa_stages=2)"),
    ("router", {"sa_stages": 3}, "sa_stages", "<= 2"),
    ("router", {"alloc_stages": 3}, "alloc_stages", "<= 2"),
    ("router", {"alloc_stages": 2, "sa_stages": 2}, "alloc_stages", "needs sa_stages=1"),
    ("router", {"max_packet_flits": 8}, "buffer_flits", "cut-through"),
    ("router", {"vcs": 3}, "vcs", "cannot be split evenly"),
    ("router", {"vcs": 1}, "vcs", "1 VCs < 2 message classes"),
    ("mesh", {"vcs": 2, "classes": 4}, "vcs", "protocol deadlock"),
    ("nocsys", {"vcs": 1}, "vcs", "classes would share a VC"),
    ("nocsys", {"gw_x": 3}, "gw_x", "outside the 2x2 chiplet mesh"),
])
def test_bad_parameters(block, params, name, text):
    spec = get(block)
    with pytest.raises(ParamError) as err:
        spec.elaborate_checked(spec.resolve(**params))
    assert err.value.name == name and text in str(err.value)
    assert len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize("block,params,modules,instances", [
    ("mesh", {"kx": 4, "ky": 4}, {"mesh", "mesh_router"}, {"mesh_router": 16}),
    ("nocsys", {}, {"nocsys", "nocsys_router", "nocsys_nop_router"},
     {"nocsys_router": 16, "nocsys_nop_router": 4}),
])
def test_router_is_one_module_instantiated_per_node(block, params, modules, instances):
    """The export holds the router once, instantiated kx*ky times (not duplicated text)."""
    import re
    from tessera.tb.runner import prepare
    text = prepare(block, params)[1].read_text()   # (cached: test_export checks the same sets)
    assert set(re.findall(r"^module (\w+)\(", text, re.M)) == modules
    for mod, n in instances.items():
        assert len(re.findall(rf"^\s*{mod} \w+ \(", text, re.M)) == n, mod
