"""RTL-measured constants of the Simba cycle models, with provenance (issue 18 calibration;
Simba §3.1 NoC/NoP/PE, §3.2 memory-mapped-interrupt synchronisation).

``data/rtl_constants.json`` lists every constant of ``chiplet_cycles.py`` / ``package_cycles.py``
that the project's RTL can measure: NoC router cycles per hop, NoP cycles per hop, the barrier
cost, controller instruction and Global PE command cycles, host and SEND flit rates; PE tile
cycles come from ``pe_cycles.py`` (``data/pe_tile_cycles.json`` or the live
``pe_utilization.json``).  :func:`load` takes each value from the live RTL bench JSON
(``<bench_dir>/<bench>`` key ``key``; dotted keys walk into objects) when it is there, else
from the data file; ``None`` values are *derived* by the package model (named in
``provenance``).  :func:`drift` lists the constants whose committed value differs from the live
measurement (``tests/test_package_model.py`` fails on any).  Left out: the NoP GRS figures of
``simba_arch.json`` (``nop_hop_ns``: a silicon latency in ns, not something the RTL's
register-stage link model measures).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).parent / "data" / "rtl_constants.json"
BENCH = Path(__file__).resolve().parents[2] / "build" / "bench"
TOL = 0.05          # relative drift allowed between a committed value and its live measurement


@dataclass(frozen=True)
class RTLConstants:
    values: dict
    provenance: dict = field(default_factory=dict)

    def __getitem__(self, k):
        return self.values[k]

    def get(self, k, default=None):
        v = self.values.get(k)
        return default if v is None else v

    def lines(self) -> list[str]:
        """One line per constant: name = value  (source)."""
        return [f"{k} = {self.values[k]}  ({self.provenance[k]})" for k in self.values]


def _walk(d, key: str):
    for part in key.split("."):
        if isinstance(d, list):                         # list of entries: first that has it
            d = next((e for e in d if isinstance(e, dict) and part in e), None)
            if d is None:
                return None
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def measured(name: str, spec: dict, bench_dir) -> tuple:
    """(value, file) of a constant in the live bench JSON, or (None, None)."""
    if not spec.get("bench") or bench_dir is None:
        return None, None
    f = Path(bench_dir) / spec["bench"]
    if not f.exists():
        return None, None
    from .arch import _bench_record
    raw = json.loads(f.read_text())
    rec = _bench_record(raw, spec["key"]) if "." not in spec["key"] else raw
    v = _walk(rec, spec["key"]) if rec is not None else None
    return (None if v is None else float(v)), f


def load(bench_dir=BENCH, path=DATA) -> RTLConstants:
    d = json.loads(Path(path).read_text())["constants"]
    vals, prov = {}, {}
    for name, spec in d.items():
        v, f = measured(name, spec, bench_dir)
        if v is not None:
            vals[name], prov[name] = v, f"RTL bench {f} [{spec['key']}]"
        else:
            vals[name] = spec["value"]
            prov[name] = (f"{Path(path).name}: {spec['source']}" if spec["value"] is not None
                          else f"derived by the model ({spec['source']})")
    from .pe_cycles import load_pe_cycles
    pc = load_pe_cycles(bench_dir)
    for k, v in (("pe_overhead_ppu", pc.overhead_ppu), ("pe_overhead_psum", pc.overhead_psum),
                 ("pe_weight_switch_cycles", pc.weight_switch_cycles)):
        vals[k], prov[k] = float(v), pc.source
    return RTLConstants(vals, prov)


def drift(bench_dir=BENCH, path=DATA, tol: float = TOL, arch_path=None) -> list[str]:
    """Constants whose committed value differs from the live RTL measurement (or from the
    copy other data files hold) by more than ``tol`` (relative).  ``arch_path``: the Simba
    model's data file (default ``data/simba_arch.json``), whose copies of RTL values (NoC hop,
    barrier master, PE-node tile start, credit loop, RTL chiplet defaults) are checked too."""
    d = json.loads(Path(path).read_text())["constants"]
    out = []
    for name, spec in d.items():
        v, f = measured(name, spec, bench_dir)
        c = spec["value"]
        if v is not None and c is not None and abs(v - c) > tol * max(abs(v), 1e-9):
            out.append(f"{name}: committed {c} vs RTL {v} ({f} [{spec['key']}])")
        if v is not None and c is None:
            out.append(f"{name}: measured {v} by the RTL ({f}) but null in {Path(path).name}: "
                       "commit the measurement")
    from .arch import load_arch
    a = load_arch(arch_path)                            # simba_arch.json alone
    for k in ("noc_hop_cycles", "barrier_cycles"):
        c = d[k]["value"]
        if abs(getattr(a, k) - c) > tol * c:
            out.append(f"{k}: simba_arch.json {getattr(a, k)} vs {Path(path).name} {c}")
    from .chiplet_cycles import ChipletCycles
    cc = ChipletCycles()
    for ak, ck in (("pe_tile_start_cycles", "tile_start_cycles"), ("credit_fixed_cycles", "credit_fixed_cycles")):
        if abs(getattr(a, ak) - getattr(cc, ck)) > tol * max(getattr(cc, ck), 1e-9):
            out.append(f"{ak}: simba_arch.json {getattr(a, ak)} vs chiplet_cycles.ChipletCycles.{ck} {getattr(cc, ck)}")
    try:
        from tessera.hdl.chiplet.config import ChipletConfig
    except ImportError:                                  # pragma: no cover
        ChipletConfig = None
    if ChipletConfig is not None:
        cfg = ChipletConfig()
        for ak, ck in (("psum_packet_beats", "psum_beats"), ("max_tile_words", "max_tile"),
                       ("credit_window_packets", "credit_window"), ("psum_window_packets", "psum_window")):
            if getattr(a, ak) != getattr(cfg, ck):
                out.append(f"{ak}: simba_arch.json {getattr(a, ak)} vs RTL ChipletConfig.{ck} {getattr(cfg, ck)}")
    for k in ("instr_cycles", "gpe_cmd_cycles", "host_flits_per_cycle", "send_flits_per_cycle"):
        if abs(getattr(cc, k) - d[k]["value"]) > tol * d[k]["value"]:
            out.append(f"{k}: chiplet_cycles.ChipletCycles {getattr(cc, k)} vs {Path(path).name} "
                       f"{d[k]['value']}")
    if bench_dir is not None and (Path(bench_dir) / "pe_utilization.json").exists():
        from .pe_cycles import load_pe_cycles
        live, committed = load_pe_cycles(bench_dir), load_pe_cycles(None)
        for k in ("overhead_ppu", "overhead_psum"):
            if abs(getattr(live, k) - getattr(committed, k)) > 0.5:
                out.append(f"PE {k}: committed {getattr(committed, k)} vs RTL fit {getattr(live, k)}")
        if abs(live.weight_switch_cycles - committed.weight_switch_cycles) > 0.01:
            out.append(f"PE weight_switch_cycles: committed {committed.weight_switch_cycles} vs RTL "
                       f"fit {live.weight_switch_cycles}")
    return out
