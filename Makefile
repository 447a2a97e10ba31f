# Two commands do all the set-up on a fresh machine:
#   make        create .venv if missing, install the locked dependencies and the package, run the pipeline
#               on the embedded default (params.yaml) through Snakemake, ending with the report
#   make test   the same set-up, then the test suite
# and a few more: `make docs` (the guide, into site/), `make lint`, `make lock`, `make preset NAME=...`.
SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
CORES ?= 2
# `make test` runs the suite on this many pytest-xdist workers (tests/conftest.py says how it is split); 0: one
# process
TEST_WORKERS ?= 2
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

# What `make` shows of Snakemake's output: its progress without the job listings (workflow/scripts/
# progress_filter.py says why Snakemake's --quiet cannot); the complete log, every job listed, is Snakemake's
# own .snakemake/log/<date>.snakemake.log, named in the last lines. SNAKEMAKE_FILTER=cat shows everything.
SNAKEMAKE_FILTER ?= $(BIN)/python workflow/scripts/progress_filter.py

# pip's log level while installing: -qq shows errors only (pip's -q is additive: warnings, errors, critical).
# A single -q printed a warning per package and index where a configured index (an extra-index-url of local
# mirrors) lacks that package, "Location '...' is ignored: it is neither a file nor a directory", 277 lines
# on a machine set up that way; errors, a failed resolve among them, still show. PIP_QUIET=-q shows warnings.
PIP_QUIET ?= -qq

.PHONY: all pipeline test test-recipe test-inductor lint lock preset docs docs-pictures clean-results

all: pipeline

# The venv is rebuilt only when the lock or the package metadata change.
$(INSTALLED): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install $(PIP_QUIET) --no-compile torch==2.13.0   # first, alone: an unpinned resolve pulls CUDA
	$(BIN)/pip install $(PIP_QUIET) --no-compile -r requirements.lock
	$(BIN)/pip install $(PIP_QUIET) --no-deps -e .
	@# Bytecode for every module, on every core (pip compiles on one); like pip, skip what this Python
	@# cannot compile. Without it, each process compiles what it imports (each time, with
	@# PYTHONDONTWRITEBYTECODE set).
	$(BIN)/python -m compileall -qq -j 0 $(VENV)/lib || true
	touch $@

# After Snakemake, in a git repository with DVC (this project's own clone): the run recorded in dvc.lock
# (`dvc commit --force`), so that `dvc status`, like `snakemake -n`, names nothing (docs/provenance.md,
# "Why Snakemake and DVC agree"). It hashes every output and copies the cached ones into .dvc/cache: on the
# default grid (1.8 GB of checkpoints) about 40 s on a loaded 2-core machine, 28 s where the cache already
# holds them. Without it, `dvc status` named every stage (~1,500 lines) while Snakemake had nothing to do.
pipeline: $(INSTALLED)
	$(BIN)/ngptlab plan --write results/plan.json
	set -o pipefail; PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake --cores $(CORES) 2>&1 | $(SNAKEMAKE_FILTER)
	@if [ -d .dvc ] && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	  $(BIN)/dvc commit --force --quiet && echo "recorded the run in dvc.lock (dvc commit --force)"; fi

test: $(INSTALLED)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -n $(TEST_WORKERS) --no-loadscope-reorder $(PYTEST_ARGS)

# The cluster page's recipe on the rehearsal preset (tests/test_cluster_recipe.py), through the Slurm and SSH
# server that .ci/setup-slurm.sh and .ci/setup-sshd.sh start: an hour or more on two cores (docs/tests.md), so not in `make test`.
test-recipe: $(INSTALLED)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -m recipe tests/test_cluster_recipe.py $(PYTEST_ARGS)

# Every arm through inductor's CPU code generation (tests/test_compile.py): about 3 minutes on two cores with
# a cold cache, so not in `make test`, which compiles every arm with AOT autograd's eager backend.
test-inductor: $(INSTALLED)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -m inductor tests/test_compile.py $(PYTEST_ARGS)

lint: $(INSTALLED)
	$(BIN)/ruff check src tests
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake --lint

lock: $(INSTALLED)
	{ head -3 requirements.lock; $(BIN)/pip freeze --exclude-editable | sed 's/^torch==2.13.0+cpu$$/torch==2.13.0/'; } > requirements.lock.tmp
	mv requirements.lock.tmp requirements.lock

# Apply a preset (workflow/presets/NAME.yaml) for both snakemake and dvc repro: params.yaml and the grid file.
# The params.yaml it replaces is kept as params.yaml.previous. Two names are not files of workflow/presets/:
# NAME=default, the embedded default (the params.yaml of the checked-out commit, `git show HEAD:params.yaml`),
# and NAME=previous, the params.yaml.previous kept by the last `make preset` (it swaps the two).
preset: $(INSTALLED)
	@set -e; \
	case "$(NAME)" in \
	  default) src=.params.default.yaml; git show HEAD:params.yaml > $$src ;; \
	  previous) test -f params.yaml.previous || { echo "make preset: no params.yaml.previous to go back to"; exit 2; }; \
	            src=.params.default.yaml; cp params.yaml.previous $$src ;; \
	  *) src=workflow/presets/$(NAME).yaml; \
	     test -f $$src || { echo "no preset '$(NAME)'; have: $$(ls workflow/presets) (and default, previous)"; exit 2; } ;; \
	esac; \
	$(BIN)/ngptlab plan --params $$src --write results/plan.json; \
	if cmp -s $$src params.yaml; then echo "make preset: params.yaml is already $(NAME)"; \
	else cp params.yaml params.yaml.previous; cp $$src params.yaml; \
	  echo "make preset: params.yaml is now $(NAME); the params.yaml it replaced is params.yaml.previous"; \
	  echo "  (back: make preset NAME=previous; the embedded default: make preset NAME=default)"; fi; \
	rm -f .params.default.yaml

# The researcher's guide (mkdocs.yml, docs/): strict, so a broken link or a page missing from the nav fails;
# the reference pages are generated from the code as it builds (docs/hooks.py).
# The guide's pictures of the report (docs/images/), from the report `make` rendered: after a change to it.
docs-pictures: $(INSTALLED)
	$(BIN)/python workflow/scripts/docs_pictures.py reports docs/images

docs: $(INSTALLED)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
