#!/usr/bin/env bash
# One device call for issue 8: build, the digest's lines/s on the H200 machine's CPU, then
# `ribbon bench e2e` on the mixed corpus with compaction on and off (0.5B architecture).
# Results land in $OUT (then bench/results/).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ${WHL:-.whl}/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 RIBBON_CACHE_DIR=/tmp/ribbon-cache
python3 -m pip install -q --no-build-isolation --no-deps -e . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
[ -n "${SKIP_DIGEST:-}" ] || timeout 60 python3 bench/digest.py --throughput-only --out $OUT/digest_h200.json 2>&1 | tee $OUT/digest_h200.txt
for c in on off; do
  timeout ${E2E_TIMEOUT:-150} python3 -m worker bench e2e --arch-config config/models/qwen2.5-0.5b.json \
    --documents ${DOCS:-1000} --corpus mixed --max-new-tokens 64 --compaction $c \
    --out $OUT/e2e_h200_mixed_compaction_$c.json 2>&1 | grep -v '^%' | grep -v 'Writing model' | tee $OUT/e2e_h200_mixed_compaction_$c.txt
done
