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
