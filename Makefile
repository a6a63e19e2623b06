# One command sets everything up and runs the tests: `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: test venv install clean demo

venv: $(STAMP)

$(STAMP): pyproject.toml CMakeLists.txt
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q "scikit-build-core>=0.10" "pybind11>=2.13"
	RIBBON_WERROR=ON $(BIN)/python -m pip install -q --no-build-isolation -e ".[test,bench]"
	touch $(STAMP)

# Rebuilds the extension (C++ changes) and runs the whole suite.
install: $(STAMP)
	RIBBON_WERROR=ON $(BIN)/python -m pip install -q --no-build-isolation --no-deps -e .

test: install
	$(BIN)/python -m pytest

demo: install
	$(BIN)/ribbon demo --max-new-tokens 64

clean:
	rm -rf $(VENV) build
