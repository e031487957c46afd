"""Cycle-accurate golden models of the T3 track & trigger hardware (Pati et al., ASPLOS'24, §4.2, §4.5).

Written from the specification in the RTL module docstrings (``tessera.hdl.t3.*``) and the paper,
not from the RTL code: plain Python state machines, one ``step()`` per clock cycle.  ``step`` takes
the inputs that are valid during the cycle, returns the outputs the hardware drives during that
cycle (combinational from state and inputs) and advances the state to the next cycle.

* :class:`TrackerModel` -- set-associative WF Tracker with overflow entries, trigger FIFO, over-count
  detection, reset clear sweep (§4.2.1).
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
    (set, tag)); a tile lives in exactly one slot.  S1 sees every write of earlier cycles."""

    def __init__(self, sets=256, ways=8, overflow=4, trig_depth=4, threshold=0):
        self.sets, self.ways, self.n_ovf, self.trig_depth = sets, ways, overflow, trig_depth
        self.threshold = threshold
        self.reset()

    def reset(self):
        self.table = [[None] * self.ways for _ in range(self.sets)]
        self.ovf = [None] * self.n_ovf       # (set, Way) or None
        self.clear_left = self.sets          # clear sweep after reset: one set per cycle
        self.s1 = None                       # update in S1
        self.tfifo = deque()
        self.err = 0
        self.conflicts = 0
        self.occupancy = 0

    def _lookup(self, u):
        """(action, where, cnt, start): where = ("set", way) / ("ovf", j) / None."""
        wg, wf, addr, n, _src = u
        si = wg % self.sets
        s = self.table[si]
        tag = (wg // self.sets, wf)
        where = None
        for i, w in enumerate(s):
            if w is not None and w.tag == tag:
                where = ("set", i)
                break
        else:
            for j, o in enumerate(self.ovf):
                if o is not None and o[0] == si and o[1].tag == tag:
                    where = ("ovf", j)
                    break
        if where is not None:
            w = s[where[1]] if where[0] == "set" else self.ovf[where[1]][1]
            cnt, start = w.count + n, min(w.addr, addr)
        else:
            cnt, start = n, addr
        if cnt > self.threshold:
            return "err", where, cnt, start
        if cnt == self.threshold:
            return ("free" if where else "trig"), where, cnt, start
        if where is not None:
            return "upd", where, cnt, start
        for i, w in enumerate(s):
            if w is None:
                return "alloc", ("set", i), cnt, start
        for j, o in enumerate(self.ovf):
            if o is None:
                return "alloc", ("ovf", j), cnt, start
        return "conflict", None, cnt, start

    def step(self, upd_valid=False, upd=None, trig_ready=False):
        out = {"trig_valid": bool(self.tfifo), "trig": self.tfifo[0] if self.tfifo else None,
               "err_count": self.err, "error": self.err != 0, "conflicts": self.conflicts,
               "occupancy": self.occupancy, "busy": self.clear_left > 0, "stall": False}
        pop_trig = out["trig_valid"] and trig_ready
        if self.clear_left > 0:
            out["upd_ready"] = False
            self.clear_left -= 1
            self.s1 = None
            if pop_trig:
                self.tfifo.popleft()
            return out
        tf_full = len(self.tfifo) >= self.trig_depth
        hold = False
        if self.s1 is not None:
            action, where, cnt, start = self._lookup(self.s1)
            out["stall"] = action == "conflict"
            hold = (action in ("free", "trig") and tf_full) or action == "conflict"
        out["upd_ready"] = self.s1 is None or not hold
        # --- end of cycle ------------------------------------------------------------------
        if self.s1 is not None and not hold:
            wg, wf, addr, n, _ = self.s1
            si = wg % self.sets
            if action == "err":
                self.err = min(self.err + 1, 0xFFFF)
            elif action in ("trig", "free"):
                self.tfifo.append((wg, wf, start))
                if action == "free":
                    self._put(si, where, None)
                    self.occupancy -= 1
            elif action == "upd":
                self._put(si, where, Way((wg // self.sets, wf), start, cnt))
            elif action == "alloc":
                self._put(si, where, Way((wg // self.sets, wf), start, cnt))
                self.occupancy += 1
                if where[0] == "ovf":
                    self.conflicts = min(self.conflicts + 1, 0xFFFF)
        if pop_trig:
            self.tfifo.popleft()
        if not hold:
            self.s1 = tuple(upd) if (upd_valid and out["upd_ready"]) else None
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
    """Trigger -> DMA command, cycle-accurate (see ``tessera.hdl.t3.dma_table``).

    ``step`` returns ``trig_ready``, ``cmd_valid`` and ``cmd`` (a dict) for the cycle."""

    def __init__(self, entries=16, wf_width=3, addr_width=48):
        self.n, self.wf_width = entries, wf_width
        self.amask = (1 << addr_width) - 1
        self.reset()

    def reset(self):
        self.table = [None] * self.n
        self.count = [0] * self.n
        self.out = None
        self.misses = 0
        self.done = 0
        self.issued = 0

    def program(self, index, entry: DmaEntry):
        """Effect of one configuration write (takes one cycle in the RTL, see ``step``)."""
        self.table[index] = entry
        self.count[index] = 0

    def step(self, trig_valid=False, trig=None, cmd_ready=False, cfg=None):
        out = {"cmd_valid": self.out is not None, "cmd": self.out, "misses": self.misses,
               "error": self.misses != 0, "done": self.done, "issued": self.issued}
        ready = self.out is None or cmd_ready
        out["trig_ready"] = ready
        if self.out is not None and cmd_ready:
            self.out = None
        if trig_valid and ready:
            wg, wf, addr = trig
            key = (wg << self.wf_width) | wf
            hit = next((i for i, e in enumerate(self.table)
                        if e is not None and e.key_lo <= key <= e.key_hi), None)
            if hit is None:
                self.misses = min(self.misses + 1, 0xFFFF)
            else:
                e = self.table[hit]
                cnt = self.count[hit] + 1
                if cnt >= e.tiles:
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
                else:
                    self.count[hit] = cnt
        if cfg is not None:        # configuration write wins over a same-cycle count update
            idx, entry = cfg
            self.program(idx, entry)
        return out


# --------------------------------------------------------------------------------------------
# Memory-controller arbiter
# --------------------------------------------------------------------------------------------
POLICY_RR, POLICY_COMPUTE_FIRST, POLICY_MCA = 0, 1, 2


class ArbiterModel:
    """Compute vs communication arbitration into one DRAM command queue (see
    ``tessera.hdl.t3.mca``).  ``step`` returns ``c_ready``, ``m_ready``, ``out_valid``, ``out_src``
    (0 compute / 1 communication), ``threshold`` (effective), ``starving``."""

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
        out = {"out_valid": valid, "out_src": int(sel_comm) if valid else 0,
               "c_ready": out_ready and valid and not sel_comm,
               "m_ready": out_ready and valid and sel_comm,
               "threshold": thr, "starving": starving}
        # state
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
