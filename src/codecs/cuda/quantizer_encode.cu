// SPDX-License-Identifier: BSD-3-Clause
// Block quantizer encoder on the GPU: a persistent grid (the thread blocks of the kernel that
// stay resident) whose warps stride over the codec blocks, a segment of lanes per codec block
// (8 lanes for 128 elements, a warp for 512 and more). Each lane stages two groups of eight
// elements (128-bit loads, both in flight at once) and keeps them in registers, the segment
// reduces absmax and finiteness with shuffles, and each lane quantizes its groups with the
// shared element math: no shared memory, no barrier, each element read once (blocks over 512
// elements read their later groups twice). Before, a thread block per codec block made the
// encoder bound by how fast the GPU schedules blocks (perf/codecs). Raw blocks are placed in
// block order by an exclusive scan of the per-block raw flags (CUB), and a last small kernel
// writes the header and the zero padding, exactly as the CPU encoder lays them out. A
// fixed-length stream writes no raw entries (its marked blocks only reset their residual): no
// scan and no raw kernel run for it, two launches in all.
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <memory>
#include <span>

#include "codecs/cuda/cuda_check.h"
#include "codecs/cuda/kernels_internal.h"
#include "codecs/cuda/quantizer_encode.cuh"
#include "common/kernel_registry.h"

