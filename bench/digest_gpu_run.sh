#!/usr/bin/env bash
# One device call: build, the digest's cost on the H200 host's CPU (bench/digest.py,
# no Drain3 there), then `python -m bench.e2e` on the same mixed documents with compaction on and off
# (0.5B architecture, engine-only alongside in each), with the preprocessing pool at its auto size
# (cores // 4), then compaction on with the pool off (PROCS0=1). Results land in $OUT (then bench/results/).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ${WHL:-.whl}/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 RIBBON_CACHE_DIR=/tmp/ribbon-cache
python3 -m pip install -q --no-build-isolation --no-deps -e . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
N=${DOCS:-500}
[ -n "${SKIP_DIGEST:-}" ] || timeout 60 python3 -m bench.digest --throughput-only --drain-lines 0 \
  --out $OUT/digest_h200host.json 2>&1 | tee $OUT/digest_h200host.txt
e2e() {  # compaction, processes ('' = auto), name
  timeout ${E2E_TIMEOUT:-150} python3 -m worker bench e2e --arch-config config/models/qwen2.5-0.5b.json \
    --documents $N --corpus mixed --max-new-tokens 64 --compaction $1 ${2:+--preprocess-processes $2} \
    --out $OUT/$3.json 2>&1 | grep -v '^%' | grep -v 'Writing model' | tee $OUT/$3.txt
}
e2e on '' e2e-mixed-compaction-on_h200
e2e off '' e2e-mixed-compaction-off_h200
[ -z "${PROCS0:-}" ] || e2e on 0 e2e-mixed-compaction-on-nopool_h200
