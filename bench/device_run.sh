#!/usr/bin/env bash
# The benchmarks' runs on a device machine (the H200), as one call: bash bench/device_run.sh [--dry-run] STAGE...
#
# It installs the wheels of WHL (default .whl: pydantic and the rest the device's image lacks; carry it),
# builds the C++ extension once per machine (PCRE2's source from PCRE2 [.pcre2]: carry it too, bench/RESULTS.md;
# limit BUILD_S [90]; its log in $OUT/build.log when it fails), records the GPUs in $OUT/gpu.txt, then runs the
# stages in the order given. Each stage writes its JSON and its log ($OUT/<name>.txt) under $OUT, named as in
# bench/results/ for the GPU the call got (`h200` below: `h100` on an H100, MACHINE to name it yourself); its last lines are shown.
#
# Every step has a time limit, and no step runs past CALL_S (default 585 s: the device's 600 s a call,
# less a margin) from the call's start: a step's limit is its own or what is left of the call, the
# smaller (then 5 s to stop after SIGTERM). A step still running 3 s before its limit has every Python
# process print its threads' stacks into its log, then end (SIGABRT with PYTHONFAULTHANDLER). --dry-run prints each step and its limit instead, and the
# limits' sum (no device needed: tests/bench/test_device_run.py runs it on the CPU). --list prints the
# stages. The exit status is 1 when a step failed or was stopped at its limit (each is named at the end).
#
# Stages (a variable set for the call applies to every stage that reads it; defaults in brackets):
#   check             e2e-check and windows-capacity: the tree checked on the defaults in one call (gpu-tests
#                     take a call of their own with them: the three steps' limits exceed one call)
#   gpu-tests         pytest -m gpu over TESTS [the GPU engine, packer, FP8, continuous and guard tests],
#                     -k TESTS_K; limit TESTS_S [240]: TESTS_LOG [gpu_tests_h200].txt
#   e2e               python -m bench.e2e on the 0.5B architecture (random weights), DOCS [3000] documents,
#                     max_new_tokens 64, RUNS [3] pairs, steady loads at STEADY [0.5,0.9] of capacity for
#                     STEADY_S [60] s; PROCESS [auto], TOKEN_BUDGET [auto], BATCHING [the setting's];
#                     limit E2E_S [500]: NAME [e2e_h200].json
#   e2e-check         the same on the defaults, shorter: RUNS [3] pairs (the overhead is their median),
#                     STEADY [0.9] for STEADY_S [30] s; limit E2E_S [330] (about 290 s on the H200):
#                     e2e-check_h200.json
#   e2e-batching      e2e once per batching mode in MODES [bin continuous], max_new_tokens 128, each document
#                     stopping after a length of bench/results/stop_lengths_cpu.json, TOKEN_BUDGET [524288],
#                     BATCH_RUNS [RUNS, 3] pairs; continuous adds a steady STEADY [0.9] load for STEADY_S [30] s;
#                     PREFILL, REFILL: prefill_step_tokens, refill_fraction; limit BATCH_S [E2E_S, 320] each:
#                     e2e-<mode>SUFFIX_h200.json
#   continuous-sweep  bench/continuous_sweep.py over the same bins: SETTINGS, BIN_K; limit SWEEP_S [300]:
#                     continuous-sweep_h200.json
#   fp8               bench/fp8_prefill.py on the 7B stress mix (every variant, FP8 attention's included),
#                     FP8_ARGS; limit FP8_S [480]: fp8_prefill_h200.json
#   fp8-attention     bench/fp8_prefill.py --variants attention: the default FP8 variant without and with FP8
#                     attention side by side (tok/s at 65,536 and 131,072 tokens a bin, accuracy, per-layer
#                     attention error, the attention kernels alone at each launch shape); limit FP8_ATTN_S [400]:
#                     fp8_attention_h200.json
#   fp8-kernels       bench/fp8_prefill.py --variants kernels: the default FP8 variant (the chunked SiLU-multiply-
#                     quantize kernel, the row kernel at q/k/v and o_proj) beside one_pass without and with the
#                     row kernel and the row kernel at every GEMM (tok/s at 65,536 tokens a bin, accuracy, a
#                     kernel profile each; no bigger bins; about 100 s on the H200); limit FP8_KERN_S [330]:
#                     fp8_kernels_h200.json
#   digest-host       bench/digest.py --throughput-only on the host's CPU; limit DIGEST_S [60]: digest_h200host.json
#   digest-e2e        e2e on DOCS [500] `mixed` documents, compaction on, then off (the preprocessing pool at
#                     its auto size), and on with the pool off when PROCS0 is set; limit E2E_S [150] each:
#                     e2e-mixed-compaction-{on,off}_h200.json
#   windows           bench/windows.py, generative, RECORDS [200000] records at RATE [10000]/s; limit
#                     WINDOWS_S [400]: windows_h200.json
#   windows-capacity  bench/windows.py --capacity on the defaults, CAP_RECORDS [50000] records as a backlog,
#                     max_new_tokens 64, TOKEN_BUDGET [524288]; limit CAPACITY_S [100]: windows-capacity_h200.json
#   windows-kill      bench/windows_kill.py, KILLS [20] kill -9 cycles (digest mode); limit KILL_S [200]:
#                     windows_kill_h200.json
#   engine-variants   bench/engine_variants.py; limit 300: engine_variants_h200.json
#   engine-kernels    bench/engine_kernels.py, its winner kept for engine-7b; limit 150: engine_kernels_h200.json
#   engine-7b         bench/engine.py on 7B (stress mix, budget 524288, CHUNK [65536], CHUNKS [32768,65536]);
#                     HF_GEN= (set, empty) also runs HF generate; limit 300: engine-7b_h200.json
#   engine-0.5b       bench/engine.py on 0.5B, no HF baselines; limit 120: engine-0.5b_h200.json
#   multigpu          bench/multigpu.py (`ribbon run --gpus` on 1 GPU and on all, then a kill -9), DOCS [6000],
#                     REPEATS [2], GPUS [all], MULTI_ARGS; limit MULTI_S [480]: multigpu_h200x<N>.json
#   steady            python -m bench.steady in a process of its own, RATE [641.9] documents/s for STEADY_S
#                     [60] s, PARTITIONS [8]; limit STEADY_S + 240: NAME [steady]_h200.json
# The PNGs of an engine run are drawn on this machine: python -m bench.engine --plot <json> --out bench/results.
set -uo pipefail
cd "$(dirname "$0")/.."

