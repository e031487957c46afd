"""Run one compiled package pass (``hdl/package/compiler.py``) on the RTL package through the
RTL engineer's testbench (``tb/package/package.py`` :class:`PackageTB`; Simba §3.1 package,
issue 18 contract item 5).

Host sequence: every chiplet's program is loaded (``prog_sel`` = chiplet index); the
WLOAD/PLOAD preload packets of every PE (hierarchical destinations) are sent on ``host_in``
and given 64 cycles to land before ``start`` (weights preloaded, as in Simba §4.1); ``start``
(all chiplets); when every chiplet shows ``BAR 1`` (each IA home has opened its input RECV
window) the input blocks are queued as OUT packets to the homes' Global PEs; the run ends when
every chiplet's controller is done and every read-back word has arrived on ``host_out``.
Returns the words read back per output window ((chiplet, base) -> [n, K0] int8, split by the
DATA packets' source chiplet, windows of one chiplet in program order), ``cycles`` (start ->
last chiplet end, the testbench's count), ``chiplet_cycles`` (the RTL's ``done_cycle[c]``),
``nop_flits`` (the RTL counter), the barrier costs the testbench measured and the status.
Simulators: cocotb on Verilator (``tb/package/test_run_package.py``, the exported ``package``
block, cached build) or amaranth.sim (``sim="amaranth"``, small packages).
"""
from __future__ import annotations

import numpy as np

from tessera.hdl.global_pe.packets import DATA_CLASS, KIND_BITS, KIND_DATA
from tessera.hdl.package.compiler import BAR_INPUT


def pass_payload(pp, in_gap: float = 0.0, out_ready: float = 1.0) -> dict:
    """Plain data of a compiled package pass (picklable for the cocotb run)."""
    from tessera.hdl.chiplet.config import node_map
    nm = node_map(pp.target.chiplet_cfg())
    xy = pp.target.chiplets()
    return {"programs": {c.chiplet: [int(w) for w in c.program.words] for c in pp.chiplets},
            "preload_pe": [[list(xy[c.chiplet]), list(n), [[int(f) for f in p] for p in pk]]
                           for c in pp.chiplets for n, pk in c.preload_pe.items()],
            "preload_input": [[list(xy[c.chiplet]), list(nm.gpe), [[int(f) for f in p] for p in c.preload_input]]
                              for c in pp.chiplets if c.preload_input],
            "windows": [[c.chiplet, int(w.base), int(w.n)] for c in pp.chiplets for w in c.windows],
            "in_gap": in_gap, "out_ready": out_ready}


async def drive_pass(tb, pl, max_cycles: int = 2_000_000) -> dict:
    """The host side of one package pass on a set-up PackageTB (either simulator)."""
    pe_pk = [tb.packet((tuple(c), tuple(n)), p, DATA_CLASS) for c, n, pks in pl["preload_pe"] for p in pks]
    in_pk = [tb.packet((tuple(c), tuple(n)), p, DATA_CLASS) for c, n, pks in pl["preload_input"] for p in pks]
    for c, words in sorted(pl["programs"].items()):
        tb.load_program(words, chiplet=int(c))
    tb.send_packets(pe_pk)
    for _ in range(max_cycles):
        if not tb.tx and tb.cur is None and not tb.prog_q:
            break
        await tb.step()
    for _ in range(64):                          # the last WLOAD crosses the NoP
        await tb.step()
    ev = {}

    def cue(t):
        ev["input_cue"] = t.cycle - t.start_cycle
        t.send_packets(in_pk)
    tb.on_barrier(BAR_INPUT, cue)
    total = sum(n for _c, _b, n in pl["windows"])
    sample = tb._sample
    C = tb.C

    def probe():                                 # phase timestamps (cycles after start)
        nrx = len(tb.rx_packets)
        sample()
        if tb.start_cycle is None:
            return
        t = tb.cycle - tb.start_cycle
        for c in range(C):                       # PEs of chiplet c running: first / last cycle
            if tb.io.get(f"pe_running__{c}"):
                ev.setdefault(f"pe_first_{c}", t)
                ev[f"pe_last_{c}"] = t
        for head, pays in tb.rx_packets[nrx:]:   # read-back DATA per source chiplet
            if pays[0] & ((1 << KIND_BITS) - 1) == KIND_DATA:
                c = tb.pcfg.index((head["src.chiplet.x"], head["src.chiplet.y"]))
                ev.setdefault(f"readback_first_{c}", t)
                ev[f"readback_last_{c}"] = t
    tb._sample = probe
    tb.start()
    await tb.run(max_cycles=max_cycles, until=lambda t: _data_words(t) >= total)
    tb._sample = sample
    st = tb.read_status()
    got = {}
    for head, pays in tb.rx_packets:
        if pays[0] & ((1 << KIND_BITS) - 1) != KIND_DATA:
            continue
        c = tb.pcfg.index((head["src.chiplet.x"], head["src.chiplet.y"]))
        got.setdefault(c, []).extend(int(w) for w in pays[1:])
    windows = []
    for c, base, n in pl["windows"]:
        ws = got.get(c, [])
        windows.append([c, base, ws[:n]])
        got[c] = ws[n:]
    bars = {int(b): tb.barrier_cost(b) for b in tb.bar_events}
    s0 = tb.start_cycle or 0
    bar_events = {int(b): {k: {int(c): int(t - s0) for c, t in v.items()} for k, v in e.items()}
                  for b, e in tb.bar_events.items()}
    return {"windows": windows, "cycles": tb.cycles, "chiplet_cycles": list(st["done_cycle"]),
            "nop_flits": st.get("nop_flits"), "events": ev, "barrier_cycles": bars,
            "bar_events": bar_events,
            "status": {k: v for k, v in st.items()}}


