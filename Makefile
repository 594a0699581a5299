# Trainyard. The two commands: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint format messages bench chaos docs-screenshots clean help

help:
	@echo "make run    start Trainyard on the embedded default (SQLite, no broker server, kubesim)"
	@echo "make test   install test dependencies and run the whole suite"
	@echo "make lint   ruff and mypy"
	@echo "make bench  run the benchmarks in bench/"
	@echo "make chaos  the production-like stack under load while things break (Postgres, Redis; ~15 min)"

UV_VERSION := 0.13.9

# The venv gets uv, which installs the pinned dependencies in about 5 s where pip takes
# about 35 s (measured on a fresh machine with empty caches); pip is the fallback when
# uv cannot be installed.
$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Trainyard needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	-@$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION) 2>/dev/null \
	  || echo "uv unavailable: installing with pip"

INSTALL = if [ -x $(BIN)/uv ]; then $(BIN)/uv pip install --quiet --python $(BIN)/python $(1); \
	else $(BIN)/python -m pip install --quiet --disable-pip-version-check $(1); fi

# Reinstalls whenever pyproject.toml changes.
$(STAMP)-run: pyproject.toml | $(BIN)/python
	@echo "Installing Trainyard's dependencies into $(VENV) ..."
	@$(call INSTALL,-e .)
	@touch $@

$(STAMP)-dev: pyproject.toml | $(BIN)/python
	@echo "Installing Trainyard's test dependencies into $(VENV) ..."
	@$(call INSTALL,-e '.[dev]')
	@touch $@ $(STAMP)-run

run: $(STAMP)-run
	$(BIN)/python -m portal.launcher

# The suite runs on TEST_WORKERS pytest-xdist workers (default: one per CPU plus one, since
# the browser tests wait on chromium and the live server for about 40% of their time), each
# with its own test database and Redis database; TEST_WORKERS=0 (or xdist not installed) runs
# it in one process. PYTEST_ARGS go to pytest either way, e.g. PYTEST_ARGS="-x jobs".
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
XDIST = $(shell [ "$(TEST_WORKERS)" != "0" ] && $(BIN)/python -c 'import xdist' 2>/dev/null \
	&& echo "-n $(TEST_WORKERS) --dist loadgroup")

test: $(STAMP)-dev
	@bash scripts/ensure-kubectl.sh || echo "kubectl unavailable: kubectl tests will be skipped"
	@bash scripts/ensure-test-tools.sh
	@bash scripts/ensure-torch.sh $(BIN)/python
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

lint: $(STAMP)-dev
	$(BIN)/ruff check .
	DEBUG=true $(BIN)/mypy core portal tenants jobs billing k8s_sync kubesim

format: $(STAMP)-dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Rebuild the catalogues (django.po for Python and templates, djangojs.po for static/js)
# and compile them after editing locale/*/LC_MESSAGES/*.po.
messages: $(STAMP)-run
	DEBUG=true $(BIN)/python manage.py makemessages -l zh_Hans --no-obsolete --ignore '.venv/*' --ignore 'var/*' --ignore 'kubesim/*' --ignore 'staticfiles/*' --ignore 'bench/*'
	DEBUG=true $(BIN)/python manage.py makemessages -d djangojs -l zh_Hans --no-obsolete --ignore '.venv/*' --ignore 'var/*' --ignore 'staticfiles/*' --ignore 'static/vendor/*'
	DEBUG=true $(BIN)/python manage.py compilemessages -l zh_Hans

# kueue_stack.py runs Kueue's full 15,000-job scenario through the stack (--scale 1) on
# SQLite in the loop, then on Postgres at BENCH_DATABASE_URL (recreated; skipped when no
# server answers there).
BENCH_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/trainyard_bench_stack
bench: $(STAMP)-dev
	@for f in bench/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done
	@if pg_isready -q -h 127.0.0.1 2>/dev/null; then echo "== bench/kueue_stack.py (Postgres)"; \
	  DATABASE_URL=$(BENCH_DATABASE_URL) $(BIN)/python bench/kueue_stack.py --scale 1 || exit 1; \
	else echo "== bench/kueue_stack.py (Postgres): no Postgres on 127.0.0.1, skipped"; fi

# Not part of `make test`: about 10 minutes of load and injected failures on this machine's
# Postgres (database trainyard_chaos) and its own redis-server, then the invariants.
# CHAOS_ARGS="--minutes 3" for a shorter run.
chaos: $(STAMP)-dev
	$(BIN)/python scripts/chaos.py $(CHAOS_ARGS)

# The screenshots of the guides in docs/: the browser tests (tests/e2e) save them, under
# fixed names, into docs/img when TRAINYARD_DOCS_SCREENSHOTS is set.
docs-screenshots: $(STAMP)-dev
	@bash scripts/ensure-test-tools.sh
	TRAINYARD_DOCS_SCREENSHOTS=docs/img $(BIN)/python -m pytest tests/e2e -m e2e

clean:
	rm -rf var staticfiles .pytest_cache .mypy_cache .ruff_cache
