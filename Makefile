# Two commands do all the set-up on a fresh machine:
#   make        create .venv if missing, install the locked dependencies and the package, run the pipeline
#               on the embedded default (params.yaml) through Snakemake, ending with the report
#   make test   the same set-up, then the test suite
SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
CORES ?= 2
# `make test` runs the suite on this many pytest-xdist workers (tests/conftest.py says how it is split); 0: one
# process
TEST_WORKERS ?= 2
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: all pipeline test lint lock preset clean-results

all: pipeline

# The venv is rebuilt only when the lock or the package metadata change.
$(INSTALLED): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --no-compile torch==2.13.0   # first, alone: an unpinned resolve pulls CUDA
	$(BIN)/pip install --quiet --no-compile -r requirements.lock
	$(BIN)/pip install --quiet --no-deps -e .
	@# Bytecode for every module, on every core (pip compiles on one); like pip, skip what this Python
	@# cannot compile. Without it, each process compiles what it imports (each time, with
	@# PYTHONDONTWRITEBYTECODE set).
	$(BIN)/python -m compileall -qq -j 0 $(VENV)/lib || true
	touch $@

pipeline: $(INSTALLED)
	$(BIN)/ngptlab plan --write results/plan.json
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake --cores $(CORES)

test: $(INSTALLED)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -n $(TEST_WORKERS) --no-loadscope-reorder $(PYTEST_ARGS)

lint: $(INSTALLED)
	$(BIN)/ruff check src tests
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake --lint

lock: $(INSTALLED)
	{ head -3 requirements.lock; $(BIN)/pip freeze --exclude-editable | sed 's/^torch==2.13.0+cpu$$/torch==2.13.0/'; } > requirements.lock.tmp
	mv requirements.lock.tmp requirements.lock

# Apply a preset (workflow/presets/NAME.yaml) for both snakemake and dvc repro: params.yaml and the grid file.
preset: $(INSTALLED)
	test -f workflow/presets/$(NAME).yaml || { echo "no preset '$(NAME)'; have: $$(ls workflow/presets)"; exit 2; }
	$(BIN)/ngptlab plan --params workflow/presets/$(NAME).yaml --write results/plan.json
	cp workflow/presets/$(NAME).yaml params.yaml
