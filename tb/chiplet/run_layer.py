"""Run one compiled layer pass (``hdl/chiplet/compiler.py``) on the RTL chiplet through the
chiplet testbench (``tb/chiplet/chiplet.py``, Simba §3.1 chiplet; issue 17 contract item 5).

Host sequence: the program is loaded; the WLOAD/PLOAD preload packets are sent on
``host_in`` and given 64 cycles to land before ``start`` (weights preloaded, as in Simba's
§4.1 measurements; the PEs are idle until the program configures them); ``start``; at ``BAR 1`` (the program has opened the input RECV
window) the input band is queued as OUT packets to the Global PE; the run ends when the
controller is done and every readback word has arrived on ``host_out``.  Returns the words
read back (in address order of the output window), the start -> done cycles (the testbench's
``cycles``: controller fetch, every CFG/command, the input preload after BAR 1, the NoC
traffic, the readback SEND and the final WAITs), the RTL's ``noc_flits`` counter and the
status.  Simulators: cocotb on Verilator (``tb/chiplet/test_run_layer.py``, the exported
``chiplet`` block, cached build) or amaranth.sim (``amaranth_run``; small chiplets only).
"""
from __future__ import annotations

import numpy as np

from tessera.hdl.chiplet.compiler import BAR_PRELOAD
from tessera.hdl.chiplet.config import ChipletConfig
from tessera.hdl.global_pe.packets import DATA_CLASS
from tessera.hdl.pe.config import PEParams

# The one small chiplet that make test verilates (a chiplet build is ~60 CPU-s at -O0): the
# compiled passes (tests/test_run_layer_rtl.py) and the chiplet scenarios (tests/test_chiplet_top.py)
# both run on it.  2x2 PEs, small buffers; one CREDIT per DATA packet (``credit_batch=1``, as in
# a package) so a pass's NoC flit count is exact.  The chiplet default (coalesced credits, 4 per
# CREDIT) runs the chiplet scenarios in make soak; pe_node's coalescing is in make test
# (tests/test_pe_node.py).
SUITE_CFG = ChipletConfig(nx=2, ny=2, words=512, banks=2, max_tile=8, out_words=8, psum_beats=2,
                          prog_depth=512, timeout_bits=16, credit_batch=1,
                          pe=PEParams(wbuf_bytes=1024, ibuf_bytes=512, abuf_entries=32, ppu_depth=4))


def pass_payload(ps, in_gap: float = 0.0, out_ready: float = 1.0) -> dict:
    """What the host needs of a compiled pass (plain data: picklable for the cocotb run)."""
    return {"program": [int(w) for w in ps.program.words],
            "preload_pe": {tuple(n): [[int(f) for f in p] for p in pk] for n, pk in ps.preload_pe.items()},
            "preload_input": [[int(f) for f in p] for p in ps.preload_input],
            "out_words": int(ps.out_words), "in_gap": in_gap, "out_ready": out_ready}


def host_packets(tb, pl):
    """(preload packets to the PEs, input packets to the Global PE) as flit lists."""
    pe = [tb.packet(node, p, DATA_CLASS) for node, pkts in pl["preload_pe"].items() for p in pkts]
    gin = [tb.packet(tb.nmap.gpe, p, DATA_CLASS) for p in pl["preload_input"]]
    return pe, gin


