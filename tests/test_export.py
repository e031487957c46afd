"""Every registered block exports lint-clean (verilator -Wall with the documented
waivers), synthesises in Yosys with no latches/loops, and has a consistent
manifest.  Also pins the CLI's error behaviour for bad parameters.

The Verilog and manifest come from tessera.tb.runner.prepare: the same generate() + manifest()
as tessera.export.export, cached per parameter set in build/sim/, so a parameter set that a
cocotb test or tests/test_noc_params.py also uses is elaborated once per suite run."""
import json
import subprocess
import sys

import pytest

from tessera.registry import blocks
from tessera.tb.runner import prepare
from tessera.toolchain import verilator_lint, yosys_check

NAMES = sorted(blocks())

# Blocks whose flattened Yosys check takes minutes of CPU (the chiplet: ~90 s at 2x2 PEs,
# ~5 min at the default 4x4; nocsys: ~75 s; package: 2x2 chiplets of 2x2 PEs in make test): make test lints them (test_export_lint_small, at
# the size given here); the full lint + Yosys check, at that size and at the defaults, runs in
# make soak.
SMALL = {"chiplet": {"nx": 2, "ny": 2}, "nocsys": {}, "package": {"nx": 2, "ny": 2}}
CASES = ([pytest.param(n, {}, id=n) for n in NAMES if n not in SMALL]
         + [pytest.param(n, SMALL[n], id=f"{n}-small", marks=pytest.mark.slow)
            for n in SMALL if SMALL[n]]
         + [pytest.param(n, {}, id=f"{n}-default", marks=pytest.mark.slow) for n in SMALL])


def _exported(name, params):
    """{'verilog', 'manifest'} of the block at these parameters (cached export, see above)."""
    sim_dir, vpath, _ = prepare(name, params)
    return {"verilog": vpath, "manifest": sim_dir / f"{name}.manifest.json"}


@pytest.mark.parametrize("name,params", CASES)
def test_export_lint_synth(name, params):
    spec = blocks()[name]
    paths = _exported(name, params)
    doc = json.loads(paths["manifest"].read_text())
    assert doc["block"] == name and doc["parameters"] == spec.resolve(**params)
    text = paths["verilog"].read_text()
    assert f"module {name}(" in text.replace(" (", "(")
    for port in doc["ports"]:
        assert port["name"] in text, port["name"]
    for s in doc["streams"]:
        assert s["valid"] in text and s["payload"] in text
    lint = verilator_lint([paths["verilog"]], name)
    assert lint.returncode == 0, lint.stderr
    synth = yosys_check([paths["verilog"]], name)
    assert synth.returncode == 0, synth.stdout + synth.stderr


# make test budget: the package's -Wall lint runs in make soak; make test verilates the whole
# package in tests/test_package.py (cocotb) and lints its chiplet (chiplet here) and routers
# (stop 30) chiplet and nocsys too: ~22 CPU-s each; the chiplet is verilated by the cocotb
# tests of tests/test_chiplet_top.py and tests/test_run_layer_rtl.py in make test
SOAK_LINT = {"package", "chiplet", "nocsys"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SOAK_LINT else n
                                  for n in sorted(SMALL)])
def test_export_lint_small(name):
    """make test's check of the blocks above: small-size export, manifest, Verilator -Wall."""
    spec = blocks()[name]
    paths = _exported(name, SMALL[name])
    doc = json.loads(paths["manifest"].read_text())
    assert doc["block"] == name and doc["parameters"] == spec.resolve(**SMALL[name])
    lint = verilator_lint([paths["verilog"]], name)
    assert lint.returncode == 0, lint.stderr


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "tessera.cli", *args], capture_output=True,
                          text=True)


def test_cli_blocks_lists_every_block():
    r = _cli("blocks")
    assert r.returncode == 0
    for name in NAMES:
        assert f"{name}:" in r.stdout


def test_cli_unknown_block_and_param(tmp_path):
    r = _cli("verilog", "no_such_block", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "unknown block" in r.stderr
    assert not (tmp_path / "x").exists()
    if NAMES:
        r = _cli("verilog", NAMES[0], "--param", "no_such=1", "--out", str(tmp_path / "y"))
        assert r.returncode == 2 and "no_such" in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "y").exists()


BAD_VERILOG = {
    "latch": "module t(input en, input d, output reg q); always @* if (en) q = d; endmodule",
    "loop": "module t(input a, output y); wire b; assign b = a ^ y; assign y = b & a; endmodule",
    "two_drivers": "module t(input a, input b, output y); assign y = a; assign y = b; endmodule",
    "undriven": "module t(input a, output y); wire u; assign y = a & u; endmodule",
}


@pytest.mark.parametrize("bug", sorted(BAD_VERILOG))
def test_yosys_check_fails_on_structural_bugs(bug, tmp_path):
    """The structural check that every export passes can fail: a latch, a combinational loop,
    two drivers and an undriven net are each rejected; the same module without the bug passes."""
    bad = tmp_path / "bad" / "t.v"
    bad.parent.mkdir()
    bad.write_text(BAD_VERILOG[bug] + "\n")
    assert yosys_check([bad], "t").returncode != 0, bug
    good = tmp_path / "good" / "t.v"
    good.parent.mkdir()
    good.write_text("module t(input a, input b, output y); assign y = a & b; endmodule\n")
    assert yosys_check([good], "t").returncode == 0
