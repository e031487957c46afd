"""Chiplet top (block ``chiplet``) smoke tests on a 2x2-PE chiplet in amaranth.sim, through
the chiplet testbench class (tb/chiplet/chiplet.py) that the cocotb test also uses.  One
simulation (elaborating the chiplet costs ~30 s) runs the scenarios back to back, the host
pulsing ``clear`` between programs:

* a controller program that CFG-writes a PE and WAITs for its DONE with a short timeout
  ends with error TIMEOUT and the timeout flag (never hangs);
* data round trip: the program opens a Global PE RECV window for the gateway, raises BAR 1
  (the host streams the words into ``host_in`` as OUT packets, with random gaps), WAITs for
  the RECV, SENDs the window unicast to the gateway; the host reads the DATA packets on
  ``host_out`` under random back-pressure, returns a CREDIT per packet, and every word
  comes back bit-exact, in order; no router error, no Global PE error flag.
"""
import random

import pytest

from tessera.hdl.chiplet import isa
from tessera.hdl.chiplet.asm import Program
from tessera.hdl.chiplet.config import ChipletConfig, node_map
from tessera.hdl.chiplet.packets import REGS
from tessera.hdl.global_pe.packets import (OP_RECV, OP_SEND, command_layout,
                                           node_address_layout)
from tessera.hdl.pe.config import PEParams
from tessera.tb.chiplet.chiplet import amaranth_run

CFG = ChipletConfig(nx=2, ny=2, words=256, banks=2, max_tile=8, out_words=8, psum_beats=2,
                    prog_depth=64, timeout_bits=16,
                    pe=PEParams(wbuf_bytes=1024, ibuf_bytes=512, abuf_entries=32, ppu_depth=4))


def _program(cfg=CFG):
    nm = node_map(cfg)
    return nm, Program(nm.mesh, command_layout(cfg.gpe))


def _addr_int(cfg, xy):
    lay = node_address_layout(cfg.gpe)
    return lay.const({"chiplet": {"x": 0, "y": 0},
                      "node": {"x": xy[0], "y": xy[1]}}).as_value().value


def timeout_program():
    nm, p = _program()
    p.tmo(100).cfg(*nm.pes[1], reg=REGS["ntiles"], value=1).wait([nm.pes[1]]).end()  # no START
    return p.words


def round_trip_program(words, base):
    nm, p = _program()
    gw = nm.gateway
    mask = 1 | (nm.mask([gw]) << 1)             # mask_layout: chiplets (1 bit), then nodes
    p.tmo(5000)
    p.cmd(op=OP_RECV, tag=1, a=base, cnt0=len(words), mask=mask)
    p.bar(1)                                    # host: stream the words now
    p.wait(gpe=True)
    p.cmd(op=OP_SEND, tag=2, a=base, cnt0=len(words), cnt1=1, cnt2=1, stride0=1, stride1=0,
          stride2=0, tile=CFG.max_tile, groups=0, ucast=1, uaddr=_addr_int(CFG, gw))
    p.wait(gpe=True)
    p.end()
    return p.words


SEEDS = (1, 2)


@pytest.fixture(scope="module")
def results():
    res = {}

    async def body(tb):
        tb.load_program(timeout_program())
        tb.start()
        await tb.run(max_cycles=2000)
        res["timeout"] = (dict(tb.status), tb.cycles)
        for seed in SEEDS:
            rng = random.Random(seed)
            n = 37                              # 4 full packets + a short one
            words = [rng.getrandbits(64) for _ in range(n)]
            base = 16 * seed
            tb.new_run()
            tb.rng.seed(seed)
            tb.in_gap, tb.out_ready = 0.3, 0.6
            tb.load_program(round_trip_program(words, base))
            tb.on_barrier(1, lambda t, w=words, b=base: t.send_packets(t.out_packets(w, b)))
            tb.start()
            await tb.run(max_cycles=5000, until=lambda t, n=n: t.data_words() >= n)
            res[seed] = (dict(tb.status), words, tb.data_packets(), tb.credits, tb.in_flits,
                         tb.out_flits)

    amaranth_run(CFG, body)
    return res


def test_cfg_then_wait_times_out(results):
    s, cycles = results["timeout"]
    assert (s["done"], s["error"], s["timeout"]) == (1 - 1, 1, 1), s
    assert s["err_code"] == isa.ERR_TIMEOUT
    assert s["noc_err"] == 0 and s["pe_error"] == 0, s
    assert 100 < cycles < 200, cycles


@pytest.mark.parametrize("seed", SEEDS)
def test_gpe_round_trip_through_gateway(results, seed):
    s, words, pkts, credits, in_flits, out_flits = results[seed]
    n = len(words)
    assert (s["done"], s["error"], s["timeout"]) == (1, 0, 0), s
    assert s["noc_err"] == 0 and s["gpe_status"] == 0 and s["stray"] == 0, s
    got = [w for _h, ws in pkts for w in ws]
    assert got == words
    assert all(len(ws) <= CFG.max_tile for _h, ws in pkts)
    assert credits == len(pkts) == -(-n // CFG.max_tile)
    # host_in carried the OUT packets (n words + a head each) and the credits
    assert in_flits == n + -(-n // CFG.max_tile) + credits
    assert out_flits == n + len(pkts)
    assert s["noc_flits"] >= in_flits
