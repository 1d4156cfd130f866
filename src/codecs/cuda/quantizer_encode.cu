// SPDX-License-Identifier: BSD-3-Clause
// Block quantizer encoder on the GPU: a persistent grid (a few thread blocks per
// multiprocessor) whose warps stride over the codec blocks, a segment of lanes per codec
// block (16 lanes for 128 elements, a warp for 256 and more). Each lane stages groups of
// eight elements (128-bit loads) and keeps them in registers, the segment reduces absmax and
// finiteness with shuffles, and each lane quantizes its groups with the shared element math:
// no shared memory, no barrier, each element read once (blocks over 256 elements read their
// later groups twice). Before, a thread block per codec block made the encoder bound by how
// fast the GPU schedules blocks (perf/codecs). Raw blocks are placed in block order by an
// exclusive scan of the per-block raw flags (CUB), and a last small kernel writes the header
// and the zero padding, exactly as the CPU encoder lays them out. A fixed-length stream writes
// no raw entries (its marked blocks only reset their residual): no scan and no raw kernel run
// for it, two launches in all.
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <atomic>
#include <memory>
#include <span>

#include "codecs/cuda/cuda_check.h"
#include "codecs/cuda/device_elements.cuh"
#include "codecs/cuda/device_wire.cuh"
#include "codecs/cuda/kernel_preload.h"
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

// The values an encode quantizes, before the residual: the caller's input x, of T.
template <class T>
struct InputSource {
  __device__ void load(const EncodeArgs& a, uint64_t i, uint32_t cnt, float v[kGroup]) const {
    loadGroup<T>(static_cast<const typename T::Storage*>(a.x), i, cnt, a.vecX, v);
  }
};

// Group [i, i + cnt) of the block's input as the CPU stages it: the source's values, or
// those plus the residual. (No zero is added without a residual: that would turn -0 into +0
// in raw blocks.) The rest of v is 0.
template <class Src>
__device__ void stageGroup(const EncodeArgs& a, const Src& src, uint64_t i, uint32_t cnt, float v[kGroup]) {
  src.load(a, i, cnt, v);
  if (!a.residual) return;
  float r[kGroup];
  loadGroup<DevF32>(a.residual, i, cnt, a.vecRes, r);
  for (uint32_t t = 0; t < cnt; ++t) v[t] = v[t] + r[t];
}

