# The two set-up commands: `make run` and `make test`. Each creates .venv when missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEV    := $(VENV)/.installed-dev

.PHONY: run test test-all ui lint bench clean-runs chromium data

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch is pinned to the CPU wheel (a plain `torch` pulls a multi-GB CUDA build). Modules are
# compiled once after install, on every core (pip compiles them one by one: 3.6 -> 2.0 min to
# build .venv on the 2-core machine, 2026-11-28). They must be: where PYTHONDONTWRITEBYTECODE
# is set, as on this project's machines, a module without its .pyc is compiled again by every
# process that imports it (14 s of a 90 s sweep under load, 2026-11-29). A file that does not
# compile (torch ships some for newer Pythons) is compiled, or fails, where it is imported.
COMPILE = $(BIN)/python -m compileall -q -q -j 0 \
	$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
	arag metrics runners report labelling tracking hydra_plugins run.py || true
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --no-compile torch==2.13.0
	$(BIN)/pip install --quiet --no-compile -e .
	$(COMPILE)
	touch $@

$(DEV): $(STAMP)
	$(BIN)/pip install --quiet --no-compile -e '.[dev]'
	$(COMPILE)
	touch $@

# the browser test drives Debian's chromium (never a downloaded browser build); as root,
# `make test` installs it with apt and says so; CHROMIUM=no skips that (the test then skips)
CHROMIUM ?= yes
chromium:
	@[ "$(CHROMIUM)" = no ] || command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  { if [ "$$(id -u)" = 0 ]; then \
	      echo "installing Debian's chromium for the browser test (apt-get; to skip: make test CHROMIUM=no)" && \
	      apt-get update -qq && \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	    else echo "chromium missing: the browser test will be skipped (apt-get install chromium)"; fi; }

run: $(STAMP)
	$(BIN)/python run.py -m system=arag,naive,stuffing dataset=sample

# the fast suite (3 minutes on 2 cores, 2026-11-29, nothing else running; ~10 on 2026-11-27, the
# machine shared); with CI set, or `make test-all`, the slow end-to-end sweeps too (.ci/run runs them
# on both cores with -n 2, a math thread per worker: 17.3 minutes of tests on this 2-core
# machine, 2026-12-02, 1,303 tests from a fresh clone with nothing else running; 20.2 minutes for
# the whole of .ci/run, its install included; 39 on 2026-12-02 with the machine shared)
test: $(DEV) chromium
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-all: $(DEV) chromium
	$(BIN)/python -m pytest --runslow $(PYTEST_ARGS)

# ruff over the whole tree, mypy over the packages, import-linter over their layering
# (runners > report > labelling > tracking > metrics > arag, no cycles; pyproject.toml)
lint: $(DEV)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# the MLflow UI over the default store: make ui PORT=5001 for another port; with
# ARAG_UI_PORT exported, make ui serves there and every address and trace link we print follows;
# make ui STORE=sqlite:///X/mlflow.db for a store of your own (the address a run prints says so)
PORT ?= $(or $(ARAG_UI_PORT),5000)
STORE ?= sqlite:///mlruns/mlflow.db
# a port already taken is said with the fix (ARAG_UI_PORT), not MLflow's Errno 98
ui: $(STAMP)
	@$(BIN)/python -m tracking.ui_port $(PORT)
	$(BIN)/mlflow ui --backend-store-uri $(STORE) --host 127.0.0.1 --port $(PORT)

# link the real datasets of a checkout that has ../shared/datasets beside it into
# data/datasets/ (git-ignored, never committed: a fresh clone has no link), where the dataset
# configs look; elsewhere, say where to clone each one (docs/datasets.md: Real datasets).
# Exits non-zero only when it found none of them. A data/datasets link left by an older
# checkout (it was committed once) is replaced by a folder of per-dataset links.
SHARED_DATA ?= ../shared/datasets
UPSTREAM_ectsum       := https://github.com/rajdeep345/ECTSum
UPSTREAM_financebench := https://github.com/patronus-ai/financebench
UPSTREAM_summedits    := https://github.com/salesforce/factualNLG
data:
	@if [ -L data/datasets ]; then rm data/datasets && echo "data/datasets: replaced the old link by a folder"; fi
	@mkdir -p data/datasets
	@found=0; for d in ectsum financebench summedits; do \
	  case $$d in ectsum) url=$(UPSTREAM_ectsum);; financebench) url=$(UPSTREAM_financebench);; \
	    *) url=$(UPSTREAM_summedits);; esac; \
	  if [ -L data/datasets/$$d ] && [ ! -e data/datasets/$$d ]; then rm data/datasets/$$d; fi; \
	  if [ -e data/datasets/$$d ]; then echo "data/datasets/$$d: already there"; found=1; \
	  elif [ -d $(SHARED_DATA)/$$d ]; then \
	    case "$(SHARED_DATA)" in /*) src=$(SHARED_DATA)/$$d;; *) src=../../$(SHARED_DATA)/$$d;; esac; \
	    ln -s $$src data/datasets/$$d && found=1 && \
	    echo "data/datasets/$$d -> $(SHARED_DATA)/$$d"; \
	  else echo "data/datasets/$$d: not in $(SHARED_DATA); to get it: git clone $$url data/datasets/$$d"; fi; \
	done; \
	if [ $$found = 0 ]; then echo "make data: no dataset found in $(SHARED_DATA). Fix: clone them into data/datasets/ (the lines above; docs/datasets.md: Real datasets), or make data SHARED_DATA=<folder holding ectsum/ financebench/ summedits/>" >&2; exit 1; fi

clean-runs:
	rm -rf mlruns/mlflow.db mlruns/artifacts data/runs outputs multirun
