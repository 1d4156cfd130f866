// SPDX-License-Identifier: BSD-3-Clause
// Sparsifier decoder on the GPU. randk regenerates its positions from the seed in the
// stream, one thread per kept element. topk/threshold walk the index section with one
// thread block, tile by tile, carrying the rank and the running index across tiles with
// block scans (CUB): a LEB128 gap is decoded by the thread holding its last byte (it looks
// back at most four bytes), a bitmap word by popcount. The walk runs twice: once to
// validate exactly what the CPU's forEachGapIndex / forEachBitmapIndex check, then, only if
// the stream is valid, to scatter the values.
#include <cub/block/block_scan.cuh>

#include "codecs/cuda/cuda_check.h"
#include "codecs/cuda/device_elements.cuh"
#include "codecs/cuda/device_wire.cuh"
#include "codecs/cuda/kernel_preload.h"
#include "codecs/cuda/kernels_internal.h"
#include "codecs/cuda/sparse_common.cuh"

namespace ccl::codec::cuda::detail {
namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kBytesPerThread = 4;
using Scan = cub::BlockScan<unsigned long long, kThreads>;

__device__ inline float valueAt(const uint8_t* values, bool fp16, uint64_t r) {
  return fp16 ? fp::halfToFloat(static_cast<uint16_t>(loadLe(values + 2 * r, 2)))
              : fp::bitsFloat(loadLe(values + 4 * r, 4));
}

template <class T>
struct StoreSink {
  typename T::Storage* y;
  __device__ void one(uint64_t i, float v) const { T::store(y, i, v); }
};

struct AccumulateSink {
  float* acc;
  __device__ void one(uint64_t i, float v) const { acc[i] += v; }
};

struct Section {
  const uint8_t* idx;
  const uint8_t* values;
  bool fp16;
  uint64_t bytes, nnz, n;
};

__device__ inline Section sectionOf(const uint8_t* in, const Header& h) {
  const Layout l = layoutOf(h);
  return Section{in + l.raw, in + l.codes, (h.flags & kFlagFp16Values) != 0, h.indexBytes, h.aux, h.count};
}

// The gap ending at byte p, from its (at most five) bytes; false if it has more.
__device__ inline bool gapEndingAt(const uint8_t* s, uint64_t p, uint64_t& gap) {
  uint32_t c = 0;
  while (c < 5 && p > c && (s[p - c - 1] & 0x80)) ++c;
  if (c == 5) return false;
  gap = 0;
  for (uint32_t k = 0; k <= c; ++k) gap |= static_cast<uint64_t>(s[p - c + k] & 0x7f) << (7 * k);
  return true;
}

template <bool kApply, class Sink>
__device__ void walkGaps(const Section& s, Sink sink, uint32_t& bad) {
  __shared__ typename Scan::TempStorage temp;
  unsigned long long rankBase = 0, indexBase = 0;
  for (uint64_t tile = 0; tile < s.bytes; tile += kThreads * kBytesPerThread) {
    unsigned long long ends[kBytesPerThread], steps[kBytesPerThread];  // steps: gap + 1 at an end byte
    for (unsigned q = 0; q < kBytesPerThread; ++q) {
      const uint64_t p = tile + threadIdx.x * kBytesPerThread + q;
      uint64_t gap = 0;
      const bool end = p < s.bytes && !(s.idx[p] & 0x80);
      if (end && (!gapEndingAt(s.idx, p, gap) || gap >= s.n)) bad = 1;  // gap >= n: index >= n
      ends[q] = end ? 1 : 0;
      steps[q] = end && gap < s.n ? gap + 1 : 0;
    }
    unsigned long long endTotal, stepTotal;
    Scan(temp).ExclusiveSum(ends, ends, endTotal);
    __syncthreads();
    Scan(temp).ExclusiveSum(steps, steps, stepTotal);
    __syncthreads();
    for (unsigned q = 0; q < kBytesPerThread; ++q) {
      const uint64_t p = tile + threadIdx.x * kBytesPerThread + q;
      if (p >= s.bytes || (s.idx[p] & 0x80)) continue;
      const uint64_t r = rankBase + ends[q];
      uint64_t gap = 0;
      gapEndingAt(s.idx, p, gap);
      const uint64_t index = indexBase + steps[q] + gap;  // exclusive prefix of (gap+1) plus this gap
      if (r >= s.nnz || index >= s.n) {
        bad = 1;
      } else if (kApply) {
        sink.one(index, valueAt(s.values, s.fp16, r));
      }
    }
    rankBase += endTotal;
    indexBase += stepTotal;
  }
  if (rankBase != s.nnz || (s.bytes > 0 && (s.idx[s.bytes - 1] & 0x80))) bad = 1;
}

template <bool kApply, class Sink>
__device__ void walkBitmap(const Section& s, Sink sink, uint32_t& bad) {
  __shared__ typename Scan::TempStorage temp;
  const uint64_t bytes = (s.n + 7) / 8;
  if (s.n % 8 && (s.idx[bytes - 1] >> (s.n % 8)) != 0) bad = 1;
  unsigned long long rankBase = 0;
  for (uint64_t tile = 0; tile < bytes; tile += kThreads * kBytesPerThread) {
    const uint64_t p0 = tile + threadIdx.x * kBytesPerThread;
    uint32_t word = 0;
    for (unsigned q = 0; q < kBytesPerThread; ++q)
      word |= p0 + q < bytes ? static_cast<uint32_t>(s.idx[p0 + q]) << (8 * q) : 0u;
    unsigned long long rank, total;
    Scan(temp).ExclusiveSum(static_cast<unsigned long long>(__popc(word)), rank, total);
    __syncthreads();
    for (uint64_t r = rankBase + rank; word; word &= word - 1, ++r) {
      const uint64_t index = p0 * 8 + __ffs(word) - 1;
      if (r >= s.nnz) {
        bad = 1;
      } else if (kApply) {
        sink.one(index, valueAt(s.values, s.fp16, r));
      }
    }
    rankBase += total;
  }
  if (rankBase != s.nnz) bad = 1;
}

template <bool kApply, class Sink>
__global__ void __launch_bounds__(kThreads) walkIndexSection(const uint8_t* in, DecodeState* st, Sink sink) {
  if (st->status) return;
  const Section s = sectionOf(in, st->h);
  uint32_t bad = 0;
  if (st->h.flags & kFlagBitmap) {
    walkBitmap<kApply>(s, sink, bad);
  } else {
    walkGaps<kApply>(s, sink, bad);
  }
  if (bad && !kApply) atomicOr(&st->status, kStatusBadIndices);
}

__global__ void checkRandK(DecodeState* st) {
  if (st->status == 0 && st->h.count > 0 && st->h.aux == 0) st->status = kStatusBadIndices;
}

// Loaded with the rest of this file's kernels before any flag kernel runs (kernel_preload.h).
const ::ccl::codec::cuda::KernelLibrary kKernels(&checkRandK);

template <class Sink>
__global__ void __launch_bounds__(kThreads) scatterRandK(const uint8_t* in, const DecodeState* st, Sink sink) {
  if (st->status) return;
  const Section s = sectionOf(in, st->h);
  const math::RngKey key = math::rngKey(loadLe(in + kHeaderBytes, 8));
  for (uint64_t j = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; j < s.nnz; j += uint64_t{gridDim.x} * blockDim.x)
    sink.one(devRandomKIndex(key, s.n, s.nnz, j), valueAt(s.values, s.fp16, j));
}

template <class T>
__global__ void __launch_bounds__(kThreads) zeroOutput(const DecodeState* st, typename T::Storage* y, uint64_t n) {
  if (st->status) return;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += uint64_t{gridDim.x} * blockDim.x)
    T::store(y, i, 0.0f);
}

