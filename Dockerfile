# syntax=docker/dockerfile:1
# The Ribbon worker on a CUDA PyTorch runtime. Torch comes from the base image
# (the package does not depend on it, so pip never replaces it); the C++ packer
# extension is compiled in a build stage and installed as a wheel. The embedded
# test broker (the `broker` extra) is not installed: production talks to Kafka.
#
#   docker build -t ribbon-worker .
#   docker build --build-arg BASE_IMAGE=pytorch/pytorch:<exact tag>-runtime -t ribbon-worker .
#
# The base is an exact tag whose torch (2.11, CUDA 13.0: what the H200 runs in
# docs/engine.md used) has torch.nn.attention.varlen, the fused varlen attention
# backend (the build imports it); `ribbon validate` prints the backend chosen.
# CI lints this file with hadolint (tests/deploy/test_deploy.py).
ARG BASE_IMAGE=pytorch/pytorch:2.11.0-cuda13.0-cudnn9-runtime

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
# scikit-build-core fetches cmake/ninja and pybind11 into the isolated build env.
RUN python -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels \
      -C cmake.define.RIBBON_BUILD_TESTS=OFF .

FROM ${BASE_IMAGE}
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
RUN python -m pip install --no-cache-dir /wheels/*.whl \
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
