# Targets named in README.md. `make test` is what CI runs (.ci/run).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Everything ruff and mypy check: the proxy, its tests, idemproxy-events and the examples.
PY_SOURCES := src tests packages/idemproxy-events/src examples
# The share of src/idemproxy the suite runs (the served child processes included): the test
# target fails below it. Raise it as coverage grows; never lower it.
COVERAGE_MIN := 96

.PHONY: install dev test lint typecheck unit serve bench soak clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip

install: $(BIN)/python  ## the proxy alone
	$(BIN)/pip install --quiet --disable-pip-version-check -e .

dev: $(BIN)/python  ## the proxy plus everything the tests and checks use
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,deploy,sdk]'
	scripts/install-deploy-tools.sh $(VENV)
	scripts/install-browser.sh $(VENV)

lint: dev
	$(BIN)/ruff check $(PY_SOURCES)
	$(BIN)/ruff format --check $(PY_SOURCES)

typecheck: dev
	$(BIN)/mypy $(PY_SOURCES)

unit: dev
	$(BIN)/pytest -q -m "not redis and not e2e"

test: dev  ## lint, types, and the whole suite against a real Redis and the reference Bluesky PDS
	scripts/ensure-redis.sh
	scripts/ensure-pds.sh >/dev/null
	$(BIN)/ruff check $(PY_SOURCES)
	$(BIN)/ruff format --check $(PY_SOURCES)
	$(BIN)/mypy $(PY_SOURCES)
	$(BIN)/pytest -q --cov=idemproxy --cov-report=term:skip-covered --cov-fail-under=$(COVERAGE_MIN)

soak: dev  ## the long fault run (SOAK_S seconds of traffic on Redis, a third on SQLite, Cluster, Sentinel and MCP, a sixth on a Redis that loses its data)
	IDEMPROXY_CHAOS_PROFILE=soak IDEMPROXY_SOAK_S=$(or $(SOAK_S),600) \
		$(BIN)/pytest -q -s -p no:cacheprovider tests/chaos/test_chaos.py tests/cluster \
		tests/chaos/test_sentinel.py tests/chaos/test_store_loss.py tests/chaos/test_mcp.py

serve: install  ## run the proxy on the embedded store: make serve UPSTREAM=name=https://api...
	$(BIN)/idemproxy serve $(if $(UPSTREAM),--upstream $(UPSTREAM),--config examples/idemproxy.yaml)

bench: $(BIN)/python  ## idemproxy vs the reference proxy under wrk, one table (DUR=3s per cell)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[fast]'
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis build dist src/*.egg-info
