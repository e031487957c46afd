"""Schedule of the suite under pytest-xdist (``make test``: ``-n 2 --dist loadgroup
--no-loadscope-reorder``), from the timing record ``tests/durations.json``
(tessera.pytest_cpu; ``make durations`` regenerates it).

* Tests that ran the same Verilator build (one parameter set, one build dir) get one
  ``xdist_group``: they run on one worker, after its one build, and the other worker never
  waits on that build's lock.  A test file's own ``xdist_group`` (cocotb cases that share one
  simulator process, tessera.tb.runner.run_case) takes precedence.
* Work units (a group or a single test) are ordered longest first (recorded CPU seconds), so
  the long cosimulations start at once and the short tests fill the end; tests missing from
  the record (new ones) count as 2 s and keep their file order.

Only the order and the worker placement change: every test is collected and run as before.

The suite's Verilated models are compiled at ``-O0`` (``TESSERA_SIM_OPT``, read by
tessera.tb.runner.run; build dirs ``obj_O0``, shared with ``make demo``): the cosimulations are
bound by cocotb's Python side, so the C++ build is most of a model's cost; the benches keep
Verilator's optimised default.  Build infrastructure: no paper section, no model.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("TESSERA_SIM_OPT", "-O0")

DURATIONS = Path(__file__).with_name("durations.json")
NEW_TEST_S = 2.0


_RECORD = None


def _record() -> dict:
    global _RECORD
    if _RECORD is None:
        try:
            _RECORD = json.loads(DURATIONS.read_text())["tests"]
        except (OSError, ValueError, KeyError):
            _RECORD = {}
    return _RECORD


def _build(nodeid: str) -> str:
    return _record().get(nodeid, {}).get("build", "").split("/")[0]     # <block>-<param hash>


def _group(item) -> str:
    """The item's ``xdist_group`` name ('' if none)."""
    m = item.get_closest_marker("xdist_group")
    return str(m.args[0] if m.args else m.kwargs.get("name", "default")) if m else ""


def pytest_itemcollected(item):
    # (here, not in modifyitems: xdist's worker turns the mark into the '@group' nodeid
    # suffix in its own modifyitems hook, which may run first).  A group the test file gives
    # (cases sharing one simulator process, tessera.tb.runner.run_case) is kept as it is.
    build = _build(item.nodeid)
    if build and not _group(item):
        item.add_marker(pytest.mark.xdist_group(build))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    rec = _record()
    if not rec:
        return
    unit_of, cost = {}, {}
    for it in items:
        nodeid = it.nodeid.split("@")[0]
        r = rec.get(nodeid, {})
        group = _group(it)
        unit = f"group:{group}" if group else nodeid
        unit_of[it.nodeid] = unit
        cost[unit] = cost.get(unit, 0.0) + float(r.get("cpu_s", NEW_TEST_S))
    first = {}
    for i, it in enumerate(items):
        first.setdefault(unit_of[it.nodeid], i)
    order = {id(it): i for i, it in enumerate(items)}
    items.sort(key=lambda it: (-cost[unit_of[it.nodeid]], first[unit_of[it.nodeid]], order[id(it)]))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session):
    """The ``@group`` nodeid suffix that xdist's loadgroup scheduler groups by.  xdist 3.8 sets
    it by writing ``item._nodeid``, which pytest 9 no longer reads (structured node ids), so
    every test would run as its own unit (pytest-dev/pytest-xdist#1386, fix pending in #1388);
    set it here, before the worker reports its collection."""
    if not getattr(session.config.option, "loadgroup", False):      # (set on xdist workers)
        return
    for item in session.items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if not names or "@" in item.nodeid:
            continue
        nodeid = f"{item.nodeid}@{'_'.join(names)}"
        if hasattr(item, "_id"):
            from _pytest.nodes import coerce_node_id
            item._id = coerce_node_id(nodeid)
        else:
            item._nodeid = nodeid
