#!/usr/bin/env bash
# Engine benchmarks on the device, with a wheel folder carried (WHL, default ../../.whl: pydantic etc.,
# which the image lacks). Builds the C++ packer
# (the benchmark packs with the product's packer), then runs the stages given, in order:
#   variants | kernels | tests | 7b | 0.5b        e.g.  bash bench/engine_gpu_run.sh tests 7b 0.5b
# HF_GEN= (set, empty) also runs the HF generate baselines (~100 s on 7B). Results (JSON, logs) in $OUT;
# draw the PNGs here: python -m bench.engine --plot <json> --out bench/results.
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ${WHL:-../../.whl}/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 RIBBON_CACHE_DIR=/tmp/ribbon-cache
python3 -m pip install -q --no-build-isolation --no-deps -e . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee $OUT/bench.log
common="--mixes stress --budget 524288 --chunk-tokens ${CHUNK:-65536} --prefill-chunks ${CHUNKS:-32768,65536} --out $OUT"
for stage in "$@"; do
  case $stage in
    variants) timeout 300 python3 -m bench.engine_variants --out $OUT ;;
    kernels) timeout 150 python3 -m bench.engine_kernels --out $OUT --choice $OUT/prefill_choice.txt ;;
    tests) timeout 200 python3 -m pytest --noconftest -p no:cacheprovider -m gpu -q -s tests/engine/test_gpu_engine.py -k "${TESTS_K:-}" \
             > $OUT/gpu_tests.txt 2>&1; grep -E "bf16|passed|failed|Error" $OUT/gpu_tests.txt ;;
    7b) timeout 300 python3 -m bench.engine --models 7b $common ${HF_GEN---skip-hf-generate} --compare-fa2 --compare-cublaslt --profile \
          $(cat $OUT/prefill_choice.txt 2>/dev/null) --name engine-7b_h200.json ;;
    0.5b) timeout 120 python3 -m bench.engine --models 0.5b $common --skip-hf --gen-docs 0.5b=96 \
            --name engine-0.5b_h200.json ;;
  esac 2>&1 | grep -v '^%' | grep -v '^ ' | tee -a $OUT/bench.log | grep -v '^{"t"' | tail -30
done
