"""The PE's export contract: `tessera verilog pe` writes Verilog, manifest and
filelist; bad or inconsistent parameters exit 2 with one line and write nothing."""
import json
import subprocess
import sys

import pytest

from tessera.hdl.pe import SimbaPE
from tessera.params import ParamError


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "tessera.cli", *args], capture_output=True,
                          text=True)


def test_export_pe_manifest(tmp_path):
    r = _cli("verilog", "pe", "--param", "K0=4", "--param", "C0=2", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    man = json.loads((tmp_path / "pe.manifest.json").read_text())
    assert man["parameters"]["K0"] == 4 and man["parameters"]["wbuf_bytes"] == 32768
    ports = {p["name"]: p for p in man["ports"]}
    assert ports["out__payload"]["width"] == 4 * 8 and ports["out__payload"]["direction"] == "output"
    assert ports["psum_in__payload"]["width"] == 4 * 24 and ports["psum_in__ready"]["direction"] == "output"
    assert ports["cfg"]["width"] == 4 + 4 + 11 + 8 + 8 + 8 + 11 + 11 + 2 + 4 + 4 + 2 + 1 + 1 + 5 + 2
    streams = {s["name"]: s for s in man["streams"]}
    assert set(streams) == {"w_load", "i_load", "p_load", "psum_in", "psum_out", "out"}
    assert streams["out"]["role"] == "source" and streams["w_load"]["role"] == "sink"
    fields = {f["name"]: f for f in streams["w_load"]["payload_fields"]}
    assert fields["data.1"] == {"name": "data.1", "offset": fields["data.0"]["offset"] + 8,
                                "width": 8, "signed": True}
    assert (tmp_path / "pe.f").read_text().strip().endswith("pe.v")
    assert "module pe(" in (tmp_path / "pe.v").read_text()


@pytest.mark.parametrize("param,needle", [
    ("K0=0", "K0"), ("K0=17", "K0"), ("wbuf_bytes=1000", "wbuf_bytes"),
    ("ibuf_bytes=24", "ibuf_bytes"), ("abuf_entries=100", "abuf_entries"),
    ("acc_width=18", "acc_width"), ("C0=x", "C0"),
])
def test_bad_params_exit_2(tmp_path, param, needle):
    out = tmp_path / "o"
    r = _cli("verilog", "pe", "--param", param, "--out", str(out))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert not out.exists()


def test_python_api_validates():
    with pytest.raises(ParamError, match="wbuf_bytes"):
        SimbaPE(wbuf_bytes=3000)
    with pytest.raises(ParamError, match="acc_width"):
        SimbaPE(C0=16, acc_width=20)


@pytest.mark.slow    # make test budget: test_export_lint_synth[pe] keeps a Yosys check of the PE
def test_full_generic_synthesis_small_pe(tmp_path):
    """The complete `synth` flow (with memory mapping and techmap) on a small PE:
    no latches, no loops, no multiple drivers."""
    from tessera.export import export
    from tessera.registry import get
    from tessera.toolchain import yosys_check
    # the smallest legal PE: ~35 s of CPU in generic synthesis (multipliers)
    paths = export(get("pe"), {"K0": 1, "C0": 1, "acc_width": 18, "wbuf_bytes": 16,
                               "ibuf_bytes": 16, "abuf_entries": 4, "ppu_depth": 1}, tmp_path)
    r = yosys_check([paths["verilog"]], "pe", full=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
