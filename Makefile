# recsys: set up, test, lint, and run the main job (train on the default data, then serve).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test test-all lint up clean

install: $(STAMP)

# Re-runs only when the dependency spec or the lock changes; torch goes in first (whichever
# build pip's configured index serves: a CPU one on our machines) so nothing later pulls another.
# A venv that cannot run pip or is older than Python 3.11 (a failed or stale create) is made again.
$(STAMP): pyproject.toml constraints.txt
	$(BIN)/python -c 'import sys, pip; assert sys.version_info >= (3, 11)' 2>/dev/null \
		|| { rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); }
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# Two worker processes, one per core of the 2-core machine it is sized for; a test file's tests
# stay in one worker, so a module's fixtures are built once.
test: install
	$(BIN)/python -m pytest -q -m "not slow" -n 2 --dist loadfile

test-all: install
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check app data model recsys training serving tests benchmarks scripts
	$(BIN)/mypy

# The main job: train on the default data (unless a model is already published), then serve
# on $RECSYS_PORT (default 8000). RECSYS_HOME picks the workspace; RECSYS_RETRAIN=1 retrains.
up: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/up.sh

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
