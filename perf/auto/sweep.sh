#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# CCL_CODEC=auto against every fixed choice, side by side: allreduce, float sum, RANKS
# processes on this host's shared memory, sizes 8 B to MAX_BYTES (factor 8). Each round runs
# uncompressed, each fixed codec of CODECS (per call, -Z) and CCL_CODEC=auto:CODECS, in turn;
# the table gives per size the median time of each, auto over the best fixed choice and over
# uncompressed, and the cost model's prediction for auto's choice (CCL_DEBUG=INFO's
# "predicted") against auto's measured time: the model's prediction error.
# With ALGOS (e.g. "ring tree direct") it measures CCL_ALGO=auto by the cost model instead
# (CCL_LINK_MODEL=probe, uncompressed) against the size rules ("none": no model) and each
# algorithm of ALGOS named with CCL_ALGO.
#
# Usage: perf/auto/sweep.sh [build-dir] [rounds]      (default: build, 3)
#   env RANKS (4), CODECS ("int8 int4"), ALGOS (unset), MAX_BYTES (128M), ITERS (20), WARMUP (3),
#   SMALL_ITERS (2000: sizes up to 64 KiB), MPIRUN (mpirun --allow-run-as-root
#   --oversubscribe --bind-to none), OUT_DIR (keep the raw outputs)
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
ranks=${RANKS:-4}
codecs=${CODECS:-int8 int4}
max_bytes=${MAX_BYTES:-128M}
iters=${ITERS:-20}
warmup=${WARMUP:-3}
small_iters=${SMALL_ITERS:-2000}
mpirun=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe --bind-to none}
bin=$build/perf/collectives/all_reduce_perf
[[ -x $bin ]] || { echo "missing $bin" >&2; exit 1; }
if [[ -n ${OUT_DIR:-} ]]; then out=$OUT_DIR; mkdir -p "$out"; else out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
algos=${ALGOS:-}
allowed=$(echo "$codecs" | tr ' ' ',')
if [[ -n $algos ]]; then
  echo "# $ranks processes, shared memory; sizes 8 B-$max_bytes; algorithms: size rules, $algos, auto by cost; $rounds rounds"
else
  echo "# $ranks processes, shared memory; sizes 8 B-$max_bytes; codecs: none $codecs auto:$allowed; $rounds rounds"
fi
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"

run() {  # run NAME ENV... -- FLAGS...: the small sizes with many iterations, then the rest
  local name=$1 r=$2
  shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=(-x "$1"); shift; done
  shift
  $mpirun "${envs[@]}" -np "$ranks" "$bin" -b 8 -e 64K -f 8 -n "$small_iters" -w 200 -c 0 "$@" \
    >"$out/${name}_$r.small" 2>&1 || echo "# FAILED: $name round $r (small sizes)"
  $mpirun "${envs[@]}" -np "$ranks" "$bin" -b 512K -e "$max_bytes" -f 8 -n "$iters" -w "$warmup" -c 0 "$@" \
    >"$out/${name}_$r.large" 2>&1 || echo "# FAILED: $name round $r (large sizes)"
}

for ((r = 0; r < rounds; r++)); do
  run none "$r" CCL_CODEC=none --
  if [[ -n $algos ]]; then
    for a in $algos; do run "$a" "$r" CCL_CODEC=none "CCL_ALGO=$a" --; done
    run auto "$r" CCL_CODEC=none CCL_LINK_MODEL=probe CCL_DEBUG=INFO CCL_DEBUG_SUBSYS=api --
  else
    for z in $codecs; do run "$z" "$r" CCL_CODEC=none -- -Z "$z"; done
    run auto "$r" "CCL_CODEC=auto:$allowed" CCL_DEBUG=INFO CCL_DEBUG_SUBSYS=api --
  fi
  echo "# round $((r + 1))/$rounds done"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$out" "$rounds" "${algos:-$codecs}" <<'PY'
import glob, re, statistics, sys
out, rounds, arms = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
names = ["none"] + arms + ["auto"]

def times(name):
    """size -> [out-of-place time in us per round]"""
    t = {}
    for path in glob.glob(f"{out}/{name}_*.*"):
        for line in open(path, errors="replace"):
            c = line.split()
            if len(c) >= 13 and c[0].isdigit() and c[1].isdigit():
                t.setdefault(int(c[0]), []).append(float(c[5]))
    return t

def predictions():
    """size -> (codec chosen, algorithm, predicted us), from rank 0's INFO lines"""
    p = {}
    for path in glob.glob(f"{out}/auto_*.*"):
        for line in open(path, errors="replace"):
            m = re.search(r":0 \[ccl INFO\] cclAllReduce count (\d+) float32: CCL_CODEC=auto chose (\S+) with (\S+), "
                          r"([0-9.e+-]+) us predicted", line)
            if m:
                p[int(m.group(1)) * 4] = (m.group(2), m.group(3), float(m.group(4)))
            m = re.search(r":0 \[ccl INFO\] cclAllReduce count (\d+) float32: CCL_ALGO=auto chose (\S+) for codec (\S+), "
                          r"([0-9.e+-]+) us predicted", line)
            if m:
                p[int(m.group(1)) * 4] = (m.group(3), m.group(2), float(m.group(4)))
    return p

t = {n: times(n) for n in names}
pred = predictions()
med = lambda v: statistics.median(v) if v else float("nan")
print()
print("allreduce time per call (us, out-of-place, median of the rounds); auto's choice and the model's prediction")
head = "%10s" % "size (B)" + "".join("%11s" % n for n in names) + "%9s %9s  %-16s %11s %8s" % (
    "auto/best", "auto/none", "auto chose", "predicted", "error")
print(head)
errors = []
for size in sorted(set().union(*[set(v) for v in t.values()])):
    m = {n: med(t[n].get(size, [])) for n in names}
    fixed = [m[n] for n in names[:-1] if m[n] == m[n]]
    best = min(fixed) if fixed else float("nan")
    ch = pred.get(size)
    err = ""
    if ch and m["auto"] == m["auto"]:
        e = (ch[2] - m["auto"]) / m["auto"]
        errors.append(abs(e))
        err = "%+7.0f%%" % (100 * e)
    print("%10d" % size + "".join("%11.2f" % m[n] for n in names) + "%9.2f %9.2f  %-16s %11.1f %8s" % (
        m["auto"] / best, m["auto"] / m["none"], (ch[0] + "/" + ch[1]) if ch else "?", ch[2] if ch else float("nan"), err))
if errors:
    print()
    print("prediction error |predicted - measured| / measured over %d sizes: median %.0f %%, worst %.0f %%"
          % (len(errors), 100 * statistics.median(errors), 100 * max(errors)))
PY
