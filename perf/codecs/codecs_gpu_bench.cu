// SPDX-License-Identifier: BSD-3-Clause
// GPU codec throughput: encode, decode and decode-accumulate of every codec the GPU has
// kernels for, on fp32 input in device memory, in GB/s of fp32 elements, each against the
// device's copy bandwidth (cudaMemcpy device to device of the same buffer) measured in the
// same run. Times are CUDA events around `--iters` back-to-back calls after one warm-up.
// Prints one table and, with --json, one JSON line per row. Exits 0, saying why, without a
// device. These are the inputs of perf/gpu/project.py.
//   codecs_gpu_bench [--mib 64] [--iters 20] [--json]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codecs/codec.h"
#include "codecs/codec_table.h"
#include "codecs/cuda/codec_kernels.h"
#include "common/error.h"

namespace {

using namespace ccl;

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "codecs_gpu_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Milliseconds per call of `body` over `iters` calls on `stream`.
template <class Body>
double timed(cudaStream_t stream, int iters, Body&& body) {
  body();  // warm-up (workspace growth, first launch)
  cudaEvent_t a, b;
  ok(cudaEventCreate(&a), "cudaEventCreate");
  ok(cudaEventCreate(&b), "cudaEventCreate");
  ok(cudaEventRecord(a, stream), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) body();
  ok(cudaEventRecord(b, stream), "cudaEventRecord");
  ok(cudaEventSynchronize(b), "cudaEventSynchronize");
  float ms = 0;
  ok(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return static_cast<double>(ms) / iters;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 64;
  int iters = 20;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mib" && i + 1 < argc)
      mib = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--iters" && i + 1 < argc)
      iters = std::atoi(argv[++i]);
    else if (a == "--json")
      json = true;
    else {
      std::fprintf(stderr, "usage: codecs_gpu_bench [--mib N] [--iters N] [--json]\n");
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("codecs_gpu_bench: no CUDA device; nothing measured\n");
    return 0;
  }
  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const size_t n = mib * (size_t{1} << 20) / sizeof(float);
  std::vector<float> host(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (float& v : host) v = normal(rng);

  cudaStream_t stream;
  ok(cudaStreamCreate(&stream), "cudaStreamCreate");
  float *x = nullptr, *y = nullptr;
  ok(cudaMalloc(&x, n * sizeof(float)), "cudaMalloc");
  ok(cudaMalloc(&y, n * sizeof(float)), "cudaMalloc");
  ok(cudaMemcpy(x, host.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
  uint32_t* status = nullptr;
  ok(cudaMalloc(&status, sizeof(uint32_t)), "cudaMalloc");
  codec::cuda::Workspace ws;

  const double gb = static_cast<double>(n * sizeof(float)) / 1e9;
  const double copyMs = timed(stream, iters, [&] {
    ok(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
  });
  const double copyGbs = gb / (copyMs * 1e-3);
  std::printf("# %s, %zu MiB of fp32, %d calls per row; copy (device to device) %.1f GB/s\n", prop.name, mib, iters,
              copyGbs);
  std::printf("# %-12s %10s %8s %10s %8s %10s %8s %9s\n", "codec", "encode", "x copy", "decode", "x copy", "dec+acc",
              "x copy", "bits/elem");
  for (int c = 0; c < cclNumCodecs; ++c) {
    if (codec::isLowRank(c)) continue;  // no GPU kernels
    const codec::Params p = codec::defaultParams(static_cast<cclCodec_t>(c));
    const size_t cap = codec::maxEncodedBytes(p, n);
    void* stream_buf = nullptr;
    ok(cudaMalloc(&stream_buf, cap), "cudaMalloc");
    uint64_t* len = nullptr;
    ok(cudaMallocManaged(&len, sizeof(uint64_t)), "cudaMallocManaged");
    try {
      const double enc = timed(stream, iters, [&] {
        codec::cuda::encode(p, x, cclFloat32, n, stream_buf, cap, nullptr, len, ws, stream);
      });
      ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      const size_t bytes = static_cast<size_t>(*len);
      codec::Expect e;
      e.count = n;
      e.codec = p.codec;
      const double dec = timed(stream, iters, [&] {
        codec::cuda::decode(stream_buf, bytes, e, y, cclFloat32, status, ws, stream);
      });
      const double acc = timed(stream, iters, [&] {
        codec::cuda::decodeAccumulate(stream_buf, bytes, e, y, status, ws, stream);
      });
      uint32_t st = 0;
      ok(cudaMemcpy(&st, status, sizeof(st), cudaMemcpyDeviceToHost), "cudaMemcpy");
      codec::cuda::throwIfInvalid(st);
      const double bits = 8.0 * static_cast<double>(bytes) / static_cast<double>(n);
      const double e1 = gb / (enc * 1e-3), d1 = gb / (dec * 1e-3), a1 = gb / (acc * 1e-3);
      std::printf("  %-12s %10.1f %8.2f %10.1f %8.2f %10.1f %8.2f %9.2f\n", codec::codecInfo(c).name, e1,
                  e1 / copyGbs, d1, d1 / copyGbs, a1, a1 / copyGbs, bits);
      if (json)
        std::printf("{\"device\": \"%s\", \"codec\": \"%s\", \"mib\": %zu, \"encode_gbs\": %.2f, \"decode_gbs\": %.2f, "
                    "\"decode_acc_gbs\": %.2f, \"copy_gbs\": %.2f, \"bits_per_elem\": %.3f}\n",
                    prop.name, codec::codecInfo(c).name, mib, e1, d1, a1, copyGbs, bits);
    } catch (const Error& err) {
      std::printf("  %-12s failed: %s\n", codec::codecInfo(c).name, err.what());
    }
    cudaFree(stream_buf);
    cudaFree(len);
  }
  cudaFree(x);
  cudaFree(y);
  cudaFree(status);
  cudaStreamDestroy(stream);
  return 0;
}
