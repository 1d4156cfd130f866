// SPDX-License-Identifier: BSD-3-Clause
// Sparsifier decoder on the GPU. randk regenerates its positions from the seed in the
// stream, one thread per kept element. topk/threshold decode their index section in tiles
// over the whole grid, in three launches: each tile's count of kept elements and sum of
// gaps (a LEB128 gap is decoded by the thread holding its last byte, which looks back at most
// four bytes; a bitmap word by popcount), one thread block's scan of the tiles' counts with
// the stream's checks (what the CPU's forEachGapIndex / forEachBitmapIndex refuse), then,
// only if the stream is valid, every tile again with its rank and index base, scattering the
// values. Before, one thread block walked the section twice: top-k decoded at 42 GB/s,
// threshold at 1.2 (perf/codecs).
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <algorithm>

#include "codecs/cuda/cuda_check.h"
#include "codecs/cuda/device_elements.cuh"
#include "codecs/cuda/device_wire.cuh"
#include "codecs/cuda/kernels_internal.h"
#include "codecs/cuda/sparse_common.cuh"
#include "common/kernel_registry.h"

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

// Items per thread of a tile: bytes of a gap-coded section, 32-bit words of a bitmap.
constexpr unsigned kTileItems = kThreads * kBytesPerThread;
using Reduce = cub::BlockReduce<unsigned long long, kThreads>;

// Word w of a bitmap of `bytes` bytes (0 past its end).
__device__ inline uint32_t bitmapWord(const Section& s, uint64_t w) {
  const uint64_t bytes = (s.n + 7) / 8, p = w * 4;
  if (p + 4 <= bytes) return loadLe(s.idx + p, 4);
  uint32_t v = 0;
  for (uint64_t q = p; q < bytes; ++q) v |= static_cast<uint32_t>(s.idx[q]) << (8 * (q - p));
  return v;
}

// Item q of this thread in `tile`: kept elements it adds (its ends) and, for gaps, what it
// moves the running index by (gap + 1 at an end byte); `bad` for a gap the CPU refuses.
struct ItemCount {
  unsigned long long ends = 0, steps = 0;
};
__device__ inline ItemCount countItem(const Section& s, bool bitmap, uint64_t item, uint32_t& bad) {
  ItemCount c;
  if (bitmap) {
    c.ends = __popc(bitmapWord(s, item));
    return c;
  }
  if (item >= s.bytes || (s.idx[item] & 0x80)) return c;
  uint64_t gap = 0;
  if (!gapEndingAt(s.idx, item, gap) || gap >= s.n) {  // gap >= n: index >= n
    bad = 1;
    return c;
  }
  c.ends = 1;
  c.steps = gap + 1;
  return c;
}

// Phase 1: every tile's ends and steps into tiles[2t], tiles[2t + 1]; a bad gap fails the
// stream.
__global__ void __launch_bounds__(kThreads)
    countTiles(const uint8_t* in, DecodeState* st, uint64_t numTiles, unsigned long long* tiles) {
  if (st->status) return;
  __shared__ typename Reduce::TempStorage temp;
  const Section s = sectionOf(in, st->h);
  const bool bitmap = (st->h.flags & kFlagBitmap) != 0;
  uint32_t bad = 0;
  for (uint64_t t = blockIdx.x; t < numTiles; t += gridDim.x) {
    ItemCount mine;
    for (unsigned q = 0; q < kBytesPerThread; ++q) {
      const ItemCount c = countItem(s, bitmap, t * kTileItems + threadIdx.x * kBytesPerThread + q, bad);
      mine.ends += c.ends;
      mine.steps += c.steps;
    }
    const unsigned long long ends = Reduce(temp).Sum(mine.ends);
    __syncthreads();
    const unsigned long long steps = Reduce(temp).Sum(mine.steps);
    __syncthreads();
    if (threadIdx.x == 0) tiles[2 * t] = ends, tiles[2 * t + 1] = steps;
  }
  if (bad) atomicOr(&st->status, kStatusBadIndices);
}

// Phase 2, one thread block: the tiles' counts become their exclusive prefixes, and the
// stream is checked whole: exactly nnz kept elements, indices below n (the last is the sum
// of the steps less one), no gap left open at the end, no bitmap bit past n.
__global__ void __launch_bounds__(kThreads)
    scanTiles(const uint8_t* in, DecodeState* st, uint64_t numTiles, unsigned long long* tiles) {
  if (st->status) return;
  __shared__ typename Scan::TempStorage temp;
  unsigned long long ends = 0, steps = 0;
  for (uint64_t base = 0; base < numTiles; base += kThreads) {
    const uint64_t t = base + threadIdx.x;
    unsigned long long e = t < numTiles ? tiles[2 * t] : 0, g = t < numTiles ? tiles[2 * t + 1] : 0, eTotal, gTotal;
    Scan(temp).ExclusiveSum(e, e, eTotal);
    __syncthreads();
    Scan(temp).ExclusiveSum(g, g, gTotal);
    __syncthreads();
    if (t < numTiles) tiles[2 * t] = ends + e, tiles[2 * t + 1] = steps + g;
    ends += eTotal;
    steps += gTotal;
  }
  if (threadIdx.x != 0) return;
  const Section s = sectionOf(in, st->h);
  bool ok = ends == s.nnz;
  if (st->h.flags & kFlagBitmap) {
    const uint64_t bytes = (s.n + 7) / 8;
    ok = ok && !(s.n % 8 && (s.idx[bytes - 1] >> (s.n % 8)) != 0);
  } else {
    ok = ok && steps <= s.n && !(s.bytes > 0 && (s.idx[s.bytes - 1] & 0x80));
  }
  if (!ok) st->status |= kStatusBadIndices;
}

