#!/usr/bin/env bash
# One device call: steady-load runs, each a `ribbon bench steady` process of its own (not inside
# `ribbon bench e2e` after its backlog runs). RATES: documents/s, space-separated (default: 50% and 90% of
# the 713 docs/s end-to-end capacity of e2e_h200_stream.json); STEADY_S: seconds of load (60).
# Each process also makes the random checkpoint, starts the engine process and warms it up before
# its load, so its timeout is STEADY_S + 240 s. PARTITIONS: the topics' partitions (8); SUFFIX: added
# to the file names. Results: $OUT/steady_h200_<rate>${SUFFIX}.{json,txt}.
set -uo pipefail
WHL=${WHL:-.whl}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $WHL/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 RIBBON_CACHE_DIR=/tmp/ribbon-cache
python3 -m pip install -q --no-build-isolation --no-deps -e . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
STEADY_S=${STEADY_S:-60}
for rate in ${RATES:-356.6 641.9}; do
  timeout $((STEADY_S + 240)) python3 -m worker bench steady --arch-config config/models/qwen2.5-0.5b.json \
    --rate "$rate" --seconds "$STEADY_S" --max-new-tokens 64 --process on --token-budget 524288 --partitions ${PARTITIONS:-8} \
    --out "$OUT/steady_h200_$rate${SUFFIX:-}.json" 2>&1 | grep -v '^%' | grep -v 'Loading\|Writing' | tee "$OUT/steady_h200_$rate${SUFFIX:-}.txt"
done
