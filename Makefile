# jobstate: everything installs into .venv from nothing but python3 (3.11+), git and make.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help venv test demo lint bench verify clean allocate generate approve rework reassemble complete

help:
	@echo "make test   - create .venv, install jobstate with test extras, run pytest"
	@echo "make demo   - run the demo in a throwaway repo"
	@echo "make lint   - ruff and mypy --strict"
	@echo "make bench  - performance figures"

$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit("jobstate needs Python 3.11+") if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,lint]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

demo: $(STAMP)
	$(BIN)/python -m jobstate.demo

lint: $(STAMP)
	$(BIN)/ruff check jobstate tests bench
	$(BIN)/ruff format --check jobstate tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
