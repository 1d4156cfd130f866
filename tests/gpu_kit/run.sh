#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The device kit's one command: every GPU check of ccl, each under its own time limit, then
# one table. Built by scripts/gpu_kit.sh into a folder holding bin/, lib/ (libccl and the
# NCCL face), dropin/ (the face as libnccl.so.2) and this script.
#   run.sh [--quick] [--steps REGEX]   --quick: the checks only, no numbers; --steps: only the
#                                      steps whose names match REGEX (grep -E)
# Logs go to $OUT (or <kit>/logs). KIT_BUDGET (seconds, default 420) bounds the whole run:
# a step gets at most what is left. KIT_MIN (default 1M) and KIT_MAX (default 1G) are the
# smallest and largest sizes of the all_reduce_perf sweeps (a rerun of some steps, or of one
# size, in less time). Exit 0 when every step passed (or, on a machine without a device,
# every step loaded and said so); 1 otherwise.
set -u
kit=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$kit/logs}
mkdir -p "$out"
quick=0
only=""
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --steps) only=$2; shift ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
budget=${KIT_BUDGET:-420}
started=$(date +%s)

# NVIDIA's NCCL and the CUDA runtime where this machine has them: PyTorch's wheels, the
# toolkit, the system. The face finds NVIDIA's library through CCL_NCCL_LIBRARY (drop-in) or
# as the next libnccl.so.2 (interposer); ccl's CUDA probe loads libcudart.so.13.
find_lib() {  # find_lib NAME: the folder of the first NAME found
  local py
  py=$(python3 - "$1" 2>/dev/null <<'EOF'
import glob, os, site, sys
roots = [p for p in site.getsitepackages() + [site.getusersitepackages()] if os.path.isdir(p)]
for r in roots:
    for hit in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib", sys.argv[1]))):
        print(os.path.dirname(hit)); sys.exit(0)
EOF
  )
  if [ -n "$py" ]; then echo "$py"; return; fi
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [ -e "$d/$1" ] && { echo "$d"; return; }
  done
}
nccl_dir=$(find_lib libnccl.so.2)
cudart_dir=$(find_lib libcudart.so.13)
export LD_LIBRARY_PATH="$kit/lib${nccl_dir:+:$nccl_dir}${cudart_dir:+:$cudart_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -n "$nccl_dir" ] && export CCL_NCCL_LIBRARY="$nccl_dir/libnccl.so.2"
export CCL_TIMEOUT=${CCL_TIMEOUT:-20}  # seconds, under every step's limit: a stall inside ccl names itself
export UCX_MODULE_DIR="$kit/lib/ucx"  # the kit's UCX transports (shared memory, TCP, cross-memory attach)

device=1
probe=$("$kit/bin/face_device_check" probe 2>&1)
rc=$?
[ $rc -ne 0 ] && device=0
{
  echo "kit: $kit"
  echo "probe (rc $rc): $probe"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  echo "NVIDIA NCCL: ${nccl_dir:-not found}; libcudart.so.13: ${cudart_dir:-not found}"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
} | tee "$out/00_device.log"

rows=()
failed=0
left() { echo $((budget - ($(date +%s) - started))); }

# step NAME LIMIT CMD...: runs CMD with its log in $out/NAME.log and adds a row. Without a
# device a step passes when it loaded and reported that it skipped (gtest's SKIPPED, or 77).
step() {
  local name=$1 limit=$2
  shift 2
  if [ -n "$only" ] && ! grep -qE "$only" <<<"$name"; then return; fi
  local remaining
  remaining=$(left)
  if [ "$remaining" -lt 5 ]; then
    rows+=("$name|not run: KIT_BUDGET spent|0|")
    failed=1
    return
  fi
  [ "$limit" -gt "$remaining" ] && limit=$remaining
  local t0 rc log="$out/$name.log" status note=""
  t0=$(date +%s.%N)
  timeout -k 5 "$limit" "$@" >"$log" 2>&1
  rc=$?
  local secs
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  local skipped
  skipped=$(grep -c '^\[  SKIPPED \] [A-Za-z]' "$log")
  if grep -q 'error while loading shared libraries\|cannot open shared object' "$log"; then
    status="FAILED: a library is missing"
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    status="FAILED: no end within ${limit} s"
  elif [ $device -eq 0 ]; then
    if [ $rc -eq 0 ] || [ $rc -eq 77 ]; then status="skipped: no device"; else status="FAILED (exit $rc)"; fi
  elif [ $rc -eq 77 ]; then
    status="FAILED: skipped on a device"
  elif [ $rc -ne 0 ]; then
    status="FAILED (exit $rc)"
  elif [ "$skipped" -gt 0 ]; then
    status="FAILED: $skipped tests skipped on a device"
  else
    status="passed"
  fi
  case $status in FAILED*) failed=1 ;; esac
  note=$(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]+|tests? ran|^PASSED|^FAILED' "$log" | tail -2 | tr '\n' ' ')
  rows+=("$name|$status|$secs|$note")
  printf '%-34s %-40s %7s s  %s\n' "$name" "$status" "$secs" "$note"
}

