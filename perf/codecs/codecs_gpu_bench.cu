// SPDX-License-Identifier: BSD-3-Clause
// GPU codec throughput: encode, decode and decode-accumulate of every codec the GPU has
// kernels for, on fp32 input in device memory, the encode of a quantizer's fixed-length
// stream (what a device link posts), and the fused hop (a ring's decode-add-encode,
// one kernel: codec::cuda::decodeAddEncodeBatch of one hop) of the codecs whose fixed-length
// streams it takes (traffic: the received stream, the local fp32 and the sent stream). Two figures per operation: GB/s
// of fp32 elements (what perf/gpu/project.py takes), and the memory traffic (bytes read plus bytes written: encode
// reads 4n and writes the stream, decode the reverse, decode-accumulate also reads the accumulator) over the
// device-to-device copy's traffic (2 x 4n) in the same run. The default 1 GiB buffer is many times the L2 (50-60 MB on
// an H100/H200), so no operation is served from cache; a buffer under 8 L2s is flagged. Times are CUDA events around
// `--iters` back-to-back calls after one warm-up, so launch costs are spread over calls of
// hundreds of microseconds. Each codec's round trip error is printed beside its speeds, as
// tests/gpu_kit/torch_codec_peer.py prints PyTorch's: rms and max of |x - D(E(x))| over
// max|x|. Prints one table and, with --json, one JSON line per row. Exits
// 0, saying why, without a device.
//   codecs_gpu_bench [--mib 1024] [--iters 20] [--json]
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <utility>
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

// The round trip's error terms over the grid: the sum of (y - x)^2, and the largest |y - x| and
// |x| as the bits of non-negative floats (which order as unsigned integers).
__global__ void roundTripError(const float* x, const float* y, size_t n, double* sumSq, unsigned* maxDiff,
                               unsigned* maxAbs) {
  double s = 0;
  float md = 0, ma = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    const float d = fabsf(y[i] - x[i]);
    s += static_cast<double>(d) * d;
    md = fmaxf(md, d);
    ma = fmaxf(ma, fabsf(x[i]));
  }
  for (int o = 16; o > 0; o /= 2) {
    s += __shfl_down_sync(0xffffffffu, s, o);
    md = fmaxf(md, __shfl_down_sync(0xffffffffu, md, o));
    ma = fmaxf(ma, __shfl_down_sync(0xffffffffu, ma, o));
  }
  if (threadIdx.x % 32 == 0) {
    atomicAdd(sumSq, s);
    atomicMax(maxDiff, __float_as_uint(md));
    atomicMax(maxAbs, __float_as_uint(ma));
  }
}

struct RoundTrip {
  double rms = 0, max = 0;  // over max|x|
};

