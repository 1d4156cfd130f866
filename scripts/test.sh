#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Sets up a fresh machine and runs every test: the main build (CUDA kernels compiled when
# nvcc is present; GPU tests skip without a device), the Python package with the PyTorch
# backend and DDP hook (in the torch environment of scripts/torch_venv.sh, made once) and
# PyTorch's own distributed test suite on the backend (python/tests/torch_suite), the same
# suite under ASan+UBSan and under TSan (built without UCX: in-process transport only), the
# device kit built and checked (scripts/gpu_kit.sh --check), and the decoder fuzzers
# for a bounded time. CCL_TEST_QUICK=1 runs only the main build's suite and the Python tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/scripts/setup.sh"
# PyTorch's environment (on a fresh machine a download of about 2.8 GB) is made while the main
# build compiles; the main suite's checks against its libtorch_cuda.so and its fault tests
# under DDP wait for it.
venv_log=$(mktemp)
"$root/scripts/torch_venv.sh" >"$venv_log" 2>&1 &
venv_pid=$!
trap 'kill "$venv_pid" 2>/dev/null || true' EXIT  # a failed build ends the script: not the download

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
jobs=$(nproc)
status=0
step() { printf '\n=== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

step "main build"
# CUDA for sm_80 only here: the device kit below compiles every kernel for sm_90. Line tables
# for debug information (-g1): this build only runs tests, whose reports keep files and lines.
BUILD_DIR="$root/build" "$root/scripts/build.sh" -DCMAKE_CUDA_ARCHITECTURES=80 -DCCL_DEBUG_LINES_ONLY=ON
wait "$venv_pid" || { cat "$venv_log" >&2; status=1; }
trap - EXIT
rm -f "$venv_log"
# The package carries the main build's libccl (CCL_PYTHON_PREBUILT): the library the suite
# below tests, not a second compilation of it. Installed before that suite, whose fault tests
# under DDP and under PyTorch's NCCL face import it (without it they skip).
export CCL_PYTHON_PREBUILT="$root/build"
"$root/scripts/python_install.sh" >/dev/null || status=1
step "main test suite"
ctest --test-dir "$root/build" --output-on-failure -j "$jobs" --timeout 900 || status=1
step "python package, PyTorch backend and DDP hook"
"$root/scripts/python_test.sh" || status=1
step "PyTorch's distributed test suite on cclz, beside gloo"
"$("$root/scripts/python_install.sh")" -P "$root/python/tests/torch_suite/run.py" --gloo-debug OFF || status=1
unset CCL_PYTHON_PREBUILT

if [ "${CCL_TEST_QUICK:-0}" != 1 ]; then
  # The builds below only run tests: one generic quantizer loop each (CCL_CODEC_SPECIALIZE=OFF,
  # bit-identical to the specialised ones the main build tests) saves a third of their time,
  # line tables for debug information (CCL_DEBUG_LINES_ONLY: reports keep files and lines) a
  # quarter of the rest, and each runs a different third of the test matrices the main build
  # runs whole (CCL_TEST_SHARD, tests/harness/shard.h).
  # The TSan build is also the build without UCX: there only the in-process transport exists,
  # and everything that needs no second process must still build and pass. Its ranks are
  # threads of one process, which is what TSan sees best; ASan keeps UCX and the process tests.
  lean=(-DCCL_ENABLE_CUDA=OFF -DCCL_BUILD_PERF=OFF -DCCL_BUILD_EXAMPLES=OFF -DCCL_CODEC_SPECIALIZE=OFF
    -DCCL_DEBUG_LINES_ONLY=ON)
  sup="$root/tests/sanitizers"
  for san in address thread; do
    if [ $san = address ]; then extra=(-DCCL_TEST_SHARD=1/3); else extra=(-DCCL_ENABLE_UCX=OFF -DCCL_TEST_SHARD=2/3); fi
    step "$san sanitizer build$([ $san = thread ] && echo ", without UCX")"
    BUILD_DIR="$root/build-$san" "$root/scripts/build.sh" -DCCL_SANITIZE=$san "${lean[@]}" "${extra[@]}"
    step "$san sanitizer test suite"
    # The collectives matrix runs over UCX here; over the in-process transport it runs in the
    # main build and the TSan build (twice the matrix would not fit the time a sanitizer build takes).
    ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" LSAN_OPTIONS="suppressions=$sup/lsan.supp:print_suppressions=0" \
      UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
      TSAN_OPTIONS="suppressions=$sup/tsan.supp:halt_on_error=1:second_deadlock_stack=1:die_after_fork=0" \
      ctest --test-dir "$root/build-$san" --output-on-failure -j "$jobs" --timeout 900 -LE no_sanitizer \
      -E '^local[.]collectives[.]' || status=1
  done
  # The device kit: built (CUDA for sm_90, no MPI), packed within its size limit, and
  # run here with an empty environment: every step must load and say it skipped (no device).
  step "device kit (scripts/gpu_kit.sh --check)"
  "$root/scripts/gpu_kit.sh" --check || status=1
  if [ -x "$root/fuzz/run.sh" ]; then
    step "decoder fuzzers"
    "$root/fuzz/run.sh" "${CCL_FUZZ_SECONDS:-10}" || status=1
  fi
fi

step "done"
exit $status
