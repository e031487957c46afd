"""``tessera run-layer`` (tessera/run_layer.py): compile + golden model + cycle model on a
small PE array; the JSON contract keys; RTL fields null while the RTL flow is absent."""
import json

import pytest

from tessera.cli import main
from tessera.run_layer import ENTRY_KEYS, parse_pes


def test_run_layer_2x2_fc(tmp_path, capsys):
    rc = main(["run-layer", "--network", "resnet50", "--layer", "fc1000", "--out", str(tmp_path),
               "--pes", "2x2", "--passes", "0", "-1", "--samples", "50", "--no-rtl"])
    assert rc == 0
    out = capsys.readouterr().out
    doc = json.loads((tmp_path / "run_layer.json").read_text())
    assert len(doc["entries"]) == 2
    for e in doc["entries"]:
        assert set(ENTRY_KEYS) <= set(e)
        assert e["golden_bit_exact"] is True and e["bytes_checked"] > 0
        assert e["model_cycles"] > 0 and 0 < e["model_utilization"] <= 1
        assert e["rtl_cycles"] is None and e["bit_exact"] is None     # --no-rtl: never invented
        assert e["utilization"] is None and e["noc_flits"] is None
    assert "RTL not run (--no-rtl)" in out
    assert (tmp_path / "fc1000.pass0.npz").exists()


@pytest.mark.parametrize("argv,msg", [
    (["--layer", "nope"], "unknown layer"),
    (["--layer", "fc1000", "--pes", "4"], "--pes"),
    (["--layer", "fc1000", "--pes", "9x9"], "nx"),
])
def test_run_layer_bad_args(tmp_path, capsys, argv, msg):
    assert main(["run-layer", "--out", str(tmp_path)] + argv) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def test_parse_pes():
    assert parse_pes("2x3") == (2, 3)
    with pytest.raises(ValueError):
        parse_pes("axb")


def test_run_layer_rows_slice(tmp_path, capsys):
    """--rows N runs a P slice of each pass: labelled, smaller, still bit-exact (golden)."""
    argv = ["run-layer", "--network", "resnet50", "--layer", "res3b_branch2b", "--pes", "2x2",
            "--passes", "0", "--samples", "30", "--no-rtl"]
    assert main(argv + ["--out", str(tmp_path / "a")]) == 0
    assert main(argv + ["--out", str(tmp_path / "b"), "--rows", "1"]) == 0
    whole = json.loads((tmp_path / "a" / "run_layer.json").read_text())["entries"][0]
    part = json.loads((tmp_path / "b" / "run_layer.json").read_text())["entries"][0]
    assert whole["slice"] is None and part["slice"].startswith("P[0:1) of pass 0")
    assert part["p_range"] == [whole["p_range"][0], whole["p_range"][0] + 1]
    assert part["golden_bit_exact"] is True and 0 < part["bytes_checked"] < whole["bytes_checked"]
    assert part["useful_macs"] * (whole["p_range"][1] - whole["p_range"][0]) == whole["useful_macs"]
    assert "outputs covered once: True" in capsys.readouterr().out
