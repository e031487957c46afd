"""Several cocotb testcases in one simulator process (tessera.tb.runner.run_cases / run_case):
the test filter selects exactly the named cases, each case's outcome and message come from
cocotb's results file (a missing case is a failure), and under pytest every item still passes
or fails by its own case -- with the case's name and assertion message -- while the simulator
runs once; a crash re-runs each case alone, a failed build fails every sibling.  Pure Python
(the simulator is replaced by stubs); the Verilator path is exercised by tests/test_pe_rtl.py."""
import re
from types import SimpleNamespace

import pytest

from tessera.tb import runner
from tessera.tb.runner import BuildError, CaseResult, SimulatorCrash, case_filter, read_results

MOD = "tessera.tb.pe.test_pe"

RESULTS = f"""<?xml version='1.0' encoding='utf-8'?>
<testsuites name="results"><testsuite name="all" package="all">
<testcase classname="{MOD}" name="directed" time="1.0"><properties/></testcase>
<testcase classname="{MOD}" name="illegal" time="1.0"><failure message="cause for {{'R': 0}}: got 3, expected 1" type="AssertionError">Traceback: line 275, in illegal</failure><properties/></testcase>
<testcase classname="{MOD}" name="latency" time="0"><error message="Test initialization failed"/><properties/></testcase>
<testcase classname="{MOD}" name="bench" time="0"><skipped/><properties/></testcase>
</testsuite></testsuites>
"""


def test_case_filter_selects_exactly_the_named_cases():
    f = re.compile(case_filter(MOD, ["latency", "random_tiles"]))
    assert f.search(f"{MOD}.latency") and f.search(f"{MOD}.random_tiles")
    for other in (f"{MOD}.latency_wide", f"{MOD}.random_tiles2", f"{MOD}.demo",
                  f"{MOD}_x.latency", f"tessera.tb.pe.test_pe_chain.latency", f"x.{MOD}.latency"):
        assert not f.search(other), other


def test_read_results_outcome_and_message_per_case(tmp_path):
    path = tmp_path / "results.xml"
    path.write_text(RESULTS)
    r = read_results(path, ["directed", "illegal", "latency", "bench", "chain3"])
    assert {k: v.outcome for k, v in r.items()} == {
        "directed": "passed", "illegal": "failed", "latency": "error", "bench": "skipped",
        "chain3": "missing"}
    assert "cause for {'R': 0}: got 3, expected 1" in r["illegal"].message
    assert "line 275, in illegal" in r["illegal"].message
    assert [k for k, v in r.items() if v.ok] == ["directed"]


def _items(cases, params):
    """Stub pytest items: test_pe[<params>-<case>] for every (params, case)."""
    return [SimpleNamespace(callspec=SimpleNamespace(params={"params": p, "testcase": c}),
                            originalname="test_pe", path="tests/test_pe_rtl.py")
            for p in params for c in cases]


def _request(item, items):
    return SimpleNamespace(node=item, session=SimpleNamespace(items=items))


@pytest.fixture
def sim(monkeypatch):
    """Stub simulator: records every run_cases / run call; ``sim.outcome`` decides the result."""
    calls = SimpleNamespace(batches=[], alone=[], outcome={})
    monkeypatch.setattr(runner, "_SHARED", {})

    def run_cases(block, params, module, names, **kw):
        calls.batches.append((params["n"], list(names)))
        if isinstance(calls.outcome, Exception):
            raise calls.outcome
        return {n: CaseResult(n, *calls.outcome.get(n, ("passed", ""))) for n in names}

    monkeypatch.setattr(runner, "run_cases", run_cases)
    monkeypatch.setattr(runner, "run", lambda block, params, module, testcase, **kw:
                        calls.alone.append(testcase))
    return calls


def _run_all(items, sim_outcome, sim):
    sim.outcome = sim_outcome
    out = {}
    for it in items:
        p, c = it.callspec.params["params"], it.callspec.params["testcase"]
        try:
            runner.run_case(_request(it, items), "pe", p, MOD, c)
            out[(p["n"], c)] = "passed"
        except AssertionError as e:
            out[(p["n"], c)] = str(e)
        except BuildError as e:
            out[(p["n"], c)] = f"build: {e}"
    return out


def test_run_case_one_simulator_per_parameter_set_each_item_by_its_case(sim):
    items = _items(["directed", "illegal", "latency"], [{"n": 1}, {"n": 2}])
    out = _run_all(items, {"illegal": ("failed", "cause for {'R': 0}: got 3, expected 1")}, sim)
    assert sim.batches == [(1, ["directed", "illegal", "latency"]),
                           (2, ["directed", "illegal", "latency"])] and sim.alone == []
    bad = {k: v for k, v in out.items() if v != "passed"}
    assert set(bad) == {(1, "illegal"), (2, "illegal")}
    assert f"{MOD}.illegal failed" in bad[(1, "illegal")]
    assert "cause for {'R': 0}: got 3, expected 1" in bad[(1, "illegal")]


def test_run_case_only_the_selected_siblings(sim):
    items = _items(["directed", "latency"], [{"n": 1}])           # (e.g. -k deselected the rest)
    assert _run_all(items, {}, sim) == {(1, "directed"): "passed", (1, "latency"): "passed"}
    assert sim.batches == [(1, ["directed", "latency"])]


def test_run_case_missing_case_fails_by_name(sim):
    items = _items(["directed", "latency"], [{"n": 1}])
    out = _run_all(items, {"latency": ("missing", "not run by the simulator")}, sim)
    assert out[(1, "directed")] == "passed" and f"{MOD}.latency missing" in out[(1, "latency")]


def test_run_case_crash_reruns_each_case_alone(sim):
    items = _items(["directed", "illegal"], [{"n": 1}])
    _run_all(items, SimulatorCrash("Process terminated with error -11"), sim)
    assert len(sim.batches) == 1 and sim.alone == ["directed", "illegal"]


def test_run_case_build_failure_fails_every_sibling_building_once(sim):
    items = _items(["directed", "illegal"], [{"n": 1}])
    out = _run_all(items, BuildError("verilator: %Error"), sim)
    assert len(sim.batches) == 1 and sim.alone == []
    assert out == {(1, "directed"): "build: verilator: %Error",
                   (1, "illegal"): "build: verilator: %Error"}
