#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Generates perf/accuracy/README.md: the numerical contract of every codec over every
# collective and algorithm, ranks 2, 3, 4, 8 and 16 as threads, five kinds of data (four
# synthetic, and gradients recorded from the trainer, or GRADS=FILE), each case against an
# fp64 reference next to its documented bound. The raw lines go to results.csv beside it.
#
# Usage: perf/accuracy/run.sh [build-dir]     (default: build; builds the tool first)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
cmake --build "$build" --target accuracy >/dev/null
args=()
# Recorded gradients: each rank's of a 4-way data-parallel run of the trainer's demo model
# (the experiments' full scale) at step 20, before any reduction; or GRADS=FILE (raw fp32).
if [[ -z ${GRADS:-} ]]; then
  cmake --build "$build" --target gpt_train >/dev/null
  rec=$(mktemp -d)
  trap 'rm -rf "$rec"' EXIT
  bible -f gen1:1-rev22:21 >"$rec/kjv.txt"
  "$build/examples/transformer/gpt_train" --data "$rec/kjv.txt" --dp 4 --layers 4 --channels 128 --heads 4 \
    --max-seq 128 --seq 128 --batch 4 --steps 21 --no-progress --dump-grads "$rec/grads" --dump-grads-step 20 >/dev/null
  cat "$rec"/grads.[0-3] >"$rec/grads.bin"
  GRADS=$rec/grads.bin
  args+=(--grads-parts 4)
fi
args+=(--grads "$GRADS")
status=0
# The library warns of every call it refuses (powersgd outside allreduce and send/recv).
"$build/perf/accuracy/accuracy" "${args[@]}" >"$root/perf/accuracy/results.csv" 2>/tmp/ccl-accuracy.log || status=$?
python3 "$root/perf/accuracy/table.py" "$root/perf/accuracy/results.csv" >"$root/perf/accuracy/README.md"
echo "perf/accuracy/README.md: $(grep -c ',ok$' "$root/perf/accuracy/results.csv") cases within their contract," \
     "$(grep -c ',FAIL$' "$root/perf/accuracy/results.csv" || true) outside"
exit $status
