# One command sets everything up and runs the tests: `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: test lint venv install clean demo promtool kafka kustomize

venv: $(STAMP)

$(STAMP): pyproject.toml CMakeLists.txt
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q "scikit-build-core>=0.10" "pybind11>=2.13"
	RIBBON_WERROR=ON $(BIN)/python -m pip install -q --no-build-isolation -e ".[test,bench]"
	touch $(STAMP)

# Rebuilds the C++ extension (after C++ changes) into the existing venv.
install: $(STAMP)
	RIBBON_WERROR=ON $(BIN)/python -m pip install -q --no-build-isolation --no-deps -e .

# promtool and amtool (tests/deploy/test_alerts.py) from Debian's packages, when missing; needs root or sudo.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
promtool:
	@command -v promtool >/dev/null && command -v amtool >/dev/null || { \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
	    prometheus prometheus-alertmanager >/dev/null; }
	@promtool --version | head -1

# kustomize (tests/deploy/test_deploy.py renders deploy/k8s/base and every overlay with it), when missing:
# built from the Go module proxy into the venv's bin/ (Go from Debian's golang-go package when absent).
KUSTOMIZE_VERSION ?= v5.7.1
kustomize:
	@command -v kustomize >/dev/null || test -x $(BIN)/kustomize || { \
	  command -v go >/dev/null || { $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends golang-go >/dev/null; }; \
	  mkdir -p $(BIN) && GOBIN="$(abspath $(BIN))" go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION); }
	@PATH="$(abspath $(BIN)):$$PATH" kustomize version

# The gates first (seconds), then the whole suite, PYTEST_WORKERS tests at a time (pytest-xdist; most
# tests wait on brokers and worker processes, not on the CPU; how tests are handed out: tests/conftest.py).
PYTEST_WORKERS ?= 6
test: install lint promtool kustomize kafka
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS)

# The Apache Kafka jars of the tests (tests/kafka/pom.xml), fetched once with Maven into
# ~/.cache/ribbon/kafka-<version>/; needs java 17+ and mvn. The tests fetch them too on first use.
kafka: install
	$(BIN)/python -c "from tests.apache_kafka import jars_dir; print('kafka jars in', jars_dir())"

# Quick gates (seconds; settings in pyproject.toml): ruff (errors and likely bugs), vulture (dead
# code), the package graph (layers one way, no cycles), files (Python, and C++ under ext/) of at most
# 400 lines and constructors of at most 6 parameters (.ci/check_size.py), no history narration in docs, docstrings and comments
# (.ci/check_history.py), every path the docs and docstrings name exists and bench/results/ is
# indexed and small (.ci/check_paths.py).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/vulture
	$(BIN)/lint-imports
	$(BIN)/python .ci/check_size.py
	$(BIN)/python .ci/check_history.py
	$(BIN)/python .ci/check_paths.py

demo: install
	$(BIN)/ribbon demo --max-new-tokens 64

clean:
	rm -rf $(VENV) build