// A stream with kFlagNonFinite decodes as NaN everywhere (added to an accumulator: NaN).
template <class T>
__global__ void __launch_bounds__(kThreads)
    markNonFinite(const DecodeState* st, typename T::Storage* y, float* acc, uint64_t n) {
  if (st->status || !(st->h.flags & kFlagNonFinite)) return;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += uint64_t{gridDim.x} * blockDim.x) {
    if (acc) {
      acc[i] += markedBlockValue();
    } else {
      T::store(y, i, markedBlockValue());
    }
  }
}

template <class Sink>
void launchScatter(const uint8_t* in, const Expect& expect, DecodeState* st, Sink sink, cudaStream_t stream) {
  if (expect.codec == cclCodecRandK) {
    scatterRandK<<<gridFor(expect.count, kThreads), kThreads, 0, stream>>>(in, st, sink);
    checkLaunch("scatterRandK");
  } else {
    walkIndexSection<true><<<1, kThreads, 0, stream>>>(in, st, sink);
    checkLaunch("walkIndexSection");
  }
}

}  // namespace

void sparsifierDecode(const uint8_t* in, size_t inBytes, const Expect& expect, Target target, uint32_t* status,
                      Workspace& ws, cudaStream_t stream) {
  auto* st = static_cast<DecodeState*>(ws.get(sizeof(DecodeState), stream));
  startDecode(in, inBytes, expect, st, stream);
  if (expect.codec == cclCodecRandK) {
    checkRandK<<<1, 1, 0, stream>>>(st);
    checkLaunch("checkRandK");
  } else {
    walkIndexSection<false><<<1, kThreads, 0, stream>>>(in, st, AccumulateSink{nullptr});
    checkLaunch("walkIndexSection (validate)");
  }
  if (target.accumulate) {
    auto* acc = static_cast<float*>(target.y);
    launchScatter(in, expect, st, AccumulateSink{acc}, stream);
    markNonFinite<DevF32><<<gridFor(expect.count, kThreads), kThreads, 0, stream>>>(st, nullptr, acc, expect.count);
    checkLaunch("markNonFinite");
  } else {
    withDeviceType(target.type, [&](auto tag) {
      using T = decltype(tag);
      auto* y = static_cast<typename T::Storage*>(target.y);
      zeroOutput<T><<<gridFor(expect.count, kThreads), kThreads, 0, stream>>>(st, y, expect.count);
      checkLaunch("zeroOutput");
      launchScatter(in, expect, st, StoreSink<T>{y}, stream);
      markNonFinite<T><<<gridFor(expect.count, kThreads), kThreads, 0, stream>>>(st, y, nullptr, expect.count);
      checkLaunch("markNonFinite");
    });
  }
  finishDecode(st, status, ws.orStatus, stream);
}

}  // namespace ccl::codec::cuda::detail
