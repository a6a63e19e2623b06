#!/usr/bin/env bash
# One device call that checks the tree on the H200 after a round of changes: the GPU tests, the
# digest's throughput on the host's CPU, the end-to-end benchmark (bench/gpu_run.sh, shortened), the
# windowed syslog stream at a fixed rate and the windowed capacity run (the `steady` and `capacity`
# stages of bench/windows_gpu_run.sh), all on the defaults (the model in the engine process, continuous
# batching). Every step has its own time limit so the call ends inside the device's 10 minutes (130 +
# 40 + 200 + 90 + 100 s at most, besides the build). Results land in $OUT.
# Needs the wheels' folder .whl carried (see bench/RESULTS.md). Usage: bash bench/h200_check.sh
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 RIBBON_CACHE_DIR=/tmp/ribbon-cache
python3 -m pip install -q --no-build-isolation --no-deps -e . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $OUT/gpu.txt
timeout ${TESTS_S:-130} python3 -m pytest -p no:cacheprovider -m gpu -q tests/engine/test_gpu_engine.py \
  tests/packer/test_packer_gpu.py tests/engine/test_fp8.py tests/engine/test_gpu_continuous.py tests/engine/test_guards_gpu.py 2>&1 \
  | tail -25 | tee $OUT/gpu_tests_h200.txt
timeout 40 python3 -m bench.digest --throughput-only --out $OUT/digest_h200host.json 2>&1 | tail -12
SKIP_BUILD=1 WHL=.whl NAME=e2e-check_h200 RUNS=${RUNS:-2} STEADY=${STEADY-0.9} STEADY_S=${STEADY_S:-30} \
  E2E_TIMEOUT=${E2E_S:-200} bash bench/gpu_run.sh > /dev/null 2>&1; tail -30 $OUT/e2e-check_h200.txt
SKIP_BUILD=1 SKIP_KILL=1 RECORDS=${RECORDS:-100000} WINDOWS_TIMEOUT=${WINDOWS_S:-90} \
  CAP_RECORDS=${CAP_RECORDS:-50000} CAPACITY_TIMEOUT=${CAPACITY_S:-100} bash bench/windows_gpu_run.sh steady capacity 2>&1 | tail -25
ls -la $OUT
