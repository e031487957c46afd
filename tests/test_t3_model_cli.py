"""``tessera t3`` CLI behaviour (table, JSON, plots, one-line errors with exit 2), the demo hook, and
the end-to-end (Fig 19) layer model."""
import json
import subprocess
import sys

import pytest

from tessera.sim_models.t3 import config, e2e, study


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "tessera.cli", "t3", *args], capture_output=True,
                          text=True)


def test_cli_table_json_plots(tmp_path):
    r = _cli("--model", "t-nlg", "--tp", "16", "--sublayer", "OP", "--config", "t3", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "OP" in r.stdout and "t3" in r.stdout
    doc = json.loads((tmp_path / "t3_t-nlg_tp16.json").read_text())
    row = doc["rows"][0]
    assert (row["M"], row["N"], row["K"]) == (8192, 4256, 266)
    assert set(row["times_us"]) == {"sequential", "t3"}
    assert row["speedup"]["sequential"] == 1.0
    assert (tmp_path / "t3_t-nlg_tp16_OP_timeline.png").stat().st_size > 0
    assert (tmp_path / "t3_t-nlg_tp16_breakdown.png").stat().st_size > 0


@pytest.mark.parametrize("args,needle", [
    (["--model", "bert"], "--model"),
    (["--model", "t-nlg", "--tp", "1"], "--tp"),
    (["--model", "t-nlg", "--tp", "3"], "does not divide"),
    (["--model", "t-nlg", "--config", "fast"], "--config"),
    (["--model", "t-nlg", "--cus", "0"], "--cus"),
])
def test_cli_errors_are_one_line(args, needle):
    r = _cli(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("tessera t3: error:")


def test_demo_rows():
    from tessera.sim_models.t3.cli import demo
    rows = demo()
    assert {r["block"] for r in rows} == {"t3 collectives", "t3 tracker xcheck", "t3 fused OP",
                                          "t3 tracker golden xcheck",
                                          "t3 address_space"}
    assert all(r["checks"] > 0 for r in rows)


def test_end_to_end_layer_model():
    s = config.system()
    m = config.model("t-nlg")
    subs = {sl: study.evaluate(s, m, 8, sl, configs=("sequential", "ideal")) for sl in config.SUBLAYERS}
    lt = e2e.layer_times(s, m, 8, subs)
    assert lt.train > lt.infer > sum(lt.sub_fwd.values())
    sp = e2e.speedups(lt, subs, "ideal")
    # the speedup is exactly the time saved on the four AR sub-layers
    save = sum(subs[k].times["sequential"] - subs[k].times["ideal"] for k in config.SUBLAYERS)
    assert sp["train"] == pytest.approx(lt.train / (lt.train - save))
    assert 1.0 < sp["train"] < sp["infer"]
    cf = e2e.comm_fraction(lt, subs)
    assert 0 < cf["train"] < cf["infer"] < 1