RoundTrip roundTrip(const float* x, const float* y, size_t n, cudaStream_t stream) {
  struct Terms {
    double sumSq;
    unsigned maxDiff, maxAbs;
  };
  Terms* t = nullptr;
  ok(cudaMalloc(&t, sizeof(Terms)), "cudaMalloc");
  ok(cudaMemsetAsync(t, 0, sizeof(Terms), stream), "cudaMemsetAsync");
  roundTripError<<<1024, 256, 0, stream>>>(x, y, n, &t->sumSq, &t->maxDiff, &t->maxAbs);
  ok(cudaGetLastError(), "roundTripError");
  Terms h{};
  ok(cudaMemcpyAsync(&h, t, sizeof(h), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  cudaFree(t);
  float md, ma;
  std::memcpy(&md, &h.maxDiff, sizeof(md));
  std::memcpy(&ma, &h.maxAbs, sizeof(ma));
  if (ma == 0) return {};
  return {std::sqrt(h.sumSq / static_cast<double>(n)) / ma, md / ma};
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 1024;
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
  ok(cudaMemset(status, 0, sizeof(uint32_t)), "cudaMemset");
  codec::cuda::Workspace ws;

  const double gb = static_cast<double>(n * sizeof(float)) / 1e9;
  const double copyMs = timed(stream, iters, [&] {
    ok(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
  });
  const double copyTraffic = 2 * gb / (copyMs * 1e-3);  // bytes read plus written
  std::printf(
      "# %s, %zu MiB of fp32%s, %d calls per row; copy (device to device) %.1f GB/s read+written\n", prop.name, mib,
      mib * (size_t{1} << 20) < 8 * static_cast<size_t>(prop.l2CacheSize) ? " (UNDER 8 L2s: partly cached)" : "", iters,
      copyTraffic);
  std::printf("# GB/s of fp32 elements; traffic = (read + written) / time over the copy's\n");
  std::printf("# %-12s %10s %8s %10s %8s %10s %8s %9s %10s %8s %10s %8s %10s %10s\n", "codec", "encode", "traffic",
              "decode", "traffic", "dec+acc", "traffic", "bits/elem", "enc fixed", "traffic", "hop", "traffic",
              "rms err", "max err");
  for (int c = 0; c < cclNumCodecs; ++c) {
    if (codec::isLowRank(c)) continue;  // no GPU kernels
    const codec::Params p = codec::defaultParams(static_cast<cclCodec_t>(c));
    const size_t cap = codec::maxEncodedBytes(p, n);
    void* stream_buf = nullptr;
    ok(cudaMalloc(&stream_buf, cap), "cudaMalloc");
    uint64_t* len = nullptr;
    ok(cudaMallocManaged(&len, sizeof(uint64_t)), "cudaMallocManaged");
    try {
      const double enc = timed(
          stream, iters, [&] { codec::cuda::encode(p, x, cclFloat32, n, stream_buf, cap, nullptr, len, ws, stream); });
      ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      const size_t bytes = static_cast<size_t>(*len);
      codec::Expect e;
      e.count = n;
      e.codec = p.codec;
      const double dec =
          timed(stream, iters, [&] { codec::cuda::decode(stream_buf, bytes, e, y, cclFloat32, status, ws, stream); });
      const RoundTrip err = roundTrip(x, y, n, stream);  // before decode-accumulate adds to y
      const double acc =
          timed(stream, iters, [&] { codec::cuda::decodeAccumulate(stream_buf, bytes, e, y, status, ws, stream); });
      uint32_t st = 0;
      ok(cudaMemcpy(&st, status, sizeof(st), cudaMemcpyDeviceToHost), "cudaMemcpy");
      codec::cuda::throwIfInvalid(st);
      // The encode of a fixed-length stream (what a device link posts: no raw entries, no scan),
      // where the quantizers' streams are variable-length by default; and the fused hop on such
      // streams: x's stream added to x, encoded again.
      double f1 = 0, ft = 0, h1 = 0, ht = 0;
      const codec::Params fixed = codec::fixLength(p);
      // The timed encodes leave x's fixed-length stream in `fs`: the hop's received stream.
      void* fs = nullptr;
      const size_t fcap = codec::maxEncodedBytes(fixed, n);
      if (fixed.fixedLength && !p.fixedLength) {
        ok(cudaMalloc(&fs, fcap), "cudaMalloc");
        const double ms = timed(stream, iters, [&] {
          codec::cuda::encode(fixed, x, cclFloat32, n, fs, fcap, nullptr, nullptr, ws, stream);
        });
        ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        f1 = gb / (ms * 1e-3);
        ft = (gb + static_cast<double>(fcap) / 1e9) / (ms * 1e-3);
      }
      if (fs && codec::cuda::fusesHops(fixed)) {
        void* out = nullptr;
        ok(cudaMalloc(&out, fcap), "cudaMalloc");
        const codec::cuda::HopItem hop{fs, fcap, x, n, out, fcap, nullptr, 7, false};
        const double ms = timed(stream, iters, [&] {
          codec::cuda::decodeAddEncodeBatch(fixed, cclFloat32, 1.0f, std::span(&hop, 1), status, ws, stream);
        });
        ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        h1 = gb / (ms * 1e-3);
        ht = (2 * static_cast<double>(fcap) / 1e9 + gb) / (ms * 1e-3);
        cudaFree(out);
      }
      cudaFree(fs);
      const double bits = 8.0 * static_cast<double>(bytes) / static_cast<double>(n);
      const double e1 = gb / (enc * 1e-3), d1 = gb / (dec * 1e-3), a1 = gb / (acc * 1e-3);
      const double sgb = static_cast<double>(bytes) / 1e9;  // the stream
      const double et = (gb + sgb) / (enc * 1e-3), dt = (sgb + gb) / (dec * 1e-3), at = (sgb + 2 * gb) / (acc * 1e-3);
      std::printf("  %-12s %10.1f %8.2f %10.1f %8.2f %10.1f %8.2f %9.2f", codec::codecInfo(c).name, e1,
                  et / copyTraffic, d1, dt / copyTraffic, a1, at / copyTraffic, bits);
      for (const auto& [g, t] : {std::pair{f1, ft}, std::pair{h1, ht}}) {
        if (g > 0)
          std::printf(" %10.1f %8.2f", g, t / copyTraffic);
        else
          std::printf(" %10s %8s", "-", "-");
      }
      std::printf(" %10.3e %10.3e\n", err.rms, err.max);
      if (json)
        std::printf(
            "{\"device\": \"%s\", \"codec\": \"%s\", \"mib\": %zu, \"encode_gbs\": %.2f, \"decode_gbs\": %.2f, "
            "\"decode_acc_gbs\": %.2f, \"encode_traffic_gbs\": %.2f, \"decode_traffic_gbs\": %.2f, "
            "\"decode_acc_traffic_gbs\": %.2f, \"copy_traffic_gbs\": %.2f, \"bits_per_elem\": %.3f, "
            "\"encode_fixed_gbs\": %.2f, \"encode_fixed_traffic_gbs\": %.2f, \"hop_gbs\": %.2f, \"hop_traffic_gbs\": "
            "%.2f, "
            "\"rms_err\": %.4e, \"max_err\": %.4e}\n",
            prop.name, codec::codecInfo(c).name, mib, e1, d1, a1, et, dt, at, copyTraffic, bits, f1, ft, h1, ht,
            err.rms, err.max);
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
