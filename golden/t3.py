"""Cycle-accurate golden models of the T3 track & trigger hardware (Pati et al., ASPLOS'24, §4.2, §4.5).

Written from the specification in the RTL module docstrings (``tessera.hdl.t3.*``) and the paper,
not from the RTL code: plain Python state machines, one ``step()`` per clock cycle.  ``step`` takes
the inputs that are valid during the cycle, returns the outputs the hardware drives during that
cycle (combinational from state and inputs) and advances the state to the next cycle.

* :class:`TrackerModel` -- set-associative WF Tracker with overflow entries, victim eviction and
  re-entry, trigger FIFO, over-count detection, reset clear sweep (§4.2.1).
* :class:`DmaTableModel` -- DMA trigger table: tile-id range lookup, multi-tile blocks (§4.2.2).
* :class:`ArbiterModel` -- memory-controller arbitration: round-robin with fall-back, compute-first,
  and MCA (occupancy threshold, starvation limit, dynamic threshold table, kernel-boundary drain)
  (§4.5).

Left out: anything the RTL leaves out (see its docstrings); DRAM timing.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

SRC_LOCAL, SRC_REMOTE, SRC_DMA = 0, 1, 2
SRC_VICTIM = 3          # a victim record re-entering the Tracker (internal)


# --------------------------------------------------------------------------------------------
# Tracker
# --------------------------------------------------------------------------------------------
@dataclass
class Way:
    tag: tuple          # (wg_msb, wf)
    addr: int           # smallest address seen
    count: int          # element updates so far


class TrackerModel:
    """One clock per :meth:`step`.  Updates and triggers are tuples:
    update ``(wg, wf, addr, n, src)``, trigger ``(wg, wf, start_addr)``.

    Table: ``sets`` lists of ``ways`` slots plus ``overflow`` slots shared by all sets (keyed by
    (set, tag)); a tile lives in at most one slot.  Items (updates and re-entering victim records)
    enter S0, pass ``read_latency`` + 1 stages (S1 and S2; with the set memory's read latency 2,
    the default, SA before them) and are applied in S3 to the table as it is then (every earlier
    item's effect visible), ``read_latency`` + 2 cycles after they entered; the outcome (trigger,
    victim record, counters, occupancy) is committed in S4, so a trigger is visible the cycle
    after S4 (an update accepted in cycle t that completes its tile: trigger in
    t + 4 + ``read_latency``: t+6 by default, t+5 with ``read_latency=1``).  Entry needs room for
    every item in flight (``pipe`` = 3 + ``read_latency`` of them, S1..S4 and SA) in the trigger
    FIFO (``trig_depth`` + ``pipe``) and, for an input update, in the victim FIFO (``victims`` +
    ``pipe``); the victim FIFO may enter every other cycle.  Only input
    updates evict; a victim record that finds its set full goes back to the victim FIFO, which
    keeps one record per tile (a pushed record merges into its tile's waiting record, or into
    the one read out that cycle).  The FIFO's push is registered: a record pushed in S4 lands
    in the FIFO in the next cycle, counting in its level (room reservation) until then."""

    def __init__(self, sets=256, ways=8, overflow=4, trig_depth=4, threshold=0, victims=4,
                 read_latency=2):
        self.sets, self.ways, self.n_ovf, self.trig_depth = sets, ways, overflow, trig_depth
        self.victims = victims
        self.read_latency = read_latency
        self.PIPE = 3 + read_latency        # items in flight after S0
        self.latency = 4 + read_latency     # accepted completing update -> trigger visible
        self.threshold = threshold
        self.reset()

    def reset(self):
        self.table = [[None] * self.ways for _ in range(self.sets)]
        self.ovf = [None] * self.n_ovf       # (set, Way) or None
        self.clear_left = self.sets          # clear sweep after reset: one set per cycle
        self.pre = [None] * (self.read_latency + 1)   # items before S3 ([-1] is S2)
        self.s3 = None                       # item in S3 (applied at the end of this cycle)
        self.s4 = None                       # outcome of the item applied last cycle (S4)
        self.tfifo = deque()
        self.vfifo = deque()                 # victim records (wg, wf, addr, count, SRC_VICTIM)
        self.pending_victim = None           # pushed by S4 last cycle, lands this cycle
        self.vturn = False
        self.vptr = 0
        self.err = 0
        self.conflicts = 0
        self.evictions = 0
        self.occupancy = 0

    def idle(self):
        return (all(x is None for x in self.pre) and self.s3 is None and self.s4 is None
                and not self.tfifo and not self.vfifo and self.pending_victim is None)

    def _apply(self, u):
        """Apply one item to the table (S3); returns its outcome, committed in S4."""
        wg, wf, addr, n, _src = u
        out = {"trig": None, "victim": None, "err": 0, "conf": 0, "evict": 0, "occ": 0}
        si = wg % self.sets
        s = self.table[si]
        tag = (wg // self.sets, wf)
        where = next((("set", i) for i, w in enumerate(s) if w is not None and w.tag == tag), None)
        if where is None:
            where = next((("ovf", j) for j, o in enumerate(self.ovf)
                          if o is not None and o[0] == si and o[1].tag == tag), None)
        if where is not None:
            w = s[where[1]] if where[0] == "set" else self.ovf[where[1]][1]
            cnt, start = w.count + n, min(w.addr, addr)
        else:
            cnt, start = n, addr
        if cnt > self.threshold:
            out["err"] = 1
            return out
        if cnt == self.threshold:
            out["trig"] = (wg, wf, start)
            if where is not None:
                self._put(si, where, None)
                out["occ"] = -1
            return out
        way = Way(tag, start, cnt)
        if where is not None:
            self._put(si, where, way)
            return out
        free = next((i for i, w in enumerate(s) if w is None), None)
        if free is not None:
            s[free] = way
            out["occ"] = 1
            return out
        ofree = next((j for j, o in enumerate(self.ovf) if o is None), None)
        if ofree is not None:
            self.ovf[ofree] = (si, way)
            out["occ"] = 1
            out["conf"] = 1
            return out
        if u[4] == SRC_VICTIM:                             # a record does not evict: requeued
            out["victim"] = (wg, wf, addr, n, SRC_VICTIM)
            return out
        v = s[self.vptr]                                   # evict: the victim re-enters later
        out["victim"] = (v.tag[0] * self.sets + si, v.tag[1], v.addr, v.count, SRC_VICTIM)
        out["evict"] = 1
        s[self.vptr] = way
        self.vptr = (self.vptr + 1) % self.ways
        return out

    def _commit(self, o):
        """S4: push the trigger (and the victim record, which lands next cycle: the
        FIFO's push is registered), update the counters."""
        if o["trig"] is not None:
            self.tfifo.append(o["trig"])
        self.pending_victim = o["victim"]        # lands in the victim FIFO next cycle
        self.err = min(self.err + o["err"], 0xFFFF)
        self.conflicts = min(self.conflicts + o["conf"], 0xFFFF)
        self.evictions = min(self.evictions + o["evict"], 0xFFFF)
        self.occupancy += o["occ"]

    def _land(self, popped):
        """The victim record pushed by last cycle's S4 lands in the FIFO.  ``popped``: the
        victim record read out of the FIFO this cycle (entering S1), if any; returns it,
        merged with the landing record if they are of one tile."""
        v, self.pending_victim = self.pending_victim, None
        if v is not None:
            k = next((i for i, r in enumerate(self.vfifo) if r[:2] == v[:2]), None)
            if popped is not None and popped[:2] == v[:2]:      # merge into the one read out
                popped = (v[0], v[1], min(popped[2], v[2]), popped[3] + v[3], SRC_VICTIM)
            elif k is None:
                self.vfifo.append(v)
            else:                       # one record per tile: merge into the waiting one
                r = self.vfifo[k]
                self.vfifo[k] = (r[0], r[1], min(r[2], v[2]), r[3] + v[3], SRC_VICTIM)
        return popped

    def step(self, upd_valid=False, upd=None, trig_ready=False):
        out = {"trig_valid": bool(self.tfifo), "trig": self.tfifo[0] if self.tfifo else None,
               "err_count": self.err, "error": self.err != 0, "conflicts": self.conflicts,
               "evictions": self.evictions, "occupancy": self.occupancy,
               "busy": self.clear_left > 0, "stall": False}
        pop_trig = out["trig_valid"] and trig_ready
        vturn = self.vturn
        self.vturn = not vturn
        if self.clear_left > 0:
            out["upd_ready"] = False
            self.clear_left -= 1
            self.pre = [None] * len(self.pre)
            self.s3 = self.s4 = None
            if pop_trig:
                self.tfifo.popleft()
            return out
        inflight = sum(x is not None for x in (*self.pre, self.s3, self.s4))
        trig_ok = len(self.tfifo) + inflight < self.trig_depth + self.PIPE
        landing = self.pending_victim is not None
        vic_ok = len(self.vfifo) + landing + inflight < self.victims + self.PIPE
        vic_turn = bool(self.vfifo) and vturn
        take_vic = vic_turn and trig_ok
        out["upd_ready"] = trig_ok and vic_ok and not vic_turn
        out["stall"] = not vic_ok
        # --- end of cycle ------------------------------------------------------------------
        entering = None
        if take_vic:
            entering = self.vfifo.popleft()
        elif upd_valid and out["upd_ready"]:
            entering = tuple(upd)
        if pop_trig:
            self.tfifo.popleft()
        popped = self._land(entering if take_vic else None)
        if take_vic:
            entering = popped
        if self.s4 is not None:
            self._commit(self.s4)
        applied = self._apply(self.s3) if self.s3 is not None else None
        self.s4, self.s3 = applied, self.pre[-1]
        self.pre = [entering] + self.pre[:-1]
        return out

    def _put(self, si, where, way):
        if where[0] == "set":
            self.table[si][where[1]] = way
        else:
            self.ovf[where[1]] = None if way is None else (si, way)


# --------------------------------------------------------------------------------------------
# DMA trigger table
# --------------------------------------------------------------------------------------------
OP_STORE, OP_UPDATE, OP_NONE = 0, 1, 2


@dataclass
class DmaEntry:
    key_lo: int          # (wg << wf_width) | wf of the first tile of the entry
    key_hi: int          # inclusive
    base: int            # start VA of the first tile (local buffer)
    dst_dev: int
    dst_addr: int        # destination VA corresponding to ``base``
    op: int              # OP_STORE / OP_UPDATE / OP_NONE (completion only)
    tiles: int           # WF tiles per DMA block (granularity)


class DmaTableModel:
    """Trigger -> DMA command, cycle-accurate (see ``tessera.hdl.t3.dma_table``): a trigger
    accepted in cycle t is matched (lowest-index entry whose key range holds it) and, in cycle t+2,
    counted in its entry; a command appears in cycle t+3.  Back-pressure from the command register
    holds the two stages.  Configuration writes are accepted only with no trigger in flight and
    block trigger acceptance in their cycle.

    ``step`` returns ``trig_ready``, ``cfg_ready``, ``cmd_valid`` and ``cmd`` (a dict)."""

    def __init__(self, entries=16, wf_width=3, addr_width=48):
        self.n, self.wf_width = entries, wf_width
        self.amask = (1 << addr_width) - 1
        self.reset()

    def reset(self):
        self.table = [None] * self.n
        self.count = [0] * self.n
        self.out = None
        self.s1 = None            # (trigger, matching entry index or None)
        self.s2 = None
        self.misses = 0
        self.done = 0
        self.issued = 0

    def idle(self):
        return self.s1 is None and self.s2 is None and self.out is None

    def program(self, index, entry: DmaEntry):
        """Effect of one configuration write (takes one cycle in the RTL, see ``step``)."""
        self.table[index] = entry
        self.count[index] = 0

    def _retire(self, trig, hit):
        wg, wf, addr = trig
        if hit is None:
            self.misses = min(self.misses + 1, 0xFFFF)
            return
        e = self.table[hit]
        cnt = self.count[hit] + 1
        if cnt < e.tiles:
            self.count[hit] = cnt
            return
        self.count[hit] = 0
        if e.tiles == 1:
            src, cwg, cwf = addr, wg, wf
        else:
            src = e.base
            cwg, cwf = e.key_lo >> self.wf_width, e.key_lo & ((1 << self.wf_width) - 1)
        if e.op == OP_NONE:
            self.done = min(self.done + 1, 0xFFFF)
        else:
            self.out = {"src": src, "dst_dev": e.dst_dev,
                        "dst": (e.dst_addr + src - e.base) & self.amask,
                        "tiles": e.tiles, "op": e.op, "wg": cwg, "wf": cwf}
            self.issued = min(self.issued + 1, 0xFFFF)

    def trig_ready(self, cmd_ready, cfg_valid=False):
        """``trig.ready`` of the coming cycle (combinational from ``cmd.ready``, ``cfg.valid``)."""
        s2_free = self.s2 is None or self.out is None or cmd_ready
        return (self.s1 is None or s2_free) and not cfg_valid

    def step(self, trig_valid=False, trig=None, cmd_ready=False, cfg=None):
        adv2 = self.out is None or cmd_ready
        s2_free = self.s2 is None or adv2
        s1_free = self.s1 is None or s2_free
        ready = s1_free and cfg is None
        cfg_ready = self.s1 is None and self.s2 is None
        out = {"cmd_valid": self.out is not None, "cmd": self.out, "misses": self.misses,
               "error": self.misses != 0, "done": self.done, "issued": self.issued,
               "trig_ready": ready, "cfg_ready": cfg_ready}
        # --- end of cycle ------------------------------------------------------------------
        if self.out is not None and cmd_ready:
            self.out = None
        if self.s2 is not None and adv2:
            self._retire(*self.s2)
        if s2_free:
            self.s2 = self.s1
        if s1_free:
            self.s1 = None
            if trig_valid and ready:
                wg, wf, _addr = trig
                key = (wg << self.wf_width) | wf
                hit = next((i for i, e in enumerate(self.table)
                            if e is not None and e.key_lo <= key <= e.key_hi), None)
                self.s1 = (tuple(trig), hit)
        if cfg is not None and cfg_ready:
            self.program(*cfg)
        return out


# --------------------------------------------------------------------------------------------
# Memory-controller arbiter
# --------------------------------------------------------------------------------------------
POLICY_RR, POLICY_COMPUTE_FIRST, POLICY_MCA = 0, 1, 2


class ArbiterModel:
    """Compute vs communication arbitration into one DRAM command queue (see
    ``tessera.hdl.t3.mca``).  ``step`` returns ``c_ready``, ``m_ready`` (the grants of the cycle,
    only with ``out_ready``), ``out_valid``, ``out_src`` (0 compute / 1 communication; the output
    register a grant fills, so a request granted in cycle t is on ``out`` in cycle t+1),
    ``threshold`` (effective), ``starving``."""

    def __init__(self, occ_width=6, wait_width=10, learn_log2=4):
        self.occ_width, self.wait_width, self.learn_log2 = occ_width, wait_width, learn_log2
        self.reset()

    def reset(self):
        self.last_comm = True      # RR: compute preferred first
        self.wait = 0
        self.learn_cnt = 0
        self.learn_sum = 0
        self.dyn_thr = 0
        self.dyn_valid = False
        self.buf = None            # source in the output register (None: empty)

    def step(self, c_valid, m_valid, out_ready, occupancy, *, policy, threshold=0,
             starve_limit=0, dynamic=False, table=(5, 10, 30, 63), bins=(24, 12, 4),
             drain=False, learn=False):
        thr = self.dyn_thr if (dynamic and self.dyn_valid) else threshold
        starving = m_valid and self.wait >= starve_limit
        if policy == POLICY_RR:
            if self.last_comm:
                sel_comm = m_valid and not c_valid
            else:
                sel_comm = m_valid
            valid = c_valid or m_valid
        elif policy == POLICY_COMPUTE_FIRST:
            sel_comm = m_valid and not c_valid
            valid = c_valid or m_valid
        else:
            comm_ok = m_valid and occupancy < thr
            if drain:
                sel_comm = m_valid
            elif starving:
                sel_comm = True
            else:
                sel_comm = comm_ok and not c_valid
            valid = c_valid or sel_comm
        grant = out_ready and valid
        out = {"out_valid": self.buf is not None,
               "out_src": self.buf if self.buf is not None else 0,
               "c_ready": grant and not sel_comm, "m_ready": grant and sel_comm,
               "threshold": thr, "starving": starving}
        # state
        if grant:
            self.buf = int(sel_comm)
        elif out_ready:
            self.buf = None
        if out["c_ready"] and c_valid:
            self.last_comm = False
        if out["m_ready"]:
            self.last_comm = True
            self.wait = 0
        elif m_valid:
            self.wait = min(self.wait + 1, (1 << self.wait_width) - 1)
        if learn:
            if self.learn_cnt < (1 << self.learn_log2):
                self.learn_sum += occupancy
                self.learn_cnt += 1
                if self.learn_cnt == (1 << self.learn_log2):
                    mean = self.learn_sum >> self.learn_log2
                    if mean >= bins[0]:
                        self.dyn_thr = table[0]
                    elif mean >= bins[1]:
                        self.dyn_thr = table[1]
                    elif mean >= bins[2]:
                        self.dyn_thr = table[2]
                    else:
                        self.dyn_thr = table[3]
                    self.dyn_valid = True
        else:
            self.learn_cnt = 0
            self.learn_sum = 0
        return out