gt="--gtest_brief=1 --gtest_color=no"

# 1-3. Kernels against the CPU codecs; the stream executor on CUDA streams (ranks on two
# devices need a second GPU: left out, not skipped); the api on device buffers, twice.
step 01_codecs_gpu_test 120 "$kit/bin/codecs_gpu_test" $gt
step 02_stream_executor_gpu_test 120 "$kit/bin/stream_executor_gpu_test" $gt \
  --gtest_filter=-DeviceStreamExecutor.RanksOnDevicesOverNccl*
step 03_api_gpu_test_run1 120 "$kit/bin/api_gpu_test" $gt
step 04_api_gpu_test_run2 120 "$kit/bin/api_gpu_test" $gt

# 5. The face: one rank under LD_PRELOAD and as the drop-in; two thread ranks on one GPU
# (NVIDIA's NCCL refuses them: the face goes on without it); PyTorch's nccl backend.
preload="$kit/lib/libccl_nccl.so.0"
step 05_face_preload_one_rank 60 env LD_PRELOAD="$preload" "$kit/bin/face_device_check" one
step 06_face_dropin_one_rank 60 env LD_LIBRARY_PATH="$kit/dropin:$LD_LIBRARY_PATH" "$kit/bin/face_device_check" one
step 07_face_preload_2_threads 60 env LD_PRELOAD="$preload" "$kit/bin/face_device_check" threads 2
step 08_face_2_threads_int8 60 env LD_PRELOAD="$preload" CCL_CODEC=int8 CCL_CODEC_SHM=on "$kit/bin/face_device_check" threads 2
step 09_torch_nccl_backend 120 env LD_PRELOAD="$preload" python3 "$kit/torch_face_check.py"
# ProcessGroupNCCL's shrink under the face: three processes on the GPU, one lost, the other
# two call torch.distributed.shrink_group (ncclCommShrink, the face's cclCommShrink) and go on.
step 09_torch_face_shrink 150 env LD_PRELOAD="$preload" python3 "$kit/torch_face_shrink.py"

# 6. CUDA graph capture: through NVIDIA's NCCL under the face (one rank), refused with an error
# on ccl's own device path (two ranks sharing the GPU), and ccl's API. Ranks on one GPU share
# a node, where a default codec stays off unless CCL_CODEC_SHM=on: these steps ask for it.
step 10_face_capture_one_rank 60 env LD_PRELOAD="$preload" CCL_CODEC=int8 CCL_CODEC_SHM=on "$kit/bin/face_device_check" capture 1
step 11_face_capture_2_threads 60 env LD_PRELOAD="$preload" CCL_CODEC=int8 CCL_CODEC_SHM=on "$kit/bin/face_device_check" capture 2
# The face with the stand-in NCCL as the real one (the program links it, the face is
# preloaded), two thread ranks on one GPU: without a codec every call goes to the stand-in's
# collectives (exact); with int8 the listed ones run on ccl over NcclLink (within bound).
step 12_face_standin_2_threads_none 60 env LD_LIBRARY_PATH="$kit/standin:$LD_LIBRARY_PATH" LD_PRELOAD="$preload" \
  "$kit/bin/face_device_check" threads 2
step 12_face_standin_2_threads_int8 60 env LD_LIBRARY_PATH="$kit/standin:$LD_LIBRARY_PATH" LD_PRELOAD="$preload" \
  CCL_CODEC=int8 CCL_CODEC_SHM=on CCL_COMPRESS=allreduce,broadcast "$kit/bin/face_device_check" threads 2
# (No captured run through the stand-in: under capture the face sends a call to the real
# library uncompressed (cclUncompressedCapture), and the stand-in, whose thread ranks order
# each other by events, cannot join two captures; step 10 captures through NVIDIA's NCCL.)

