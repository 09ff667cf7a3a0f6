# Two set-up commands (README): `make demo` and `make test`. Both create the environment.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint env bench clean proto conformance test-ts

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

# The linters first (ruff: lint + import order; mypy on the package ldpsynth/), then every test
# (pytest also runs the package's docstring examples: --doctest-modules in pyproject.toml).
lint: env
	$(BIN)/ruff check .
	$(BIN)/mypy ldpsynth

test: lint
	$(BIN)/python -m pytest

bench: env
	$(BIN)/python benchmarks/bench_mechanism.py

proto: env
	$(BIN)/python proto/generate.py

# Rebuild the conformance vectors (conformance/README.md) from the Python reference.
conformance: env
	$(BIN)/python conformance/generate.py

# The TypeScript SDK (sdk/typescript/README.md): clean install from package-lock.json, generated
# protobuf code up to date, the package builds with its declarations, then its tests (the
# conformance vectors among them; a real aggregator from .venv for the Node client). Not yet part of `make test`.
test-ts: env
	cd sdk/typescript && npm ci --no-audit --no-fund && npm run check-generated && npm run build && npm test

clean:
	rm -rf $(VENV) build *.egg-info