// The largest finite |x + residual| of the whole input into *a.tensorMax (zeroed before):
// what the tensor scale is chosen from, as the CPU's finiteAbsMax. fp32 bits of
// non-negative values order as the values, so an integer atomicMax combines the warps.
template <class T>
__global__ void __launch_bounds__(kMaxThreads) tensorAbsMax(EncodeArgs a) {
  uint32_t m = 0;
  const uint64_t groups = (a.n + kGroup - 1) / kGroup;
  for (uint64_t g = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; g < groups;
       g += uint64_t{gridDim.x} * blockDim.x) {
    const uint32_t cnt = a.n - g * kGroup < kGroup ? static_cast<uint32_t>(a.n - g * kGroup) : kGroup;
    float v[kGroup];
    stageGroup(a, InputSource<T>{}, g * kGroup, cnt, v);
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

__device__ inline float tensorScale(const EncodeArgs& a) {
  return a.tensorMax ? math::nvfp4TensorScale(fp::bitsFloat(*a.tensorMax)) : 1.0f;
}

// Lanes that encode one codec block: the power of two at or above its groups of eight, at
// most a warp. Segments are aligned within the warp, so a shuffle by an offset below `lanes`
// stays inside one.
__host__ __device__ inline unsigned segmentLanes(uint32_t blockSize) {
  const uint32_t groups = (blockSize + kGroup - 1) / kGroup;
  unsigned lanes = 1;
  while (lanes < groups && lanes < 32) lanes <<= 1;
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
  // A lane's first group stays in registers between the absmax and the quantization: a block
  // of up to 256 elements (a group per lane) is read once; a larger one reads its lanes'
  // later groups again. (An array indexed by the group would live in local memory.)
  float held[kGroup];
  float m = 0.0f;
  uint32_t nonFinite = 0;
  for (uint32_t g = lane; g < groups; g += lanes) {
    const uint32_t cnt = min(static_cast<uint32_t>(kGroup), len - g * kGroup);
    float v[kGroup];
    stageGroup(a, src, off + g * kGroup, cnt, v);
    for (int k = 0; k < kGroup; ++k) {
      m = math::absMaxStep(m, v[k]);
      nonFinite |= math::isFiniteBits(v[k]) ? 0u : 1u;
    }
    if (g == lane)
      for (int k = 0; k < kGroup; ++k) held[k] = v[k];
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
  for (uint32_t g = lane; g < groups; g += lanes) {
    const uint32_t cnt = min(static_cast<uint32_t>(kGroup), len - g * kGroup);
    const uint64_t i = off + g * kGroup;
    if (raw) {
      // The raw kernel writes the elements; the codes of a raw block are zero. A
      // fixed-length stream has no raw entries: its marked block (NaN on arrival) leaves
      // a zero residual, here, and no raw kernel runs.
      storeCodes(a.out + a.layout.codes + i * K::kBits / 8, 0, (cnt * K::kBits + 7) / 8, K::kBits, a.vecCodes);
      if (a.fixedLength && a.residual)
        for (uint32_t k = 0; k < cnt; ++k) a.residual[i + k] = 0.0f;
      continue;
    }
    if (g == lane) {
      quantizeGroup<K>(a, bs, i, cnt, held);
    } else {
      float v[kGroup];
      stageGroup(a, src, i, cnt, v);
      quantizeGroup<K>(a, bs, i, cnt, v);
    }
  }
}

// Codec blocks [0, total) in warp tiles of 32 / lanes blocks, grid-stride (a persistent grid:
// persistentGrid); calls fn(block, active, lane) on every lane of every tile, so that all
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

// Thread blocks of kMaxThreads per multiprocessor in a persistent grid: what stays resident
// at the encoders' 64 to 72 registers a thread (ptxas -v), half the multiprocessor's threads.
constexpr unsigned kBlocksPerSm = 4;

// The grid of kMaxThreads-thread blocks for `blocks` codec blocks of blockSize in warp
// segments: enough for every warp tile, at most kBlocksPerSm per multiprocessor (a
// persistent grid; the warps stride over the rest). The GPU then schedules a few hundred
// thread blocks per call, not one per codec block.
unsigned segmentGrid(uint64_t blocks, uint32_t blockSize) {
  static std::atomic<int> multiprocessors[64];
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  int sms = device < 64 ? multiprocessors[device].load(std::memory_order_relaxed) : 0;
  if (sms == 0) {
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
    if (device < 64) multiprocessors[device].store(sms, std::memory_order_relaxed);
  }
  const uint64_t perWarp = 32 / segmentLanes(blockSize), warps = kMaxThreads / 32;
  const uint64_t ctas = ((blocks + perWarp - 1) / perWarp + warps - 1) / warps;
  return static_cast<unsigned>(std::clamp<uint64_t>(ctas, 1, uint64_t(std::max(sms, 1)) * kBlocksPerSm));
}

template <class K, class T>
__global__ void __launch_bounds__(kMaxThreads) encodeBlocks(EncodeArgs a, unsigned lanes) {
  const float t = tensorScale(a);
  forEachSegment(a.blocks, lanes, [&](uint64_t b, bool active, unsigned lane) {
    encodeSegment<K>(a, InputSource<T>{}, b, active, lanes, lane, t);
  });
}

// Raw entries {u32 block, u32 0, fp32 x[blockSize]} at their scanned positions; the residual
// of a raw block becomes 0 (the block arrives exactly). Variable-length streams only.
template <class T>
__global__ void __launch_bounds__(kMaxThreads) encodeRaw(EncodeArgs a) {
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

// The header (aux = raw blocks), the zero padding after the scales and after the codes,
// and the stream's length.
__device__ void finishStream(const EncodeArgs& a, uint8_t flags, uint64_t* encodedBytes) {
  const uint64_t aux = a.fixedLength ? 0 : a.rawPos[a.blocks];
  if (threadIdx.x == 0) {
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
  const uint64_t scalesEnd = kHeaderBytes + a.blocks * a.scaleBytes;
  for (uint64_t k = scalesEnd + threadIdx.x; k < a.layout.codes; k += blockDim.x) a.out[k] = 0;
  const int bits = codeBits(a.codec);
  const uint64_t codesEnd = a.layout.codes + (a.n * bits + 7) / 8;
  for (uint64_t k = codesEnd + threadIdx.x; k < a.layout.raw; k += blockDim.x) a.out[k] = 0;
}

__global__ void __launch_bounds__(kMaxThreads) encodeFinish(EncodeArgs a, uint8_t flags, uint64_t* encodedBytes) {
  finishStream(a, flags, encodedBytes);
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

// A batch of fixed-length streams of one codec without a tensor scale, in one launch: the
// thread blocks stride over the codec blocks of every stream (firstBlock[p]: the first of
// stream p), then over the streams for their headers and padding (regions no codec block
// writes). The table travels in the kernel's parameters (CUDA 12.1's 32 KiB).
constexpr unsigned kBatchStreams = 160;
struct EncodeTable {
  EncodeArgs a[kBatchStreams];
  uint64_t firstBlock[kBatchStreams + 1];
  uint32_t count;
  uint8_t flags;
};
static_assert(sizeof(EncodeTable) <= 32000, "an encode table must fit a kernel's parameters");

template <class K, class T>
__global__ void __launch_bounds__(kMaxThreads) encodeBatch(const __grid_constant__ EncodeTable t, unsigned lanes) {
  const uint64_t total = t.firstBlock[t.count];
  forEachSegment(total, lanes, [&](uint64_t g, bool active, unsigned lane) {
    const uint32_t k = streamOf(t.firstBlock, t.count, active ? g : total - 1);
    encodeSegment<K>(t.a[k], InputSource<T>{}, g - t.firstBlock[k], active, lanes, lane, 1.0f);
  });
  for (uint32_t p = blockIdx.x; p < t.count; p += gridDim.x) finishStream(t.a[p], t.flags, nullptr);
}

// ---- The fused hop (codec::decodeAddEncode) of fixed-length streams ----
//
// The values a hop encodes: its local elements (of T) plus the received stream's decoded
// elements (a fixed-length stream of kind K, validated before: batchValidate), divided when
// it averages, in the order and rounding of the CPU's decode-accumulate, division and encode.
// One kernel reads the stream and the local chunk and writes the outgoing stream: the sum is
// never stored.
struct Hop {
  const uint8_t* in;
  const DecodeState* st;
  bool vecIn;
  bool divide;
};

template <class K, class T>
struct HopSource {
  const Hop& h;
  View w;  // the received stream's header and layout, read once per codec block
  float divisor;
  __device__ void load(const EncodeArgs& a, uint64_t i, uint32_t cnt, float v[kGroup]) const {
    loadGroup<T>(static_cast<const typename T::Storage*>(a.x), i, cnt, a.vecX, v);
    constexpr uint32_t kMask = (1u << K::kBits) - 1;
    float s;
    // A group lies in one block of the received stream too: its block size is a multiple of 8.
    if (K::readScale(scaleAt(h.in, w, i / w.h.blockSize), w.fp16, w.t, s) == ScaleRead::kOk) {
      const uint64_t word = loadCodes(h.in + w.l.codes + i * K::kBits / 8, (cnt * K::kBits + 7) / 8, K::kBits, h.vecIn);
      for (uint32_t t = 0; t < cnt; ++t) v[t] += K::dequant(static_cast<uint32_t>(word >> (t * K::kBits)) & kMask, s);
    } else {
      for (uint32_t t = 0; t < cnt; ++t) v[t] += markedBlockValue();  // a marked block: NaN
    }
    if (h.divide)
      for (uint32_t t = 0; t < cnt; ++t) v[t] /= divisor;
  }
};

// What a hop's received stream ends with: its validation's status, and a stream that is not
// fixed-length refused (its peer encoded with other parameters).
__device__ inline uint32_t hopStatus(const DecodeState* st) {
  const uint32_t bad = finalStatus(st);
  return bad ? bad : (st->h.flags & kFlagFixedLength) ? 0u : kStatusBadHeader;
}

constexpr unsigned kHopStreams = 120;
struct HopTable {
  EncodeArgs a[kHopStreams];  // x: the local elements
  Hop h[kHopStreams];
  uint64_t firstBlock[kHopStreams + 1];
  uint32_t count;
  uint8_t flags;
  float divisor;
  uint32_t* status;
};
static_assert(sizeof(HopTable) <= 32000, "a hop table must fit a kernel's parameters");

// Every hop's codec blocks, then its header and padding; a hop whose stream was refused
// writes nothing and ORs its status into the call's word (a plain read-modify-write, as the
// decoders': the word may be host-mapped memory).
template <class K, class T>
__global__ void __launch_bounds__(kMaxThreads) hopBatch(const __grid_constant__ HopTable t, unsigned lanes) {
  const uint64_t total = t.firstBlock[t.count];
  forEachSegment(total, lanes, [&](uint64_t g, bool active, unsigned lane) {
    const uint32_t k = streamOf(t.firstBlock, t.count, active ? g : total - 1);
    // A refused hop's segments only take part in the shuffles.
    const bool mine = active && hopStatus(t.h[k].st) == 0;
    encodeSegment<K>(t.a[k], HopSource<K, T>{t.h[k], viewOf(t.h[k].st), t.divisor}, g - t.firstBlock[k], mine, lanes,
                     lane, 1.0f);
  });
  for (uint32_t k = blockIdx.x; k < t.count; k += gridDim.x) {
    const uint32_t bad = hopStatus(t.h[k].st);
    if (bad) {
      if (threadIdx.x == 0) {
        volatile uint32_t* word = t.status;
        *word = *word | bad;
      }
      continue;
    }
    finishStream(t.a[k], t.flags, nullptr);
  }
}

// Loaded with the rest of this file's kernels before any flag kernel runs (kernel_preload.h).
const ::ccl::codec::cuda::KernelLibrary kKernels(&encodeFinish);

template <class K, class T>
void launchEncode(const EncodeArgs& a, uint8_t flags, uint64_t* encodedBytes, void* scanTemp, size_t scanBytes,
                  cudaStream_t stream) {
  const unsigned groups = (a.blockSize + kGroup - 1) / kGroup;
  const unsigned threads = groups >= kMaxThreads ? kMaxThreads : ((groups + 31) / 32) * 32;
  const unsigned grid = static_cast<unsigned>(a.blocks < (1u << 30) ? a.blocks : (1u << 30));
  if (a.tensorMax && a.n > 0) {
    const uint64_t want = (a.n + uint64_t{kGroup} * kMaxThreads - 1) / (uint64_t{kGroup} * kMaxThreads);
    tensorAbsMax<T><<<static_cast<unsigned>(want < 1024 ? want : 1024), kMaxThreads, 0, stream>>>(a);
    checkLaunch("tensorAbsMax");
  }
  if (a.blocks > 0) {
    encodeBlocks<K, T><<<segmentGrid(a.blocks, a.blockSize), kMaxThreads, 0, stream>>>(a, segmentLanes(a.blockSize));
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
  encodeFinish<<<1, kMaxThreads, 0, stream>>>(a, flags, encodedBytes);
  checkLaunch("encodeFinish");
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

bool quantizerEncodeBatch(const Params& p, cclDataType_t type, std::span<const EncodeItem> items, cudaStream_t stream) {
  if (!p.fixedLength || tensorScaled(p.codec)) return false;
  for (size_t first = 0; first < items.size(); first += kBatchStreams) {
    auto t = std::make_unique<EncodeTable>();  // 20 KiB: not on the stack
    t->count = static_cast<uint32_t>(std::min<size_t>(kBatchStreams, items.size() - first));
    t->flags = quantizerFlags(p);
    uint64_t blocks = 0;
    for (uint32_t k = 0; k < t->count; ++k) {
      const EncodeItem& it = items[first + k];
      Params q = p;
      q.seed = it.seed;
      t->a[k] = argsFor(q, it.x, it.n, static_cast<uint8_t*>(it.out), it.residual);
      t->firstBlock[k] = blocks;
      blocks += t->a[k].blocks;
    }
    t->firstBlock[t->count] = blocks;
    const unsigned grid = segmentGrid(std::max<uint64_t>(blocks, t->count), p.blockSize);
    withQuantizerKind(p.codec, [&](auto kind) {
      withDeviceType(type, [&](auto tag) {
        encodeBatch<decltype(kind), decltype(tag)><<<grid, kMaxThreads, 0, stream>>>(*t, segmentLanes(p.blockSize));
      });
    });
    checkLaunch("encodeBatch");
  }
  return true;
}

void quantizerHopBatch(const Params& p, cclDataType_t type, float divisor, std::span<const HopItem> items,
                       uint32_t* status, bool orInto, Workspace& ws, cudaStream_t stream) {
  if (items.empty()) return;
  auto* states =
      static_cast<DecodeState*>(ws.get(sizeof(DecodeState) * std::min<size_t>(items.size(), kHopStreams), stream));
  for (size_t first = 0; first < items.size(); first += kHopStreams) {
    // The received streams: headers, then validation, as a batch of decodes checks them.
    auto d = std::make_unique<DecodeTable>();
    auto t = std::make_unique<HopTable>();
    const auto count = static_cast<uint32_t>(std::min<size_t>(kHopStreams, items.size() - first));
    d->count = t->count = count;
    d->codec = p.codec;
    d->status = t->status = status;
    d->orInto = orInto || first > 0;
    t->flags = quantizerFlags(p);
    t->divisor = divisor;
    uint64_t blocks = 0, most = 0;
    for (uint32_t k = 0; k < count; ++k) {
      const HopItem& it = items[first + k];
      const auto* in = static_cast<const uint8_t*>(it.in);
      d->d[k] = DecodeItem{in, it.inBytes, it.n, nullptr, states + k, aligned16(in), false};
      Params q = p;
      q.seed = it.seed;
      t->a[k] = argsFor(q, it.local, it.n, static_cast<uint8_t*>(it.out), it.residual);
      t->h[k] = Hop{in, states + k, aligned16(in), it.divide};
      t->firstBlock[k] = blocks;
      blocks += t->a[k].blocks;
      most = std::max<uint64_t>(most, it.n);
    }
    t->firstBlock[count] = blocks;
    batchHeaders<<<(count + 127) / 128, 128, 0, stream>>>(*d);
    checkLaunch("batchHeaders");
    const dim3 check(std::max(1u, gridFor(most / kGroup + 1, kViewThreads) / count), count);
    const unsigned grid = segmentGrid(std::max<uint64_t>(blocks, count), p.blockSize);
    withQuantizerKind(p.codec, [&](auto kind) {
      using K = decltype(kind);
      batchValidate<K><<<check, kViewThreads, 0, stream>>>(*d);
      checkLaunch("batchValidate");
      withDeviceType(type, [&](auto tag) {
        hopBatch<K, decltype(tag)><<<grid, kMaxThreads, 0, stream>>>(*t, segmentLanes(p.blockSize));
      });
      checkLaunch("hopBatch");
    });
  }
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
      launchEncode<decltype(kind), decltype(tag)>(a, flags, encodedBytes, at<void>(base, scanAt), scanBytes, stream);
    });
  });
}

}  // namespace ccl::codec::cuda::detail
