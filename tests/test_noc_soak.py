"""Soak: mixed traffic (random lengths 1..4, ~10% multicast, random back-pressure at every
sink) through a Verilated 4x4 mesh with hardware checkers (tessera.tb.noc.traffic); after the
generators stop the network must drain.  Reports lost / duplicated / reordered / deadlocked.
``make soak`` (pytest -m slow) pushes >= 1,000,000 flits and writes its report to
build/soak/noc_soak.json (the Makefile prints it); the default suite runs a short version."""
import json

import pytest

from tessera.tb.runner import BUILD
from tessera.tb.noc.traffic import run_traffic


def soak(cycles):
    pts = [{"rate": 3000, "plen": 0, "mcast": 26, "sink_ready": 200, "warmup": 100,
            "cycles": cycles, "drain": 5000}]
    rec = run_traffic(4, 2, 4, pts, check=True)[0]
    d = rec["drained"]
    uni_inj = d["inj_pkts"] - d["mc_inj"]
    due, got = uni_inj + d["mcast_due"], d["rcv_pkts"] + d["mcast_rcv"]
    report = {"flits_delivered": d["rcv_flits"], "lost": max(0, due - got),
              "duplicated": max(0, got - due), "reordered_or_gap": d["seq_err"] + d["mseq_err"],
              "deadlock": int(d["gen_pkts"] != d["inj_pkts"] or due != got),
              "router_errors": d["errors"]}
    print("soak:", report)
    return report


def _check(r, min_flits):
    assert r["flits_delivered"] >= min_flits
    assert {k: r[k] for k in ("lost", "duplicated", "reordered_or_gap", "deadlock",
                              "router_errors")} == {"lost": 0, "duplicated": 0,
                                                    "reordered_or_gap": 0, "deadlock": 0,
                                                    "router_errors": 0}


@pytest.mark.slow
def test_soak_short():
    """8,000 cycles of traffic, then the drain: the same checks as the million-flit soak, in
    ``make soak`` (make test budget, stop 30: ~60 CPU-s, nearly all of it the 4x4 mesh's
    Verilator build); make test keeps the default router's 2x2 mesh drain check in
    amaranth.sim (tests/test_noc_sa2_sim.py)."""
    _check(soak(8000), 16000)


@pytest.mark.slow
def test_soak_million_flits():
    r = soak(360000)
    out = BUILD / "soak" / "noc_soak.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(r, indent=2) + "\n")
    _check(r, 1_000_000)