namespace ccl::codec::cuda::detail {
namespace {

// The largest finite |x + residual| of the whole input into *a.tensorMax (zeroed before):
// what the tensor scale is chosen from, as the CPU's finiteAbsMax. fp32 bits of
// non-negative values order as the values, so an integer atomicMax combines the warps. Every
// thread of the grid calls it (grid-stride).
template <class T>
__device__ void tensorAbsMaxOf(const EncodeArgs& a) {
  uint32_t m = 0;
  const uint64_t groups = (a.n + kGroup - 1) / kGroup;
  for (uint64_t g = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; g < groups;
       g += uint64_t{gridDim.x} * blockDim.x) {
    const uint32_t cnt = a.n - g * kGroup < kGroup ? static_cast<uint32_t>(a.n - g * kGroup) : kGroup;
    float v[kGroup];
    stageGroup(a, InputSource<T>{}, 0, g * kGroup, cnt, v);
    for (uint32_t t = 0; t < cnt; ++t) {
      const uint32_t b = fp::floatBits(v[t]) & 0x7fffffffu;
      m = b < 0x7f800000u && b > m ? b : m;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const uint32_t other = __shfl_xor_sync(0xffffffffu, m, o);
    m = other > m ? other : m;
  }
  if (threadIdx.x % 32 == 0 && m) atomicMax(a.tensorMax, m);
}

template <class T>
__global__ void __launch_bounds__(kMaxThreads) tensorAbsMax(EncodeArgs a) {
  tensorAbsMaxOf<T>(a);
}

// The grid for a tensor absmax over `n` elements: a thread per group of eight, at most 1024
// thread blocks (they stride over the rest).
unsigned absMaxGrid(uint64_t n) {
  const uint64_t want = (n + uint64_t{kGroup} * kMaxThreads - 1) / (uint64_t{kGroup} * kMaxThreads);
  return static_cast<unsigned>(std::clamp<uint64_t>(want, 1, 1024));
}

template <class K, class T>
__global__ void __launch_bounds__(kMaxThreads) encodeBlocks(EncodeArgs a, unsigned lanes) {
  const float t = tensorScale(a);
  forEachSegment(a.blocks, lanes, [&](uint64_t b, bool active, unsigned lane) {
    encodeSegment<K>(a, InputSource<T>{}, b, active, lanes, lane, t);
  });
}

// Raw entries {u32 block, u32 0, fp32 x[blockSize]} at their scanned positions; the residual
// of a raw block becomes 0 (the block arrives exactly). Variable-length streams only. A
// thread block per codec block, grid-stride over a few thousand thread blocks: a stream
// rarely has a raw block, and the scan's total (rawPos[blocks]) says so before any flag is
// read. (A thread block launched per codec block, 8 M per GiB of fp32, cost more than the
// encode itself: the GPU schedules thread blocks at about 1.65 G/s.)
template <class T>
__global__ void __launch_bounds__(kMaxThreads) encodeRaw(EncodeArgs a) {
  if (a.rawPos[a.blocks] == 0) return;
  const auto* x = static_cast<const typename T::Storage*>(a.x);
  for (uint64_t b = blockIdx.x; b < a.blocks; b += gridDim.x) {
    if (!a.rawFlag[b]) continue;
    const uint64_t off = b * a.blockSize;
    const uint32_t len = blockLen(a, off);
    uint8_t* entry = a.out + a.layout.raw + uint64_t{a.rawPos[b]} * rawEntryBytes(a.blockSize);
    if (threadIdx.x == 0) {
      storeLe(entry, b, 4);
      storeLe(entry + 4, 0, 4);
    }
    for (uint32_t i = threadIdx.x; i < a.blockSize; i += blockDim.x) {
      float v = 0.0f;
      if (i < len) {
        v = T::load(x, off + i);
        if (a.residual) {
          v = v + a.residual[off + i];
          a.residual[off + i] = 0.0f;
        }
      }
      if (a.out4) {
        *reinterpret_cast<uint32_t*>(entry + 8 + 4 * i) = fp::floatBits(v);
      } else {
        storeLe(entry + 8 + 4 * i, fp::floatBits(v), 4);
      }
    }
  }
}

__global__ void __launch_bounds__(kMaxThreads)
    encodeFinish(EncodeArgs a, uint8_t flags, uint64_t* encodedBytes, const uint32_t* poison) {
  finishStream(a, flags, encodedBytes, poison);
}

// A batch of fixed-length streams of one codec in one launch: the thread blocks stride over
// the codec blocks of every stream (firstBlock[p]: the first of stream p), then over the
// streams for their headers and padding (regions no codec block writes). A tensor-scaled
// codec's streams (nvfp4) take two launches before it: their absmax words zeroed, then each
// stream's absmax (batchAbsMax). The table travels in the kernel's parameters (CUDA 12.1's
// 32 KiB).
constexpr unsigned kBatchStreams = 160;
struct EncodeTable {
  EncodeArgs a[kBatchStreams];
  uint64_t firstBlock[kBatchStreams + 1];
  uint32_t count;
  uint8_t flags;
  const uint32_t* poison;  // Workspace::poison
};
static_assert(sizeof(EncodeTable) <= 32000, "an encode table must fit a kernel's parameters");

// The absmax words of a batch's streams zeroed (they accumulate by atomicMax), in-kernel:
// no memset on the hot path.
__global__ void __launch_bounds__(kMaxThreads) zeroAbsMax(const __grid_constant__ EncodeTable t) {
  for (uint32_t k = threadIdx.x; k < t.count; k += blockDim.x) *t.a[k].tensorMax = 0;
}

// Every stream's tensor absmax (tensorAbsMaxOf), the whole grid on one stream after another.
template <class T>
__global__ void __launch_bounds__(kMaxThreads) batchAbsMax(const __grid_constant__ EncodeTable t) {
  for (uint32_t k = 0; k < t.count; ++k) tensorAbsMaxOf<T>(t.a[k]);
}

template <class K, class T>
__global__ void __launch_bounds__(kMaxThreads) encodeBatch(const __grid_constant__ EncodeTable t, unsigned lanes) {
  const uint64_t total = t.firstBlock[t.count];
  forEachSegment(total, lanes, [&](uint64_t g, bool active, unsigned lane) {
    const uint32_t k = streamOf(t.firstBlock, t.count, active ? g : total - 1);
    encodeSegment<K>(t.a[k], InputSource<T>{}, g - t.firstBlock[k], active, lanes, lane, tensorScale(t.a[k]));
  });
  for (uint32_t p = blockIdx.x; p < t.count; p += gridDim.x) finishStream(t.a[p], t.flags, nullptr, t.poison);
}

// Loaded with the rest of this file's kernels before any flag kernel runs
// (collectives/exec/cuda/kernel_preload.h).
const ::ccl::KernelLibrary kKernels(&encodeFinish);

template <class K, class T>
void launchEncode(const EncodeArgs& a, uint8_t flags, uint64_t* encodedBytes, const uint32_t* poison, void* scanTemp,
                  size_t scanBytes, cudaStream_t stream) {
  const unsigned groups = (a.blockSize + kGroup - 1) / kGroup;
  const unsigned threads = groups >= kMaxThreads ? kMaxThreads : ((groups + 31) / 32) * 32;
  const unsigned grid = gridFor(a.blocks, 1);  // the raw kernel's: a thread block per codec block in flight
  if (a.tensorMax && a.n > 0) {
    tensorAbsMax<T><<<absMaxGrid(a.n), kMaxThreads, 0, stream>>>(a);
    checkLaunch("tensorAbsMax");
  }
  if (a.blocks > 0) {
    encodeBlocks<K, T><<<segmentGrid(encodeBlocks<K, T>, a.blocks, a.blockSize), kMaxThreads, 0, stream>>>(
        a, segmentLanes(a.blockSize));
    checkLaunch("encodeBlocks");
  }
  // A fixed-length stream places no raw entries: no scan, no raw kernel.
  if (!a.fixedLength) {
    checkEnqueued(cub::DeviceScan::ExclusiveSum(scanTemp, scanBytes, a.rawFlag, a.rawPos,
                                                static_cast<int64_t>(a.blocks + 1), stream),
                  "cub::DeviceScan::ExclusiveSum", 2);
    if (a.blocks > 0) {
      encodeRaw<T><<<grid, threads, 0, stream>>>(a);
      checkLaunch("encodeRaw");
    }
  }
  encodeFinish<<<1, kMaxThreads, 0, stream>>>(a, flags, encodedBytes, poison);
  checkLaunch("encodeFinish");
}

}  // namespace

bool quantizerEncodeBatch(const Params& p, cclDataType_t type, std::span<const EncodeItem> items, Workspace& ws,
                          cudaStream_t stream) {
  if (!p.fixedLength) return false;
  const bool scaled = tensorScaled(p.codec);
  for (size_t first = 0; first < items.size(); first += kBatchStreams) {
    auto t = std::make_unique<EncodeTable>();  // 20 KiB: not on the stack
    t->count = static_cast<uint32_t>(std::min<size_t>(kBatchStreams, items.size() - first));
    t->flags = quantizerFlags(p);
    t->poison = ws.poison;
    // One absmax word per stream; the workspace is this stream's, and the batches of one
    // call follow each other on it.
    auto* maxima = scaled ? static_cast<uint32_t*>(ws.get(t->count * sizeof(uint32_t), stream)) : nullptr;
    uint64_t blocks = 0, elements = 0;
    for (uint32_t k = 0; k < t->count; ++k) {
      const EncodeItem& it = items[first + k];
      Params q = p;
      q.seed = it.seed;
      t->a[k] = argsFor(q, it.x, it.n, static_cast<uint8_t*>(it.out), it.residual);
      t->a[k].tensorMax = scaled ? maxima + k : nullptr;
      t->firstBlock[k] = blocks;
      blocks += t->a[k].blocks;
      elements += it.n;
    }
    t->firstBlock[t->count] = blocks;
    withQuantizerKind(p.codec, [&](auto kind) {
      withDeviceType(type, [&](auto tag) {
        auto* kernel = encodeBatch<decltype(kind), decltype(tag)>;
        const unsigned grid = segmentGrid(kernel, std::max<uint64_t>(blocks, t->count), p.blockSize);
        if (scaled) {
          zeroAbsMax<<<1, kMaxThreads, 0, stream>>>(*t);
          checkLaunch("zeroAbsMax");
          batchAbsMax<decltype(tag)><<<absMaxGrid(elements), kMaxThreads, 0, stream>>>(*t);
          checkLaunch("batchAbsMax");
        }
        kernel<<<grid, kMaxThreads, 0, stream>>>(*t, segmentLanes(p.blockSize));
      });
    });
    checkLaunch("encodeBatch");
  }
  return true;
}

void quantizerEncode(const Params& p, const void* x, cclDataType_t type, size_t n, uint8_t* out, float* residual,
                     uint64_t* encodedBytes, Workspace& ws, cudaStream_t stream) {
  EncodeArgs a = argsFor(p, x, n, out, residual);
  const uint8_t flags = quantizerFlags(p);

  size_t scanBytes = 0;
  check(cub::DeviceScan::ExclusiveSum(nullptr, scanBytes, static_cast<uint32_t*>(nullptr),
                                      static_cast<uint32_t*>(nullptr), static_cast<int64_t>(a.blocks + 1), stream),
        "cub::DeviceScan::ExclusiveSum (size)");
  Carver c;
  // The last flag (always 0) and the tensor's absmax (0 before tensorAbsMax) are adjacent,
  // so one memset clears both.
  const size_t flagAt = c.add((a.blocks + 2) * 4), posAt = c.add((a.blocks + 1) * 4), scanAt = c.add(scanBytes);
  void* base = ws.get(c.bytes(), stream);
  a.rawFlag = at<uint32_t>(base, flagAt);
  a.rawPos = at<uint32_t>(base, posAt);
  a.tensorMax = tensorScaled(p.codec) ? a.rawFlag + a.blocks + 1 : nullptr;
  // The last raw flag is read by the scan (variable-length streams), the tensor's absmax
  // accumulates from 0 (tensor-scaled codecs); a fixed-length stream without a tensor scale
  // needs neither: encodeBlocks and encodeFinish, two launches in all.
  if (!a.fixedLength || a.tensorMax)
    checkEnqueued(cudaMemsetAsync(a.rawFlag + a.blocks, 0, 8, stream), "cudaMemsetAsync", 1);

  withQuantizerKind(p.codec, [&](auto kind) {
    withDeviceType(type, [&](auto tag) {
      launchEncode<decltype(kind), decltype(tag)>(a, flags, encodedBytes, ws.poison, at<void>(base, scanAt), scanBytes,
                                                  stream);
    });
  });
}

}  // namespace ccl::codec::cuda::detail
