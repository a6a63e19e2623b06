#!/usr/bin/env bash
# One device call on the H200: the windowed syslog benchmark (bench/windows.py) in generative mode on
# random Qwen2.5-0.5B weights, then the 20-cycle kill -9 run (bench/windows_kill.py, digest mode).
# Results land in $OUT. WHL: the wheels' folder (default .whl); RECORDS, RATE: the stream (default
# 200,000 records at 10,000/s from 50 hosts); SKIP_BUILD=1 when an earlier step of the call built it;
# SKIP_KILL=1 leaves the kill -9 run out.
set -uo pipefail
WHL=${WHL:-.whl}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $WHL/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 RIBBON_CACHE_DIR=/tmp/ribbon-cache
if [ -z "${SKIP_BUILD:-}" ]; then
  python3 -m pip install -q --no-build-isolation --no-deps -e . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $OUT/gpu.txt
fi
timeout ${WINDOWS_TIMEOUT:-400} python3 -m bench.windows --mode generative --device cuda \
  --arch-config config/models/qwen2.5-0.5b.json --records ${RECORDS:-200000} --rate ${RATE:-10000} \
  --log $OUT/windows_h200_worker.log --out $OUT/windows_h200.json 2>&1 | grep -v '^%' | tail -60
[ -n "${SKIP_KILL:-}" ] || timeout 500 python3 -m bench.windows_kill --kills 20 --log $OUT/windows_kill_h200_worker.log \
  --out $OUT/windows_kill_h200.json 2>&1 | grep -v '^%' | tail -30
