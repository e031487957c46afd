"""Package (block ``package``, issue 18): configuration checks (fast) and the cocotb /
Verilator test of record (tb/package/test_package.py) on one shared build: 2x2 chiplets of
2x2 PEs, small buffers, NoP link latency drawn per build from the seed."""
import json
import random

import pytest

from tessera.hdl.chiplet.config import ChipletConfig
from tessera.hdl.package.config import PackageConfig
from tessera.params import ParamError

SMALL_CHIPLET = dict(nx=2, ny=2, words=512, banks=2, max_tile=8, out_words=8, psum_beats=2,
                     prog_depth=128, timeout_bits=16, wbuf_bytes=1024, ibuf_bytes=512,
                     abuf_entries=32, ppu_depth=4)


def params(seed: int, **kw) -> dict:
    """Block parameters of the test package; NoP link latency random per build (seed)."""
    rng = random.Random(seed)
    return dict(SMALL_CHIPLET, ckx=2, cky=2, nop_link_latency=rng.choice([2, 3, 5]), **kw)


def test_config_defaults_and_host_node():
    pc = PackageConfig().validate()
    assert (pc.ckx, pc.cky, pc.nchiplets) == (2, 2, 4)
    assert pc.host_addr == ((0, 0), (3, 4))
    assert pc.chiplets() == [(0, 0), (1, 0), (0, 1), (1, 1)]
    small = PackageConfig(chiplet=ChipletConfig(nx=2, ny=2)).validate()
    assert small.host_addr == ((0, 0), (2, 0))
    assert small.chiplet_cfg().router_config().hier
    assert PackageConfig(ckx=6, cky=6).validate().nchiplets == 36


@pytest.mark.parametrize("kw,name", [
    (dict(ckx=7), "ckx"), (dict(cky=0), "cky"), (dict(nop_link_latency=0), "nop_link_latency"),
    (dict(nop_flit_cycles=0), "nop_flit_cycles"), (dict(nop_buffer_flits=3), "nop_buffer_flits"),
    (dict(chiplet=ChipletConfig(nx=3)), "nx"),
])
def test_config_errors(kw, name):
    with pytest.raises(ParamError) as e:
        PackageConfig(**kw).validate()
    assert e.value.name == name and "\n" not in str(e.value)


def test_from_params_rejects_address_fields():
    with pytest.raises(ParamError):
        PackageConfig.from_params({"chiplet_mesh_x": 2})


def _run(tmp_path, seed, **kw):
    from tessera.tb.runner import run
    out = tmp_path / "package.json"
    run("package", params(seed, **kw), "tessera.tb.package.test_package", seed=seed,
        opt="-O0", public="top", extra_env={"PACKAGE_OUT": str(out)})
    return json.loads(out.read_text())


@pytest.mark.cocotb
def test_cocotb_verilator_package_2x2(tmp_path):
    r = _run(tmp_path, 1)
    print(json.dumps({k: r[k] for k in ("xchip", "round_trip")}, indent=1))
    assert r["round_trip"]["bar_cost"]["2"] > 0


@pytest.mark.cocotb
@pytest.mark.slow
def test_cocotb_verilator_package_serialised_links(tmp_path):
    """soak: another seed (another link latency) with a NoP link serialisation of 2."""
    _run(tmp_path, 2, nop_flit_cycles=2)
