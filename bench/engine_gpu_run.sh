#!/usr/bin/env bash
# One device call for issue 10 (run from a copy of the tree that holds whl/ with the pure-Python
# deps the image lacks): the engine variants benchmark, then the GPU engine tests. Results in $OUT.
# BENCH="bench/engine_variants.py ..." or "-m worker bench engine ..." picks what runs first.
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 RIBBON_CACHE_DIR=/tmp/ribbon-cache
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/gpu.txt
timeout ${BENCH_S:-360} python3 ${BENCH:-bench/engine_variants.py --out $OUT} 2>&1 | grep -v '^%' | tee $OUT/bench.log | tail -40
[ -n "${SKIP_GPU_TESTS:-}" ] || timeout ${TEST_S:-200} python3 -m pytest --noconftest -p no:cacheprovider -m gpu -q \
  tests/test_gpu_engine.py 2>&1 | tail -25 | tee $OUT/gpu_tests.txt
