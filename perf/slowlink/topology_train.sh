#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The trainer's demo model, data parallel over NODES x LOCAL ranks of the two-level slow-link
# layout (launch.sh), with dp.grad as fp32 (flat), int4 + LoCo flat (two-shot across every
# rank) and int4 + LoCo hierarchical (sums inside each node exact, int4 only across nodes).
# Prints tokens/s (median over the steps after the first two) and the training loss (mean of
# the last three steps) per run, then the medians per variant.
#   sudo perf/slowlink/topology_train.sh BUILD_DIR
# Knobs: NODES [2], LOCAL [2], RATE [1gbit], STEPS [30], SEEDS ["1 2"], VARIANTS (below).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: topology_train.sh BUILD_DIR}
train=$build/examples/transformer/gpt_train
[[ -x $train ]] || { echo "missing $train (cmake --build $build --target gpt_train)" >&2; exit 1; }
steps=${STEPS:-30}
seeds=${SEEDS:-1 2}
work=$(mktemp -d /tmp/cclsl-train.XXXXXX)
text=$work/kjv.txt
command -v bible >/dev/null || { echo "needs the bible-kjv package (bible)" >&2; exit 1; }
bible -f gen1:1-rev22:21 >"$text"
# name|CCL_ALGO|--compress (empty: fp32)
variants=${VARIANTS:-"fp32|ring|
int4+loco flat|twoshot|dp.grad=int4:feedback=loco:beta=0.8:reset=1024
int4+loco hier|hier|dp.grad=int4:feedback=loco:beta=0.8:reset=1024"}

results=$work/results.txt
: >"$results"
for seed in $seeds; do
  while IFS='|' read -r name algo compress; do
    [[ -n $name ]] || continue
    log=$work/$(echo "$name" | tr ' +' '__')-$seed.jsonl
    extra=()
    [[ -z $compress ]] || extra=(--compress "$compress")
    echo "# $name (CCL_ALGO=$algo), seed $seed" >&2
    CCL_ALGO=$algo NODES=${NODES:-2} LOCAL=${LOCAL:-2} RATE=${RATE:-1gbit} "$here/launch.sh" "$train" \
      --data "$text" --layers 6 --channels 256 --heads 8 --seq 128 --batch 4 --steps "$steps" --val-every 0 \
      --seed "$seed" --dp $((${NODES:-2} * ${LOCAL:-2})) --rendezvous {id} --log "$log" "${extra[@]}" >&2
    python3 - "$log" "$name" "$seed" >>"$results" <<'EOF'
import json, statistics, sys
steps = [r for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "step"]
tps = statistics.median(r["tokens_per_s"] for r in steps[2:])
loss = statistics.mean(r["loss"] for r in steps[-3:])
print(f"{sys.argv[2]}|{sys.argv[3]}|{tps:.1f}|{loss:.4f}|{len(steps)}")
EOF
  done <<<"$variants"
done

python3 - "$results" <<'EOF'
import collections, statistics, sys
rows = [l.strip().split("|") for l in open(sys.argv[1]) if l.strip()]
print("| variant | seed | tokens/s | loss (last 3 steps) | steps |")
print("|---|---:|---:|---:|---:|")
for name, seed, tps, loss, n in rows:
    print(f"| {name} | {seed} | {tps} | {loss} | {n} |")
by = collections.defaultdict(list)
for name, seed, tps, loss, n in rows:
    by[name].append((float(tps), float(loss)))
base = statistics.median(t for t, _ in by[rows[0][0]])
print()
print("| variant | tokens/s (median of seeds) | x the first | loss (mean of seeds) |")
print("|---|---:|---:|---:|")
for name, v in by.items():
    t = statistics.median(x for x, _ in v)
    print(f"| {name} | {t:.1f} | {t / base:.2f} | {statistics.mean(l for _, l in v):.4f} |")
EOF
echo "# logs in $work" >&2
