# The two commands a newcomer needs: `make demo` and `make test`. Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip install -q --disable-pip-version-check
# The demo needs only the runtime dependencies; the tests add the dev tools on top.
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed-dev

# A real kube-apiserver and etcd for the Kubernetes tests, built from Debian's packages (about 5 minutes, once).
KAS_HOME ?= $(HOME)/.cache/kube-apiserver-1.20.2
export KAS_HOME

.PHONY: demo demo-mechanisms test lint typecheck unit kube-apiserver postgres chromium bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(PIP) -e .
	touch $@

$(STAMP): pyproject.toml | $(BIN)/python
	$(PIP) -e '.[dev]'
	touch $@ $(RUN_STAMP)

demo: $(RUN_STAMP)
	$(BIN)/tidegate simulate examples/hybrid-idc/ --out out/

# The burst month with every mechanism on, on demand, and with each mechanism off in turn.
demo-mechanisms: $(RUN_STAMP)
	$(BIN)/tidegate simulate examples/hybrid-idc/ examples/hybrid-idc-mechanisms/ --name hybrid-idc-mechanisms --out out/mechanisms/

lint: $(STAMP)
	$(BIN)/ruff check tidegate tests bench
	$(BIN)/ruff format --check tidegate tests bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

kube-apiserver:
	tools/build-kube-apiserver

# Debian's PostgreSQL server, for the store's tests on PostgreSQL (installed only when missing).
postgres:
	tools/install-postgres

# Debian's Chromium, for the dashboard's and the report's Playwright tests (installed only when missing;
# Playwright never downloads a browser of its own).
chromium:
	tools/install-chromium

# Every test runs: the Kubernetes, PostgreSQL and browser ones fail (not skip) without what they need.
unit: $(STAMP) kube-apiserver postgres chromium
	TIDEGATE_REQUIRE_KUBE=1 TIDEGATE_REQUIRE_POSTGRES=1 TIDEGATE_REQUIRE_BROWSER=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 $(BIN)/pytest

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python -m bench.run_all
	$(BIN)/python -m bench.sweep

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
