// SPDX-License-Identifier: BSD-3-Clause
// Block quantizer decoder on the GPU. The stream is validated first, as the CPU decoder
// does before writing anything: every scale (a value the encoder can write, or the raw
// marker) and every raw entry (increasing block numbers naming exactly the marked blocks).
// Then one thread per group of eight elements dequantizes with the shared element math,
// and raw entries are copied (a fixed-length stream's marked blocks decode as NaN). Every
// kernel after the header check does nothing once the status word is non-zero, so y (or
// acc) is only written for a valid stream.
#include <algorithm>
#include <memory>
#include <span>

#include "codecs/cuda/cuda_check.h"
#include "codecs/cuda/device_elements.cuh"
#include "codecs/cuda/device_wire.cuh"
#include "codecs/cuda/kernels_internal.h"
#include "codecs/cuda/quantizer_view.cuh"
#include "codecs/quantizer_kinds.h"
#include "common/kernel_registry.h"

namespace ccl::codec::cuda::detail {
namespace {

constexpr unsigned kThreads = kViewThreads;

template <class K>
__global__ void __launch_bounds__(kThreads) validateBlocks(const uint8_t* in, DecodeState* st) {
  validate<K>(in, st);
}

// Entries are distinct, in range and marked; equal counts make them exactly the marked set.
// (A fixed-length stream has no entries: its marked blocks are non-finite.)
__global__ void checkRawCount(DecodeState* st) {
  if (st->status == 0 && !(st->h.flags & kFlagFixedLength) && st->counter != st->h.aux)
    st->status |= kStatusBadRawBlocks;
}

// Loaded with the rest of this file's kernels before any flag kernel runs
// (collectives/exec/cuda/kernel_preload.h).
const ::ccl::KernelLibrary kKernels(&checkRawCount);

template <class T>
struct StoreSink {
  typename T::Storage* y;
  bool vec;
  __device__ void group(uint64_t i, uint32_t cnt, const float v[kGroup]) const { storeGroup<T>(y, i, cnt, vec, v); }
  __device__ void one(uint64_t i, float v) const { T::store(y, i, v); }
};

struct AccumulateSink {
  float* acc;
  bool vec;
  __device__ void group(uint64_t i, uint32_t cnt, const float v[kGroup]) const {
    float a[kGroup];
    loadGroup<DevF32>(acc, i, cnt, vec, a);
    for (int t = 0; t < kGroup; ++t) a[t] += v[t];
    storeGroup<DevF32>(acc, i, cnt, vec, a);
  }
  __device__ void one(uint64_t i, float v) const { acc[i] += v; }
};

// One thread per group of eight elements; a group never straddles blocks (blockSize % 8 == 0).
// The thread's share of the stream's groups (the x dimension of the grid), written to sink.
template <class K, class Sink>
__device__ void dequantize(const uint8_t* in, const DecodeState* st, const Sink& sink, bool vecIn) {
  const View v = viewOf(st);
  const uint64_t groups = (v.h.count + kGroup - 1) / kGroup;
  constexpr uint32_t kMask = (1u << K::kBits) - 1;
  for (uint64_t g = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; g < groups;
       g += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t i = g * kGroup;
    float s;
    const bool ok = K::readScale(scaleAt(in, v, i / v.h.blockSize), v.fp16, v.t, s) == ScaleRead::kOk;
    if (!ok && !v.fixedLength) continue;  // a raw block: copyRawBlocks writes it
    const uint32_t cnt = v.h.count - i < kGroup ? static_cast<uint32_t>(v.h.count - i) : kGroup;
    float y[kGroup];
    if (ok) {
      const uint64_t word = loadCodes(in + v.l.codes + i * K::kBits / 8, (cnt * K::kBits + 7) / 8, K::kBits, vecIn);
      for (int t = 0; t < kGroup; ++t) y[t] = K::dequant(static_cast<uint32_t>(word >> (t * K::kBits)) & kMask, s);
    } else {
      for (int t = 0; t < kGroup; ++t) y[t] = markedBlockValue();
    }
    sink.group(i, cnt, y);
  }
}

template <class K, class Sink>
__global__ void __launch_bounds__(kThreads)
    dequantizeGroups(const uint8_t* in, const DecodeState* st, Sink sink, bool vecIn) {
  if (st->status) return;
  dequantize<K>(in, st, sink, vecIn);
}

// The raw entries' elements, a thread block per entry in turn.
template <class Sink>
__device__ void copyRaw(const uint8_t* in, const DecodeState* st, const Sink& sink) {
  const View v = viewOf(st);
  for (uint64_t r = blockIdx.x; r < v.h.aux; r += gridDim.x) {
    const uint8_t* entry = in + v.l.raw + r * entryBytes(v);
    const uint64_t off = uint64_t{loadLe(entry, 4)} * v.h.blockSize;
    const uint64_t len = v.h.count - off < v.h.blockSize ? v.h.count - off : v.h.blockSize;
    for (uint32_t i = threadIdx.x; i < len; i += blockDim.x)
      sink.one(off + i, fp::bitsFloat(loadLe(entry + 8 + 4 * i, 4)));
  }
}

template <class Sink>
__global__ void __launch_bounds__(kThreads) copyRawBlocks(const uint8_t* in, const DecodeState* st, Sink sink) {
  if (st->status) return;
  copyRaw(in, st, sink);
}

template <class K, class MakeSink>
__global__ void __launch_bounds__(kThreads) batchDequantize(const __grid_constant__ DecodeTable t, MakeSink make) {
  const DecodeItem& d = t.d[blockIdx.y];
  const uint32_t bad = finalStatus(d.st);
  // A plain read-modify-write, as copyStatus's: the word may be host-mapped memory, where a
  // device atomic is not promised. Two failing streams racing can lose one's bits, never
  // both: the word ends non-zero, and the call fails.
  if (blockIdx.x == 0 && threadIdx.x == 0 && bad) {
    volatile uint32_t* word = t.status;
    *word = *word | bad;
  }
  if (bad) return;
  const auto sink = make(d.y, d.vecY);
  dequantize<K>(d.in, d.st, sink, d.vecIn);
  copyRaw(d.in, d.st, sink);
}

template <class T>
struct MakeStoreSink {
  __device__ StoreSink<T> operator()(void* y, bool vec) const {
    return StoreSink<T>{static_cast<typename T::Storage*>(y), vec};
  }
};
struct MakeAccumulateSink {
  __device__ AccumulateSink operator()(void* y, bool vec) const { return AccumulateSink{static_cast<float*>(y), vec}; }
};

template <class K, class Sink>
void launchDecode(const uint8_t* in, const Expect& expect, DecodeState* st, Sink sink, cudaStream_t stream) {
  const unsigned grid = gridFor(expect.count / kGroup + 1, kThreads);
  validateBlocks<K><<<grid, kThreads, 0, stream>>>(in, st);
  checkLaunch("validateBlocks");
  checkRawCount<<<1, 1, 0, stream>>>(st);
  checkLaunch("checkRawCount");
  dequantizeGroups<K><<<grid, kThreads, 0, stream>>>(in, st, sink, aligned16(in));
  checkLaunch("dequantizeGroups");
  copyRawBlocks<<<gridFor(expect.count / 8 + 1, 1, 1024), kThreads, 0, stream>>>(in, st, sink);
  checkLaunch("copyRawBlocks");
}

}  // namespace

void quantizerDecode(const uint8_t* in, size_t inBytes, const Expect& expect, Target target, uint32_t* status,
                     Workspace& ws, cudaStream_t stream) {
  auto* st = static_cast<DecodeState*>(ws.get(sizeof(DecodeState), stream));
  startDecode(in, inBytes, expect, st, stream);
  withQuantizerKind(expect.codec, [&](auto kind) {
    using K = decltype(kind);
    if (target.accumulate) {
      launchDecode<K>(in, expect, st, AccumulateSink{static_cast<float*>(target.y), aligned16(target.y)}, stream);
      return;
    }
    withDeviceType(target.type, [&](auto tag) {
      using T = decltype(tag);
      StoreSink<T> sink{static_cast<typename T::Storage*>(target.y), aligned16(target.y)};
      launchDecode<K>(in, expect, st, sink, stream);
    });
  });
  finishDecode(st, status, ws.orStatus, stream);
}

void quantizerDecodeBatch(std::span<const DecodeRequest> items, int codec, Target target, uint32_t* status, bool orInto,
                          Workspace& ws, cudaStream_t stream) {
  if (items.empty()) return;
  auto* states = static_cast<DecodeState*>(
      ws.get(sizeof(DecodeState) * std::min<size_t>(items.size(), kDecodeBatchStreams), stream));
  for (size_t first = 0; first < items.size(); first += kDecodeBatchStreams) {
    auto t = std::make_unique<DecodeTable>();  // 10 KiB: not on the stack
    t->count = static_cast<uint32_t>(std::min<size_t>(kDecodeBatchStreams, items.size() - first));
    t->codec = codec;
    t->status = status;
    t->orInto = orInto || first > 0;
    uint64_t most = 0;
    for (uint32_t k = 0; k < t->count; ++k) {
      const DecodeRequest& r = items[first + k];
      t->d[k] = DecodeItem{
          static_cast<const uint8_t*>(r.in), r.inBytes, r.count, r.y, states + k, aligned16(r.in), aligned16(r.y)};
      most = std::max<uint64_t>(most, r.count);
    }
    batchHeaders<<<(t->count + 127) / 128, 128, 0, stream>>>(*t);
    checkLaunch("batchHeaders");
    // As many thread blocks per stream as one stream of the largest alone would take, shared.
    const unsigned x = std::max(1u, gridFor(most / kGroup + 1, kThreads) / t->count);
    const dim3 grid(x, t->count);
    withQuantizerKind(codec, [&](auto kind) {
      using K = decltype(kind);
      batchValidate<K><<<grid, kThreads, 0, stream>>>(*t);
      checkLaunch("batchValidate");
      if (target.accumulate) {
        batchDequantize<K><<<grid, kThreads, 0, stream>>>(*t, MakeAccumulateSink{});
      } else {
        withDeviceType(target.type, [&](auto tag) {
          batchDequantize<K><<<grid, kThreads, 0, stream>>>(*t, MakeStoreSink<decltype(tag)>{});
        });
      }
      checkLaunch("batchDequantize");
    });
  }
}

}  // namespace ccl::codec::cuda::detail
