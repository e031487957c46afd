"""Per-layer configuration and synchronisation as the Simba runtime does them (seed paper Sec. 3.1,
Sec. 4.1; issue 14, stop 30).  All times in PE cycles.

Sec. 3.1: each chiplet's RISC-V core (the Rocket Chip Generator, the paper's ref. 2) "is responsible
for configuring and managing the chiplet's PEs and Global PE states via memory-mapped registers
using an AXI-based communication protocol.  After all states are configured, the RISC-V triggers
the execution in the active PEs and Global PEs and waits for these blocks to send done
notifications via interrupts.  Synchronization of chiplet control processors across the package is
implemented via memory-mapped interrupts."  Every constant below is an ``Arch`` parameter with its
source in ``data/simba_arch.json``:

* MMIO write (``mmio_rtt``): a Rocket store to an uncached address leaves the D-cache in stage s2
  (``rv_mmio_issue_cycles``) and holds one of ``rv_mmio_outstanding`` uncached slots (rocket-chip
  ``DCacheParams.nMMIOs`` = 1) until its AXI write response returns, so successive configuration
  writes are serialised by the round trip: controller -> NoC (a GALS crossing,
  ``gals_crossing_cycles``) -> hops -> target (a crossing) -> the register write -> the response
  back the same way.  The controller sits next to the Global PE (its NoC distances are the Global
  PE's, as in the rest of the model).
* Configuration (``ctrl_mmio_config``): the registers the project's RTL chiplet program writes per
  layer (``pe_config_regs`` per PE used, ``gpe_cmd_words`` x (sets + 1) Global PE words), one MMIO
  round trip each, + ``ctrl_fixed_instr`` local instructions.
* Global PE autonomy (``ctrl_gpe_autonomous``): "after all states are configured, the RISC-V
  triggers the execution" -- the Global PE walks its tiles without a controller command per tile,
  so the per-tile SEND issue bound of the project RTL (model.py ``ctrl_step``) is dropped.
* Done collection (``ctrl_irq_done``): every active PE and the Global PE raise a done interrupt;
  uniform work makes them arrive together, so the controller takes them one handler at a time:
  (PEs used + 1) x handler after the last tile.  handler = ``rv_irq_cycles`` (interrupt latency to
  the handler's first fetch incl. the PLIC, SiFive E31 / FE310 manuals) + ``rv_handler_instr``
  single-issue instructions + the PLIC claim (load) and complete (store), ``rv_local_mmio_cycles``
  each.
* Package barrier (``ctrl_irq_barrier``, N >= 2 chiplets): each controller writes a memory-mapped
  interrupt register of the master (``barrier_master``: the layer's medoid chiplet, or its first): the farthest arrival's one-way
  latency, then the master takes N - 1 interrupts one handler at a time, then releases every other
  chiplet with an MMIO write over the NoP -- serial round trips while ``rv_mmio_outstanding`` is 1
  (else pipelined: one issue slot per write + the farthest one-way trip) -- and the last released
  controller takes its interrupt.  NoP hops cost ``nop_hop_ns`` (which already includes the GRS
  clock crossings); the NoC legs are controller -> NoP router at each end.
* Pipelining hand-off (stop 31, with ``ctrl_irq_barrier`` on; ``handoff``, used by
  optim.pipeline_block): a pipelined stage is triggered by the same memory-mapped interrupts -- every
  chiplet of the producing partition writes the interrupt register of the consuming partition's
  master (chosen as ``barrier_master`` chooses), the master takes one handler per producer chiplet
  and releases its own chiplets by serial MMIO writes; and a stage's end barrier is charged whole
  after its last step (it cannot be spread over the steps that overlap its producer).  How many
  hand-offs is ``pipeline_handoff``: 1 (the default since stop 30, an ASSUMPTION) = one per producer
  row-step the consumer reads, serialised at the consumer's master; 0 = one per stage, row-level flow
  control left to the Global PE's multicast manager (Sec. 3.1 "producer-consumer relationships").
  The paper does not say which carries row readiness.
* Host step (``host_layer_ns``): Sec. 4.1 measures with the RISC-V cycle counters and compiles and
  runs each layer independently; a host/off-package step per layer is outside those counters, so the
  default is 0 (kept as a parameter for the take-apart).

Left out: instruction-cache misses (handlers assumed cached, as the SiFive figures assume),
contention of configuration writes with data traffic, PLIC priority arbitration among simultaneous
done interrupts beyond serial handling.
"""
from __future__ import annotations

import numpy as np

from .arch import Arch
from .topology import ChipletNoC


def _rv(arch: Arch) -> float:
    """One controller cycle in PE cycles."""
    return arch.pe_clock_ghz / arch.rv_clock_ghz


def _noc(arch: Arch) -> float:
    """One NoC cycle in PE cycles."""
    return arch.pe_clock_ghz / arch.noc_clock_ghz


