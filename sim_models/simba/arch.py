"""Simba architecture parameters (seed paper Sec. 3.1-3.2, Sec. 4.1) loaded from data/simba_arch.json.

Every number lives in the JSON with its source; this module only validates, converts units
(GRS Gb/s -> bytes per PE cycle, NoP hop ns and NoC router cycles -> PE cycles) and applies
overrides.  Parameters measured on the project's RTL come from the RTL benchmarks' JSON in
``build/bench/`` when ``load_arch(bench_dir=...)`` finds them:

* ``noc_throughput.json`` key ``zero_load_cycles_per_hop`` -> ``noc_hop_cycles`` (router
  cycles, NoC clock domain; the 4x4 mesh, 1-flit, link-latency-1 entry)
* ``pe_utilization.json`` key ``tiles`` -> the per-tile PE cycle constants ``pe_overhead_ppu``,
  ``pe_overhead_psum``, ``pe_weight_switch_cycles`` (re-fitted by ``pe_cycles.fit``; without
  the file they come from the committed RTL data ``data/pe_tile_cycles.json``)

``Arch.provenance`` records where each value came from.  Clock domains (GALS, Sec. 3.2): PE
clock ``pe_clock_ghz``, NoC router clock ``noc_clock_ghz``; NoP hop latency is in ns (GRS
serdes + package wires + NoP router), so changing the PE clock does not change wire delay.
Controller (issue 14 lead 1): the per-layer configuration and the per-tile SEND commands are
counted in controller instruction words of the project's RTL chiplet (``ctrl_instr_cycles``,
``pe_config_regs``, ``gpe_cmd_words``, ``ctrl_fixed_instr``; see model.py), in the NoC clock.
RTL chiplet/package terms (issue 14, stop 21; bench/simba_overheads.py compares them with the
package RTL): ``barrier_cycles`` (the package barrier's master), ``pe_tile_start_cycles`` and
``psum_drain_in_tile`` / ``psum_packet_beats`` (per-tile PE-node costs), ``max_tile_words`` and
``mcast_cut_through`` (a multicast packet is whole in each router before it moves on), the
credit loops ``credit_window_packets`` / ``psum_window_packets`` / ``credit_fixed_cycles``, the
DATA packets' head flits ``packet_heads`` and the CREDIT flits at the Global PE's ejection port
``credit_batch``.
Runtime control (issue 14, stop 30; rtcontrol.py): the Simba runtime's RISC-V (``rv_*``, its own clock
``rv_clock_ghz``), GALS crossings (``gals_crossing_cycles``), the switches ``ctrl_mmio_config``,
``ctrl_gpe_autonomous``, ``ctrl_irq_done``, ``ctrl_irq_barrier`` / ``barrier_master``, ``host_layer_ns``
and the inter-layer move mode ``interlayer_moves``; stop 31: ``pipeline_handoff`` (the pipelining
hand-off's granularity under ``ctrl_irq_barrier``).
Left out: a separate Global PE clock (taken as the NoC clock).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).parent / "data"

# RTL benchmark file -> (json key, Arch field)
RTL_OVERRIDES = {
    "noc_throughput.json": ("zero_load_cycles_per_hop", "noc_hop_cycles"),
}
PE_FIELDS = ("pe_overhead_ppu", "pe_overhead_psum", "pe_weight_switch_cycles")


class ArchError(ValueError):
    """Invalid Simba parameter."""


@dataclass(frozen=True)
class Arch:
    mesh_rows: int
    mesh_cols: int
    pes_per_chiplet: int
    k0: int
    c0: int
    weight_buffer_bytes: int
    input_buffer_bytes: int
    accum_entries: int
    psum_bytes: int
    act_bytes: int
    gpe_buffer_bytes: int
    pe_clock_ghz: float
    core_voltage: float
    grs_gbps: float
    nop_lanes_per_link: int
    nop_pj_per_bit_at_11: float
    nop_pj_per_bit_at_25: float
    nop_hop_ns: float
    noc_hop_cycles: float
    noc_clock_ghz: float
    noc_link_bytes_per_cycle: float
    noc_cols: int
    noc_rows: int
    noc_gpe_xy: tuple
    noc_nop_xy: tuple
    input_buffer_slots: int
    layer_sync_cycles: float
    chiplet_sync_ns: float
    ctrl_instr_cycles: float
    pe_config_regs: int
    gpe_cmd_words: int
    ctrl_fixed_instr: int
    barrier_cycles: float
    pe_tile_start_cycles: float
    psum_drain_in_tile: int
    psum_packet_beats: int
    max_tile_words: int
    mcast_cut_through: int
    credit_window_packets: int
    psum_window_packets: int
    credit_fixed_cycles: float
    packet_heads: int
    credit_batch: int
    nop_port_shared: int
    barrier_arrive_serial: int
    psum_chain_serial: int
    weight_copy_nop: int
    rv_clock_ghz: float
    rv_mmio_outstanding: int
    rv_mmio_issue_cycles: float
    rv_irq_cycles: float
    rv_handler_instr: float
    rv_local_mmio_cycles: float
    gals_crossing_cycles: float
    ctrl_mmio_config: int
    ctrl_gpe_autonomous: int
    ctrl_irq_done: int
    ctrl_irq_barrier: int
    barrier_master: int
    host_layer_ns: float
    interlayer_moves: int
    pipeline_handoff: int
    energy_ref_voltage: float
    e_mac_pj: float
    e_input_buffer_pj_per_byte: float
    e_weight_buffer_pj_per_byte: float
    e_accum_pj_per_access: float
    e_gpe_pj_per_byte: float
    e_noc_pj_per_bit_hop: float
    pe_overhead_ppu: float = 6.0
    pe_overhead_psum: float = 4.0
    pe_weight_switch_cycles: float = 0.0
    provenance: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        pos = ["mesh_rows", "mesh_cols", "pes_per_chiplet", "k0", "c0", "weight_buffer_bytes",
               "input_buffer_bytes", "accum_entries", "psum_bytes", "act_bytes", "gpe_buffer_bytes",
               "pe_clock_ghz", "core_voltage", "grs_gbps", "nop_lanes_per_link", "psum_packet_beats",
               "max_tile_words",
               "noc_link_bytes_per_cycle", "noc_cols", "noc_rows", "input_buffer_slots", "noc_clock_ghz",
               "energy_ref_voltage", "rv_clock_ghz", "rv_mmio_outstanding"]
        for name in pos:
            if not getattr(self, name) > 0:
                raise ArchError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ["nop_hop_ns", "noc_hop_cycles", "chiplet_sync_ns", "pe_overhead_ppu", "pe_overhead_psum",
                     "pe_weight_switch_cycles", "layer_sync_cycles", "ctrl_instr_cycles",
                     "pe_config_regs", "gpe_cmd_words", "ctrl_fixed_instr", "barrier_cycles",
                     "pe_tile_start_cycles", "psum_drain_in_tile", "mcast_cut_through",
                     "credit_window_packets", "psum_window_packets", "credit_fixed_cycles",
                     "packet_heads", "credit_batch", "nop_port_shared", "barrier_arrive_serial",
                     "psum_chain_serial", "weight_copy_nop", "rv_mmio_issue_cycles", "rv_irq_cycles",
                     "rv_handler_instr", "rv_local_mmio_cycles", "gals_crossing_cycles", "ctrl_mmio_config",
                     "ctrl_gpe_autonomous", "ctrl_irq_done", "ctrl_irq_barrier", "host_layer_ns", "e_mac_pj",
                     "e_input_buffer_pj_per_byte", "e_weight_buffer_pj_per_byte",
                     "e_accum_pj_per_access", "e_gpe_pj_per_byte", "e_noc_pj_per_bit_hop",
                     "nop_pj_per_bit_at_11", "nop_pj_per_bit_at_25"]:
            if getattr(self, name) < 0:
                raise ArchError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.barrier_master not in (0, 1):
            raise ArchError(f"barrier_master must be 0 (the layer's first chiplet) or 1 (its medoid), got {self.barrier_master!r}")
        if self.pipeline_handoff not in (0, 1):
            raise ArchError(f"pipeline_handoff must be 0 (one per stage) or 1 (one per producer row-step), got {self.pipeline_handoff!r}")
        if self.interlayer_moves not in (0, 1, 2):
            raise ArchError(f"interlayer_moves must be 0 (none), 1 (overlapped) or 2 (serial), got {self.interlayer_moves!r}")
        if self.noc_rows * self.noc_cols < self.pes_per_chiplet + 2:
            raise ArchError("chiplet NoC too small for the PEs + Global PE + NoP router")

    # ---- derived quantities (pure functions of the parameters) ----
    @property
    def n_chiplets(self) -> int:
        return self.mesh_rows * self.mesh_cols

    @property
    def macs_per_chiplet(self) -> int:
        return self.pes_per_chiplet * self.k0 * self.c0

    @property
    def nop_hop_cycles(self) -> float:
        """NoP hop latency in PE cycles (the ns figure is fixed; the PE clock converts it)."""
        return self.nop_hop_ns * self.pe_clock_ghz

    @property
    def noc_hop_pe_cycles(self) -> float:
        """NoC hop latency (router cycles in the NoC clock domain) in PE cycles."""
        return self.noc_hop_cycles * self.pe_clock_ghz / self.noc_clock_ghz

    @property
    def ctrl_pe_cycles(self) -> float:
        """One controller instruction in PE cycles (the controller runs in the NoC clock domain)."""
        return self.ctrl_instr_cycles * self.pe_clock_ghz / self.noc_clock_ghz

    @property
    def noc_bytes_per_pe_cycle(self) -> float:
        """NoC link / port bandwidth (bytes per NoC cycle) in bytes per PE cycle."""
        return self.noc_link_bytes_per_cycle * self.noc_clock_ghz / self.pe_clock_ghz

    @property
    def nop_link_bytes_per_cycle(self) -> float:
        """One NoP link, one direction: lanes x Gb/s / 8 bits, in bytes per PE cycle."""
        return self.nop_lanes_per_link * self.grs_gbps / 8.0 / self.pe_clock_ghz

    @property
    def nop_chiplet_gbytes_per_s(self) -> float:
        """Total chiplet NoP bandwidth (4 links x 2 directions), GB/s; 100 at 25 Gb/s."""
        return 8 * self.nop_lanes_per_link * self.grs_gbps / 8.0

    @property
    def nop_pj_per_bit(self) -> float:
        lo, hi = self.nop_pj_per_bit_at_11, self.nop_pj_per_bit_at_25
        return lo + (hi - lo) * (self.grs_gbps - 11.0) / (25.0 - 11.0)

    @property
    def energy_scale(self) -> float:
        return (self.core_voltage / self.energy_ref_voltage) ** 2

    def peak_tops(self, n_chiplets: int, clock_ghz: float | None = None) -> float:
        f = self.pe_clock_ghz if clock_ghz is None else clock_ghz
        return 2 * self.macs_per_chiplet * n_chiplets * f / 1e3

    def with_(self, **kw) -> "Arch":
        prov = dict(self.provenance)
        prov.update({k: "override" for k in kw})
        return dataclasses.replace(self, provenance=prov, **kw)


def _bench_record(data, key):
    """The record holding ``key``: the JSON object itself, or, for a list of entries (the NoC
    bench), the first 4x4 / 1-flit / link-latency-1 entry of the chiplet's router pipeline
    (``sa_stages`` 1) that has it (else the first that has it)."""
    if isinstance(data, dict):
        return data if key in data else None
    if not isinstance(data, list):
        return None
    have = [e for e in data if isinstance(e, dict) and key in e]
    pref = [e for e in have if e.get("mesh") == "4x4" and e.get("packet_flits") == 1
            and e.get("link_latency") == 1 and e.get("sa_stages", 1) == 1
            and e.get("alloc_stages", 1) == 1]
    return (pref or have or [None])[0]


def load_arch(path: str | Path | None = None, bench_dir: str | Path | None = None, **overrides) -> Arch:
    """Arch from the JSON data file, then RTL-bench overrides (if ``bench_dir`` has the files),
    then keyword overrides.  Unknown or missing keys are errors."""
    path = Path(path) if path else DATA / "simba_arch.json"
    raw = json.loads(path.read_text())["params"]
    names = {f.name for f in dataclasses.fields(Arch)} - {"provenance"} - set(PE_FIELDS)
    unknown = set(raw) - names
    missing = names - set(raw)
    if unknown or missing:
        raise ArchError(f"{path.name}: unknown {sorted(unknown)} / missing {sorted(missing)}")
    vals = {k: (tuple(v["value"]) if isinstance(v["value"], list) else v["value"]) for k, v in raw.items()}
    prov = {k: v["source"] for k, v in raw.items()}
    if bench_dir is not None:
        for fname, (key, fld) in RTL_OVERRIDES.items():
            f = Path(bench_dir) / fname
            if not f.exists():
                continue
            data = _bench_record(json.loads(f.read_text()), key)
            if data is None:
                raise ArchError(f"{f}: missing key {key!r}")
            vals[fld] = float(data[key])
            prov[fld] = f"RTL bench {f} [{key}]"
    from .pe_cycles import PECycleError, load_pe_cycles
    try:
        pc = load_pe_cycles(bench_dir)
    except PECycleError as e:
        raise ArchError(str(e)) from None
    for fld, v in zip(PE_FIELDS, (pc.overhead_ppu, pc.overhead_psum, pc.weight_switch_cycles)):
        vals[fld] = float(v)
        prov[fld] = pc.source
    bad = set(overrides) - names - set(PE_FIELDS)
    if bad:
        raise ArchError(f"unknown parameter(s) {sorted(bad)}")
    vals.update(overrides)
    prov.update({k: "override" for k in overrides})
    return Arch(**vals, provenance=prov)
