#!/usr/bin/env bash
# One device call: install carried wheels, build the extension, run the end-to-end benchmark
# (three backlog runs, then steady load at 50% and 90% of the measured capacity) on the H200.
# Results land in $OUT (then bench/results/). WHL: the wheels' folder (default .whl); GPU_TESTS=1
# also runs the GPU tests first; PROCESS: engine.process (auto: the model in its own process on CUDA);
# NAME: the results' file stem (default e2e_h200); SKIP_BUILD=1 when an earlier step of the call built it;
# TOKEN_BUDGET: batching.token_budget (default auto: autotuned on the device, 524,288 for this model on the H200);
# BATCHING: batching.mode (default the setting's, continuous; the committed e2e_h200 figures are BATCHING=bin).
set -uo pipefail
WHL=${WHL:-.whl}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $WHL/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 RIBBON_CACHE_DIR=/tmp/ribbon-cache
NAME=${NAME:-e2e_h200}
if [ -z "${SKIP_BUILD:-}" ]; then
  python3 -m pip install -q --no-build-isolation --no-deps -e . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $OUT/gpu.txt
fi
[ -z "${GPU_TESTS:-}" ] || timeout 150 python3 -m pytest --noconftest -p no:cacheprovider -m gpu -q tests/engine/test_gpu_engine.py tests/packer/test_packer_gpu.py 2>&1 | tail -15 | tee $OUT/gpu_tests.txt
timeout ${E2E_TIMEOUT:-500} python3 -m worker bench e2e --arch-config config/models/qwen2.5-0.5b.json \
  --documents ${DOCS:-3000} --max-new-tokens 64 --runs ${RUNS:-3} --steady "${STEADY-0.5,0.9}" \
  --steady-seconds ${STEADY_S:-60} --process ${PROCESS:-auto} --token-budget ${TOKEN_BUDGET:-auto} ${BATCHING:+--batching $BATCHING} --out $OUT/$NAME.json 2>&1 | grep -v '^%' \
  | grep -v 'Writing model' | tee $OUT/$NAME.txt