def one_way(arch: Arch, noc_hops: float, nop_hops: float = 0.0) -> float:
    """Controller -> target register, one way: a GALS crossing into the NoC and one out of it, the
    NoC hops, and (between chiplets) the NoP hops (their ns include the GRS crossings)."""
    return (2 * arch.gals_crossing_cycles * _noc(arch) + noc_hops * arch.noc_hop_pe_cycles
            + nop_hops * arch.nop_hop_cycles)


def mmio_rtt(arch: Arch, noc_hops: float, nop_hops: float = 0.0) -> float:
    """One MMIO write with its AXI response, issue to slot free (module doc)."""
    return ((arch.rv_mmio_issue_cycles + 1) * _rv(arch) + 2 * one_way(arch, noc_hops, nop_hops)
            + 1 * _noc(arch))


def handler(arch: Arch) -> float:
    """One interrupt taken and handled (trap latency incl. PLIC, instructions, claim + complete)."""
    return (arch.rv_irq_cycles + arch.rv_handler_instr + 2 * arch.rv_local_mmio_cycles) * _rv(arch)


def config_cycles(arch: Arch, noc: ChipletNoC, kp, cp, pp, qp):
    """A chiplet's configuration of one layer as serial MMIO writes (arrays broadcast)."""
    npe = kp * cp * pp * qp
    pe_words = arch.pe_config_regs * npe
    gpe_words = arch.gpe_cmd_words * (cp * pp * qp + 1)
    # with k writes in flight a word costs its round trip / k, but at least the issue slot
    per = lambda rtt: max(rtt / arch.rv_mmio_outstanding, (arch.rv_mmio_issue_cycles + 1) * _rv(arch))
    return (pe_words * per(mmio_rtt(arch, noc.gpe_to_pe_avg)) + gpe_words * per(mmio_rtt(arch, 1))
            + arch.ctrl_fixed_instr * _rv(arch))


def done_cycles(arch: Arch, kp, cp, pp, qp):
    """Done interrupts of the active PEs and the Global PE, one handler each (arrays broadcast)."""
    return (kp * cp * pp * qp + 1) * handler(arch)


def _release(arch: Arch, legs: float, h) -> float:
    """The master's MMIO releases to chiplets ``h`` NoP hops away (nearest first) until the last one's
    write arrives: serial round trips while ``rv_mmio_outstanding`` is 1 (else they overlap k at a
    time), the farthest released one way after its issue slot."""
    rtts = np.array([mmio_rtt(arch, legs, x) for x in sorted(h)])
    return (rtts[:-1].sum() / max(1, arch.rv_mmio_outstanding) + arch.rv_mmio_issue_cycles * _rv(arch)
            + one_way(arch, legs, max(h)))


def barrier(arch: Arch, noc: ChipletNoC, hops_from_master) -> float:
    """Package barrier by memory-mapped interrupts over the NoP (module doc); ``hops_from_master``:
    NoP hops from the master to each chiplet of the layer (the master's own 0 included)."""
    h = np.asarray([x for x in np.asarray(hops_from_master).ravel() if x > 0], float)
    if h.size == 0:
        return 0.0
    legs = 2 * noc.gpe_to_nop                  # controller -> NoP router at both ends
    arrive = one_way(arch, legs, h.max()) + arch.rv_mmio_issue_cycles * _rv(arch)
    taken = h.size * handler(arch)
    return float(arrive + taken + _release(arch, legs, h) + arch.rv_irq_cycles * _rv(arch))


def handoff(arch: Arch, noc: ChipletNoC, producer_hops, consumer_hops) -> float:
    """Cross-partition hand-off of a pipelined stage (issue 14 stop 31; Sec. 3.1 "synchronization of
    chiplet control processors across the package is implemented via memory-mapped interrupts"): every
    chiplet of the producing partition writes a memory-mapped interrupt register of the consuming
    partition's master (``producer_hops``: NoP hops from each producer chiplet to that master, all
    >= 1 since the partitions are disjoint) when its first output rows are out -- the farthest write's
    one-way trip after its issue slot, then one handler per producer chiplet; the master then triggers
    its partition as a barrier release does (``consumer_hops``: NoP hops from the master to each
    consumer chiplet, its own 0 included; serial MMIO releases + the released controller's interrupt;
    none on a one-chiplet partition, whose master triggers its own PEs locally)."""
    f = np.asarray(producer_hops, float).ravel()
    if f.size == 0:
        return 0.0
    if (f <= 0).any():
        raise ValueError("handoff: producer and consumer partitions must be disjoint (a producer hop count is 0)")
    legs = 2 * noc.gpe_to_nop
    arrive = one_way(arch, legs, f.max()) + arch.rv_mmio_issue_cycles * _rv(arch)
    taken = f.size * handler(arch)
    h = np.asarray([x for x in np.asarray(consumer_hops).ravel() if x > 0], float)
    release = _release(arch, legs, h) + arch.rv_irq_cycles * _rv(arch) if h.size else 0.0
    return float(arrive + taken + release)