def _data_words(tb) -> int:
    return sum(len(p) - 1 for _h, p in tb.rx_packets if p[0] & ((1 << KIND_BITS) - 1) == KIND_DATA)


def _words_array(words, K0):
    return np.array([np.frombuffer(int(w).to_bytes(K0, "little"), np.uint8).astype(np.int8)
                     for w in words]) if words else np.zeros((0, K0), np.int8)


def package_params(pcfg) -> dict:
    """Block parameters of ``package`` for a PackageConfig (package + chiplet fields)."""
    from dataclasses import fields
    from tessera.registry import get
    names = {p.name for p in get("package").params}
    d = {f.name: getattr(pcfg, f.name) for f in fields(pcfg) if f.name in names}
    d.update({f.name: getattr(pcfg.chiplet, f.name) for f in fields(pcfg.chiplet) if f.name in names})
    d.update({f.name: getattr(pcfg.chiplet.pe, f.name) for f in fields(pcfg.chiplet.pe) if f.name in names})
    return d


def run_pass(pp, build_dir=None, seed: int = 1, in_gap: float = 0.0, out_ready: float = 1.0,
             sim: str = "verilator", opt: str | None = None, max_cycles: int | None = None) -> dict:
    """Run a compiled package pass on the RTL; ``windows`` as {(chiplet, base): [n, K0] int8}.
    ``max_cycles``: a run still going after that many cycles (per phase) raises, with the
    status the host saw (default: 20 x the package model's cycles + 20000)."""
    import json
    import pickle
    import tempfile
    from pathlib import Path
    pl = pass_payload(pp, in_gap, out_ready)
    pcfg = pp.target
    K0 = pcfg.chiplet.pe.K0
    if sim == "amaranth":
        from tessera.tb.package.package import amaranth_run
        holder = {}

        async def body(tb):
            holder["r"] = await drive_pass(tb, pl)
        amaranth_run(pcfg, body, seed=seed, in_gap=in_gap, out_ready=out_ready)
        r = holder["r"]
    else:
        from tessera.tb.runner import run
        with tempfile.TemporaryDirectory() as td:
            pin, pout = Path(td) / "pass.pkl", Path(td) / "out.json"
            pin.write_bytes(pickle.dumps(pl))
            if max_cycles is None:
                from tessera.sim_models.simba.package_cycles import package_cycles
                max_cycles = int(20 * package_cycles(pp)["cycles"]) + 20_000
            try:
                run("package", package_params(pcfg), "tessera.tb.package.test_run_package",
                    testcase="run_pass_file", seed=seed, public="top", opt=opt,
                    extra_env={"RUN_PACKAGE_PASS": str(pin), "RUN_PACKAGE_OUT": str(pout),
                               "RUN_PACKAGE_MAX_CYCLES": str(max_cycles)})
            except (Exception, SystemExit) as err:     # cocotb-test exits on a failed test
                hang = json.loads(pout.read_text()) if pout.exists() else {}
                raise RuntimeError(f"package pass failed on the RTL: {hang or err}") from None
            r = json.loads(pout.read_text())
    return {"windows": {(c, b): _words_array(ws, K0) for c, b, ws in r["windows"]},
            "cycles": r["cycles"], "chiplet_cycles": r["chiplet_cycles"], "nop_flits": r["nop_flits"],
            "barrier_cycles": r["barrier_cycles"], "bar_events": r.get("bar_events"),
            "events": r["events"], "status": r["status"]}
