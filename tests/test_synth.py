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


def test_synth_param_row_and_reuse(tmp_path):
    """``--param`` rows (e.g. ``chiplet_fit``): a block at other parameters under its own row;
    ``grades=()`` is Yosys only; ``reuse`` places and routes the previous Yosys netlist when
    the exported Verilog is unchanged (and not when it changed)."""
    from tessera.synth import VARIANTS
    from tessera.registry import get
    for row, (block, assigns, _note) in VARIANTS.items():
        get(block).resolve(assigns)                   # every variant's parameters are legal
    r = synth_block("mca", tmp_path, grades=(), assignments=["req_width=8"], row="mca_small")
    assert r["status"] == "ok" and r["params"] == ["req_width=8"] and "fmax_mhz" not in r, r
    assert (tmp_path / "mca_small" / "mca.json").exists()
    r2 = synth_block("mca", tmp_path, grades=(6,), assignments=["req_width=8"], row="mca_small",
                     reuse=True)
    assert r2.get("reused_yosys") and r2["lut4"] == r["lut4"] and r2["fmax_mhz"] > 0, r2
    r3 = synth_block("mca", tmp_path, grades=(), assignments=["req_width=4"], row="mca_small",
                     reuse=True)
    assert not r3.get("reused_yosys"), r3


def test_memory_mapping_kinds():
    """A memory with flip-flops named after it is 'logic' (flagged above 1 kbit); one with no
    cell at all was optimised away ('removed', e.g. an edge router port's buffer)."""
    from tessera.synth import _mapped_memories
    mems = [{"name": n, "width": 64, "depth": 64, "bits": 4096} for n in ("a.buf", "b.buf", "c.buf")]
    net = {"modules": {"top": {"cells": {
        "a.buf[3]_TRELLIS_FF_Q": {"type": "TRELLIS_FF"},
        "c.buf.0.0": {"type": "DP16KD"}, "other_TRELLIS_FF_Q": {"type": "TRELLIS_FF"}}}}}
    kinds = {m["name"]: m["mapped_to"] for m in _mapped_memories(mems, net)}
    assert kinds == {"a.buf": "logic", "b.buf": "removed", "c.buf": "DP16KD"}, kinds


def test_synth_tech_params_select_ecp5_dsp(tmp_path):
    """The ECP5 flow's technology choice (``TECH_PARAMS``, one place): blocks with a
    ``mult_impl`` parameter (pe, pe_chain, pe_node, chiplet, global_pe) are synthesised with
    ``mult_impl=ecp5`` unless the run sets it, others are untouched; a small PE's MAC
    multipliers and its PPU's scale products come out of synth_ecp5 as MULT18X18D with their
    own input and output registers (the fabric registers of ``generic`` are never packed
    into the DSP)."""
    import json

    from tessera.registry import get
    from tessera.synth import tech_assignments
    for b in ("pe", "pe_chain", "pe_node", "chiplet", "global_pe"):
        assert tech_assignments(get(b)) == ["mult_impl=ecp5"], b
    assert tech_assignments(get("mca")) == []
    assert tech_assignments(get("pe"), ["mult_impl=generic"]) == []
    small = ["K0=2", "C0=2", "wbuf_bytes=256", "ibuf_bytes=64", "abuf_entries=16", "ppu_depth=2"]
    r = synth_block("pe", tmp_path, grades=(), assignments=small, row="pe_small")
    assert r["status"] == "ok" and r["tech_params"] == ["mult_impl=ecp5"], r
    cells = {n: c for mod in json.loads((tmp_path / "pe_small" / "pe.json").read_text())["modules"]
             .values() for n, c in mod.get("cells", {}).items() if c["type"] == "MULT18X18D"}
    regs = [n for n, c in cells.items() if all(c["parameters"].get(f"REG_{x}_CLK") == "CLK0"
                                               for x in ("INPUTA", "INPUTB", "OUTPUT"))]
    # the K0*C0 MAC multipliers and the PPU's 2*K0 scale products (stop 32), all registered
    assert sorted(n.split(".")[0] for n in regs) == ["mac"] * 4 + ["ppu"] * 4, \
        {n: c["parameters"] for n, c in cells.items()}
    assert len(cells) == 8, sorted(cells)


def test_synth_flow_opts_reach_the_tools(tmp_path, monkeypatch):
    """Flow options (``SYNTH_OPTS``/``PNR_OPTS``/``SEED``, one place; ``--synth-opts``,
    ``--pnr-opts``, ``--seed`` for a trial) reach the Yosys script and the nextpnr command
    line, and every row records what it ran with as ``flow_opts``; a trial gets its own row."""
    import json

    import tessera.synth as synth
    calls = []
    real_run = synth._run

    def spy(cmd, cwd, timeout, log):
        calls.append(cmd)
        return real_run(cmd, cwd, timeout, log)
    monkeypatch.setattr(synth, "_run", spy)
    r = synth.synth_block("mca", tmp_path, grades=(6,), synth_opts=["-nowidelut"],
                          pnr_opts=["--placer-heap-timingweight", "20"], seed=3, row="mca_opts")
    assert r["status"] == "ok" and r["fmax_mhz"] > 0, r
    assert r["flow_opts"] == {"synth_ecp5": ["-nowidelut"],
                              "nextpnr": ["--placer-heap-timingweight", "20"], "seed": 3}, r
    ys = [c for c in calls if "yosys" in c[0] and "synth_ecp5" in c[-1]]
    assert len(ys) == 1 and "synth_ecp5 -noiopad -nowidelut " in ys[0][-1], ys
    pnr = [c for c in calls if "nextpnr" in c[0]]
    assert len(pnr) == 1, calls
    line = " ".join(pnr[0])
    assert "--seed 3 " in line and "--placer-heap-timingweight 20 " in line, line
    # reuse: the same Verilog with other synth_ecp5 options is synthesised again
    calls.clear()
    synth.synth_block("mca", tmp_path, grades=(), synth_opts=[], row="mca_opts", reuse=True)
    assert any("synth_ecp5 -noiopad -top" in c[-1] for c in calls if "yosys" in c[0]), calls
    # the defaults are recorded too, and a CLI trial lands in its own row
    out, js = tmp_path / "cli", tmp_path / "synth.json"
    assert synth.main(["mca", "--grades", "none", "--out", str(out), "--json", str(js)]) == 0
    assert synth.main(["mca", "--grades", "none", "--out", str(out), "--json", str(js),
                       "--synth-opts=-nowidelut", "--pnr-opts=--router router2"]) == 0
    rows = json.loads(js.read_text())["blocks"]
    assert rows["mca"]["flow_opts"] == {"synth_ecp5": list(synth.SYNTH_OPTS),
                                        "nextpnr": list(synth.PNR_OPTS), "seed": synth.SEED}
    trial = rows["mca+-nowidelut--routerrouter2"]
    assert trial["flow_opts"]["nextpnr"] == ["--router", "router2"], trial
