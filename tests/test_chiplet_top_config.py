"""ChipletConfig validation and the node map (contract item 2)."""
import pytest

from tessera.hdl.chiplet.config import ChipletConfig, node_map
from tessera.hdl.pe.config import PEParams
from tessera.params import ParamError


def test_default_node_map():
    nm = node_map(ChipletConfig().validate())
    assert nm.mesh == (4, 5)
    assert nm.pes[5] == (1, 1) and len(nm.pes) == 16
    assert (nm.gpe, nm.ctrl, nm.gateway, nm.empty) == ((0, 4), (1, 4), (2, 4), ((3, 4),))
    assert nm.index((3, 4)) == 19 and nm.mask([(0, 0), (1, 1)]) == 0b100001
    assert nm.kind((2, 4)) == "gateway" and nm.pe_index((3, 2)) == 11


def test_small_node_map():
    nm = node_map(ChipletConfig(nx=2, ny=2).validate())
    assert nm.mesh == (3, 3)
    assert nm.pes == ((0, 0), (1, 0), (0, 1), (1, 1))
    assert nm.empty == ((2, 0), (2, 1))
    assert (nm.gpe, nm.ctrl, nm.gateway) == ((0, 2), (1, 2), (2, 2))


def test_default_layouts_and_gpe():
    c = ChipletConfig().validate()
    assert c.gpe.word_bits == 64 and c.gpe.words == 8192
    assert (c.gpe.node_mesh_x, c.gpe.node_mesh_y) == (4, 5)
    assert c.flit_layout()["payload"].shape == 64


@pytest.mark.parametrize("kw,name", [
    (dict(nx=0), "nx"), (dict(nx=9), "nx"), (dict(ny=8), "ny"), (dict(nx=8, ny=4), "ny"),
    (dict(word_bits=128), "word_bits"), (dict(pe=PEParams(K0=4)), "word_bits"),
    (dict(vcs=1), "vcs"), (dict(classes=1, vcs=1), "classes"),
    (dict(buffer_flits=8), "buffer_flits"), (dict(words=102), "words"),
    (dict(prog_depth=1), "prog_depth"), (dict(pe=PEParams(acc_width=40)), "acc_width"),
])
def test_bad_params_one_line(kw, name):
    with pytest.raises(ParamError) as e:
        ChipletConfig(**kw).validate()
    assert e.value.name == name and "\n" not in str(e.value)


def test_params_derived_from_config():
    """The chiplet's block Params are ChipletConfig's fields (+ the PE's), with its defaults."""
    from dataclasses import fields

    from tessera.hdl.chiplet import CHIPLET_PARAMS
    from tessera.hdl.chiplet.config import FIELD_PARAMS, PACKAGE_FIELDS
    own = [f for f in fields(ChipletConfig) if f.name != "pe" and f.name not in PACKAGE_FIELDS]
    assert "hier" not in {p.name for p in CHIPLET_PARAMS}       # package-only mode
    assert {f.name for f in own} == set(FIELD_PARAMS)           # every field has help/bounds
    d, byname = ChipletConfig(), {p.name: p for p in CHIPLET_PARAMS}
    for f in own:
        assert byname[f.name].default == getattr(d, f.name)
    for f in fields(PEParams):
        assert byname[f.name].default == getattr(d.pe, f.name)
    assert ChipletConfig.from_params({p.name: p.default for p in CHIPLET_PARAMS}) == d


def test_pe_node_config_is_the_pe_block_params():
    """pe_node builds the PE the PE block defines: same fields, same defaults."""
    from dataclasses import fields

    from tessera.hdl.chiplet.packets import PeNodeConfig
    n = PeNodeConfig()
    assert n.pe == PEParams()
    assert [f.name for f in fields(PEParams)] == [f.name for f in fields(n)][:len(fields(PEParams))]
    assert PeNodeConfig(**ChipletConfig().pe_node_params()).pe == ChipletConfig().pe
