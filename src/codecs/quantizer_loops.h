// SPDX-License-Identifier: BSD-3-Clause
// The CPU loops of the block quantizers. Each block is staged as fp32 (the input itself
// when it is fp32 and no residual is added), scanned for its absmax and non-finite values,
// then quantized element by element with the shared math of codecs/math/. The loops are
// written so the compiler vectorises them (one byte of code per element in a stage, packed
// in a separate loop) and are compiled per instruction set (vector_clones.h). On x86 with
// AVX2 and F16C, the fp8, int8 and int4 inner loops are quantizer_x86.h's instead.
//
// The loops are templates over the quantizer kind; each kind is compiled in one of the
// quantizer_*.cc files (explicit instantiations of the kind's entry points below, so the
// kinds build in parallel), and quantizer.cc dispatches to them.
#pragma once

#include "codecs/quantizer.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "codecs/elements.h"
#include "codecs/quantizer_kinds.h"
#include "codecs/quantizer_x86.h"
#include "codecs/vector_clones.h"

namespace ccl::codec::detail::quantizer {

struct Geometry {
  uint64_t blocks;
  Layout layout;
  size_t scaleBytes;
  float t;  // the stream's tensor scale; 1 where its codec has none
};

inline Geometry geometry(const Header& h) {
  return Geometry{blocksOf(h.count, h.blockSize), layoutOf(h), scaleBytes(h.codec, h.flags),
                  tensorScaled(h.codec) ? tensorScaleOf(h) : 1.0f};
}
static_assert(std::bit_cast<uint32_t>(math::kNvfp4MinTensorScale) == kMinTensorScaleBits);

// Largest |v| as fp32 bits: NaN and inf compare above every finite value, so one integer
// max both finds the absmax and flags a non-finite block (result >= 0x7f800000).
CCL_ALWAYS_INLINE uint32_t blockAbsMaxBits(const float* v, uint32_t len) {
  uint32_t m = 0;
  for (uint32_t i = 0; i < len; ++i) {
    uint32_t b;
    std::memcpy(&b, v + i, 4);
    b &= 0x7fffffffu;
    m = b > m ? b : m;
  }
  return m;
}

template <class K, bool kStochastic>
CCL_ALWAYS_INLINE void quantizeToBytes(const float* v, uint32_t len, float inv, uint8_t* codes, math::RngKey key,
                                       uint64_t base) {
  for (uint32_t i = 0; i < len; ++i) {
    if constexpr (kStochastic) {
      codes[i] = static_cast<uint8_t>(K::quantStochastic(v[i], inv, math::rngBits(key, base + i)));
    } else {
      codes[i] = static_cast<uint8_t>(K::quant(v[i], inv));
    }
  }
}

// Packs len codes (len a multiple of 8) of kBits each into len * kBits / 8 bytes.
template <int kBits>
CCL_ALWAYS_INLINE void packCodes(const uint8_t* codes, uint32_t len, uint8_t* out) {
  if constexpr (kBits == 4) {
    for (uint32_t j = 0; j < len / 2; ++j) out[j] = math::packInt4(codes[2 * j], codes[2 * j + 1]);
  } else if constexpr (kBits == 2) {
    for (uint32_t j = 0; j < len / 4; ++j)
      out[j] = math::packInt2(codes[4 * j], codes[4 * j + 1], codes[4 * j + 2], codes[4 * j + 3]);
  }
}

// Element i of a block's packed codes (kBits each, element 0 in the lowest bits).
template <int kBits>
CCL_ALWAYS_INLINE uint32_t codeAt(const uint8_t* codes, uint32_t i) {
  constexpr uint32_t kPer = 8 / kBits;
  return (codes[i / kPer] >> ((i % kPer) * kBits)) & ((1u << kBits) - 1);
}

// Unpacks len codes (a multiple of 8 / kBits... any len; the source holds ceil) to one per byte.
template <int kBits>
CCL_ALWAYS_INLINE void unpackCodes(const uint8_t* in, uint32_t len, uint8_t* codes) {
  constexpr uint32_t kPer = 8 / kBits;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  const uint32_t full = len / kPer;
  for (uint32_t j = 0; j < full; ++j)
    for (uint32_t t = 0; t < kPer; ++t) codes[j * kPer + t] = static_cast<uint8_t>((in[j] >> (t * kBits)) & kMask);
  for (uint32_t i = full * kPer; i < len; ++i) codes[i] = static_cast<uint8_t>(codeAt<kBits>(in, i));
}

// How far ahead of the element being written the output ops prefetch for writing. A single
// thread's memory bandwidth is bounded by the misses it keeps in flight: the hardware
// prefetchers follow the streams, but an output that is read and written (the accumulator)
// or only written gets far more bandwidth with explicit write prefetches 4 KiB ahead
// (perf/codecs/README.md). Prefetches never fault, so running past the end is harmless.
constexpr size_t kPrefetchBytes = 4096;
constexpr size_t kLineBytes = 64;

// Prefetches for writing the len elements that start kPrefetchBytes past p. Addresses are
// computed as integers: they may lie past the end of the buffer.
template <class E>
CCL_ALWAYS_INLINE void prefetchForWrite(const E* p, uint32_t len) {
  const uintptr_t c = reinterpret_cast<uintptr_t>(p) + kPrefetchBytes;
  for (size_t b = 0; b < len * sizeof(E); b += kLineBytes)
    __builtin_prefetch(reinterpret_cast<const void*>(c + b), 1, 3);
}

// Block staging and raw output of the encoder; the hot loops are in encodeStream.
template <class K, class T>
struct EncodeState {
  const Params& p;
  const typename T::Storage* x;
  size_t n;
  uint8_t* out;
  float* residual;
  Header h;
  Geometry g;
  uint8_t* rawOut;
  uint64_t rawBlocks = 0;
  std::vector<float>& stage;
  std::vector<uint8_t>& codes;
  bool x86 = false;  // inner loops of quantizer_x86.h