// Phase 3: every tile again, its ranks and indices from its base and a block scan, the
// values scattered to the sink. Runs only for a stream phase 2 accepted.
template <class Sink>
__global__ void __launch_bounds__(kThreads) scatterTiles(const uint8_t* in, const DecodeState* st, uint64_t numTiles,
                                                         const unsigned long long* tiles, Sink sink) {
  if (st->status) return;
  __shared__ typename Scan::TempStorage temp;
  const Section s = sectionOf(in, st->h);
  const bool bitmap = (st->h.flags & kFlagBitmap) != 0;
  for (uint64_t t = blockIdx.x; t < numTiles; t += gridDim.x) {
    const uint64_t first = t * kTileItems + threadIdx.x * kBytesPerThread;
    uint32_t unused = 0;
    ItemCount mine;
    for (unsigned q = 0; q < kBytesPerThread; ++q) {
      const ItemCount c = countItem(s, bitmap, first + q, unused);
      mine.ends += c.ends;
      mine.steps += c.steps;
    }
    unsigned long long rank, index, total;
    Scan(temp).ExclusiveSum(mine.ends, rank, total);
    __syncthreads();
    Scan(temp).ExclusiveSum(mine.steps, index, total);
    __syncthreads();
    rank += tiles[2 * t];
    index += tiles[2 * t + 1];
    for (unsigned q = 0; q < kBytesPerThread; ++q) {
      const uint64_t item = first + q;
      if (bitmap) {
        for (uint32_t word = bitmapWord(s, item); word; word &= word - 1, ++rank)
          sink.one(item * 32 + __ffs(word) - 1, valueAt(s.values, s.fp16, rank));
        continue;
      }
      const ItemCount c = countItem(s, false, item, unused);
      if (!c.ends) continue;
      sink.one(index + c.steps - 1, valueAt(s.values, s.fp16, rank));  // the prefix of (gap + 1), plus this gap
      ++rank;
      index += c.steps;
    }
  }
}

__global__ void checkRandK(DecodeState* st) {
  if (st->status == 0 && st->h.count > 0 && st->h.aux == 0) st->status = kStatusBadIndices;
}

// Loaded with the rest of this file's kernels before any flag kernel runs
// (collectives/exec/cuda/kernel_preload.h).
const ::ccl::KernelLibrary kKernels(&checkRandK);

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

// Where a stream's index section is decoded: its tiles' counts in the workspace.
struct Tiles {
  uint64_t count;  // enough for either coding: the host does not know which the stream uses
  unsigned long long* counts;
  unsigned grid() const { return gridFor(count * kThreads, kThreads, 8192); }
};

template <class Sink>
void launchScatter(const uint8_t* in, const Expect& expect, DecodeState* st, const Tiles& tiles, Sink sink,
                   cudaStream_t stream) {
  if (expect.codec == cclCodecRandK) {
    scatterRandK<<<gridFor(expect.count, kThreads), kThreads, 0, stream>>>(in, st, sink);
    checkLaunch("scatterRandK");
  } else {
    scatterTiles<<<tiles.grid(), kThreads, 0, stream>>>(in, st, tiles.count, tiles.counts, sink);
    checkLaunch("scatterTiles");
  }
}

}  // namespace

void sparsifierDecode(const uint8_t* in, size_t inBytes, const Expect& expect, Target target, uint32_t* status,
                      Workspace& ws, cudaStream_t stream) {
  // Tiles for a gap-coded section of up to inBytes bytes, or a bitmap of count bits.
  const uint64_t words = (expect.count + 31) / 32;
  Tiles tiles{std::max<uint64_t>({(inBytes + kTileItems - 1) / kTileItems, (words + kTileItems - 1) / kTileItems, 1}),
              nullptr};
  Carver c;
  const size_t stAt = c.add(sizeof(DecodeState)), tilesAt = c.add(tiles.count * 2 * sizeof(unsigned long long));
  void* base = ws.get(c.bytes(), stream);
  auto* st = at<DecodeState>(base, stAt);
  tiles.counts = at<unsigned long long>(base, tilesAt);
  startDecode(in, inBytes, expect, st, stream);
  if (expect.codec == cclCodecRandK) {
    checkRandK<<<1, 1, 0, stream>>>(st);
    checkLaunch("checkRandK");
  } else {
    countTiles<<<tiles.grid(), kThreads, 0, stream>>>(in, st, tiles.count, tiles.counts);
    checkLaunch("countTiles");
    scanTiles<<<1, kThreads, 0, stream>>>(in, st, tiles.count, tiles.counts);
    checkLaunch("scanTiles");
  }
  if (target.accumulate) {
    auto* acc = static_cast<float*>(target.y);
    launchScatter(in, expect, st, tiles, AccumulateSink{acc}, stream);
    markNonFinite<DevF32><<<gridFor(expect.count, kThreads), kThreads, 0, stream>>>(st, nullptr, acc, expect.count);
    checkLaunch("markNonFinite");
  } else {
    withDeviceType(target.type, [&](auto tag) {
      using T = decltype(tag);
      auto* y = static_cast<typename T::Storage*>(target.y);
      zeroOutput<T><<<gridFor(expect.count, kThreads), kThreads, 0, stream>>>(st, y, expect.count);
      checkLaunch("zeroOutput");
      launchScatter(in, expect, st, tiles, StoreSink<T>{y}, stream);
      markNonFinite<T><<<gridFor(expect.count, kThreads), kThreads, 0, stream>>>(st, y, nullptr, expect.count);
      checkLaunch("markNonFinite");
    });
  }
  finishDecode(st, status, ws.orStatus, stream);
}

}  // namespace ccl::codec::cuda::detail
