"""cocotb environment for the Global PE: command/completion drivers and a NoC-side model.

The NoC model stands for the network and every consumer / producer node:

* ``net_out``: random back-pressure (``out_ready``); each DATA packet is
  parsed (framing, class, ``src``, header ``nwords``), its multicast mask
  expanded to consumers, and delivered.  At each head flit it checks the
  credit window: tiles received by a consumer minus credits the DUT has
  *accepted* from it must never exceed ``credit_window``.  Each consumer
  returns one CREDIT packet per tile after its own random delay
  (``delay[c]`` = (min, max) cycles, ``None`` = holds its credits).
* ``net_in``: a flit queue fed whole packets (CREDIT packets, OUT packets of
  producers) with random idle cycles; credit counts are recorded when the
  DUT accepts the flit.

It also watches ``cpl``: for every completion it records the cycle it first
shows (valid) and how many tiles of that tag had left on ``net_out`` by then, so a test can
check that a SEND completes only after its last tile.

Only the NoC side is modelled; the expected traffic comes from
:mod:`tessera.golden.global_pe`.
"""
from __future__ import annotations

import heapq
import random
from collections import deque

import cocotb
from cocotb.triggers import RisingEdge

from tessera.golden.global_pe import Tile
from tessera.hdl.global_pe.packets import (DATA_CLASS, KIND_CREDIT, KIND_DATA, KIND_OUT,
                                           GpeConfig, credit_layout, data_header_layout,
                                           out_header_layout, pack_fields, unpack_fields)
from tessera.tb.common import StreamSink, StreamSource, TBBase, load_manifest, unpack
from tessera.tb.global_pe.checks import interleaving as _interleaving


def _fields(manifest, stream):
    for s in manifest["streams"]:
        if s["name"] == stream:
            return s["payload_fields"]
    raise KeyError(stream)


