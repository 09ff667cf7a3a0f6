# Two set-up commands (README): `make demo` and `make test`. Both create the environment.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint env bench clean proto

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

clean:
	rm -rf $(VENV) build *.egg-info