STAGES="check gpu-tests e2e e2e-check e2e-batching continuous-sweep fp8 fp8-attention fp8-kernels digest-host digest-e2e windows
windows-capacity windows-kill engine-variants engine-kernels engine-7b engine-0.5b multigpu steady"
DRY=""
case "${1:-}" in
  --dry-run) DRY=1; shift ;;
  --list) echo $STAGES; exit 0 ;;
esac
[ $# -gt 0 ] || { echo "device_run.sh: name one or more stages: $(echo $STAGES)" >&2; exit 2; }
for s in "$@"; do
  [[ " $(echo $STAGES) " == *" $s "* ]] || { echo "device_run.sh: no stage '$s'; the stages: $(echo $STAGES)" >&2; exit 2; }
done

[ -n "$DRY" ] || [ -n "${OUT:-}" ] || { echo "device_run.sh: OUT (the results' folder) is not set" >&2; exit 2; }
CALL_S=${CALL_S:-585}
START=$SECONDS
TOTAL=0      # the steps' own limits, added up (what --dry-run reports)
FAILED=()    # the steps that failed or were stopped
TMP=${TMPDIR:-/tmp}  # the wheels' site, the build's mark and log, the model cache: this machine's
ARCH=config/models/qwen2.5-0.5b.json
LENGTHS=bench/results/stop_lengths_cpu.json
[ -z "$DRY" ] || OUT='$OUT'  # printed as it is
M=${MACHINE:-h200}  # the results' names: the GPU the call got (setup reads it), h200 in a dry run

step() {  # step LIMIT_S LOG CMD...: CMD under min(LIMIT_S, what is left of the call); output to $OUT/LOG.txt
  local limit=$1 log=$2; shift 2
  TOTAL=$((TOTAL + limit))
  if [ -n "$DRY" ]; then
    printf '  [%3d s] %s > $OUT/%s.txt\n' "$limit" "$*" "$log"
    return 0
  fi
  local left=$((CALL_S - (SECONDS - START)))
  [ "$limit" -le "$left" ] || limit=$left
  if [ "$limit" -lt 10 ]; then
    echo "$log: not run, $left s left of the call (CALL_S $CALL_S)"
    FAILED+=("$log")
    return 0
  fi
  # 3 s before the limit every Python process of the step prints its threads' stacks into the step's log
  # (PYTHONFAULTHANDLER, set in setup: SIGABRT dumps and ends it): a stopped step shows where it waited
  ( sleep $((limit - 3)); pkill -ABRT -f '^python3 ' ) > /dev/null 2>&1 &
  local watch=$!
  timeout -k 5 "$limit" "$@" 2>&1 | grep --line-buffered -v -e '^%' -e 'Writing model' -e 'Loading weights' \
    | tee "$OUT/$log.txt" | grep -v -e '^{"t"' -e '^  File "' -e '^Thread 0x' -e '^Current thread' \
    | tail -n "${SHOW:-25}"
  local rc=${PIPESTATUS[0]}
  kill "$watch" 2>/dev/null
  case $rc in
    0) return 0 ;;
    124|137|134) echo "$log: stopped at its limit, $limit s (the stacks at that time: $OUT/$log.txt)" ;;
    *) echo "$log: exit $rc" ;;
  esac
  FAILED+=("$log")
  return "$rc"
}

