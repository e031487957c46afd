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
status.  Simulator: amaranth.sim (``amaranth_run``); a cocotb/Verilator path is left to the
chiplet testbench's runner.
"""
from __future__ import annotations

import numpy as np

from tessera.hdl.chiplet.compiler import BAR_PRELOAD
from tessera.hdl.global_pe.packets import DATA_CLASS


def host_packets(tb, ps):
    """(preload packets to the PEs, input packets to the Global PE) as flit lists."""
    pe = [tb.packet(node, p, DATA_CLASS) for node, pkts in ps.preload_pe.items() for p in pkts]
    gin = [tb.packet(tb.nmap.gpe, p, DATA_CLASS) for p in ps.preload_input]
    return pe, gin


def run_pass(ps, cfg, build_dir=None, seed: int = 1, in_gap: float = 0.0, out_ready: float = 1.0,
             max_cycles: int = 2_000_000) -> dict:
    from tessera.tb.chiplet.chiplet import amaranth_run
    K0 = cfg.pe.K0
    holder = {}

    async def body(tb):
        pe_pk, in_pk = host_packets(tb, ps)
        npre, nin = sum(len(x) for x in pe_pk), sum(len(x) for x in in_pk)
        ev = holder["events"] = {}
        tb.load_program(ps.program.words)
        tb.send_packets(pe_pk)
        # weights/PPU land before start (Simba §4.1 measures after the weight preload)
        for _ in range(max_cycles):
            if not tb.tx and tb.cur is None and not tb.prog_q:
                break
            await tb.step()
        for _ in range(64):                      # the last WLOAD crosses the NoC
            await tb.step()

        def bar(t):
            ev["bar"] = t.cycle - t.start_cycle
            t.send_packets(in_pk)
        tb.on_barrier(BAR_PRELOAD, bar)
        sample = tb._sample

        def probe():                             # phase timestamps (cycles after start)
            sample()
            if tb.start_cycle is None:
                return
            c = tb.cycle - tb.start_cycle
            if tb.in_flits >= npre + nin and "input_sent" not in ev:
                ev["input_sent"] = c
            if tb.out_flits > 0 and "first_readback_flit" not in ev:
                ev["first_readback_flit"] = c
        tb._sample = probe
        tb.start()
        await tb.run(max_cycles=max_cycles, until=lambda t: t.data_words() >= ps.out_words)
        holder["status"] = dict(tb.status)
        holder["cycles"] = tb.cycles
        holder["words"] = [w for _h, ws in tb.data_packets() for w in ws]

    amaranth_run(cfg, body, seed=seed, in_gap=in_gap, out_ready=out_ready)
    words = holder["words"]
    arr = np.array([np.frombuffer(int(w).to_bytes(K0, "little"), np.uint8).astype(np.int8)
                    for w in words]) if words else np.zeros((0, K0), np.int8)
    st = holder["status"]
    return {"words": arr, "cycles": holder["cycles"], "noc_flits": st.get("noc_flits"), "status": st,
            "events": holder["events"]}
