#!/usr/bin/env bash
# One device call: a steady-load run, a `python -m bench.steady` process of its own (not inside
# `python -m bench.e2e` after its backlog runs). RATE: documents/s (default 641.9: 90% of the 713 docs/s
# end-to-end capacity measured on the H200); STEADY_S: seconds of load (60). The process also makes the
# random checkpoint, starts the engine process and warms it up before its load, so its timeout is
# STEADY_S + 240 s. PARTITIONS: the topics' partitions (8). Results: $OUT/${NAME:-steady}_h200.{json,txt}.
set -uo pipefail
WHL=${WHL:-.whl}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $WHL/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 RIBBON_CACHE_DIR=/tmp/ribbon-cache
python3 -m pip install -q --no-build-isolation --no-deps -e . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
STEADY_S=${STEADY_S:-60}
NAME=${NAME:-steady}
timeout $((STEADY_S + 240)) python3 -m worker bench steady --arch-config config/models/qwen2.5-0.5b.json \
  --rate "${RATE:-641.9}" --seconds "$STEADY_S" --max-new-tokens 64 --process on --token-budget 524288 --partitions ${PARTITIONS:-8} \
  --out "$OUT/${NAME}_h200.json" 2>&1 | grep -v '^%' | grep -v 'Loading\|Writing' | tee "$OUT/${NAME}_h200.txt"