setup() {
  if [ -n "$DRY" ]; then
    TOTAL=$((TOTAL + 20 + ${BUILD_S:-90}))
    echo "setup: the wheels of ${WHL:-.whl} [20 s], the extension's build [${BUILD_S:-90} s], nvidia-smi"
    return 0
  fi
  local whl=${WHL:-.whl}
  compgen -G "$whl/*.whl" > /dev/null || { echo "device_run.sh: no wheels in $whl (WHL): carry them (bench/RESULTS.md)" >&2; exit 2; }
  timeout 20 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$TMP/site" \
    "$whl"/*.whl || exit 1
  export PYTHONPATH=$PWD:$TMP/site PYTHONUNBUFFERED=1 RIBBON_CACHE_DIR=$TMP/ribbon-cache PYTHONFAULTHANDLER=1
  if [ ! -f "$TMP/ribbon-built" ]; then  # once per machine: a warm machine keeps it
    local pcre2=${PCRE2:-.pcre2} define=()   # PCRE2's source, carried (the device reaches no registry for cargo)
    [ -d "$pcre2" ] && define=(-C "cmake.define.RIBBON_PCRE2_DIR=$(cd "$pcre2" && pwd)")
    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) timeout "${BUILD_S:-90}" python3 -m pip install -q --no-build-isolation --no-deps \
      "${define[@]}" -e . > "$TMP/ribbon-build.log" 2>&1 \
      || { cp "$TMP/ribbon-build.log" "$OUT/build.log"; tail -30 "$TMP/ribbon-build.log"; exit 1; }
    touch "$TMP/ribbon-built"
  fi
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,clocks.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
  if [ -z "${MACHINE:-}" ]; then  # an H100 call's results are not the H200's: they are named for their card
    case $(sed -n 2p "$OUT/gpu.txt") in *H100*) M=h100 ;; *H200*) M=h200 ;; *) M=gpu ;; esac
  fi
}

TESTS_DEFAULT="tests/engine/test_gpu_engine.py tests/packer/test_packer_gpu.py tests/engine/test_fp8.py
tests/engine/test_gpu_continuous.py tests/engine/test_guards_gpu.py"

