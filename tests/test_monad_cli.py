"""``tessera monad`` CLI: outputs, and one-line exit-2 errors."""
import json

import pytest

from tessera.cli import main


def test_cost_cli_json(capsys):
    assert main(["monad", "cost", "--area", "100", "--node", "28", "--chiplets", "3",
                 "--packaging", "organic", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows["organic"]["total"] == pytest.approx(28.0987, rel=1e-4)   # hand value, test_monad_cost


def test_fig3_cli(capsys):
    assert main(["monad", "cost", "--fig3"]) == 0
    out = capsys.readouterr().out
    assert "TPU" in out and "Gem" in out and "interposer" in out


def test_dse_cli_writes_json_and_png(tmp_path, capsys):
    assert main(["monad", "dse", "--workload", "tiny", "--objective", "latency", "--budget", "3",
                 "--sa-steps", "3", "--batch", "3", "--workers", "0", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "dse.json").read_text())
    assert len(doc["history"]) == 6 and doc["best"]["value"] == min(doc["history"])   # two stages
    assert (tmp_path / "dse.png").stat().st_size > 1000


@pytest.mark.parametrize("argv", [
    ["monad", "cost", "--area", "-1"],
    ["monad", "cost", "--area", "10", "--node", "3"],
    ["monad", "cost"],
    ["monad", "dse", "--workload", "nope", "--out", "x"],
    ["monad", "dse", "--workload", "tiny", "--objective", "speed", "--out", "x"],
    ["monad", "dse", "--workload", "tiny", "--budget", "0", "--out", "x"],
    ["monad", "dse", "--workload", "tiny", "--scheduler", "localhost:1", "--out", "x"],
    ["monad", "dse", "--workload", "tiny"],
])
def test_bad_arguments_exit_2_one_line(argv, capsys):
    with pytest.raises(SystemExit) as e:
        raise SystemExit(main(argv))
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error:" in err[0]


def test_dse_cli_scheduler_address_matches_local(tmp_path):
    distributed = pytest.importorskip("distributed")
    common = ["monad", "dse", "--workload", "tiny", "--budget", "2", "--sa-steps", "2", "--batch", "2"]
    assert main(common + ["--workers", "0", "--out", str(tmp_path / "local")]) == 0
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                  dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://")
        assert main(common + ["--scheduler", cluster.scheduler_address, "--out", str(tmp_path / "dask")]) == 0
    local = json.loads((tmp_path / "local" / "dse.json").read_text())
    dask = json.loads((tmp_path / "dask" / "dse.json").read_text())
    assert local["history"] == dask["history"] and local["best"]["low"] == dask["best"]["low"]
