// SPDX-License-Identifier: BSD-3-Clause
// What the quantizer encoders share (quantizer_encode.cu: encodes and batches of them;
// quantizer_hop.cu: the fused hop): a stream's encode arguments, the warp-segment encode of
// one codec block from any source of values, the persistent grid over codec blocks, and the
// header and padding that finish a stream. Included by those two files only.
#pragma once

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "codecs/cuda/cuda_check.h"
#include "codecs/cuda/device_elements.cuh"
#include "codecs/cuda/device_wire.cuh"
#include "codecs/cuda/kernels_internal.h"
#include "codecs/cuda/quantizer_view.cuh"
#include "codecs/math/rng.h"
#include "codecs/quantizer_kinds.h"

namespace ccl::codec::cuda::detail {
namespace {

constexpr unsigned kMaxThreads = 256;

struct EncodeArgs {
  const void* x;
  float* residual;
  uint8_t* out;
  uint64_t n;
  uint64_t blocks;
  uint32_t blockSize;
  int codec;
  int scaleBytes;
  bool fp16Scales;
  bool fixedLength;
  bool stochastic;
  bool vecX, vecRes, vecCodes, out4;
  math::RngKey key;
  Layout layout;
  uint32_t* tensorMax;  // codecs with a tensor scale: the input's largest finite |x| (fp32 bits); else null
  uint32_t* rawFlag;    // blocks + 1 entries; the last stays 0
  uint32_t* rawPos;     // exclusive scan of rawFlag; rawPos[blocks] = raw blocks
};

__device__ inline uint32_t blockLen(const EncodeArgs& a, uint64_t off) {
  return static_cast<uint32_t>(a.n - off < a.blockSize ? a.n - off : a.blockSize);
}

// The values an encode quantizes, before the residual: the caller's input x, of T. A source's
// load gets group [i, i + cnt), which lies in codec block b.
template <class T>
struct InputSource {
  __device__ void load(const EncodeArgs& a, uint64_t /*b*/, uint64_t i, uint32_t cnt, float v[kGroup]) const {
    loadGroup<T>(static_cast<const typename T::Storage*>(a.x), i, cnt, a.vecX, v);
  }
};

// Group [i, i + cnt) of the block's input as the CPU stages it: the source's values, or
// those plus the residual. (No zero is added without a residual: that would turn -0 into +0
// in raw blocks.) The rest of v is 0.
template <class Src>
__device__ void stageGroup(const EncodeArgs& a, const Src& src, uint64_t b, uint64_t i, uint32_t cnt, float v[kGroup]) {
  src.load(a, b, i, cnt, v);
  if (!a.residual) return;
  float r[kGroup];
  loadGroup<DevF32>(a.residual, i, cnt, a.vecRes, r);
  for (uint32_t t = 0; t < cnt; ++t) v[t] = v[t] + r[t];
}

__device__ inline float tensorScale(const EncodeArgs& a) {
  return a.tensorMax ? math::nvfp4TensorScale(fp::bitsFloat(*a.tensorMax)) : 1.0f;
}

// Groups of eight a lane of a segment holds in registers between the absmax and the
// quantization: two 128-bit loads (four with a residual) in flight per lane, not one. With one,
// the encoders kept 16 KiB of loads in flight per multiprocessor, too few to cover the
// memory's latency at full bandwidth: they read and wrote at half the copy's rate
// (perf/codecs, run 16).
constexpr uint32_t kHeld = 2;

// Lanes that encode one codec block: the power of two at or above its groups of eight over
// kHeld, at most a warp (8 lanes for 128 elements, 2 for mx's 32, 1 for nvfp4's 16). Segments
// are aligned within the warp, so a shuffle by an offset below `lanes` stays inside one.
__host__ __device__ inline unsigned segmentLanes(uint32_t blockSize) {
  const uint32_t groups = (blockSize + kGroup - 1) / kGroup;
  unsigned lanes = 1;
  while (lanes * kHeld < groups && lanes < 32) lanes <<= 1;
  return lanes;
}

// Absmax and "any non-finite" over a segment of `lanes` lanes; every lane of it gets the
// result. Every lane of the warp must call it (the shuffles name the whole warp).
__device__ inline void segmentReduce(float& m, uint32_t& nonFinite, unsigned lanes) {
  for (unsigned o = lanes / 2; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, m, o);
    m = other > m ? other : m;
    nonFinite |= __shfl_xor_sync(0xffffffffu, nonFinite, o);
  }
}

__device__ void storeCodes(uint8_t* dst, uint64_t word, uint32_t bytes, int bits, bool vec) {
  if (vec && bytes == static_cast<uint32_t>(bits)) {
    if (bits == 8) {
      *reinterpret_cast<uint64_t*>(dst) = word;
    } else if (bits == 4) {
      *reinterpret_cast<uint32_t*>(dst) = static_cast<uint32_t>(word);
    } else {
      *reinterpret_cast<uint16_t*>(dst) = static_cast<uint16_t>(word);
    }
    return;
  }
  for (uint32_t k = 0; k < bytes; ++k) dst[k] = static_cast<uint8_t>(word >> (8 * k));
}

// Quantizes one staged group, writes its code bytes and, with error feedback, its residual.
template <class K>
__device__ void quantizeGroup(const EncodeArgs& a, const BlockScale& bs, uint64_t i, uint32_t cnt,
                              const float v[kGroup]) {
  uint32_t c[kGroup];
  uint64_t word = 0;
  for (int t = 0; t < kGroup; ++t) {
    c[t] = a.stochastic ? K::quantStochastic(v[t], bs.inv, math::rngBits(a.key, i + t)) : K::quant(v[t], bs.inv);
    word |= static_cast<uint64_t>(c[t]) << (t * K::kBits);
  }
  storeCodes(a.out + a.layout.codes + i * K::kBits / 8, word, (cnt * K::kBits + 7) / 8, K::kBits, a.vecCodes);
  if (!a.residual) return;
  float e[kGroup];
  for (int t = 0; t < kGroup; ++t) e[t] = v[t] - K::dequant(c[t], bs.scale);
  storeGroup<DevF32>(a.residual, i, cnt, a.vecRes, e);
}

// Codec block b of a stream, by the `lanes` lanes of a warp segment (lane: this one's index
// in it): its absmax and finiteness by shuffles, its scale, and its codes (and residual), of
// the values `src` gives. No shared memory and no barrier: a warp encodes 32 / lanes blocks
// at a time. Every lane of the warp calls it; `active` is false for a segment past the last
// block (it takes part in the shuffles only).
template <class K, class Src>
__device__ void encodeSegment(const EncodeArgs& a, const Src& src, uint64_t b, bool active, unsigned lanes,
                              unsigned lane, float t) {
  const uint64_t off = b * a.blockSize;
  const uint32_t len = active ? blockLen(a, off) : 0;
  const uint32_t groups = (len + kGroup - 1) / kGroup;
  auto count = [&](uint32_t g) { return min(static_cast<uint32_t>(kGroup), len - g * kGroup); };
  // A lane's groups lane, lane + lanes, ...: its first kHeld stay in registers from the
  // absmax to the quantization, their loads all issued before the first is used; a block
  // of more than kHeld * lanes groups (over 512 elements) reads the later ones again. The
  // array is indexed by unrolled constants only (a run-time index would put it in local
  // memory); a group past the block holds zeros, which change no absmax.
  float held[kHeld][kGroup];
#pragma unroll
  for (uint32_t k = 0; k < kHeld; ++k) {
    const uint32_t g = lane + k * lanes;
    if (g < groups) {
      stageGroup(a, src, b, off + g * kGroup, count(g), held[k]);
    } else {
      for (int e = 0; e < kGroup; ++e) held[k][e] = 0.0f;
    }
  }
  float m = 0.0f;
  uint32_t nonFinite = 0;
  auto reduce = [&](const float v[kGroup]) {
    for (int e = 0; e < kGroup; ++e) {
      m = math::absMaxStep(m, v[e]);
      nonFinite |= math::isFiniteBits(v[e]) ? 0u : 1u;
    }
  };
#pragma unroll
  for (uint32_t k = 0; k < kHeld; ++k) reduce(held[k]);
  for (uint32_t g = lane + kHeld * lanes; g < groups; g += lanes) {
    float v[kGroup];
    stageGroup(a, src, b, off + g * kGroup, count(g), v);
    reduce(v);
  }
  segmentReduce(m, nonFinite, lanes);
  if (!active) return;
  const BlockScale bs = blockScale<K>(m, nonFinite != 0, a.fp16Scales, a.fixedLength, t);
  const bool raw = bs.raw;
  if (lane == 0) {
    const uint32_t stored = raw ? rawMarkerOf(a.codec, a.fp16Scales) : bs.stored;
    storeLe(a.out + kHeaderBytes + b * a.scaleBytes, stored, a.scaleBytes);
    if (!a.fixedLength) a.rawFlag[b] = raw ? 1u : 0u;
  }
  auto emit = [&](uint32_t g, const float v[kGroup]) {
    const uint32_t cnt = count(g);
    const uint64_t i = off + g * kGroup;
    if (!raw) {
      quantizeGroup<K>(a, bs, i, cnt, v);
      return;
    }
    // The raw kernel writes the elements; the codes of a raw block are zero. A fixed-length
    // stream has no raw entries: its marked block (NaN on arrival) leaves a zero residual,
    // here, and no raw kernel runs.
    storeCodes(a.out + a.layout.codes + i * K::kBits / 8, 0, (cnt * K::kBits + 7) / 8, K::kBits, a.vecCodes);
    if (a.fixedLength && a.residual)
      for (uint32_t e = 0; e < cnt; ++e) a.residual[i + e] = 0.0f;
  };
#pragma unroll
  for (uint32_t k = 0; k < kHeld; ++k)
    if (lane + k * lanes < groups) emit(lane + k * lanes, held[k]);
  for (uint32_t g = lane + kHeld * lanes; g < groups; g += lanes) {
    float v[kGroup];
    stageGroup(a, src, b, off + g * kGroup, count(g), v);
    emit(g, v);
  }
}

// Codec blocks [0, total) in warp tiles of 32 / lanes blocks, grid-stride (a persistent grid:
// segmentGrid); calls fn(block, active, lane) on every lane of every tile, so that all
// lanes of a warp take part in each tile's shuffles.
template <class Fn>
__device__ void forEachSegment(uint64_t total, unsigned lanes, Fn&& fn) {
  const unsigned perWarp = 32 / lanes;
  const unsigned lane = threadIdx.x % 32;
  const uint64_t warps = uint64_t{gridDim.x} * (blockDim.x / 32);
  for (uint64_t tile = uint64_t{blockIdx.x} * (blockDim.x / 32) + threadIdx.x / 32; tile * perWarp < total;
       tile += warps) {
    const uint64_t b = tile * perWarp + lane / lanes;
    fn(b, b < total, lane % lanes);
  }
}

// The grid of kMaxThreads-thread blocks for `blocks` codec blocks of blockSize in warp
// segments, for `kernel`: enough for every warp tile, at most as many as stay resident at
// once (a persistent grid; the warps stride over the rest). The GPU then schedules a few
// hundred thread blocks per call, not one per codec block. The resident count is the
// kernel's own (its registers decide it: 64 to 80 a thread, 3 or 4 thread blocks per
// multiprocessor): a fixed count above it left the last thread blocks to run alone after
// the others, a second wave at a fraction of the occupancy. Both figures are host-side
// queries that do not wait for the device, made once per kernel and device.
template <class Kernel>
unsigned segmentGrid(Kernel* kernel, uint64_t blocks, uint32_t blockSize) {
  struct Known {
    int sms, resident;
  };
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, Known> known;
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  Known k{};
  {
    std::lock_guard lock(mu);
    if (auto it = known.find({reinterpret_cast<const void*>(kernel), device}); it != known.end()) k = it->second;
  }
  if (k.sms == 0) {
    check(cudaDeviceGetAttribute(&k.sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&k.resident, kernel, kMaxThreads, 0),
          "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    k.sms = std::max(k.sms, 1);
    k.resident = std::max(k.resident, 1);
    std::lock_guard lock(mu);
    known[{reinterpret_cast<const void*>(kernel), device}] = k;
  }
  const uint64_t perWarp = 32 / segmentLanes(blockSize), warps = kMaxThreads / 32;
  const uint64_t ctas = ((blocks + perWarp - 1) / perWarp + warps - 1) / warps;
  return static_cast<unsigned>(std::clamp<uint64_t>(ctas, 1, uint64_t(k.sms) * k.resident));
}

// The header (aux = raw blocks), the zero padding after the scales and after the codes,
// and the stream's length; a failed sender's header and length where `poison` says the call
// has failed (Workspace::poison).
__device__ void finishStream(const EncodeArgs& a, uint8_t flags, uint64_t* encodedBytes, const uint32_t* poison) {
  const uint64_t aux = a.fixedLength ? 0 : a.rawPos[a.blocks];
  if (threadIdx.x == 0) {
    if (callFailed(poison)) {
      storeHeader(failedSenderHeader(), a.out);
      if (encodedBytes) *encodedBytes = kHeaderBytes;
    } else {
      Header h;
      h.codec = static_cast<uint8_t>(a.codec);
      h.flags = flags;
      h.blockSize = a.blockSize;
      h.count = a.n;
      h.aux = aux;
      if (a.tensorMax) setTensorScale(h, tensorScale(a));
      storeHeader(h, a.out);
      if (encodedBytes) *encodedBytes = a.layout.raw + aux * rawEntryBytes(a.blockSize);
    }
  }
  const uint64_t scalesEnd = kHeaderBytes + a.blocks * a.scaleBytes;
  for (uint64_t k = scalesEnd + threadIdx.x; k < a.layout.codes; k += blockDim.x) a.out[k] = 0;
  const int bits = codeBits(a.codec);
  const uint64_t codesEnd = a.layout.codes + (a.n * bits + 7) / 8;
  for (uint64_t k = codesEnd + threadIdx.x; k < a.layout.raw; k += blockDim.x) a.out[k] = 0;
}

// The stream of table `first` whose blocks hold global block g: the last whose first block
// is at or before g.
__device__ inline uint32_t streamOf(const uint64_t* first, uint32_t count, uint64_t g) {
  uint32_t lo = 0, hi = count - 1;
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (first[mid] <= g)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// The arguments of one stream's encode, but for the workspace's raw flags and positions.
EncodeArgs argsFor(const Params& p, const void* x, size_t n, uint8_t* out, float* residual) {
  EncodeArgs a{};
  a.x = x;
  a.residual = residual;
  a.out = out;
  a.n = n;
  a.blockSize = p.blockSize;
  a.blocks = (n + p.blockSize - 1) / p.blockSize;
  if (a.blocks >= (1ull << 31)) throw Error(cclInvalidArgument, "encode: too many blocks for the CUDA quantizer");
  a.codec = p.codec;
  a.fp16Scales = p.fp16Scales;
  a.fixedLength = p.fixedLength;
  a.stochastic = p.stochastic;
  a.scaleBytes = static_cast<int>(scaleBytes(p.codec, quantizerFlags(p)));
  a.vecX = aligned16(x);
  a.vecRes = residual && aligned16(residual);
  a.vecCodes = (reinterpret_cast<uintptr_t>(out) & 7u) == 0;
  a.out4 = (reinterpret_cast<uintptr_t>(out) & 3u) == 0;
  a.key = math::rngKey(p.seed);
  Header h;
  h.codec = static_cast<uint8_t>(p.codec);
  h.flags = quantizerFlags(p);
  h.blockSize = p.blockSize;
  h.count = n;
  a.layout = layoutOf(h);  // aux = 0: codes and raw offsets do not depend on it
  return a;
}

}  // namespace
}  // namespace ccl::codec::cuda::detail
