#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Generates perf/accuracy/README.md: the numerical contract of every codec over every
# collective and algorithm, ranks 2, 3, 4, 8 and 16 as threads, four kinds of data (and
# recorded gradients with GRADS=FILE), each case against an fp64 reference next to its
# documented bound. The raw lines go to results.csv beside it.
#
# Usage: perf/accuracy/run.sh [build-dir]     (default: build; builds the tool first)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
cmake --build "$build" --target accuracy >/dev/null
args=()
[[ -n ${GRADS:-} ]] && args+=(--grads "$GRADS")
status=0
# The library warns of every call it refuses (powersgd outside allreduce and send/recv).
"$build/perf/accuracy/accuracy" "${args[@]}" >"$root/perf/accuracy/results.csv" 2>/tmp/ccl-accuracy.log || status=$?
python3 "$root/perf/accuracy/table.py" "$root/perf/accuracy/results.csv" >"$root/perf/accuracy/README.md"
echo "perf/accuracy/README.md: $(grep -c ',ok$' "$root/perf/accuracy/results.csv") cases within their contract," \
     "$(grep -c ',FAIL$' "$root/perf/accuracy/results.csv" || true) outside"
exit $status
