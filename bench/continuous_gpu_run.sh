#!/usr/bin/env bash
# Device calls for continuous batching and FP8 prefill, from a copy of the tree with main's wheel folder
# carried too (WHL, default ../../.whl). Builds the C++ packer, then runs the stages given, in order:
#   tests | sweep | e2e | fp8        e.g.  bash bench/continuous_gpu_run.sh tests sweep e2e
# e2e: the 0.5B architecture (random weights) on 3,000 `short` documents with max_new_tokens 128, each
# document stopping after a length drawn from bench/results/stop_lengths_cpu.json (SmolLM2's measured
# output lengths), once bin at a time and once with continuous batching (which also times the engine
# alone both ways over the same bins, and runs a steady 90% load; RUNS engine-only and end-to-end pairs, default 3). fp8: bench/fp8_prefill.py on the 7B
# stress mix (every variant; FP8_ARGS adds arguments, e.g. "--variants default --no-gemms").
# sweep: bench/continuous_sweep.py, the engine alone over the same bins, bin at a time and each continuous
# setting in SETTINGS (prefill_step_tokens:refill_fraction:lag[:check_every],...), bin at a time at each
# check_every in BIN_K (e.g. 8,16). e2e takes PREFILL and REFILL (the settings' defaults when unset). Results (JSON, logs) in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ${WHL:-../../.whl}/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 RIBBON_CACHE_DIR=/tmp/ribbon-cache
if [ ! -f /tmp/ribbon-built ]; then
  python3 -m pip install -q --no-build-isolation --no-deps -e . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
  touch /tmp/ribbon-built
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/gpu.txt
LENGTHS=bench/results/stop_lengths_cpu.json
for stage in "$@"; do
  case $stage in
    tests) timeout 200 python3 -m pytest --noconftest -p no:cacheprovider -m gpu -q -s tests/engine/test_gpu_continuous.py \
             tests/engine/test_fp8.py > $OUT/continuous_gpu_tests_h200.txt 2>&1; grep -E "agree|passed|failed|Error" $OUT/continuous_gpu_tests_h200.txt ;;
    sweep) timeout ${SWEEP_TIMEOUT:-300} python3 bench/continuous_sweep.py --arch-config config/models/qwen2.5-0.5b.json \
             --stop-lengths $LENGTHS ${SETTINGS:+--settings $SETTINGS} ${BIN_K:+--bin-check-every $BIN_K} \
             --out $OUT/continuous-sweep_h200.json 2>&1 \
             | grep -v '^%' | grep -v 'Writing model' | tee $OUT/continuous-sweep_h200.txt | tail -20 ;;
    e2e) for mode in ${MODES:-bin continuous}; do
           extra=""; [ $mode = continuous ] && extra="--steady ${STEADY-0.9} --steady-seconds ${STEADY_S:-30}"
           timeout ${E2E_TIMEOUT:-320} python3 -m worker bench e2e --arch-config config/models/qwen2.5-0.5b.json \
             --documents ${DOCS:-3000} --max-new-tokens 128 --runs ${RUNS:-3} --token-budget ${TOKEN_BUDGET:-524288} \
             --batching $mode --stop-lengths $LENGTHS ${PREFILL:+--prefill-step-tokens $PREFILL} \
             ${REFILL:+--refill-fraction $REFILL} $extra \
             --out $OUT/e2e-${mode}${SUFFIX:-}_h200.json 2>&1 \
             | grep -v '^%' | grep -v 'Writing model' | tee $OUT/e2e-${mode}${SUFFIX:-}_h200.txt | tail -12
         done ;;
    fp8) timeout ${FP8_TIMEOUT:-360} python3 bench/fp8_prefill.py --out $OUT ${FP8_ARGS:-} 2>&1 | grep -v '^%' \
           > $OUT/fp8_prefill_h200.txt; grep -E "tok/s|Error|error" $OUT/fp8_prefill_h200.txt | tail -20 ;;
  esac
done
