#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the device kit: a self-contained folder that runs every GPU check of ccl with one
# command on a machine with a GPU (CUDA 13 driver; PyTorch, NVIDIA's NCCL wheel; no UCX, no
# GoogleTest, no network needed there). CUDA code for sm_90 only (H100, H200), no MPI; UCX's
# libraries travel in the kit (ranks as processes: all_reduce_perf -np N); test binaries with
# GoogleTest linked in, stripped.
#   scripts/gpu_kit.sh            build into gpu-kit/ and pack gpu-kit.tar.xz (at most 60 MiB)
#   scripts/gpu_kit.sh --check    the same, then run the kit here with an empty environment and
#                                 only the kit's libraries: every step must load and, without a
#                                 device, say so (what CI runs). It builds the quantizers' one
#                                 generic loop (CCL_CODEC_SPECIALIZE=OFF: the main build compiles
#                                 and tests the specialised ones), so its kit is a few MiB
#                                 smaller than the one a device runs, which is built without it
# On the device machine: tar xJf gpu-kit.tar.xz && gpu-kit/run.sh (tests/gpu_kit/run.sh). xz, not
# gzip: the kit with nccl-tests is 57 MiB under gzip and 29 under xz, and what travels to the
# device machine (the checkout and the kit) must stay under 64 MiB.
# BUILD_DIR (default build-kit) and KIT_DIR (default gpu-kit) are inside the checkout and ignored.
# NCCL_TESTS_SRC=<a checkout of NVIDIA's nccl-tests> adds its *_perf binaries (about 7 MiB
# packed), which run.sh runs through the face on a device.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=0
[ "${1:-}" = --check ] && check=1
build=${BUILD_DIR:-$root/build-kit}
kit=${KIT_DIR:-$root/gpu-kit}
max_packed=$((60 * 1024 * 1024))

"$root/scripts/setup.sh" >/dev/null
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "gpu_kit: no CUDA compiler on this machine: the kit cannot be built (skipped)"
  exit 0
fi

specialize=ON
[ $check -eq 1 ] && specialize=OFF
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCCL_ENABLE_CUDA=ON -DCCL_ENABLE_NCCL=ON -DCCL_ENABLE_UCX=ON -DCCL_BUILD_EXAMPLES=OFF \
  -DCCL_CODEC_SPECIALIZE=$specialize -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null
targets=(ccl ccl_nccl ccl_nccl_dropin codecs_gpu_test stream_executor_gpu_test api_gpu_test face_device_check
  all_reduce_perf codecs_gpu_bench ccltest_standin_nccl)
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

rm -rf "$kit"
mkdir -p "$kit/bin" "$kit/lib" "$kit/dropin" "$kit/standin"
for f in tests/unit/codecs/codecs_gpu_test tests/unit/collectives/stream_executor_gpu_test tests/e2e/api/api_gpu_test \
  tests/gpu_kit/face_device_check perf/collectives/all_reduce_perf perf/codecs/codecs_gpu_bench; do
  strip --strip-unneeded -o "$kit/bin/$(basename "$f")" "$build/$f"