  uint32_t rawMarker() const { return rawMarkerOf(p.codec, p.fp16Scales); }

  // The block as fp32, zero-padded to a multiple of 8 elements. Adding a zero residual
  // would turn -0 into +0 (raw blocks must be exact), so it is added only when present.
  CCL_ALWAYS_INLINE const float* stageBlock(size_t off, uint32_t len, uint32_t slot) {
    if constexpr (std::is_same_v<T, F32>) {
      if (!residual && len == p.blockSize) return x + off;
    }
    float* s = stage.data() + size_t{slot} * p.blockSize;
    if (residual) {
      for (uint32_t i = 0; i < len; ++i) s[i] = T::load(x, off + i) + residual[off + i];
    } else {
      for (uint32_t i = 0; i < len; ++i) s[i] = T::load(x, off + i);
    }
    for (uint32_t i = len; i < p.blockSize; ++i) s[i] = 0.0f;
    return s;
  }

  void writeRaw(uint64_t b, const float* v, uint32_t len) {
    const uint32_t entry[2] = {static_cast<uint32_t>(b), 0};
    std::memcpy(rawOut, entry, sizeof(entry));
    std::memcpy(rawOut + 8, v, size_t{len} * 4);
    std::memset(rawOut + 8 + size_t{len} * 4, 0, size_t{p.blockSize - len} * 4);
    rawOut += rawEntryBytes(p.blockSize);
    ++rawBlocks;
  }
};

// A block's values (staged in `slot` when they need staging) and the scale it gets.
struct ScaledBlock {
  const float* v;
  BlockScale s;
};

template <class K, class T>
CCL_ALWAYS_INLINE ScaledBlock scaleBlock(EncodeState<K, T>& st, size_t off, uint32_t len, uint32_t slot) {
  const float* v = st.stageBlock(off, len, slot);
  const uint32_t m = blockAbsMaxBits(v, len);
  return {v, blockScale<K>(fp::bitsFloat(m), m >= 0x7f800000u, st.p.fp16Scales, st.p.fixedLength, st.g.t)};
}

// The prefix of a block that quantizer_x86.h quantized into dst (none when it does not apply).
template <class K, bool kStochastic>
CCL_ALWAYS_INLINE uint32_t quantizeX86(bool enabled, const float* v, uint32_t len, float inv, uint8_t* dst) {
  if constexpr (x86::kCovers<K> && !kStochastic) {
    if (enabled) return x86::quantize<K>(v, len, inv, dst);
  }
  return 0;
}

// Writes block b of len elements (len == bs except for the last block) with its scale.
template <class K, class T, bool kStochastic>
CCL_ALWAYS_INLINE void encodeBlock(EncodeState<K, T>& st, uint64_t b, uint32_t bs, uint32_t len, ScaledBlock sb,
                                   math::RngKey key) {
  uint8_t* scales = st.out + kHeaderBytes;
  uint8_t* codes = st.codes.data();
  const size_t off = b * bs;
  const float* v = sb.v;
  const BlockScale& s = sb.s;
  uint8_t* dst = st.out + st.g.layout.codes + off * K::kBits / 8;
  const size_t codeBytes = (size_t{len} * K::kBits + 7) / 8;
  if (s.raw) {
    storeScale(scales, b, st.g.scaleBytes, st.rawMarker());
    std::memset(dst, 0, codeBytes);
    if (!st.p.fixedLength) st.writeRaw(b, v, len);
    if (st.residual) std::fill_n(st.residual + off, len, 0.0f);
    return;
  }
  storeScale(scales, b, st.g.scaleBytes, s.stored);
  const uint32_t padded = (len + 7) & ~7u;  // the stage is zero past len
  if constexpr (K::kBits == 8) {
    // Full blocks straight into the stream; a short last block via the code stage.
    uint8_t* c = len == bs ? dst : codes;
    const uint32_t done = quantizeX86<K, kStochastic>(st.x86, v, padded, s.inv, c);
    quantizeToBytes<K, kStochastic>(v + done, padded - done, s.inv, c + done, key, off + done);
    if (len != bs) std::memcpy(dst, codes, codeBytes);
    if (st.residual) {
      float* e = st.residual + off;
      for (uint32_t i = 0; i < len; ++i) e[i] = v[i] - K::dequant(c[i], s.scale);
    }
  } else {
    // The x86 loop writes whole bytes of the stream, never past len; the rest goes through
    // the code stage. Whole groups are packed in place; a last partial group goes through a
    // small buffer so no byte past the stream's codes is written.
    const uint32_t done = quantizeX86<K, kStochastic>(st.x86, v, len, s.inv, dst);
    quantizeToBytes<K, kStochastic>(v + done, padded - done, s.inv, codes + done, key, off + done);
    const uint32_t len8 = len & ~7u;
    packCodes<K::kBits>(codes + done, len8 - done, dst + done * K::kBits / 8);
    if (len8 != len) {
      uint8_t tail[8];
      packCodes<K::kBits>(codes + len8, 8, tail);
      std::memcpy(dst + len8 * K::kBits / 8, tail, codeBytes - len8 * K::kBits / 8);
    }
    if (st.residual) {
      unpackCodes<K::kBits>(dst, done, codes);
      float* e = st.residual + off;
      for (uint32_t i = 0; i < len; ++i) e[i] = v[i] - K::dequant(codes[i], s.scale);
    }
  }
}

// Blocks are scaled a group at a time, then written: a block's scale is a chain of
// dependent steps (absmax, its horizontal maximum, one or two divisions) that the CPU
// cannot start while the previous block's quantizing loop fills its instruction window,
// but the scales of a group are independent and overlap one another.
constexpr uint32_t kGroupBytes = 4096;
constexpr uint32_t kMaxGroup = 16;

inline uint32_t groupBlocks(uint32_t blockSize) {
  return std::clamp<uint32_t>(kGroupBytes / (blockSize * 4), 1, kMaxGroup);
}

// kBlock != 0 compiles the full blocks for that size (the defaults, 128, 32 and 16): with
// constant trip counts their loops vectorise without remainder code, which is much of the
// cost of a small block.
template <class K, class T, bool kStochastic, uint32_t kBlock>
CCL_VECTOR_CLONES void encodeStream(EncodeState<K, T>& st) {
  const uint32_t bs = kBlock != 0 ? kBlock : st.p.blockSize;
  const uint32_t group = groupBlocks(bs);
  const math::RngKey key = math::rngKey(st.p.seed);
  const uint64_t full = st.n / bs;
  ScaledBlock sb[kMaxGroup];
  for (uint64_t b0 = 0; b0 < full; b0 += group) {
    const uint32_t k = static_cast<uint32_t>(std::min<uint64_t>(group, full - b0));
    // The input is left to the hardware prefetchers, which follow it: software prefetches of
    // the next group slowed large encodes on one CPU and helped another only within its noise
    // (perf/codecs/README.md, 'fp8 rounded in fp32, and encode without read prefetch, measured
    // side by side' and 'The same two comparisons on a Zen 3 (AVX2) machine').
    for (uint32_t j = 0; j < k; ++j) sb[j] = scaleBlock(st, (b0 + j) * bs, bs, j);
    for (uint32_t j = 0; j < k; ++j) encodeBlock<K, T, kStochastic>(st, b0 + j, bs, bs, sb[j], key);
  }
  if (full < st.g.blocks) {
    const auto len = static_cast<uint32_t>(st.n - full * bs);
    encodeBlock<K, T, kStochastic>(st, full, bs, len, scaleBlock(st, full * bs, len, 0), key);
  }
}

// The largest finite |x + residual| of the input: what a tensor scale is chosen from (one
// pass more over the input, for the codecs that have one).
// (Over K too, though it does not use it: a function of several instruction-set clones is
// then made by the one file that compiles K.)
template <class K, class T>
CCL_VECTOR_CLONES float finiteAbsMax(const typename T::Storage* x, const float* residual, size_t n) {
  uint32_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    const float v = residual ? T::load(x, i) + residual[i] : T::load(x, i);
    const uint32_t b = fp::floatBits(v) & 0x7fffffffu;
    m = b < 0x7f800000u && b > m ? b : m;
  }
  return fp::bitsFloat(m);
}

