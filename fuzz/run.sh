#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the codec fuzz targets with clang (-fsanitize=fuzzer,address,undefined) in their
# own build folder and runs each for a bounded time. Exits non-zero if any target crashes.
#   fuzz/run.sh [SECONDS_PER_TARGET=20]
# Environment: CCL_FUZZ_BUILD (build folder, default build-codecs-fuzz next to fuzz/),
# CXX (default clang++, else clang++-14).
set -euo pipefail

seconds="${1:-20}"
case "$seconds" in '' | *[!0-9]*) echo "usage: $0 SECONDS_PER_TARGET" >&2; exit 2 ;; esac

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

failed=()
for target in "$build"/fuzz_decode_*; do
  [[ -x "$target" ]] || continue
  name="$(basename "$target")"
  corpus="$build/corpus/$name"
  artifacts="$build/artifacts/$name/"
  mkdir -p "$corpus" "$artifacts"
  echo "== $name: ${seconds}s"
  if ! "$target" -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$artifacts" -print_final_stats=1 "$corpus" >"$build/$name.log" 2>&1; then
    echo "   CRASH: see $build/$name.log and $artifacts" >&2
    tail -n 30 "$build/$name.log" >&2
    failed+=("$name")
  else
    grep -E "the .* decoder|stat::number_of_executed_units|Done [0-9]+ runs" "$build/$name.log" | tail -n 3 | sed 's/^/   /'
  fi
done

if ((${#failed[@]})); then
  echo "fuzz targets that crashed: ${failed[*]}" >&2
  exit 1
fi
echo "all fuzz targets ran ${seconds}s without a crash"