async def drive_pass(tb, pl, max_cycles: int = 5_000_000) -> dict:
    """The host side of one pass on a set-up ChipletTB (either simulator)."""
    pe_pk, in_pk = host_packets(tb, pl)
    npre, nin = sum(len(x) for x in pe_pk), sum(len(x) for x in in_pk)
    ev = {}
    tb.load_program(pl["program"])
    tb.send_packets(pe_pk)
    # weights/PPU land before start (Simba §4.1 measures after the weight preload)
    for _ in range(max_cycles):
        if not tb.tx and tb.cur is None and not tb.prog_q:
            break
        await tb.step()
    for _ in range(64):                          # the last WLOAD crosses the NoC
        await tb.step()

    def bar(t):
        ev["bar"] = t.cycle - t.start_cycle
        t.send_packets(in_pk)
    tb.on_barrier(BAR_PRELOAD, bar)
    sample = tb._sample

    npes = len(tb.nmap.pes)
    busy = [0] * npes                            # per PE: cycles computing (pe_busy)
    first_busy, last_busy = [None] * npes, [None] * npes
    running = [0] * npes                         # per PE: cycles from START to DONE (pe_running)
    has_busy = tb.io.has("pe_busy") if hasattr(tb.io, "has") else True

    def probe():                                 # phase timestamps (cycles after start)
        sample()
        if tb.start_cycle is None:
            return
        c = tb.cycle - tb.start_cycle
        if tb.end_cycle is None:
            r = tb.io.get("pe_running")
            b = tb.io.get("pe_busy") if has_busy else 0
            if r or b:
                for i in range(npes):
                    running[i] += (r >> i) & 1
                    if (b >> i) & 1:
                        busy[i] += 1
                        if first_busy[i] is None:
                            first_busy[i] = c
                        last_busy[i] = c
        if tb.in_flits >= npre + nin and "input_sent" not in ev:
            ev["input_sent"] = c
        if tb.out_flits > 0 and "first_readback_flit" not in ev:
            ev["first_readback_flit"] = c
    tb._sample = probe
    tb.start()
    await tb.run(max_cycles=max_cycles, until=lambda t: t.data_words() >= pl["out_words"])
    tb._sample = sample
    if has_busy:
        ev["pe_busy_cycles"] = busy
        ev["pe_first_busy"], ev["pe_last_busy"] = first_busy, last_busy
    ev["pe_running_cycles"] = running
    words = [int(w) for _h, ws in tb.data_packets() for w in ws]
    return {"words": words, "cycles": tb.cycles, "events": ev, "status": dict(tb.status)}


def _words_array(words, K0):
    return np.array([np.frombuffer(int(w).to_bytes(K0, "little"), np.uint8).astype(np.int8)
                     for w in words]) if words else np.zeros((0, K0), np.int8)


def chiplet_params(cfg) -> dict:
    """Block parameters of ``chiplet`` for a ChipletConfig."""
    from dataclasses import fields
    from tessera.registry import get
    names = {p.name for p in get("chiplet").params}
    d = {f.name: getattr(cfg, f.name) for f in fields(cfg) if f.name in names}
    d.update({f.name: getattr(cfg.pe, f.name) for f in fields(cfg.pe) if f.name in names})
    return d


def run_pass(ps, cfg, build_dir=None, seed: int = 1, in_gap: float = 0.0, out_ready: float = 1.0,
             sim: str = "verilator", opt: str | None = None) -> dict:
    """Run a pass on the RTL chiplet: ``sim="verilator"`` (cocotb, cached build per parameter
    set under build/sim/) or ``"amaranth"`` (amaranth.sim: small chiplets, a few thousand
    cycles)."""
    import json
    import pickle
    import tempfile
    from pathlib import Path
    pl = pass_payload(ps, in_gap, out_ready)
    K0 = cfg.pe.K0
    if sim == "amaranth":
        from tessera.tb.chiplet.chiplet import amaranth_run
        holder = {}

        async def body(tb):
            holder["r"] = await drive_pass(tb, pl)
        amaranth_run(cfg, body, seed=seed, in_gap=in_gap, out_ready=out_ready)
        r = holder["r"]
    else:
        from tessera.tb.runner import run
        with tempfile.TemporaryDirectory() as td:
            pin, pout = Path(td) / "pass.pkl", Path(td) / "out.json"
            pin.write_bytes(pickle.dumps(pl))
            run("chiplet", chiplet_params(cfg), "tessera.tb.chiplet.test_run_layer",
                testcase="run_pass_file", seed=seed, public="top", opt=opt,
                extra_env={"RUN_LAYER_PASS": str(pin), "RUN_LAYER_OUT": str(pout)})
            r = json.loads(pout.read_text())
    st = r["status"]
    return {"words": _words_array(r["words"], K0), "cycles": r["cycles"],
            "noc_flits": st.get("noc_flits"), "status": st, "events": r["events"]}