template <class K, class T>
size_t encodeQuantized(const Params& p, const typename T::Storage* x, size_t n, uint8_t* out, float* residual) {
  thread_local std::vector<float> stage;
  thread_local std::vector<uint8_t> codes;
  stage.resize(size_t{groupBlocks(p.blockSize)} * p.blockSize);
  codes.resize(p.blockSize);
  EncodeState<K, T> st{p, x, n, out, residual, Header{}, Geometry{}, nullptr, 0, stage, codes};
  st.h.codec = static_cast<uint8_t>(p.codec);
  st.h.blockSize = p.blockSize;
  st.h.count = n;
  st.h.flags = quantizerFlags(p);
  if (tensorScaled(p.codec)) setTensorScale(st.h, math::nvfp4TensorScale(finiteAbsMax<K, T>(x, residual, n)));
  st.g = geometry(st.h);
  st.rawOut = out + st.g.layout.raw;
  st.x86 = x86::kCovers<K> && x86::available();
  if (p.stochastic) {
    encodeStream<K, T, true, 0>(st);
  } else if constexpr (!CCL_CODEC_SPECIALIZE) {
    encodeStream<K, T, false, 0>(st);
  } else if (p.blockSize == 128) {
    encodeStream<K, T, false, 128>(st);
  } else if (p.blockSize == 32) {
    encodeStream<K, T, false, 32>(st);
  } else if (p.blockSize == 16) {
    encodeStream<K, T, false, 16>(st);
  } else {
    encodeStream<K, T, false, 0>(st);
  }
  st.h.aux = st.rawBlocks;
  writeHeader(st.h, out);
  // Zero the alignment padding so equal inputs give equal bytes.
  const size_t scalesEnd = kHeaderBytes + st.g.blocks * st.g.scaleBytes;
  std::memset(out + scalesEnd, 0, st.g.layout.codes - scalesEnd);
  const size_t codeEnd = st.g.layout.codes + (n * K::kBits + 7) / 8;
  std::memset(out + codeEnd, 0, st.g.layout.raw - codeEnd);
  return static_cast<size_t>(st.rawOut - out);
}

