// SPDX-License-Identifier: BSD-3-Clause
// Sparsifier encoder on the GPU. The kept indices come out ascending, as on the CPU:
//   topk       radix select of the k-th largest |x| key (codecs/math/radix_select.h, as on
//              the CPU: a shared-memory histogram pass and a one-block pick per round), then
//              CUB stream compaction of the indices above it plus, in index order, as many
//              equal to it as the top k still needs (the CPU's rule: ties keep the lower index);
//   threshold  CUB stream compaction (DeviceSelect::If) of the indices with |x| >= t;
//   randk      one index per stratum from the shared counter-based RNG.
// The values kernel writes fp32/fp16 values and the residual; varint lengths are scanned
// (CUB) into gap offsets, and the header kernel picks bitmap or gaps by the CPU's rule.
// Workspace: the kept indices and their gap offsets (4 bytes each while the section stays
// under 4 GiB, 8 beyond), so threshold needs 8 bytes per element (12 past 858 M elements);
// the selections read a counting iterator, the gap lengths are computed as the scan reads
// them, and the values are read from the input (or the residual) where they lie. topk adds its
// keys and its ties' scan (12 bytes per element).
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <algorithm>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>

#include "codecs/cuda/cuda_check.h"
#include "codecs/cuda/device_elements.cuh"
#include "codecs/cuda/device_wire.cuh"
#include "codecs/cuda/kernels_internal.h"
#include "codecs/cuda/sparse_common.cuh"
#include "codecs/math/quant_int.h"
#include "codecs/math/radix_select.h"
#include "common/kernel_registry.h"