# NVIDIA's nccl-tests (a kit built with NCCL_TESTS_SRC) through the face as libnccl.so.2 with
# CCL_CODEC=none: one rank, every collective exact (-c 1), and all_reduce by graph launch
# (-G 3); then two thread ranks on the one GPU (-t 2; the kit's build takes the device modulo
# the count) with the stand-in as the real library, which NVIDIA's refuses. nccl-tests exits
# 0 with wrong values: a row passes only when it printed "0 OK".
if [ -d "$kit/nccl-tests" ] && [ $device -eq 1 ]; then
  check='set -o pipefail; "$@" 2>&1 | tee /dev/stderr | grep -q "Out of bounds values : 0 OK"'
  nt=(env LD_LIBRARY_PATH="$kit/dropin:$LD_LIBRARY_PATH" CCL_CODEC=none bash -c "$check" nccl-test)
  for b in "$kit"/nccl-tests/*_perf; do
    step "22_nccl_tests_$(basename "$b" _perf)" 30 "${nt[@]}" "$b" -b 8 -e 8M -f 8 -c 1 -g 1
  done
  step 22_nccl_tests_all_reduce_graph 30 "${nt[@]}" "$kit/nccl-tests/all_reduce_perf" -b 8 -e 8M -f 8 -c 1 -G 3
  nt2=(env LD_LIBRARY_PATH="$kit/dropin:$LD_LIBRARY_PATH" CCL_NCCL_LIBRARY="$kit/standin/libnccl.so.2"
    CCL_CODEC=none bash -c "$check" nccl-test)
  for b in all_reduce all_gather broadcast reduce reduce_scatter alltoall gather scatter sendrecv; do
    [ -x "$kit/nccl-tests/${b}_perf" ] || continue
    step "23_nccl_tests_t2_standin_$b" 30 "${nt2[@]}" "$kit/nccl-tests/${b}_perf" -b 8 -e 8M -f 8 -c 1 -t 2 -g 1
  done
fi

# 7. Numbers, the questions first: a step gets at most what is left of KIT_BUDGET.
if [ $quick -eq 0 ]; then
  # Ranks as processes (each its own CUDA context, as production runs them), over UCX's
  # shared memory: the staged link between two processes on one GPU, 1 MiB-1 GiB. The int4
  # and uncompressed rows at 256 MiB and 1 GiB are the compression-pays check; the commands
  # and host functions per call are printed by the harness.
  procs=("$kit/bin/all_reduce_perf" -M device -b "${KIT_MIN:-1M}" -e "${KIT_MAX:-1G}" -f 4 -n 5 -w 1 -c 1 --stall_dump 8)
  for z in none int8 int4; do
    step "13_all_reduce_perf_np2_$z" 90 env CCL_TIMEOUT=15 "${procs[@]}" -np 2 -Z $z
  done
  step 14_codecs_gpu_bench_1GiB 150 "$kit/bin/codecs_gpu_bench" --mib 1024 --iters 5
  # The bench at 64 MiB, then PyTorch's own quantization kernels on the same GPU (the codec
  # issue's peer) at 64 MiB and 1 GiB. The peer rotates four 64 MiB buffers; the bench's one
  # 64 MiB buffer is partly in the L2, and its header says so.
  step 19_codecs_gpu_bench_64MiB 90 "$kit/bin/codecs_gpu_bench" --mib 64 --iters 20
  step 19_torch_codec_peer 120 python3 "$kit/torch_codec_peer.py"
  # Two ranks as threads on one GPU (one process: the driver's queues and locks shared), at
  # the default 1 MiB chunks, where runs 2-8 stalled at 16-64 MiB.
  perf=("$kit/bin/all_reduce_perf" -M device -t 2 -b "${KIT_MIN:-1M}" -e "${KIT_MAX:-1G}" -f 4 -n 5 -w 1 -c 1 --stall_dump 8)
  for z in int8 int4 fp8_e4m3 mxfp4 nvfp4 topk; do
    step "15_all_reduce_perf_t2_$z" 120 env CCL_TRANSPORT=local CCL_TIMEOUT=15 "${perf[@]}" -Z $z
  done
  # Thread ranks over NcclLink (CCL_DEVICE_TRANSPORT=nccl) through the stand-in NCCL
  # (standin/libnccl.so.2: device-to-device copies ordered by events already recorded):
  # every stream at its bound, quantizers fixed-length. none exact, int8 within its bound.
  standin=(env CCL_TRANSPORT=local CCL_TIMEOUT=15 CCL_DEVICE_TRANSPORT=nccl
    CCL_NCCL_LIBRARY="$kit/standin/libnccl.so.2")
  step 16_all_reduce_perf_t2_standin_none 60 "${standin[@]}" "${perf[@]}" -e 256M
  step 16_all_reduce_perf_t2_standin_int8 60 "${standin[@]}" "${perf[@]}" -e 256M -Z int8
  for z in fp8_e4m3 mxfp4 nvfp4 topk; do
    step "17_all_reduce_perf_np2_$z" 90 env CCL_TIMEOUT=15 "${procs[@]}" -np 2 -Z $z
  done
  # Four processes, each codec of the two-process rows but none.
  for z in int8 int4 fp8_e4m3 mxfp4 nvfp4 topk; do
    step "18_all_reduce_perf_np4_$z" 120 env CCL_TIMEOUT=15 "${procs[@]}" -np 4 -Z $z
  done
  # Buffers inside a float on the device (a misaligned float load faults on a GPU).
  step 20_all_reduce_perf_np2_int8_misaligned 60 env CCL_TIMEOUT=15 "${procs[@]}" -np 2 -Z int8 -e 64M --misalign 3
fi

{
  echo
  echo "| step | result | seconds | summary |"
  echo "|---|---|---:|---|"
  for r in "${rows[@]}"; do echo "| ${r//|/ | } |"; done
  echo
  echo "total $(($(date +%s) - started)) s; device: $([ $device = 1 ] && echo present || echo none)"
} | tee "$out/summary.md"
# Every log in one file, to bring back from the device machine.
tar czf "$out/kit-logs.tar.gz" -C "$out" --exclude kit-logs.tar.gz . 2>/dev/null
exit $failed