// Checks every scale and raw entry before anything is written: raw entries name distinct
// blocks in increasing order, exactly the blocks whose scale is the raw marker (a
// fixed-length stream has none: its marked blocks are non-finite).
template <class K>
void validateBlocks(const Header& h, const uint8_t* in, const Geometry& g) {
  const bool fp16 = h.flags & kFlagFp16Scales;
  const size_t sb = g.scaleBytes;  // read again for each raw entry below
  uint64_t marked = 0;
  for (uint64_t b = 0; b < g.blocks; ++b) {
    float s;
    const ScaleRead r = K::readScale(loadScale(in + kHeaderBytes, b, sb), fp16, g.t, s);
    if (r == ScaleRead::kInvalid) throw Error(cclInvalidUsage, "compressed stream: invalid block scale");
    marked += r == ScaleRead::kRaw ? 1 : 0;
  }
  if (!(h.flags & kFlagFixedLength) && marked != h.aux)
    throw Error(cclInvalidUsage, "compressed stream: raw block count does not match the scales");
  int64_t prev = -1;
  for (uint64_t r = 0; r < h.aux; ++r) {
    uint32_t entry[2];
    std::memcpy(entry, in + g.layout.raw + r * rawEntryBytes(h.blockSize), sizeof(entry));
    float s;
    if (static_cast<int64_t>(entry[0]) <= prev || entry[0] >= g.blocks || entry[1] != 0 ||
        K::readScale(loadScale(in + kHeaderBytes, entry[0], sb), fp16, g.t, s) != ScaleRead::kRaw)
      throw Error(cclInvalidUsage, "compressed stream: bad raw block entry");
    prev = entry[0];
  }
}