namespace ccl::codec::cuda::detail {
namespace {

constexpr unsigned kThreads = 256;

struct SparseState {
  unsigned long long kept;
  uint32_t bitmap;
  uint32_t nonFinite;  // the input held a NaN or an infinity (kFlagNonFinite)
};

__device__ inline uint64_t firstThread() { return uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; }
__device__ inline uint64_t threadStride() { return uint64_t{gridDim.x} * blockDim.x; }

// The fp32 values the codec sees (with error feedback: residual += x, in place) and, for topk,
// the sort keys; whether any is not finite. As on the CPU, a non-finite sum leaves 0 in the
// residual, the value selection then sees.
template <class T>
__global__ void __launch_bounds__(kThreads)
    stageSparse(const typename T::Storage* x, uint64_t n, float* residual, uint32_t* keys, SparseState* st) {
  uint32_t bad = 0;
  for (uint64_t i = firstThread(); i < n; i += threadStride()) {
    float v = T::load(x, i);
    if (residual) v = residual[i] + v;
    const bool finite = math::isFiniteBits(v);
    bad |= finite ? 0u : 1u;
    if (residual) {
      v = finite ? v : 0.0f;
      residual[i] = v;
    }
    if (keys) keys[i] = devMagnitudeKey(fp::floatBits(v));
  }
  if (__any_sync(0xffffffffu, bad) && threadIdx.x % 32 == 0) atomicOr(&st->nonFinite, 1u);
}

// Element i as the codec sees it: the residual after stageSparse, else the input as fp32.
template <class T>
struct ValueAt {
  const typename T::Storage* x;
  const float* residual;
  __device__ float operator()(uint64_t i) const { return residual ? residual[i] : T::load(x, i); }
};

template <class T>
struct AtLeast {
  ValueAt<T> v;
  uint32_t key;
  __device__ bool operator()(uint32_t i) const { return devMagnitudeKey(fp::floatBits(v(i))) >= key; }
};

// The identity permutation the selections read (no array in memory).
using Indices = thrust::counting_iterator<uint32_t>;

// Radix select state: the digits chosen so far (prefix, under mask), the rank still sought
// (after the last round: how many keys equal to the k-th belong to the top k), and the
// current round's histogram.
struct RadixState {
  uint32_t prefix;
  uint32_t mask;
  unsigned long long rank;
  uint32_t hist[math::kRadixMaxBins];
};

__global__ void radixInit(RadixState* s, uint64_t k) { s->rank = k; }

// Counts the keys matching the chosen digits by their digit of this round: per block in
// shared memory, then added to the state's histogram.
__global__ void __launch_bounds__(kThreads) radixHistogram(const uint32_t* keys, uint64_t n, RadixState* s, int round) {
  __shared__ uint32_t h[math::kRadixMaxBins];
  const uint32_t bins = math::radixBins(round);
  for (uint32_t b = threadIdx.x; b < bins; b += blockDim.x) h[b] = 0;
  __syncthreads();
  const uint32_t prefix = s->prefix, mask = s->mask;
  for (uint64_t i = firstThread(); i < n; i += threadStride()) {
    const uint32_t key = keys[i];
    if ((key & mask) == prefix) atomicAdd(&h[math::radixDigit(key, round)], 1u);
  }
  __syncthreads();
  for (uint32_t b = threadIdx.x; b < bins; b += blockDim.x)
    if (h[b]) atomicAdd(&s->hist[b], h[b]);
}

// One block: thread t owns the t-th group of bins from the top. A scan gives each group the
// count above it; the group holding the sought rank walks its bins (the CPU's walk) and
// records the digit. Every group then clears its bins for the next round.
__global__ void __launch_bounds__(kThreads) radixPick(RadixState* s, int round) {
  using Scan = cub::BlockScan<unsigned long long, kThreads>;
  __shared__ typename Scan::TempStorage temp;
  const uint32_t bins = math::radixBins(round), per = bins / kThreads;
  const uint32_t hi = bins - 1 - threadIdx.x * per, lo = hi + 1 - per;
  unsigned long long sum = 0;
  for (uint32_t b = lo; b <= hi; ++b) sum += s->hist[b];
  unsigned long long above = 0;
  Scan(temp).ExclusiveSum(sum, above);
  const unsigned long long rank = s->rank;
  __syncthreads();  // every thread has read the rank before it changes
  if (above < rank && rank <= above + sum) {
    uint64_t r = rank - above;
    const uint32_t digit = math::radixPickBin(s->hist, lo, hi, r);
    s->prefix |= digit << math::radixShift(round);
    s->mask |= (bins - 1) << math::radixShift(round);
    s->rank = r;
  }
  for (uint32_t b = lo; b <= hi; ++b) s->hist[b] = 0;
}
static_assert(math::radixBins(0) % kThreads == 0 && math::radixBins(2) % kThreads == 0);

__global__ void __launch_bounds__(kThreads)
    equalToKth(const uint32_t* keys, uint64_t n, const RadixState* s, uint32_t* eq) {
  const uint32_t kth = s->prefix;
  for (uint64_t i = firstThread(); i < n; i += threadStride()) eq[i] = keys[i] == kth ? 1u : 0u;
}

// Index i belongs to the top k: its key is above the k-th, or equal to it with fewer than
// the needed number of equal keys before it.
struct TopKTake {
  const uint32_t* keys;
  const uint32_t* equalBefore;
  const RadixState* s;
  __device__ bool operator()(uint32_t i) const {
    const uint32_t key = keys[i], kth = s->prefix;
    return key > kth || (key == kth && equalBefore[i] < s->rank);
  }
};

__global__ void randomKIndices(math::RngKey key, uint64_t n, uint64_t k, uint32_t* idx, SparseState* st) {
  for (uint64_t j = firstThread(); j < k; j += threadStride()) idx[j] = devRandomKIndex(key, n, k, j);
  if (firstThread() == 0) st->kept = k;
}

// Top-k keeping every element: all the indices.
__global__ void allIndices(uint64_t n, uint32_t* idx, SparseState* st) {
  for (uint64_t i = firstThread(); i < n; i += threadStride()) idx[i] = static_cast<uint32_t>(i);
  if (firstThread() == 0) st->kept = n;
}

// Loaded with the rest of this file's kernels before any flag kernel runs
// (collectives/exec/cuda/kernel_preload.h).
const ::ccl::KernelLibrary kKernels(&allIndices);

__device__ inline uint32_t varintBytes(uint32_t v) {
  return v < (1u << 7) ? 1 : v < (1u << 14) ? 2 : v < (1u << 21) ? 3 : v < (1u << 28) ? 4 : 5;
}

// The varint length of gap r, 0 past the kept count (so a scan may run over an upper bound).
struct GapBytes {
  const uint32_t* idx;
  const SparseState* st;
  __device__ uint32_t operator()(uint64_t r) const {
    return r < st->kept ? varintBytes(idx[r] - (r ? idx[r - 1] + 1 : 0)) : 0u;
  }
};

// Values (and residual) of the kept elements.
template <class T>
__global__ void __launch_bounds__(kThreads)
    writeValues(ValueAt<T> v, const uint32_t* idx, const SparseState* st, uint8_t* values, bool fp16, float* residual) {
  const uint64_t kept = st->kept;
  for (uint64_t r = firstThread(); r < kept; r += threadStride()) {
    const uint32_t i = idx[r];
    const float x = v(i);
    if (fp16) {
      const uint16_t h = fp::floatToHalf(x);
      storeLe(values + 2 * r, h, 2);
      if (residual) residual[i] = x - fp::halfToFloat(h);
    } else {
      storeLe(values + 4 * r, fp::floatBits(x), 4);
      if (residual) residual[i] = 0.0f;
    }
  }
}

// Header, randk seed, value padding, the index format, and the stream's length; a failed
// sender's header and length where `poison` says the call has failed (Workspace::poison).
template <class Offset>
__global__ void __launch_bounds__(kThreads)
    sparseHeader(int codec, uint64_t n, uint8_t flags, uint64_t seed, const Offset* offs, SparseState* st, uint8_t* out,
                 uint64_t* encodedBytes, const uint32_t* poison) {
  const uint64_t kept = st->kept;
  const bool randk = codec == cclCodecRandK;
  const uint64_t gapBytes = randk ? 0 : offs[kept];
  const bool bitmap = !randk && (n + 7) / 8 < gapBytes;
  Header h;
  h.codec = static_cast<uint8_t>(codec);
  h.count = n;
  h.aux = kept;
  h.flags = static_cast<uint8_t>(flags | (bitmap ? kFlagBitmap : 0) | (st->nonFinite ? kFlagNonFinite : 0));
  if (!randk) h.indexBytes = static_cast<uint32_t>(bitmap ? (n + 7) / 8 : gapBytes);
  const Layout l = layoutOf(h);
  if (threadIdx.x == 0) {
    const bool failed = callFailed(poison);
    storeHeader(failed ? failedSenderHeader() : h, out);
    if (randk) storeLe(out + kHeaderBytes, seed, 8);
    if (encodedBytes) *encodedBytes = failed ? kHeaderBytes : l.total;
    st->bitmap = bitmap;
  }
  const uint64_t valuesEnd = l.codes + kept * ((flags & kFlagFp16Values) ? 2 : 4);
  for (uint64_t k = valuesEnd + threadIdx.x; k < l.raw; k += blockDim.x) out[k] = 0;
}

// The index section (after the values, aligned): LEB128 gaps at their scanned offsets, or
// the bitmap, one byte per thread from a binary search of the sorted indices.
template <class Offset>
__global__ void __launch_bounds__(kThreads)
    writeIndexSection(const uint32_t* idx, const Offset* offs, const SparseState* st, uint64_t n, uint64_t valueBytes,
                      uint8_t* out) {
  const uint64_t kept = st->kept;
  uint8_t* section = out + alignUp(kHeaderBytes + kept * valueBytes);
  if (!st->bitmap) {
    for (uint64_t r = firstThread(); r < kept; r += threadStride()) {
      uint32_t gap = idx[r] - (r ? idx[r - 1] + 1 : 0);
      uint8_t* p = section + offs[r];
      while (gap >= 0x80) {
        *p++ = static_cast<uint8_t>(gap | 0x80);
        gap >>= 7;
      }
      *p = static_cast<uint8_t>(gap);
    }
    return;
  }
  for (uint64_t byte = firstThread(); byte < (n + 7) / 8; byte += threadStride()) {
    uint64_t lo = 0, hi = kept;  // first r with idx[r] >= 8 * byte
    while (lo < hi) {
      const uint64_t mid = (lo + hi) / 2;
      if (idx[mid] < 8 * byte) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    uint32_t bits = 0;
    for (uint64_t r = lo; r < kept && idx[r] < 8 * byte + 8; ++r) bits |= 1u << (idx[r] % 8);
    section[byte] = static_cast<uint8_t>(bits);
  }
}

// Device buffers of one encode call, carved from the workspace.
template <class Offset>
struct Buffers {
  uint32_t *keys = nullptr, *equal = nullptr, *equalBefore = nullptr, *idx = nullptr;
  RadixState* radix = nullptr;
  Offset* offs = nullptr;
  SparseState* st = nullptr;
  void* temp = nullptr;
  size_t tempBytes = 0;
};

// The gap offsets' scan input: each kept index's varint length, as the scan reads it.
template <class Offset>
using GapLengths = thrust::transform_iterator<GapBytes, thrust::counting_iterator<uint64_t>, Offset>;

// CUB temporary bytes for the selection and the gap scan of n elements, `slots` kept at most.
template <class T, class Offset>
size_t cubTempBytes(cclCodec_t codec, uint64_t n, uint64_t slots, cudaStream_t stream) {
  size_t a = 0, b = 0, c = 0;
  const auto items = static_cast<int64_t>(n);
  if (codec == cclCodecTopK) {
    check(cub::DeviceScan::ExclusiveSum(nullptr, a, static_cast<uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
                                        items, stream),
          "cub::DeviceScan::ExclusiveSum (size)");
    check(cub::DeviceSelect::If(nullptr, b, Indices(0), static_cast<uint32_t*>(nullptr),
                                static_cast<unsigned long long*>(nullptr), items, TopKTake{nullptr, nullptr, nullptr},
                                stream),
          "cub::DeviceSelect::If (size)");
  } else if (codec == cclCodecThreshold) {
    check(cub::DeviceSelect::If(nullptr, a, Indices(0), static_cast<uint32_t*>(nullptr),
                                static_cast<unsigned long long*>(nullptr), items, AtLeast<T>{{nullptr, nullptr}, 0},
                                stream),
          "cub::DeviceSelect::If (size)");
  }
  if (codec != cclCodecRandK)
    check(cub::DeviceScan::ExclusiveSum(nullptr, c,
                                        GapLengths<Offset>(thrust::counting_iterator<uint64_t>(0), GapBytes{}),
                                        static_cast<Offset*>(nullptr), static_cast<int64_t>(slots + 1), stream),
          "cub::DeviceScan::ExclusiveSum (size)");
  return std::max({a, b, c, size_t{1}});
}

template <class T, class Offset>
Buffers<Offset> carve(const Params& p, uint64_t n, uint64_t slots, Workspace& ws, cudaStream_t stream) {
  const size_t tempBytes = cubTempBytes<T, Offset>(p.codec, n, slots, stream);
  const bool topk = p.codec == cclCodecTopK, sel = p.codec != cclCodecRandK;
  Carver c;
  const size_t keysAt = c.add(topk ? n * 4 : 0), equalAt = c.add(topk ? n * 4 : 0),
               equalBeforeAt = c.add(topk ? n * 4 : 0), radixAt = c.add(topk ? sizeof(RadixState) : 0),
               idxAt = c.add(slots * 4), offsAt = c.add(sel ? (slots + 1) * sizeof(Offset) : 0),
               stAt = c.add(sizeof(SparseState)), tempAt = c.add(tempBytes);
  void* base = ws.get(c.bytes(), stream);
  Buffers<Offset> b;
  if (topk) {
    b.keys = at<uint32_t>(base, keysAt);
    b.equal = at<uint32_t>(base, equalAt);
    b.equalBefore = at<uint32_t>(base, equalBeforeAt);
    b.radix = at<RadixState>(base, radixAt);
  }
  if (sel) b.offs = at<Offset>(base, offsAt);
  b.idx = at<uint32_t>(base, idxAt);
  b.st = at<SparseState>(base, stAt);
  b.temp = at<void>(base, tempAt);
  b.tempBytes = tempBytes;
  return b;
}

// Leaves the ascending kept indices in b.idx and their number in b.st->kept.
template <class T, class Offset>
void select(const Params& p, ValueAt<T> v, uint64_t n, uint64_t k, Buffers<Offset>& b, cudaStream_t stream) {
  const auto items = static_cast<int64_t>(n);
  size_t tb = b.tempBytes;
  if (p.codec == cclCodecRandK) {
    randomKIndices<<<gridFor(k, kThreads), kThreads, 0, stream>>>(math::rngKey(p.seed), n, k, b.idx, b.st);
    checkLaunch("randomKIndices");
  } else if (p.codec == cclCodecThreshold) {
    const AtLeast<T> pred{v, devMagnitudeKey(fp::floatBits(p.threshold))};
    checkEnqueued(cub::DeviceSelect::If(b.temp, tb, Indices(0), b.idx, &b.st->kept, items, pred, stream),
                  "cub::DeviceSelect::If", 2);
  } else if (k >= n) {
    allIndices<<<gridFor(n, kThreads), kThreads, 0, stream>>>(n, b.idx, b.st);
    checkLaunch("allIndices");
  } else if (k > 0) {
    checkEnqueued(cudaMemsetAsync(b.radix, 0, sizeof(RadixState), stream), "cudaMemsetAsync", 1);
    radixInit<<<1, 1, 0, stream>>>(b.radix, k);
    checkLaunch("radixInit");
    for (int round = 0; round < math::kRadixRounds; ++round) {
      radixHistogram<<<gridFor(n, kThreads, 512), kThreads, 0, stream>>>(b.keys, n, b.radix, round);
      checkLaunch("radixHistogram");
      radixPick<<<1, kThreads, 0, stream>>>(b.radix, round);
      checkLaunch("radixPick");
    }
    equalToKth<<<gridFor(n, kThreads), kThreads, 0, stream>>>(b.keys, n, b.radix, b.equal);
    checkLaunch("equalToKth");
    checkEnqueued(cub::DeviceScan::ExclusiveSum(b.temp, tb, b.equal, b.equalBefore, items, stream),
                  "cub::DeviceScan::ExclusiveSum", 2);
    tb = b.tempBytes;
    const TopKTake take{b.keys, b.equalBefore, b.radix};
    checkEnqueued(cub::DeviceSelect::If(b.temp, tb, Indices(0), b.idx, &b.st->kept, items, take, stream),
                  "cub::DeviceSelect::If", 2);
  }
}

template <class T, class Offset>
void encodeTyped(const Params& p, const typename T::Storage* x, uint64_t n, uint8_t* out, float* residual,
                 uint64_t* encodedBytes, Workspace& ws, cudaStream_t stream) {
  const bool randk = p.codec == cclCodecRandK;
  const uint64_t k = keptCount(p, n);
  const uint64_t slots = p.codec == cclCodecThreshold ? n : k;  // upper bound of the kept count
  Buffers<Offset> b = carve<T, Offset>(p, n, slots, ws, stream);
  checkEnqueued(cudaMemsetAsync(b.st, 0, sizeof(SparseState), stream), "cudaMemsetAsync", 1);
  if (n > 0) {
    stageSparse<T><<<gridFor(n, kThreads), kThreads, 0, stream>>>(x, n, residual, b.keys, b.st);
    checkLaunch("stageSparse");
  }
  const ValueAt<T> v{x, residual};
  if (n > 0) select(p, v, n, k, b, stream);
  const uint64_t valuesAt = kHeaderBytes + (randk ? 8 : 0);
  writeValues<T>
      <<<gridFor(slots + 1, kThreads), kThreads, 0, stream>>>(v, b.idx, b.st, out + valuesAt, p.fp16Values, residual);
  checkLaunch("writeValues");
  if (!randk) {
    size_t tb = b.tempBytes;
    checkEnqueued(cub::DeviceScan::ExclusiveSum(
                      b.temp, tb, GapLengths<Offset>(thrust::counting_iterator<uint64_t>(0), GapBytes{b.idx, b.st}),
                      b.offs, static_cast<int64_t>(slots + 1), stream),
                  "cub::DeviceScan::ExclusiveSum", 2);
  }
  const uint8_t flags = p.fp16Values ? kFlagFp16Values : 0;
  sparseHeader<Offset>
      <<<1, kThreads, 0, stream>>>(p.codec, n, flags, p.seed, b.offs, b.st, out, encodedBytes, ws.poison);
  checkLaunch("sparseHeader");
  if (randk) return;
  writeIndexSection<Offset><<<gridFor(n / 8 + slots + 1, kThreads), kThreads, 0, stream>>>(b.idx, b.offs, b.st, n,
                                                                                           p.fp16Values ? 2 : 4, out);
  checkLaunch("writeIndexSection");
}

}  // namespace

void sparsifierEncode(const Params& p, const void* x, cclDataType_t type, size_t n, uint8_t* out, float* residual,
                      uint64_t* encodedBytes, Workspace& ws, cudaStream_t stream) {
  // Gap offsets in 32 bits while the section (at most 5 bytes a kept element) fits them.
  const uint64_t slots = p.codec == cclCodecThreshold ? n : keptCount(p, n);
  const bool wide = (slots + 1) * kMaxGapBytes >= (uint64_t{1} << 32);
  withDeviceType(type, [&](auto tag) {
    using T = decltype(tag);
    const auto* in = static_cast<const typename T::Storage*>(x);
    if (wide) {
      encodeTyped<T, unsigned long long>(p, in, n, out, residual, encodedBytes, ws, stream);
    } else {
      encodeTyped<T, uint32_t>(p, in, n, out, residual, encodedBytes, ws, stream);
    }
  });
}

}  // namespace ccl::codec::cuda::detail