e2e() {  # e2e LIMIT NAME ARGS...: python -m bench.e2e on the 0.5B architecture, --out $OUT/NAME.json
  local limit=$1 name=$2; shift 2
  step "$limit" "$name" python3 -m bench e2e --arch-config $ARCH "$@" --out "$OUT/$name.json"
}

run_stage() {
  case $1 in
    check) run_stage e2e-check; run_stage windows-capacity ;;
    gpu-tests)
      # shellcheck disable=SC2086  # TESTS is a list of files
      step "${TESTS_S:-240}" "${TESTS_LOG:-gpu_tests_$M}" python3 -m pytest -p no:cacheprovider -m gpu -q -s ${TESTS:-$TESTS_DEFAULT} \
        -k "${TESTS_K:-}" ;;
    e2e)
      e2e "${E2E_S:-500}" "${NAME:-e2e_$M}" --documents "${DOCS:-3000}" --max-new-tokens 64 --runs "${RUNS:-3}" \
        --steady "${STEADY-0.5,0.9}" --steady-seconds "${STEADY_S:-60}" --process "${PROCESS:-auto}" \
        --token-budget "${TOKEN_BUDGET:-auto}" ${BATCHING:+--batching $BATCHING} ;;
    e2e-check)
      e2e "${E2E_S:-330}" e2e-check_$M --documents "${DOCS:-3000}" --max-new-tokens 64 --runs "${RUNS:-3}" \
        --steady "${STEADY-0.9}" --steady-seconds "${STEADY_S:-30}" ;;
    e2e-batching)
      local mode
      for mode in ${MODES:-bin continuous}; do
        local steady=()
        [ "$mode" != continuous ] || steady=(--steady "${STEADY-0.9}" --steady-seconds "${STEADY_S:-30}")
        e2e "${BATCH_S:-${E2E_S:-320}}" "e2e-$mode${SUFFIX:-}_$M" --documents "${DOCS:-3000}" --max-new-tokens 128 \
          --runs "${BATCH_RUNS:-${RUNS:-3}}" --token-budget "${TOKEN_BUDGET:-524288}" --batching "$mode" --stop-lengths $LENGTHS \
          ${PREFILL:+--prefill-step-tokens $PREFILL} ${REFILL:+--refill-fraction $REFILL} "${steady[@]}"
      done ;;
    continuous-sweep)
      step "${SWEEP_S:-300}" continuous-sweep_$M python3 -m bench continuous_sweep --arch-config $ARCH \
        --stop-lengths $LENGTHS ${SETTINGS:+--settings $SETTINGS} ${BIN_K:+--bin-check-every $BIN_K} \
        --out "$OUT/continuous-sweep_$M.json" ;;
    fp8)
      # shellcheck disable=SC2086  # FP8_ARGS: more arguments
      step "${FP8_S:-480}" fp8_prefill_$M python3 -m bench fp8_prefill --out "$OUT" ${FP8_ARGS:-} ;;
    fp8-attention)
      step "${FP8_ATTN_S:-400}" fp8_attention_$M python3 -m bench fp8_prefill --out "$OUT" --variants attention \
        --no-gemms --attn-shapes --name fp8_attention_$M.json ;;
    fp8-kernels)
      step "${FP8_KERN_S:-330}" fp8_kernels_$M python3 -m bench fp8_prefill --out "$OUT" --variants kernels \
        --no-gemms --big-chunk 0 --name fp8_kernels_$M.json ;;
    digest-host)
      step "${DIGEST_S:-60}" digest_${M}host python3 -m bench digest --throughput-only --drain-lines 0 \
        --out "$OUT/digest_${M}host.json" ;;
    digest-e2e)
      local mixed=(--documents "${DOCS:-500}" --corpus mixed --max-new-tokens 64)
      e2e "${E2E_S:-150}" e2e-mixed-compaction-on_$M "${mixed[@]}" --compaction on
      e2e "${E2E_S:-150}" e2e-mixed-compaction-off_$M "${mixed[@]}" --compaction off
      [ -z "${PROCS0:-}" ] || e2e "${E2E_S:-150}" e2e-mixed-compaction-on-nopool_$M "${mixed[@]}" --compaction on \
        --preprocess-processes 0 ;;
    windows)
      step "${WINDOWS_S:-400}" windows_$M python3 -m bench windows --mode generative --device cuda --arch-config $ARCH \
        --records "${RECORDS:-200000}" --rate "${RATE:-10000}" --log "$OUT/windows_${M}_worker.log" \
        --out "$OUT/windows_$M.json" ;;
    windows-capacity)
      step "${CAPACITY_S:-100}" windows-capacity_$M python3 -m bench windows --capacity --device cuda --arch-config $ARCH \
        --records "${CAP_RECORDS:-50000}" --max-new-tokens 64 --token-budget "${TOKEN_BUDGET:-524288}" --timeout-s 180 \
        --out "$OUT/windows-capacity_$M.json" ;;
    windows-kill)
      step "${KILL_S:-200}" windows_kill_$M python3 -m bench windows_kill --kills "${KILLS:-20}" \
        --log "$OUT/windows_kill_${M}_worker.log" --out "$OUT/windows_kill_$M.json" ;;
    engine-variants) step 300 engine_variants_$M python3 -m bench engine_variants --out "$OUT" ;;
    engine-kernels)
      step 150 engine_kernels_$M python3 -m bench engine_kernels --out "$OUT" --choice "$OUT/prefill_choice.txt" ;;
    engine-7b)
      # shellcheck disable=SC2046  # the kernels stage's winner: more arguments
      step 300 engine-7b_$M python3 -m bench engine --models 7b "${ENGINE_COMMON[@]}" ${HF_GEN---skip-hf-generate} \
        --compare-fa2 --compare-cublaslt --compare-decode-launch --profile $(cat "$OUT/prefill_choice.txt" 2>/dev/null) \
        --name engine-7b_$M.json ;;
    engine-0.5b)
      step 120 engine-0.5b_$M python3 -m bench engine --models 0.5b "${ENGINE_COMMON[@]}" --skip-hf --gen-docs 0.5b=96 \
        --name engine-0.5b_$M.json ;;
    multigpu)
      local n
      n=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
      [ "${GPUS:-all}" = all ] || n=$(echo "$GPUS" | tr ',' '\n' | wc -l)
      # shellcheck disable=SC2086  # MULTI_ARGS: more flags
      step "${MULTI_S:-480}" "multigpu_${M}x$n" python3 -m bench multigpu --arch-config $ARCH --gpus "${GPUS:-all}" \
        --documents "${DOCS:-6000}" --repeats "${REPEATS:-2}" --max-new-tokens 64 --token-budget "${TOKEN_BUDGET:-524288}" \
        ${MULTI_ARGS:-} --log "$OUT/multigpu_supervisors.log" --out "$OUT/multigpu_${M}x$n.json" ;;
    steady)
      step $((${STEADY_S:-60} + 240)) "${NAME:-steady}_$M" python3 -m bench steady --arch-config $ARCH \
        --rate "${RATE:-641.9}" --seconds "${STEADY_S:-60}" --max-new-tokens 64 --process on --token-budget 524288 \
        --partitions "${PARTITIONS:-8}" --out "$OUT/${NAME:-steady}_$M.json" ;;
  esac
}

ENGINE_COMMON=(--mixes stress --budget 524288 --chunk-tokens "${CHUNK:-65536}" --prefill-chunks "${CHUNKS:-32768,65536}"
               --out "$OUT")
setup
for stage in "$@"; do
  echo "== $stage"
  run_stage "$stage"
done
if [ -n "$DRY" ]; then
  echo "limits: $TOTAL s in all, the setup's included (CALL_S $CALL_S)"
else
  echo "== done in $((SECONDS - START)) s${FAILED[*]:+; failed or stopped: ${FAILED[*]}}"
  [ ${#FAILED[@]} -eq 0 ] || exit 1
fi