// Block b of a validated stream: where its values go, its scale and its packed codes;
// false for a raw block.
struct BlockView {
  size_t off;
  uint32_t len;
  float s;
  const uint8_t* codes;
};

template <class K>
CCL_ALWAYS_INLINE bool blockView(const Header& h, const uint8_t* in, const Geometry& g, uint64_t b, BlockView& v) {
  // validateBlocks has refused invalid scales: anything but a usable one is a raw block.
  if (K::readScale(loadScale(in + kHeaderBytes, b, g.scaleBytes), h.flags & kFlagFp16Scales, g.t, v.s) !=
      ScaleRead::kOk)
    return false;
  v.off = b * h.blockSize;
  v.len = static_cast<uint32_t>(std::min<uint64_t>(h.blockSize, h.count - v.off));
  v.codes = in + g.layout.codes + v.off * K::kBits / 8;
  return true;
}

// Dequantizes every non-raw block of a validated stream straight into op's output:
// op.dequantize<K>(offset, codes, scale, len) gets each block's codes one per byte (the
// stream's own bytes for 8-bit codes), so no value goes through a stage.
// kBlock != 0 compiles the full blocks of that size with constant trip counts, as the
// encoder does: a loop over a runtime count of 16 or 32 elements stays scalar (its vector
// version needs more elements than one small block has).
template <class K, class Op, uint32_t kBlock>
CCL_VECTOR_CLONES void decodeBlocks(const Header& h, const uint8_t* in, const Geometry& g, Op& op) {
  thread_local std::vector<uint8_t> codeStage;
  codeStage.resize(h.blockSize);
  uint8_t* stage = codeStage.data();
  for (uint64_t b = 0; b < g.blocks; ++b) {
    BlockView v;
    if (!blockView<K>(h, in, g, b, v)) continue;
    auto run = [&](uint32_t len) {
      if constexpr (K::kBits != 8) {
        unpackCodes<K::kBits>(v.codes, len, stage);
        v.codes = stage;
      }
      op.template dequantize<K>(v.off, v.codes, v.s, len);
    };
    if (kBlock != 0 && v.len == kBlock) {
      run(kBlock);
    } else {
      run(v.len);
    }
  }
}

