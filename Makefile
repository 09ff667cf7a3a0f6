# Two set-up commands (README): `make demo` and `make test`. Both create the environment.
# While editing, `make test-fast`: the linters, then the tests not marked slow (no TypeScript SDK).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo demo-web test test-fast lint env bench clean proto conformance test-ts sdk-browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Re-install whenever the project metadata changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	touch $@

env: $(VENV)/.installed

demo: env
	$(BIN)/ldpsynth simulate

# The survey in a browser: the SDK's browser bundle, then the pages and a replica with a web port on
# 127.0.0.1 (open the printed survey and analyst URLs; Ctrl-C stops).
demo-web: env sdk-browser
	$(BIN)/ldpsynth simulate --web

sdk-browser:
	cd sdk/typescript && npm ci --no-audit --no-fund && npm run build:browser

# The linters first (ruff: lint + import order; mypy on the package ldpsynth/), then every test
# (pytest also runs the package's docstring examples: --doctest-modules in pyproject.toml; the 30
# slowest are listed at the end), then the TypeScript SDK's (test-ts: Node, and headless Chromium
# against real replicas).
lint: env
	$(BIN)/ruff check .
	$(BIN)/mypy ldpsynth

test: lint
	$(BIN)/python -m pytest --durations=30
	$(MAKE) test-ts

# The edit-test loop: the linters, then every test not marked slow (pytest -m "not slow"); CI runs
# them all (make test).
test-fast: lint
	$(BIN)/python -m pytest -m "not slow"

bench: env
	$(BIN)/python benchmarks/bench_mechanism.py

proto: env
	$(BIN)/python proto/generate.py

# Rebuild the conformance vectors (conformance/README.md) from the Python reference.
conformance: env
	$(BIN)/python conformance/generate.py

# The TypeScript SDK (sdk/typescript/README.md): clean install from package-lock.json, generated
# protobuf code up to date, the package builds with its declarations, ESLint (npm run lint) and
# Prettier (npm run format:check) find nothing, then its tests (the conformance vectors among them;
# real replicas from .venv for the Node and web clients; Debian's chromium for the browser tests and
# the demo, skipped saying why where it is missing outside CI).
test-ts: env
	cd sdk/typescript && npm ci --no-audit --no-fund && npm run check-generated && npm run build && npm run lint && npm run format:check && npm test

clean:
	rm -rf $(VENV) build *.egg-info
