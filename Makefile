# jobstate: everything installs into .venv from nothing but python3 (3.11+), git and make.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help venv test test-loaded test-slow mutate demo lint bench verify clean allocate generate approve rework reassemble complete

help:
	@echo "make test   - create .venv, install jobstate with test extras, run pytest (all but the slow SIGKILL and concurrency loops)"
	@echo "             in random order (pytest-randomly prints the seed; replay an order with"
	@echo "             make test PYTEST_ARGS=--randomly-seed=SEED, or keep file order with PYTEST_ARGS='-p no:randomly');"
	@echo "             each test fails after 45 s unless it says why it needs longer (pytest-timeout);"
	@echo "             its files go to /dev/shm when it has 4 GiB free (TEST_TMPDIR=DIR chooses another place)"
	@echo "make test-loaded - make test while busy loops keep every core busy; prints the load it ran under"
	@echo "make test-slow - the SIGKILL loops, the crash sweep of every committing command and the many-process concurrency loops (CI runs them too)"
	@echo "make mutate - mutation testing (mutmut) of the rule modules against their fast tests; minutes each,"
	@echo "             not in CI: make mutate MODULES='model guard' (model guard transaction decision)"
	@echo "make demo   - run the demo in a throwaway repo"
	@echo "make lint   - ruff and mypy --strict"
	@echo "make bench  - performance figures, each ratio beside its target (under 3 minutes)"
	@echo "make bench FULL=1 - also the 10,000-episode multi-GB verify, a scaling table to 100,000 episodes and the layout at 1,000,000"

$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit("jobstate needs Python 3.11+") if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,lint]'
	touch $(STAMP)

venv: $(STAMP)

# a fast test does at most 20 CPU seconds of its own work (tests/conftest.py); more is a slow test, said so.
# The heaviest fast test does about 7 idle; CPU seconds grow on a busy 2-core machine (shared caches and cores),
# and CI once measured a nested pytest's timed-out cleanup at 12.6: 10 failed CI runs on noise, 20 does not.
# two xdist workers per core: most of a test's wall time is git and python children starting and files being
# synced, so a core left idle by one worker's wait is the other's (measured in the closing note of issue 27)
WORKERS ?= $(shell $(PYTHON) -c 'import os; print(2 * len(os.sched_getaffinity(0)))')

# the tests write many small files and fsync them: on a RAM file system a busy disk's writeback no longer
# decides the suite's time (a fresh clone, idle, one after the other: 101 s there, 136 s on this machine's
# disk). /dev/shm when it has 4 GiB free, else the system's temporary directory; TEST_TMPDIR=DIR chooses.
# Only the files of failed tests are kept (pyproject.toml: tmp_path_retention_policy), so RAM is given back.
TEST_TMPDIR ?= $(shell $(PYTHON) -c 'import os; s = os.statvfs("/dev/shm") if os.access("/dev/shm", os.W_OK) else None; print("/dev/shm" if s and s.f_bavail * s.f_frsize >= 4 << 30 else "")' 2>/dev/null)
TEST_ENV = $(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR))

test: $(STAMP)
	$(TEST_ENV) JOBSTATE_TEST_CPU_BUDGET=20 $(BIN)/python -m pytest -q -n $(WORKERS) -m "not slow" $(PYTEST_ARGS)

# make test while busy loops keep every core busy (what a shared or small machine does to the suite)
test-loaded: $(STAMP)
	$(BIN)/python tests/under_load.py -- $(MAKE) --no-print-directory test PYTEST_ARGS='$(PYTEST_ARGS)'

# the SIGKILL loops and the deterministic crash sweep (tests/test_crash_sweep.py, each command in parts: the xdist
# workers share the longest sweeps); CI runs them after make test
test-slow: $(STAMP)
	$(TEST_ENV) $(BIN)/python -m pytest -q -n $(WORKERS) -m slow $(PYTEST_ARGS)

# mutation testing on demand (not in CI): mutmut changes one module at a time on disk; leave the tree alone meanwhile
MODULES ?=
mutate: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[mutate]'
	$(BIN)/python tests/mutate.py $(MODULES)

demo: $(STAMP)
	$(BIN)/python -m jobstate_demo.demo

lint: $(STAMP)
	$(BIN)/ruff check jobstate jobstate_demo tests bench
	$(BIN)/ruff format --check jobstate jobstate_demo tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/run.py $(if $(filter-out 0,$(FULL)),--full) $(BENCH_ARGS)

# --- the weekly media pipeline, as a pipeline repo wraps jobstate -------------------------
# make allocate KEY=scheduled-run:2026-08-07 DATE=2026-08-07
# make generate EPISODE=2026-W32-0 VENDOR_URL=http://127.0.0.1:PORT [MAX_COST="12.40 USD" with a budget]
# make approve EPISODE=... BY=editor [REJECT=1 REASON=...]; make rework / reassemble / complete EPISODE=...
# make verify  (read-only check of this repository's state, as CI runs it)
JOBSTATE ?= $(BIN)/jobstate
REPO ?= .
VENDOR_URL ?= http://127.0.0.1:8765
VENDOR_STEP = $(BIN)/python -m jobstate_demo.vendor_sim step --url $(VENDOR_URL)
need = $(if $($(1)),,$(error $(1) is required, e.g. make $@ $(1)=...))
# with a budget in jobstate.yaml: make generate EPISODE=... MAX_COST="12.40 USD"
MAX_COST_ARG = $(if $(MAX_COST),--max-cost '$(MAX_COST)')

allocate: $(STAMP)
	$(call need,KEY)$(call need,DATE)$(JOBSTATE) allocate --repo $(REPO) --key '$(KEY)' --date '$(DATE)'

generate: $(STAMP)
	$(call need,EPISODE)$(JOBSTATE) run --repo $(REPO) --episode '$(EPISODE)' --step generate $(MAX_COST_ARG) -- $(VENDOR_STEP) --kind generate --artifact final.txt

approve: $(STAMP)
	$(call need,EPISODE)$(call need,BY)$(JOBSTATE) approve --repo $(REPO) --episode '$(EPISODE)' --by '$(BY)' $(if $(REJECT),--reject --reason '$(REASON)')

rework: $(STAMP)
	$(call need,EPISODE)$(JOBSTATE) run --repo $(REPO) --episode '$(EPISODE)' --step rework $(MAX_COST_ARG) -- $(VENDOR_STEP) --kind rework --artifact rework.txt

reassemble: $(STAMP)
	$(call need,EPISODE)$(JOBSTATE) run --repo $(REPO) --episode '$(EPISODE)' --step reassemble $(MAX_COST_ARG) -- $(VENDOR_STEP) --kind reassemble --price 0.85 --artifact final-v2.txt

verify: $(STAMP)
	$(JOBSTATE) verify --repo $(REPO) --rev $(or $(REV),HEAD) $(if $(AGAINST),--against $(AGAINST))

complete: $(STAMP)
	$(call need,EPISODE)$(JOBSTATE) complete --repo $(REPO) --episode '$(EPISODE)'

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .mutmut-cache html
