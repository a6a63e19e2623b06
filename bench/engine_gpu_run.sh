#!/usr/bin/env bash
# Device calls for issue 10, from a copy of the tree holding whl/ (pure-Python deps the image
# lacks). Stages, in the order given: variants | 7b | 0.5b | tests. Results in $OUT.
#   bash bench/engine_gpu_run.sh 7b 0.5b tests
# whl/ held (pip download --no-deps for cp312 manylinux): pydantic 2.14.4, pydantic_core 2.50.5,
# pydantic-settings 2.16.3, python-dotenv 1.2.4, typing-inspection 0.4.5, annotated-types 0.8.0, orjson.
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 RIBBON_CACHE_DIR=/tmp/ribbon-cache
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/bench.log
common="--mixes stress --budget 524288 --chunk-tokens ${CHUNK:-65536} --prefill-chunks 32768,65536 --out $OUT"
for stage in "$@"; do
  case $stage in
    variants) timeout 300 python3 bench/engine_variants.py --out $OUT ;;
    7b) timeout 330 python3 bench/engine.py --models 7b $common --name engine_h200_7b.json ;;
    0.5b) timeout 120 python3 bench/engine.py --models 0.5b $common --skip-hf --name engine_h200_0.5b.json ;;
    tests) timeout 200 python3 -m pytest --noconftest -p no:cacheprovider -m gpu -q tests/test_gpu_engine.py ;;
  esac 2>&1 | grep -v '^%' | grep -v '^ ' | tee -a $OUT/bench.log | grep -v '^{"t"' | tail -30
done
