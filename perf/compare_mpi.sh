#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Side-by-side allreduce comparison on this machine: ccl (NP MPI processes, and NP thread
# ranks in one process) against Open MPI's MPI_Allreduce, float sum, uncompressed:
# bandwidth from 1 MiB to MAX_BYTES, latency at 8 B, 64 B, 512 B and 4 KiB.
# Runs are interleaved (ccl, ccl -t, MPI, ccl, ...) and the median of each is reported.
#
# Usage: perf/compare_mpi.sh [build-dir] [repeats]
#   env ITERS (default 20), WARMUP (5), LAT_ITERS (2000), LAT_WARMUP (200), NP (4),
#   MAX_BYTES (64M), MPIRUN (default: mpirun --allow-run-as-root --oversubscribe --bind-to none),
#   OUT_DIR (keep the raw tables there). CCL_* variables are passed to every ccl run.
set -euo pipefail

build=${1:-build-perf}
repeats=${2:-5}
iters=${ITERS:-20}
warmup=${WARMUP:-5}
lat_iters=${LAT_ITERS:-2000}
lat_warmup=${LAT_WARMUP:-200}
np=${NP:-4}
max_bytes=${MAX_BYTES:-64M}
mpirun=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe --bind-to none}

ccl_bin=$build/perf/collectives/all_reduce_perf
mpi_bin=$build/perf/baselines/mpi_allreduce_perf
for bin in "$ccl_bin" "$mpi_bin"; do
  [[ -x $bin ]] || { echo "missing $bin: build targets all_reduce_perf and mpi_allreduce_perf first" >&2; exit 1; }
done

# Raw outputs go to OUT_DIR when set (kept), else to a temporary folder removed at exit.
if [[ -n ${OUT_DIR:-} ]]; then
  out=$OUT_DIR
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

bw_flags=(-b 1M -e "$max_bytes" -f 2 -d float -o sum -c 0 -n "$iters" -w "$warmup")
lat_flags=(-b 8 -e 4K -f 8 -d float -o sum -c 0 -n "$lat_iters" -w "$lat_warmup")

echo "# ccl bandwidth: $mpirun -np $np $ccl_bin ${bw_flags[*]}"
echo "# ccl threads:   $ccl_bin -t $np ${bw_flags[*]}"
echo "# MPI bandwidth: $mpirun -np $np $mpi_bin ${bw_flags[*]}"
echo "# latency runs use: ${lat_flags[*]}"
echo "# repeats: $repeats (interleaved), median reported"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"

# mpirun forwards only the variables it is told about: pass every CCL_* setting on.
ccl_env=()
for name in $(compgen -e | grep '^CCL_' || true); do
  ccl_env+=(-x "$name")
  echo "# $name=${!name}"
done

# A failed run (error, timeout) is reported and its rows so far are still used.
failures=0
run() {
  local file=$1
  shift
  if ! "$@" > "$out/$file.txt" 2> "$out/$file.err"; then
    failures=$((failures + 1))
    echo "# FAILED: $* (last error line: $(grep -v 'mpool.c' "$out/$file.err" | grep . | tail -1))"
  fi
}

for ((r = 0; r < repeats; r++)); do
  run "ccl_bw_$r" $mpirun "${ccl_env[@]}" -np "$np" "$ccl_bin" "${bw_flags[@]}"
  run "cclt_bw_$r" "$ccl_bin" -t "$np" "${bw_flags[@]}"
  run "mpi_bw_$r" $mpirun -np "$np" "$mpi_bin" "${bw_flags[@]}"
  run "ccl_lat_$r" $mpirun "${ccl_env[@]}" -np "$np" "$ccl_bin" "${lat_flags[@]}"
  run "cclt_lat_$r" "$ccl_bin" -t "$np" "${lat_flags[@]}"
  run "mpi_lat_$r" $mpirun -np "$np" "$mpi_bin" "${lat_flags[@]}"
  echo "# repeat $((r + 1))/$repeats done ($failures failed runs so far)"
done

echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "$repeats" "$np" <<'PY'
import statistics, sys

out, repeats, np = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
P, T = "np%d" % np, "-t%d" % np  # the labels of the process and thread runs

def rows(path):
    """size -> (out-of-place time us, out-of-place busbw, in-place time us, in-place busbw)."""
    table = {}
    with open(path) as f:
        for line in f:
            c = line.split()
            # Table rows only: other lines (warnings of a failed run) are skipped.
            if len(c) != 13 or not c[0].isdigit():
                continue
            table[int(c[0])] = (float(c[5]), float(c[7]), float(c[9]), float(c[11]))
    return table

def median(kind, what, col):
    per_size = {}
    for r in range(repeats):
        for size, vals in rows(f"{out}/{kind}_{what}_{r}.txt").items():
            per_size.setdefault(size, []).append(vals[col])
    return {s: (statistics.median(v), len(v)) for s, v in per_size.items()}

nan = (float("nan"), 0)

def ratio(a, b):
    return a / b if b else float("nan")

ccl, cclt, mpi = (median(k, "bw", 1) for k in ("ccl", "cclt", "mpi"))
print()
print("out-of-place busbw (GB/s), median over the runs that reached the size (count in brackets)")
print("%12s  %14s  %14s  %14s  %8s  %8s" % ("size (B)", "ccl " + P, "ccl " + T, "MPI " + P, P + "/MPI", T + "/MPI"))
for size in sorted(set(mpi) | set(ccl) | set(cclt)):
    a, b, m = ccl.get(size, nan), cclt.get(size, nan), mpi.get(size, nan)
    print("%12d  %10.3f (%d)  %10.3f (%d)  %10.3f (%d)  %8.2f  %8.2f"
          % (size, a[0], a[1], b[0], b[1], m[0], m[1], ratio(a[0], m[0]), ratio(b[0], m[0])))

lat = {k: median(k, "lat", 0) for k in ("ccl", "cclt", "mpi")}
print()
print("allreduce latency (us, out-of-place), median of the runs")
print("%10s  %10s  %10s  %10s  %9s  %9s" % ("size (B)", "ccl " + P, "ccl " + T, "MPI " + P, P + "/MPI", T + "/MPI"))
for size in sorted(set(lat["mpi"]) | set(lat["ccl"]) | set(lat["cclt"])):
    a, b, m = (lat[k].get(size, nan)[0] for k in ("ccl", "cclt", "mpi"))
    print("%10d  %10.2f  %10.2f  %10.2f  %9.2f  %9.2f" % (size, a, b, m, ratio(a, m), ratio(b, m)))
PY
