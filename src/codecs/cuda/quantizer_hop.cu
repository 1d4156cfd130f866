// SPDX-License-Identifier: BSD-3-Clause
// The fused hop of fixed-length quantizer streams on the GPU (codec::decodeAddEncode): a
// batch of received streams validated as a batch of decodes validates them, then one kernel
// that reads each received stream and its local chunk once and writes the outgoing stream
// once, through the encoders' warp segments (quantizer_encode.cuh). The sum is never stored.
#include <algorithm>
#include <memory>
#include <span>

#include "codecs/cuda/cuda_check.h"
#include "codecs/cuda/kernels_internal.h"
#include "codecs/cuda/quantizer_encode.cuh"
#include "codecs/cuda/quantizer_view.cuh"
#include "common/kernel_registry.h"

namespace ccl::codec::cuda::detail {
namespace {

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

// The received stream is laid out as the outgoing one (hopStatus checks its header against
// the encode's arguments), so its scales and codes are found from those, read from the
// kernel's parameters: no layout is derived from the received header per codec block (that
// took two 64-bit divisions and a table lookup per block and lane, and kept the hop at a
// third of the copy's traffic; perf/codecs, run 17).
template <class K, class T>
struct HopSource {
  const Hop& h;
  float t;  // the received stream's tensor scale (1 where its codec has none)
  float divisor;
  __device__ void load(const EncodeArgs& a, uint64_t b, uint64_t i, uint32_t cnt, float v[kGroup]) const {
    loadGroup<T>(static_cast<const typename T::Storage*>(a.x), i, cnt, a.vecX, v);
    constexpr uint32_t kMask = (1u << K::kBits) - 1;
    float s;
    if (K::readScale(loadLe(h.in + kHeaderBytes + b * a.scaleBytes, a.scaleBytes), a.fp16Scales, t, s) ==
        ScaleRead::kOk) {
      const uint64_t word =
          loadCodes(h.in + a.layout.codes + i * K::kBits / 8, (cnt * K::kBits + 7) / 8, K::kBits, h.vecIn);
      for (uint32_t e = 0; e < cnt; ++e) v[e] += K::dequant(static_cast<uint32_t>(word >> (e * K::kBits)) & kMask, s);
    } else {
      for (uint32_t e = 0; e < cnt; ++e) v[e] += markedBlockValue();  // a marked block: NaN
    }
    if (h.divide)
      for (uint32_t e = 0; e < cnt; ++e) v[e] /= divisor;
  }
};

// What a hop's received stream ends with: its validation's status (the header read already
// refused another codec or count: headerValid), and a stream laid out otherwise than the
// outgoing one refused: not fixed-length, or of another block size or scale format (the
// peers of a call encode with the call's parameters; the CPU's decodeAddEncode would take
// such a stream, a device hop does not).
__device__ inline uint32_t hopStatus(const DecodeState* st, const EncodeArgs& a) {
  const uint32_t bad = finalStatus(st);
  if (bad) return bad;
  const Header& h = st->h;
  const bool same =
      (h.flags & kFlagFixedLength) && h.blockSize == a.blockSize && ((h.flags & kFlagFp16Scales) != 0) == a.fp16Scales;
  return same ? 0u : kStatusBadHeader;
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
  const uint32_t* before;  // the call's word before the batch (DecodeTable::before)
};
static_assert(sizeof(HopTable) <= 32000, "a hop table must fit a kernel's parameters");

// Every hop's codec blocks, then its header and padding; a hop whose stream was refused
// ORs its status into the call's word (a plain read-modify-write, as the decoders': the word
// may be host-mapped memory) and writes a failed sender's stream (wire.h) and nothing else,
// as does every hop of a call whose word was set before the batch (HopTable::before).
template <class K, class T>
__global__ void __launch_bounds__(kMaxThreads, 3) hopBatch(const __grid_constant__ HopTable t, unsigned lanes) {
  const uint64_t total = t.firstBlock[t.count];
  forEachSegment(total, lanes, [&](uint64_t g, bool active, unsigned lane) {
    const uint32_t k = streamOf(t.firstBlock, t.count, active ? g : total - 1);
    // A refused hop's segments only take part in the shuffles.
    const bool mine = active && hopStatus(t.h[k].st, t.a[k]) == 0;
    const float received = mine && tensorScaled(t.a[k].codec) ? tensorScaleOf(t.h[k].st->h) : 1.0f;
    encodeSegment<K>(t.a[k], HopSource<K, T>{t.h[k], received, t.divisor}, g - t.firstBlock[k], mine, lanes, lane,
                     1.0f);
  });
  for (uint32_t k = blockIdx.x; k < t.count; k += gridDim.x) {
    const uint32_t bad = hopStatus(t.h[k].st, t.a[k]);
    if (bad) {
      if (threadIdx.x == 0) {
        volatile uint32_t* word = t.status;
        *word = *word | bad;
        storeHeader(failedSenderHeader(), t.a[k].out);
      }
      continue;
    }
    finishStream(t.a[k], t.flags, nullptr, t.before);
  }
}

// Loaded with the rest of this file's kernels before any flag kernel runs
// (collectives/exec/cuda/kernel_preload.h).
const ::ccl::KernelLibrary kKernels(&hopBatch<Fp8Kind<fp::E4M3>, DevF32>);

}  // namespace

void quantizerHopBatch(const Params& p, cclDataType_t type, float divisor, std::span<const HopItem> items,
                       uint32_t* status, bool orInto, Workspace& ws, cudaStream_t stream) {
  if (items.empty()) return;
  const size_t tables = std::min<size_t>(items.size(), kHopStreams);
  auto* states = static_cast<DecodeState*>(ws.get(sizeof(DecodeState) * (tables + 1), stream));
  // The call's word before the batch: a hop whose own stream is valid writes a failed
  // sender's stream only where the call had failed before it (not for another hop's refusal).
  auto* before = reinterpret_cast<uint32_t*>(states + tables);
  for (size_t first = 0; first < items.size(); first += kHopStreams) {
    // The received streams: headers, then validation, as a batch of decodes checks them.
    auto d = std::make_unique<DecodeTable>();
    auto t = std::make_unique<HopTable>();
    const auto count = static_cast<uint32_t>(std::min<size_t>(kHopStreams, items.size() - first));
    d->count = t->count = count;
    d->codec = p.codec;
    d->status = t->status = status;
    d->orInto = orInto || first > 0;
    d->before = first == 0 ? before : nullptr;
    t->before = before;
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
    withQuantizerKind(p.codec, [&](auto kind) {
      using K = decltype(kind);
      batchValidate<K><<<check, kViewThreads, 0, stream>>>(*d);
      checkLaunch("batchValidate");
      withDeviceType(type, [&](auto tag) {
        auto* kernel = hopBatch<K, decltype(tag)>;
        const unsigned grid = segmentGrid(kernel, std::max<uint64_t>(blocks, count), p.blockSize);
        kernel<<<grid, kMaxThreads, 0, stream>>>(*t, segmentLanes(p.blockSize));
      });
      checkLaunch("hopBatch");
    });
  }
}

}  // namespace ccl::codec::cuda::detail
