"""cocotb testbench of the T3 DMA trigger table (§4.2.2) against ``tessera.golden.t3.DmaTableModel``,
cycle by cycle: entries programmed through ``cfg`` (per-tile ranges and multi-tile blocks, store /
update / completion-only), random triggers in random order with random idle cycles and random
command back-pressure, triggers outside every entry (misses), reprogramming between rounds, and a
higher-index entry that shadows a lower one (priority: the lower index wins).  Also
checked independently of the golden model: every multi-tile block is issued exactly once, after
all of its tiles triggered, and every single-tile trigger yields its own command.
"""
from __future__ import annotations

import os
import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from tessera.golden.t3 import OP_NONE, OP_STORE, OP_UPDATE, DmaEntry, DmaTableModel
from tessera.tb.common import TBBase, load_manifest, pack, unpack


class DmaTB(TBBase):
    def __init__(self, dut):
        super().__init__(dut)
        p = self.params
        man = load_manifest()
        st = {s["name"]: s for s in man["streams"]}
        self.tf, self.cf, self.gf = (st[n]["payload_fields"] for n in ("trig", "cmd", "cfg"))
        self.wf_width = p["wf_width"]
        self.model = DmaTableModel(p["entries"], p["wf_width"], p["addr_width"])
        dut.trig__valid.value = 0
        dut.cfg__valid.value = 0
        dut.cmd__ready.value = 0

    async def start(self):
        await self.reset()
        self.model.reset()
        self.model.step(False, None, False)

    def cfg_word(self, idx, e):
        if e is None:
            return pack(self.gf, {"index": idx, "entry.valid": 0})
        return pack(self.gf, {"index": idx, "entry.valid": 1, "entry.key_lo": e.key_lo,
                              "entry.key_hi": e.key_hi, "entry.base": e.base,
                              "entry.dst_dev": e.dst_dev, "entry.dst_addr": e.dst_addr,
                              "entry.op": e.op, "entry.tiles": e.tiles})

    async def cycle(self, trig, cmd_ready, cfg=None):
        d = self.dut
        d.trig__valid.value = int(trig is not None)
        if trig is not None:
            d.trig__payload.value = pack(self.tf, dict(zip(("wg", "wf", "addr"), trig)))
        d.cmd__ready.value = int(cmd_ready)
        d.cfg__valid.value = int(cfg is not None)
        if cfg is not None:
            d.cfg__payload.value = self.cfg_word(*cfg)
        await ReadOnly()
        exp = self.model.step(trig is not None, trig, cmd_ready, cfg)
        got = {"trig_ready": bool(d.trig__ready.value), "cmd_valid": bool(d.cmd__valid.value),
               "cfg_ready": bool(d.cfg__ready.value),
               "misses": d.misses.value.to_unsigned(), "done": d.done.value.to_unsigned(),
               "issued": d.issued.value.to_unsigned(), "error": bool(d.error.value)}
        for k, v in got.items():
            self.check_equal(v, exp[k], f"cycle {self.cycles} {k}")
        got["cmd"] = None
        if got["cmd_valid"]:
            got["cmd"] = unpack(self.cf, d.cmd__payload.value.to_unsigned())
            self.check_equal(got["cmd"], exp["cmd"], f"cycle {self.cycles} command")
        self.cycles += 1
        await RisingEdge(self.clk)
        return got


def program(rng, n_entries, wpf):
    """A table: per-tile ranges (tiles=1) and multi-tile blocks.  Returns (entries, tiles)."""
    entries, tiles = [], []
    key = 8
    for i in range(n_entries - 1):              # last entry left empty: some triggers miss
        gran = rng.choice([1, 1, 2, 3, 4])
        span = rng.randint(gran, gran + 6) if gran == 1 else gran
        ks = [key + k for k in range(span)]
        base = 0x10000 + key * 0x100
        op = rng.choice([OP_UPDATE, OP_UPDATE, OP_STORE, OP_NONE])
        e = DmaEntry(ks[0], ks[-1], base, rng.randrange(4), 0x800000 + key * 0x100 + i, op, gran)
        entries.append(e)
        for k in ks:
            tiles.append((k >> wpf, k & ((1 << wpf) - 1), base + (k - ks[0]) * 0x100, i))
        key += span + rng.randint(0, 3)          # gaps: keys between entries miss
    return entries, tiles


@cocotb.test()
async def dma_table_random(dut):
    tb = DmaTB(dut)
    seed = int(os.environ.get("TESSERA_SEED", "1"))
    rng = random.Random(seed)
    E, wfw = tb.params["entries"], tb.params["wf_width"]
    await tb.start()
    total_cmds = 0
    for rnd in range(6):
        entries, tiles = program(rng, E, wfw)
        # the last entry shadows an earlier one (same key range, other destination): priority
        # must pick the lower index, so it never matches
        s = rng.choice(entries)
        shadow = DmaEntry(s.key_lo, s.key_hi, s.base ^ 0x40, (s.dst_dev + 1) % 4, s.dst_addr ^ 0x80,
                          OP_STORE if s.op != OP_STORE else OP_UPDATE, s.tiles)
        for i, e in enumerate(entries + [shadow if rnd % 2 else None]):
            while not (await tb.cycle(None, True, (i, e)))["cfg_ready"]:
                pass
        trigs = [(wg, wf, a) for wg, wf, a, _ in tiles]
        miss_keys = [k for k in range(4, entries[-1].key_hi + 6)
                     if not any(e.key_lo <= k <= e.key_hi for e in entries)]
        extra = [(k >> wfw, k & ((1 << wfw) - 1), 0x42) for k in rng.sample(miss_keys, 3)]
        trigs += extra
        rng.shuffle(trigs)
        cmds, cur = [], None
        misses0, done0 = tb.model.misses, tb.model.done
        while trigs or cur is not None or not tb.model.idle():
            if cur is None and trigs and rng.random() < 0.8:
                cur = trigs.pop()
            o = await tb.cycle(cur, rng.random() < 0.6)
            if cur is not None and o["trig_ready"]:
                cur = None
            if o["cmd_valid"] and int(tb.dut.cmd__ready.value):
                cmds.append(o["cmd"])
        # independent checks: one command per single-tile trigger, one per complete block
        want = 0
        for i, e in enumerate(entries):
            n = sum(1 for t in tiles if t[3] == i)
            blocks = n if e.tiles == 1 else 1
            got = [c for c in cmds if e.key_lo <= ((c["wg"] << wfw) | c["wf"]) <= e.key_hi]
            if e.op == OP_NONE:
                tb.check_equal(got, [], f"entry {i}: completion-only entry issued a DMA")
                continue
            want += blocks
            tb.check_equal(len(got), blocks, f"entry {i} commands")
            for c in got:
                tb.check_equal(c["dst"] - c["src"], e.dst_addr - e.base, "dst offset")
                tb.check_equal((c["tiles"], c["op"], c["dst_dev"]), (e.tiles, e.op, e.dst_dev),
                               "command fields")
                if e.tiles > 1:
                    tb.check_equal(c["src"], e.base, "block source")
        tb.check_equal(len(cmds), want, "commands issued")
        tb.check_equal(tb.model.misses - misses0, 3, "misses")
        total_cmds += len(cmds)
    tb.check(total_cmds > 20, "too few commands")
    tb.report("dma_table_random", what=f"{total_cmds} DMA commands from random triggers: fields, "
                                       "counts and misses vs golden trigger table")