done
# Libraries under their SONAMEs, the names the binaries and LD_PRELOAD ask for.
strip --strip-unneeded -o "$kit/lib/libccl.so.0" "$build/src/api/libccl.so.0"
strip --strip-unneeded -o "$kit/lib/libccl_nccl.so.0" "$build/src/nccl/libccl_nccl.so.0"
strip --strip-unneeded -o "$kit/dropin/libnccl.so.2" "$build/src/nccl/dropin/libnccl.so.2"
# The stand-in NCCL for thread ranks on one GPU (tests/gpu_kit/standin_nccl.cc): test code.
strip --strip-unneeded -o "$kit/standin/libnccl.so.2" "$build/tests/gpu_kit/standin/libnccl.so.2"
# NVIDIA's nccl-tests, when a checkout is given (NCCL_TESTS_SRC, e.g. a public snapshot; never
# part of this repository): built against NVIDIA's nccl.h for the kit's GPU, run there
# through the face (run.sh). They need libcudart.so.13, which run.sh finds on the machine.
if [ -n "${NCCL_TESTS_SRC:-}" ]; then
  # Built from a copy whose device choice is taken modulo the device count, so that -t 2
  # (two thread ranks, through the stand-in) runs on one GPU; rank i of a process otherwise
  # takes device (NCCL_TESTS_DEVICE or its first) + i.
  tests_src="$build/nccl-tests-src"
  rm -rf "$tests_src"
  cp -r "$NCCL_TESTS_SRC" "$tests_src"
  choice='gpus\[i\] = (gpu0 != -1 ? gpu0 : localRank\*nThreads\*nGpus) + i;'
  if grep -q "$choice" "$tests_src/src/common.cu"; then
    sed -i "s/$choice/&\n    { int devices = 1; CUDACHECK(cudaGetDeviceCount(\&devices)); gpus[i] %= devices; }/" \
      "$tests_src/src/common.cu"
  else
    echo "gpu_kit: nccl-tests' device choice not found in src/common.cu: -t 2 will need two GPUs" >&2
  fi
  # The same choice where it lists the devices (src/util.cu in 2.19), which refuses a device
  # past the count before common.cu's choice is made.
  listed='const int cudaDev = (gpu0 != -1 ? gpu0 : localRank\*nThreads\*nGpus) + i;'
  if grep -q "$listed" "$tests_src"/src/*.cu; then
    sed -i "s/$listed/const int cudaDev = ((gpu0 != -1 ? gpu0 : localRank*nThreads*nGpus) + i) % available_devices;/" \
      "$tests_src"/src/*.cu
  fi
  if ! make -C "$tests_src/src" -j "$(nproc)" BUILDDIR="$build/nccl-tests" NCCL_HOME=/usr/local/cuda \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >"$build/nccl-tests.log" 2>&1; then
    echo "gpu_kit: nccl-tests did not build from $NCCL_TESTS_SRC (see $build/nccl-tests.log)" >&2
    exit 1
  fi
  mkdir -p "$kit/nccl-tests"
  for f in "$build"/nccl-tests/*_perf; do strip --strip-unneeded -o "$kit/nccl-tests/$(basename "$f")" "$f"; done
fi
# UCX (Debian's 1.13: host memory, shared memory and TCP between processes) and what it needs;
# its transport modules in lib/ucx (run.sh points UCX_MODULE_DIR there).
multiarch=/usr/lib/x86_64-linux-gnu
mkdir -p "$kit/lib/ucx"
for l in libucp.so.0 libucs.so.0 libuct.so.0 libucm.so.0 libnuma.so.1; do cp -L "$multiarch/$l" "$kit/lib/$l"; done
cp -L "$multiarch/ucx/libuct_cma.so.0" "$kit/lib/ucx/"
cp "$root/tests/gpu_kit/run.sh" "$root/tests/gpu_kit/torch_face_check.py" "$root/tests/gpu_kit/torch_face_shrink.py" \
  "$root/tests/gpu_kit/torch_codec_peer.py" "$kit/"
git -C "$root" rev-parse --short HEAD >"$kit/COMMIT" 2>/dev/null || echo unknown >"$kit/COMMIT"

# Every library a binary needs is the kit's, NVIDIA's NCCL (found where run.sh runs) or the
# C/C++ runtime any Linux with PyTorch has.
for f in "$kit"/bin/* "$kit"/lib/*.so* "$kit"/lib/ucx/* "$kit"/dropin/* "$kit"/standin/*; do
  for need in $(readelf -d "$f" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
    case $need in
      libccl.so.0 | libnccl.so.2 | libc.so.6 | libm.so.6 | libstdc++.so.6 | libgcc_s.so.1 | libdl.so.2 | \
        libpthread.so.0 | librt.so.1 | ld-linux-x86-64.so.2 | libucp.so.0 | libucs.so.0 | libuct.so.0 | \
        libucm.so.0 | libnuma.so.1) ;;
      *)
        echo "gpu_kit: $(basename "$f") needs $need, which the kit does not carry" >&2
        exit 1
        ;;
    esac
  done
done

rm -f "$root/gpu-kit.tar.gz"
tar cf - -C "$(dirname "$kit")" "$(basename "$kit")" | xz -T0 -6 >"$root/gpu-kit.tar.xz"
packed=$(stat -c %s "$root/gpu-kit.tar.xz")
echo "gpu_kit: $kit, $(du -sm "$kit" | cut -f1) MiB; packed $root/gpu-kit.tar.xz, $((packed / 1024 / 1024)) MiB"
if [ "$packed" -gt "$max_packed" ]; then
  echo "gpu_kit: the packed kit is larger than 60 MiB" >&2
  exit 1
fi

if [ $check -eq 1 ]; then
  # No variable of this shell, no library outside the kit but the system's and NVIDIA's.
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="${HOME:-/root}" KIT_BUDGET=600 OUT="$build/kit-check" \
    bash "$kit/run.sh"
fi