class GpeEnv(TBBase):
    def __init__(self, dut, out_ready=1.0, in_idle=0.0, cmd_idle=0.0, cpl_ready=1.0):
        super().__init__(dut)
        self.cfg = GpeConfig.from_params(self.params)
        man = load_manifest()
        self.flit_fields = {f["name"]: (f["offset"], f["width"]) for f in _fields(man, "net_out")}
        self.cmd = StreamSource(dut, "cmd", self.clk, fields=_fields(man, "cmd"),
                                idle_prob=cmd_idle, rng=random.Random(self.seed + 1))
        self.cpl = StreamSink(dut, "cpl", self.clk, fields=_fields(man, "cpl"),
                              ready_prob=cpl_ready, rng=random.Random(self.seed + 2))
        self.out_ready = out_ready
        self.in_idle = in_idle
        self.node_id = ((0, 0), (0, 0))
        dut.node_id.value = 0
        dut.net_in__valid.value = 0
        dut.net_out__ready.value = 0
        self.delay = {}                   # consumer -> (min, max) credit-return delay or None
        self.power_on_buffer()
        self.reset_model()
        cocotb.start_soon(self._noc())

    def power_on_buffer(self):
        """Bank contents back to their power-on value (all zeros, the SRAM's initial contents,
        which the golden model also starts from): several testcases share one simulator
        process (tessera.tb.runner.run_case) and reset does not clear memory."""
        buf = self.dut.buffer
        for k in range(self.cfg.banks):
            cells = getattr(buf, f"bank{k}").cells
            for i in range(len(cells)):
                cells[i].value = 0

    # -- model state ---------------------------------------------------------
    def reset_model(self):
        n = self.cfg.consumers
        self.received = {c: [] for c in range(n)}      # Tile list per consumer, arrival order
        self.received_dest = {c: [] for c in range(n)}  # (Tile, packet destination) pairs
        self.heads = [0] * n                            # tiles started per consumer
        self.accepted = [0] * n                         # credits accepted by the DUT
        self.held = [0] * n                             # credits a holding consumer owes
        self.arrive_time = {c: [] for c in range(n)}
        self.pending_credits: list = []                 # heap of (cycle, seq, consumer)
        self._seq = 0
        self.in_packets: deque = deque()                # packets (list of (int, meta)) to send
        self.in_cur: deque = deque()
        self.in_valid = False
        self.in_item = None
        self.cur_pkt = None
        self.out_flits = 0
        self.first_out = None
        self.last_out = None
        self.out_busy_cycles = 0
        self.violations = []
        self.tiles_by_tag: dict = {}                    # tag -> tiles delivered (per consumer)
        self.cpl_seen: list = []                        # (tag, cycle, tiles of tag so far)
        self._cpl_showing = False

    # -- addressing ------------------------------------------------------------
    def coords(self, consumer):
        cfg = self.cfg
        chip, node = divmod(consumer, cfg.nodes)
        return ((chip % cfg.chiplet_mesh_x, chip // cfg.chiplet_mesh_x),
                (node % cfg.node_mesh_x, node // cfg.node_mesh_x))

    def members(self, chip_mask, node_mask):
        cfg = self.cfg
        return [c * cfg.nodes + n for c in range(cfg.chiplets) if chip_mask >> c & 1
                for n in range(cfg.nodes) if node_mask >> n & 1]

    def _get(self, word, name):
        off, width = self.flit_fields[name]
        return (word >> off) & ((1 << width) - 1)

    def flit(self, head, tail, src, payload, mclass=0):
        (cx, cy), (nx, ny) = self.coords(src) if isinstance(src, int) else src
        vals = {"head": head, "tail": tail, "mclass": mclass, "mcast": 0,
                "src.chiplet.x": cx, "src.chiplet.y": cy, "src.node.x": nx, "src.node.y": ny,
                "payload": payload}
        word = 0
        for k, v in vals.items():
            off, width = self.flit_fields[k]
            word |= (int(v) & ((1 << width) - 1)) << off
        return word

    # -- packets into the DUT --------------------------------------------------
    def credit_packet(self, consumer, count=1):
        p = pack_fields(credit_layout(), kind=KIND_CREDIT, count=count)
        return [(self.flit(1, 1, consumer, p), ("credit", consumer, count))]

    def out_packet(self, producer, addr, words):
        p = pack_fields(out_header_layout(), kind=KIND_OUT, addr=addr, nwords=len(words))
        flits = [(self.flit(1, not words, producer, p), None)]
        for i, w in enumerate(words):
            flits.append((self.flit(0, i == len(words) - 1, producer, w), None))
        return flits

    def send_in(self, packet):
        self.in_packets.append(packet)

    # -- commands --------------------------------------------------------------
    def issue(self, cmd):
        self.cmd.send_nowait(cmd.fields())

    async def wait_cpl(self, n, limit=200000):
        for _ in range(limit):
            if len(self.cpl.items) >= n:
                return
            await RisingEdge(self.clk)
        raise AssertionError(f"timeout waiting for {n} completions (got {len(self.cpl.items)})")

    async def wait_until(self, cond, limit=200000, what="condition"):
        for _ in range(limit):
            if cond():
                return
            await RisingEdge(self.clk)
        raise AssertionError(f"timeout waiting for {what}")

    # -- the NoC process -------------------------------------------------------
    async def _noc(self):
        dut = self.dut
        W = self.cfg.credit_window
        hdr_l = data_header_layout()
        while True:
            await RisingEdge(self.clk)
            self.cycles += 1
            now = self.cycles
            # net_out: handshake sampled at this edge
            if int(dut.net_out__valid.value):
                self.out_busy_cycles += 1
                if int(dut.net_out__ready.value):
                    self.out_flits += 1
                    if self.first_out is None:
                        self.first_out = now
                    self.last_out = now
                    self._take_out(dut.net_out__payload.value.to_unsigned(), now, W, hdr_l)
            if int(dut.cpl__valid.value):      # first cycle a completion shows
                if not self._cpl_showing:
                    tag = unpack(self.cpl.fields, dut.cpl__payload.value.to_unsigned())["tag"]
                    self.cpl_seen.append((tag, now, self.tiles_by_tag.get(tag, 0)))
                self._cpl_showing = not int(dut.cpl__ready.value)
            else:
                self._cpl_showing = False
            dut.net_out__ready.value = int(self.out_ready >= 1.0 or
                                           self.rng.random() < self.out_ready)
            # net_in
            if self.in_valid and int(dut.net_in__ready.value):
                meta = self.in_item[1]
                if meta is not None and meta[0] == "credit":
                    self.accepted[meta[1]] += meta[2]
                self.in_valid = False
            if not self.in_valid:
                if not self.in_cur:
                    self._next_in_packet(now)
                if self.in_cur and (self.in_idle <= 0 or self.rng.random() >= self.in_idle):
                    self.in_item = self.in_cur.popleft()
                    dut.net_in__payload.value = self.in_item[0]
                    self.in_valid = True
            dut.net_in__valid.value = int(self.in_valid)

    def _next_in_packet(self, now):
        while self.pending_credits and self.pending_credits[0][0] <= now:
            _, _, c = heapq.heappop(self.pending_credits)
            self.in_packets.append(self.credit_packet(c))
        if self.in_packets:
            self.in_cur.extend(self.in_packets.popleft())

    def _take_out(self, word, now, W, hdr_l):
        g = self._get
        head, tail = g(word, "head"), g(word, "tail")
        payload = g(word, "payload")
        if head:
            assert self.cur_pkt is None, "head flit inside a packet"
            assert g(word, "mclass") == DATA_CLASS, "DATA packet class"
            src = ((g(word, "src.chiplet.x"), g(word, "src.chiplet.y")),
                   (g(word, "src.node.x"), g(word, "src.node.y")))
            assert src == self.node_id, f"src {src} != node_id {self.node_id}"
            h = unpack_fields(hdr_l, payload)
            assert h["kind"] == KIND_DATA, f"header kind {h['kind']}"
            assert not tail, "DATA packet without data"
            if g(word, "mcast"):
                dests = self.members(g(word, "dest.mcast.chiplets"), g(word, "dest.mcast.nodes"))
            else:
                dests = [self._consumer((g(word, "dest.ucast.chiplet.x"),
                                         g(word, "dest.ucast.chiplet.y")),
                                        (g(word, "dest.ucast.node.x"),
                                         g(word, "dest.ucast.node.y")))]
            assert dests, "packet with no destination"
            if g(word, "mcast"):
                dkey = ("mcast", g(word, "dest.mcast.chiplets"), g(word, "dest.mcast.nodes"))
            else:
                dkey = ("ucast", dests[0])
            for c in dests:
                self.heads[c] += 1
                if self.heads[c] - self.accepted[c] > W:
                    self.violations.append((now, c, self.heads[c], self.accepted[c]))
                assert self.heads[c] - self.accepted[c] <= W, (
                    f"consumer {c} got tile {self.heads[c]} with only {self.accepted[c]} "
                    f"credits returned (window {W})")
            self.cur_pkt = (h, dests, [], dkey)
            return
        assert self.cur_pkt is not None, "body flit without head"
        self.cur_pkt[2].append(payload)
        if tail:
            h, dests, words, dkey = self.cur_pkt
            self.cur_pkt = None
            assert len(words) == h["nwords"], f"nwords {h['nwords']} but {len(words)} flits"
            t = Tile(h["tag"], h["seq"], tuple(words))
            self.tiles_by_tag[t.tag] = self.tiles_by_tag.get(t.tag, 0) + len(dests)
            for c in dests:
                self.received[c].append(t)
                self.received_dest[c].append((t, dkey))
                self.arrive_time[c].append(now)
                d = self.delay.get(c, (1, 4))
                if d is None:
                    self.held[c] += 1
                else:
                    self._seq += 1
                    heapq.heappush(self.pending_credits,
                                   (now + self.rng.randint(*d), self._seq, c))

    def _consumer(self, chip, node):
        cfg = self.cfg
        return ((chip[1] * cfg.chiplet_mesh_x + chip[0]) * cfg.nodes
                + node[1] * cfg.node_mesh_x + node[0])

    async def check_credits_restored(self):
        """Once every credit return has reached the DUT, each consumer's credit counter in
        the multicast manager is back at ``credit_window`` (no credit leaked or invented),
        holding consumers excepted."""
        await self.wait_until(lambda: not self.pending_credits and not self.in_packets
                              and not self.in_cur and not self.in_valid,
                              what="credit returns drained")
        await self.clocks(4)
        W = self.cfg.credit_window
        for c in range(self.cfg.consumers):
            v = int(getattr(self.dut.mcast, f"credit{c}").value)
            exp = W - (self.heads[c] - self.accepted[c])
            self.check_equal(v, exp, f"consumer {c} credit counter")
            if not self.held[c]:
                self.check_equal(v, W, f"consumer {c} credits back at the window")

    def release(self, c):
        """A holding consumer returns all credits it owes."""
        n, self.held[c] = self.held[c], 0
        if n:
            self.send_in(self.credit_packet(c, n))

    # -- checks against the golden model ---------------------------------------
    def check_packets(self, expected: dict, tags=None):
        """Each consumer received exactly the golden tiles: the arrival order must be an
        interleaving of the golden destination streams, each in order, nothing else.
        ``expected`` is the golden model's ``dest_packets``: tiles are compared together
        with the packet destination (multicast masks / unicast node), so two lanes
        carrying the same tiles to one consumer are still told apart."""
        for c in range(self.cfg.consumers):
            got = [x for x in self.received_dest[c] if tags is None or x[0].tag in tags]
            lanes = [[x for x in lane if tags is None or x[0].tag in tags]
                     for lane in expected.get(c, [])]
            lanes = [lane for lane in lanes if lane]
            self.check_equal(len(got), sum(map(len, lanes)), f"consumer {c} tile count")
            bad = _interleaving(got, lanes)
            if bad is not None:
                t, d = got[bad]
                why = "unexpected or out of order"
                for lane in lanes:
                    for e, _ in lane:
                        if (e.tag, e.seq) == (t.tag, t.seq) and e.words != t.words:
                            x = [i for i, (p, q) in enumerate(zip(t.words, e.words)) if p != q]
                            why = (f"data differs: {len(t.words)} words vs {len(e.words)} "
                                   f"expected, first bad word {x[:1]}")
                raise AssertionError(f"consumer {c}: arrival {bad} tile tag={t.tag} "
                                     f"seq={t.seq} dest={d}: {why}")
            self.checks += 1

    def check_send_completions(self, expected: dict, send_tags):
        """A SEND completes only after every tile it sends has left on ``net_out``:
        when the completion of a tag in ``send_tags`` (tags used once) first shows on
        ``cpl`` (valid), the tiles of that tag delivered so far (summed over consumers)
        equal the golden total (``expected``: the golden ``dest_packets``)."""
        total: dict = {}
        for lanes in expected.values():
            for lane in lanes:
                for t, _ in lane:
                    total[t.tag] = total.get(t.tag, 0) + 1
        n = 0
        for tag, cycle, seen in self.cpl_seen:
            if tag in send_tags:
                self.check_equal(seen, total.get(tag, 0),
                                 f"tiles of SEND {tag} delivered by its completion (cycle {cycle})")
                n += 1
        self.check_equal(n, len(send_tags), "SEND completions seen")