template <class K, class Op>
void decodeBlocks(const Header& h, const uint8_t* in, const Geometry& g, Op& op) {
  if constexpr (!CCL_CODEC_SPECIALIZE) {
    decodeBlocks<K, Op, 0>(h, in, g, op);
  } else if (h.blockSize == 16) {
    decodeBlocks<K, Op, 16>(h, in, g, op);
  } else if (h.blockSize == 32) {
    decodeBlocks<K, Op, 32>(h, in, g, op);
  } else if (h.blockSize == 128) {
    decodeBlocks<K, Op, 128>(h, in, g, op);
  } else {
    decodeBlocks<K, Op, 0>(h, in, g, op);
  }
}

// decodeBlocks for fp32 output through the x86 inner loops: one function compiled for
// AVX2 and F16C, so that no block pays a call into code compiled for another instruction set.
template <class K, bool kAccumulate>
CCL_X86_TARGET void decodeBlocksX86(const Header& h, const uint8_t* in, const Geometry& g, float* out) {
  for (uint64_t b = 0; b < g.blocks; ++b) {
    BlockView v;
    if (!blockView<K>(h, in, g, b, v)) continue;
    float* o = out + v.off;
    prefetchForWrite(o, v.len);
    for (uint32_t i = x86::dequantize<K, kAccumulate>(v.codes, v.len, v.s, o); i < v.len; ++i) {
      const float x = K::dequant(codeAt<K::kBits>(v.codes, i), v.s);
      o[i] = kAccumulate ? o[i] + x : x;
    }
  }
}

// Runs op over every block of a validated stream: dequantize for the quantized blocks,
// op(offset, values, len) for the raw ones, and NaNs for the marked blocks of a fixed-length
// stream.
template <class K, class Op>
void forEachBlock(const Header& h, const uint8_t* in, Op op) {
  const Geometry g = geometry(h);
  validateBlocks<K>(h, in, g);
  if constexpr (x86::kDecodes<K> && Op::kF32Out) {
    if (x86::available()) {
      decodeBlocksX86<K, Op::kAccumulate>(h, in, g, op.f32());
    } else {
      decodeBlocks<K>(h, in, g, op);
    }
  } else {
    decodeBlocks<K>(h, in, g, op);
  }
  thread_local std::vector<float> raw;
  raw.resize(h.blockSize);
  for (uint64_t r = 0; r < h.aux; ++r) {
    const uint8_t* entry = in + g.layout.raw + r * rawEntryBytes(h.blockSize);
    uint32_t b;
    std::memcpy(&b, entry, 4);
    const size_t off = size_t{b} * h.blockSize;
    const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(h.blockSize, h.count - off));
    std::memcpy(raw.data(), entry + 8, size_t{len} * 4);
    op(off, raw.data(), len);
  }
  if (!(h.flags & kFlagFixedLength)) return;
  raw.assign(h.blockSize, markedBlockValue());
  for (uint64_t b = 0; b < g.blocks; ++b) {
    float s;
    if (K::readScale(loadScale(in + kHeaderBytes, b, g.scaleBytes), false, g.t, s) != ScaleRead::kRaw) continue;
    const size_t off = b * h.blockSize;
    op(off, raw.data(), static_cast<uint32_t>(std::min<uint64_t>(h.blockSize, h.count - off)));
  }
}

