#!/usr/bin/env bash
# One device call on the H200 for the windowed syslog stream. The stages named as arguments run in
# this order (none named: capacity kill, whose time limits end both within one 600 s call):
#   steady    bench/windows.py, generative mode on random Qwen2.5-0.5B weights, RECORDS records (default
#             200,000) from 50 hosts at RATE/s (default 10,000), the worker in a process of its own:
#             windows_h200.json
#   capacity  bench/windows.py --capacity: CAP_RECORDS records (default 200,000) as a backlog, the same
#             weights, max_new_tokens 64, TOKEN_BUDGET (default 524,288: this model's autotuned budget on
#             the H200; auto measures it again); the worker against the engine alone over the prompts it
#             built: windows-capacity_h200.json
#   kill      bench/windows_kill.py, KILLS (default 20) kill -9 cycles during a windowed stream (digest
#             mode): windows_kill_h200.json
# Results and the workers' logs land in $OUT; a short summary is printed at the end. WHL: the wheels'
# folder (default .whl); SKIP_BUILD=1 when an earlier step of the call built the tree; SKIP_KILL=1 leaves
# the kill stage out. Time limits per stage: WINDOWS_TIMEOUT (400 s), CAPACITY_TIMEOUT (240 s),
# KILL_TIMEOUT (200 s; the 20 cycles took 81 s on the 2-core development VM).
#   bash bench/windows_gpu_run.sh                  # capacity, then kill
#   bash bench/windows_gpu_run.sh steady           # the fixed-rate stream alone (bench/h200_check.sh)
set -uo pipefail
STAGES=${*:-capacity kill}
WHL=${WHL:-.whl}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $WHL/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 RIBBON_CACHE_DIR=/tmp/ribbon-cache
if [ -z "${SKIP_BUILD:-}" ]; then
  python3 -m pip install -q --no-build-isolation --no-deps -e . > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $OUT/gpu.txt
fi
has() { [[ " $STAGES " == *" $1 "* ]]; }
if has steady; then
  timeout ${WINDOWS_TIMEOUT:-400} python3 -m bench.windows --mode generative --device cuda \
    --arch-config config/models/qwen2.5-0.5b.json --records ${RECORDS:-200000} --rate ${RATE:-10000} \
    --log $OUT/windows_h200_worker.log --out $OUT/windows_h200.json 2>&1 | grep -v '^%' | tail -60
fi
if has capacity; then
  timeout ${CAPACITY_TIMEOUT:-240} python3 -m bench.windows --capacity --device cuda \
    --arch-config config/models/qwen2.5-0.5b.json --records ${CAP_RECORDS:-200000} --max-new-tokens 64 \
    --token-budget ${TOKEN_BUDGET:-524288} --timeout-s 180 --out $OUT/windows-capacity_h200.json 2>&1 \
    | grep -v '^%' | grep -v 'Writing model' | tee $OUT/windows-capacity_h200.txt | tail -12
fi
if has kill && [ -z "${SKIP_KILL:-}" ]; then
  timeout ${KILL_TIMEOUT:-200} python3 -m bench.windows_kill --kills ${KILLS:-20} \
    --log $OUT/windows_kill_h200_worker.log --out $OUT/windows_kill_h200.json > $OUT/windows_kill_h200.txt 2>&1
  echo "kill exit $?"
fi
python3 - <<'EOF'
import json, os, pathlib
out = pathlib.Path(os.environ["OUT"])
for name, keys in (("windows_h200", ("records_covered", "outputs", "worker_peak_rss_bytes", "output_over_input_wire")),
                   ("windows-capacity_h200", ("worker_overhead_pct", "prompts", "prompt_tokens")),
                   ("windows_kill_h200", ("seconds", "kills", "records", "uncovered", "covered_by_differing_outputs",
                                          "covered_by_identical_repeats", "outputs", "offsets_never_moved_back"))):
    f = out / f"{name}.json"
    if f.exists():
        r = json.loads(f.read_text())
        extra = {k: {x: r[k][x] for x in ("windows", "records_covered", "wall_s", "windows_per_s")}
                 for k in ("end_to_end",) if k in r}
        extra.update({k: {x: r[k][x] for x in ("wall_s", "windows_per_s")} for k in ("engine_only",) if k in r})
        print(name, json.dumps({k: r.get(k) for k in keys} | extra))
EOF
