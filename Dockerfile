# syntax=docker/dockerfile:1
# The Ribbon worker on a CUDA PyTorch runtime. Torch comes from the base image
# (the package does not depend on it, so pip never replaces it); the C++ packer
# extension is compiled in a build stage and installed as a wheel.
#
#   docker build -t ribbon-worker .
#   docker build --build-arg BASE_IMAGE=pytorch/pytorch:<tag>-runtime -t ribbon-worker .
#
# The fused varlen attention backend needs a torch that has
# torch.nn.attention.varlen (or flash_attn installed); otherwise the worker logs
# the fallback it chose at start ("attention backend ...").
ARG BASE_IMAGE=pytorch/pytorch:2.9.0-cuda12.8-cudnn9-runtime

FROM ${BASE_IMAGE} AS build
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
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false
COPY --from=build /wheels /wheels
RUN python -m pip install /wheels/*.whl \
 && rm -rf /wheels \
 && python -c "import torch, worker._core, worker.cli; print('torch', torch.__version__)"
# Non-root; the autotune cache (~/.cache/ribbon) is a volume in docker-compose.yml.
RUN useradd --create-home --uid 10001 ribbon \
 && mkdir -p /home/ribbon/.cache/ribbon /models \
 && chown -R ribbon /home/ribbon/.cache
USER ribbon
WORKDIR /home/ribbon
EXPOSE 9464
# /healthz answers 503 when the GPU loop is stuck; urlopen raises on it (exit 1).
HEALTHCHECK --interval=15s --timeout=5s --start-period=600s --retries=4 \
  CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('RIBBON_SERVER__PORT', '9464'), timeout=3)"
ENTRYPOINT ["ribbon"]
CMD ["run"]
