"""make synth on one small block (CI's time budget): the flow runs end to end
(export, synth_ecp5, nextpnr-ecp5), the JSON has the issue's keys, and the
block meets the 100 MHz target on the slowest speed grade."""
from tessera.synth import synth_block, table

KEYS = {"lut4", "ff", "bram", "lutram", "dsp", "fmax_mhz", "critical_path", "memories"}


def test_synth_mca(tmp_path):
    r = synth_block("mca", tmp_path, grades=(6,), timeout=600)
    assert r["status"] == "ok", r
    assert KEYS <= set(r), sorted(KEYS - set(r))
    assert r["fmax_mhz"] >= 100, r
    assert r["lut4"] > 0 and r["ff"] > 0
    assert r["critical_path"]["from"] and r["critical_path"]["to"]
    assert "mca" in table({"mca": r})
