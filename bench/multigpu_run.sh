#!/usr/bin/env bash
# One device call on a machine of several GPUs (nvidia-h200-x2): `ribbon run --gpus` on 1 GPU and on all,
# the 0.5B architecture (random weights), DOCS documents (default 6,000, the `short` corpus as
# bench/gpu_run.sh) on an input topic of 8 partitions, REPEATS backlogs each (default 2, the median
# reported), then kill -9 of one child under a steady load (bench/multigpu.py). GPUS=0: the single-GPU
# kind (one run, its child killed). MULTI_ARGS: more flags (e.g. --skip-single). Results and the
# supervisors' log land in $OUT: multigpu_h200x<N>.json. WHL: the wheels' folder (default .whl).
set -uo pipefail
WHL=${WHL:-.whl}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $WHL/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 RIBBON_CACHE_DIR=/tmp/ribbon-cache
python3 -m pip install -q --no-build-isolation --no-deps -e . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv | tee $OUT/gpu.txt
N=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l); [ "${GPUS:-all}" = all ] || N=$(echo $GPUS | tr ',' '\n' | wc -l)
timeout ${MULTI_TIMEOUT:-480} python3 -m bench.multigpu --arch-config config/models/qwen2.5-0.5b.json --gpus ${GPUS:-all} \
  --documents ${DOCS:-6000} --repeats ${REPEATS:-2} --max-new-tokens 64 --token-budget ${TOKEN_BUDGET:-524288} \
  ${MULTI_ARGS:-} --log $OUT/multigpu_supervisors.log --out $OUT/multigpu_h200x$N.json 2>&1 | grep -v '^%' | grep -v 'Writing model'
echo "exit ${PIPESTATUS[0]}"
