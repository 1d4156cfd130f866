#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the codec fuzz targets with clang (-fsanitize=fuzzer,address,undefined) in their
# own build folder and runs each for a bounded time, or a number of inputs. Exits non-zero if
# any target crashes.
#   fuzz/run.sh [SECONDS_PER_TARGET=20]
#   fuzz/run.sh --runs N       N inputs per target (the campaign's budget: 1000000)
#   fuzz/run.sh --keep [...]   then merge what each target found into fuzz/corpus/<target>
#                              (minimised: the inputs that add coverage), which every run
#                              starts from
# Environment: CCL_FUZZ_BUILD (build folder, default build-codecs-fuzz next to fuzz/),
# CXX (default clang++, else clang++-14), CCL_FUZZ_TARGETS (codec numbers to run, e.g. "8 9";
# default all).
set -euo pipefail

keep=0
if [[ ${1:-} == --keep ]]; then keep=1; shift; fi
budget=(-max_total_time="${1:-20}")
what="${1:-20}s"
if [[ ${1:-} == --runs ]]; then
  budget=(-runs="${2:-}")
  what="${2:-} inputs"
  set -- "${2:-}"
fi
case "${1:-20}" in *[!0-9]*) echo "usage: $0 [--keep] [SECONDS_PER_TARGET | --runs N]" >&2; exit 2 ;; esac

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${CCL_FUZZ_BUILD:-$here/../build-codecs-fuzz}"
cxx="${CXX:-}"
if [[ -z "$cxx" ]]; then
  if command -v clang++ >/dev/null; then cxx=clang++; else cxx=clang++-14; fi
fi
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi

cmake -S "$here" -B "$build" "${generator[@]}" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2

# One target per core at a time (each fuzzer is one thread); their reports in target order.
fuzz_one() {
  local target=$1 name
  name="$(basename "$target")"
  local corpus="$build/corpus/$name" artifacts="$build/artifacts/$name/" kept="$here/corpus/$name"
  mkdir -p "$corpus" "$artifacts"
  local seeds=()
  [[ -d "$kept" ]] && seeds=("$kept")
  if "$target" "${budget[@]}" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$artifacts" -print_final_stats=1 "$corpus" "${seeds[@]}" >"$build/$name.log" 2>&1; then
    echo ok >"$build/$name.status"
  else
    echo crash >"$build/$name.status"
  fi
}
targets=()
for target in "$build"/fuzz_decode_*; do
  [[ -x "$target" ]] || continue
  name="$(basename "$target")"
  if [[ -n ${CCL_FUZZ_TARGETS:-} && " $CCL_FUZZ_TARGETS " != *" ${name#fuzz_decode_} "* ]]; then continue; fi
  targets+=("$target")
done
cores=$(nproc)
for target in "${targets[@]}"; do
  rm -f "$build/$(basename "$target").status"
  while (($(jobs -rp | wc -l) >= cores)); do wait -n || true; done
  fuzz_one "$target" &
done
wait

failed=()
for target in "${targets[@]}"; do
  name="$(basename "$target")"
  kept="$here/corpus/$name"
  echo "== $name: $what"
  if [[ "$(cat "$build/$name.status" 2>/dev/null)" != ok ]]; then
    echo "   CRASH: see $build/$name.log and $build/artifacts/$name/" >&2
    tail -n 30 "$build/$name.log" >&2
    failed+=("$name")
  else
    grep -aE "the .* decoder|stat::number_of_executed_units|Done [0-9]+ runs" "$build/$name.log" | tail -n 3 | sed 's/^/   /'
    if ((keep)); then
      mkdir -p "$kept"
      "$target" -merge=1 -max_len=8192 "$kept" "$build/corpus/$name" >"$build/$name.merge.log" 2>&1
      echo "   fuzz/corpus/$name: $(find "$kept" -type f | wc -l) inputs"
    fi
  fi
done

if ((${#failed[@]})); then
  echo "fuzz targets that crashed: ${failed[*]}" >&2
  exit 1
fi
echo "all fuzz targets ran $what without a crash"