// Output ops are structs, not lambdas, so the vector clones of decodeBlocks get a named type.
template <class T>
struct StoreOp {
  static constexpr bool kF32Out = std::is_same_v<T, F32>;
  static constexpr bool kAccumulate = false;
  typename T::Storage* out;
  float* f32() const requires kF32Out { return out; }
  template <class K>
  CCL_ALWAYS_INLINE void dequantize(size_t off, const uint8_t* codes, float s, uint32_t len) const {
    prefetchForWrite(out + off, len);
    for (uint32_t i = 0; i < len; ++i) T::store(out, off + i, K::dequant(codes[i], s));
  }
  void operator()(size_t off, const float* v, uint32_t len) const {
    for (uint32_t i = 0; i < len; ++i) T::store(out, off + i, v[i]);
  }
};

struct AccumulateOp {
  static constexpr bool kF32Out = true;
  static constexpr bool kAccumulate = true;
  float* acc;
  float* f32() const { return acc; }
  template <class K>
  CCL_ALWAYS_INLINE void dequantize(size_t off, const uint8_t* codes, float s, uint32_t len) const {
    float* a = acc + off;
    prefetchForWrite(a, len);
    for (uint32_t i = 0; i < len; ++i) a[i] += K::dequant(codes[i], s);
  }
  void operator()(size_t off, const float* v, uint32_t len) const {
    for (uint32_t i = 0; i < len; ++i) acc[off + i] += v[i];
  }
};

// The entry points of kind K (quantizer.h's functions for one codec), compiled by the
// quantizer_*.cc file that instantiates K (CCL_QUANTIZER_INSTANTIATE).
template <class K>
size_t encodeKind(const Params& p, const void* x, cclDataType_t type, size_t n, uint8_t* out, float* residual) {
  return withElementType(type, [&](auto tag) {
    using T = decltype(tag);
    return encodeQuantized<K, T>(p, static_cast<const typename T::Storage*>(x), n, out, residual);
  });
}

template <class K>
void decodeKind(const Header& h, const uint8_t* in, void* y, cclDataType_t type) {
  withElementType(type, [&](auto tag) {
    using T = decltype(tag);
    forEachBlock<K>(h, in, StoreOp<T>{static_cast<typename T::Storage*>(y)});
  });
}

template <class K>
void accumulateKind(const Header& h, const uint8_t* in, float* acc) {
  forEachBlock<K>(h, in, AccumulateOp{acc});
}

}  // namespace ccl::codec::detail::quantizer

// The entry points of K: with `extern`, declared (quantizer.cc); without, compiled
// (quantizer_*.cc). Used inside namespace ccl::codec::detail::quantizer.
#define CCL_QUANTIZER_INSTANTIATE(EXTERN, K)                                                                 \
  EXTERN template size_t encodeKind<K>(const Params&, const void*, cclDataType_t, size_t, uint8_t*, float*); \
  EXTERN template void decodeKind<K>(const Header&, const uint8_t*, void*, cclDataType_t);                   \
  EXTERN template void accumulateKind<K>(const Header&, const uint8_t*, float*);

// Every quantizer kind, as withQuantizerKind names them; X(K) for each.
#define CCL_EACH_QUANTIZER_KIND(X, EXTERN) \
  X(EXTERN, Fp8Kind<fp::E4M3>)             \
  X(EXTERN, Fp8Kind<fp::E5M2>)             \
  X(EXTERN, MxKind<8>)                     \
  X(EXTERN, MxKind<4>)                     \
  X(EXTERN, Nvfp4Kind)                     \
  X(EXTERN, IntKind<8>)                    \
  X(EXTERN, IntKind<4>)                    \
  X(EXTERN, IntKind<2>)                    \
  X(EXTERN, MidriseKind)
