// SPDX-License-Identifier: BSD-3-Clause
// The per-codec parts of the block quantizers, for the CPU loops and the CUDA kernels alike:
// how a block's scale is chosen, stored and read back, and how one element is quantized and
// dequantized. The math itself lives in codecs/math/; these structs bind it to the wire
// layout and to the codec's row of codec_table.h. Adding a quantizer means one kind here
// and one line in withQuantizerKind.
//
// Every kind's chooseScale and readScale take `t`, the stream's tensor scale: NVFP4 scales
// its blocks by it (tensorScaled), the others ignore it (their streams carry none).
#pragma once

#include <cstdint>
#include <cstring>

#include "codecs/codec_table.h"
#include "codecs/math/quant_fp4.h"
#include "codecs/math/quant_fp8.h"
#include "codecs/math/quant_int.h"
#include "codecs/wire.h"
#include "common/error.h"

namespace ccl::codec {

// A block's scale as the encoder uses it: multiply by `inv` to quantize, by `scale` to
// dequantize. `raw` sends the block raw instead.
struct BlockScale {
  bool raw = false;
  float inv = 0.0f;
  float scale = 0.0f;
  uint32_t stored = 0;  // the scale's bits as written (fp32, fp16 or e8m0)
};

// What a stored scale says: a usable scale, the raw marker, or a value no encoder writes
// (negative, infinite, another NaN), which only a corrupt stream has.
enum class ScaleRead { kOk, kRaw, kInvalid };

// Constant-size copies (no memcpy call per block); little-endian: the low bytes.
inline void storeScale(uint8_t* scales, uint64_t b, size_t bytes, uint32_t v) {
  if (bytes == 4) {
    std::memcpy(scales + b * 4, &v, 4);
  } else if (bytes == 2) {
    const auto h = static_cast<uint16_t>(v);
    std::memcpy(scales + b * 2, &h, 2);
  } else {
    scales[b] = static_cast<uint8_t>(v);
  }
}

inline uint32_t loadScale(const uint8_t* scales, uint64_t b, size_t bytes) {
  if (bytes == 4) {
    uint32_t v;
    std::memcpy(&v, scales + b * 4, 4);
    return v;
  }
  if (bytes == 2) {
    uint16_t h;
    std::memcpy(&h, scales + b * 2, 2);
    return h;
  }
  return scales[b];
}

constexpr uint32_t kF32RawMarker = 0x7fc00000u;
constexpr uint32_t kF16RawMarker = 0x7e00u;

constexpr uint32_t kE4m3RawMarker = 0x7fu;  // e4m3's NaN

CCL_HD uint32_t rawMarkerOf(int codec, bool fp16Scales) {
  if (codecInfo(codec).scale == ScaleFormat::kE8m0) return math::kMxRawMarker;
  if (codecInfo(codec).scale == ScaleFormat::kE4m3Tensor) return kE4m3RawMarker;
  return fp16Scales ? kF16RawMarker : kF32RawMarker;
}

// fp32 scale s (finite, >= 0); inv = 1/s, 0 for an all-zero block.
CCL_HD BlockScale f32Scale(float absmax, float divisor) {
  const float s = absmax / divisor;
  if (absmax > 0.0f && !(s >= math::kMinScale)) return BlockScale{true, 0.0f, 0.0f, kF32RawMarker};
  return BlockScale{false, s > 0.0f ? 1.0f / s : 0.0f, s, fp::floatBits(s)};
}

// The int codecs' scale s = absmax / divisor: fp32, or fp16 rounded up (so |x| / s never
// exceeds the divisor); raw where fp16 cannot hold it.
CCL_HD BlockScale linearScale(float absmax, float divisor, bool fp16, float) {
  if (!fp16) return f32Scale(absmax, divisor);
  const float s = absmax / divisor;
  if (absmax > 0.0f && !(s >= math::kMinHalfScale && s <= math::kMaxHalfScale))
    return BlockScale{true, 0.0f, 0.0f, kF16RawMarker};
  const uint16_t h = math::halfScaleRoundUp(s);
  const float scale = fp::halfToFloat(h);
  return BlockScale{false, scale > 0.0f ? 1.0f / scale : 0.0f, scale, h};
}

// Reads a stored fp32/fp16 scale.
CCL_HD ScaleRead readLinearScale(uint32_t stored, bool fp16, float& s) {
  if (fp16) {
    if (stored == kF16RawMarker) return ScaleRead::kRaw;
    s = fp::halfToFloat(static_cast<uint16_t>(stored));
  } else {
    if (stored == kF32RawMarker) return ScaleRead::kRaw;
    s = fp::bitsFloat(stored);
  }
  return (s >= 0.0f && math::isFiniteBits(s)) ? ScaleRead::kOk : ScaleRead::kInvalid;
}

template <int kBitsT>
struct IntKind {
  static constexpr int kBits = kBitsT;
  static constexpr int kQmax = (1 << (kBits - 1)) - 1;
  static constexpr uint32_t kMask = (1u << kBits) - 1;
  static constexpr int kCodec = kBits == 8 ? cclCodecInt8 : kBits == 4 ? cclCodecInt4 : cclCodecInt2;
  static_assert(kCodecTable.rows[kCodec].codeBits == kBits && kCodecTable.rows[kCodec].scaleDivisor == kQmax);

  CCL_HD static BlockScale chooseScale(float absmax, bool fp16, float t) {
    return linearScale(absmax, static_cast<float>(kQmax), fp16, t);
  }
  CCL_HD static ScaleRead readScale(uint32_t stored, bool fp16, float, float& s) {
    return readLinearScale(stored, fp16, s);
  }

  CCL_HD static uint32_t quant(float v, float inv) {
    return static_cast<uint32_t>(math::quantIntNearest(v * inv, kQmax)) & kMask;
  }
  CCL_HD static uint32_t quantStochastic(float v, float inv, uint32_t r) {
    return static_cast<uint32_t>(math::quantIntStochastic(v * inv, kQmax, r)) & kMask;
  }
  CCL_HD static float dequant(uint32_t code, float s) {
    // Sign extension written so that compilers see it: int8 codes as a signed byte load.
    int32_t q;
    if constexpr (kBits == 8) {
      q = static_cast<int8_t>(code);
    } else {
      q = static_cast<int32_t>(code << (32 - kBits)) >> (32 - kBits);
    }
    return math::dequantInt(q, s);
  }
};

// int2_midrise: IntKind<2>'s scales (absmax / 1.5 here) and packing, with codes 0..3 for
// the four levels (q - 1.5) s.
struct MidriseKind {
  static constexpr int kBits = 2;
  static constexpr uint32_t kMask = 3;
  static constexpr int kCodec = cclCodecInt2Midrise;
  static_assert(kCodecTable.rows[kCodec].codeBits == kBits &&
                kCodecTable.rows[kCodec].scaleDivisor == math::kMidriseHalfRange);

  CCL_HD static BlockScale chooseScale(float absmax, bool fp16, float t) {
    return linearScale(absmax, math::kMidriseHalfRange, fp16, t);
  }
  CCL_HD static ScaleRead readScale(uint32_t stored, bool fp16, float, float& s) {
    return readLinearScale(stored, fp16, s);
  }
  CCL_HD static uint32_t quant(float v, float inv) { return math::quantMidriseNearest(v * inv); }
  CCL_HD static uint32_t quantStochastic(float v, float inv, uint32_t r) {
    return math::quantMidriseStochastic(v * inv, r);
  }
  CCL_HD static float dequant(uint32_t code, float s) { return math::dequantMidrise(code & kMask, s); }
};

template <class F>
struct Fp8Kind {
  static constexpr int kBits = 8;
  static constexpr int kCodec = F::kMaxFinite == fp::E4M3::kMaxFinite ? cclCodecFp8E4m3 : cclCodecFp8E5m2;
  static constexpr float kMaxFinite = math::fp8MaxFinite<F>();
  static_assert(kCodecTable.rows[kCodec].codeBits == kBits && kCodecTable.rows[kCodec].scaleDivisor == kMaxFinite);

  CCL_HD static BlockScale chooseScale(float absmax, bool, float) { return f32Scale(absmax, kMaxFinite); }
  CCL_HD static ScaleRead readScale(uint32_t stored, bool, float, float& s) {
    return readLinearScale(stored, false, s);
  }
  CCL_HD static uint32_t quant(float v, float inv) { return math::fp8EncodeFinite<F>(v * inv); }
  CCL_HD static uint32_t quantStochastic(float v, float inv, uint32_t r) {
    return math::fp8EncodeStochastic<F>(v * inv, r);
  }
  CCL_HD static float dequant(uint32_t code, float s) { return math::fp8DecodeFinite<F>(code) * s; }
};

// OCP MX: the scale is 2^(E-127), stored as its e8m0 exponent E; elements e4m3 (MXFP8,
// kBits 8) or e2m1 (MXFP4, kBits 4).
template <int kBitsT>
struct MxKind {
  static constexpr int kBits = kBitsT;
  static constexpr int kCodec = kBits == 8 ? cclCodecMxfp8E4m3 : cclCodecMxfp4;
  // floor(log2(largest element)): the absmax lands in [2^emax, 2^(emax+1)) after scaling.
  static constexpr int kEmaxElem = kBits == 8 ? 8 : math::kE2m1Emax;
  static_assert(kCodecTable.rows[kCodec].scaleDivisor == float(1 << kEmaxElem) &&
                kCodecTable.rows[kCodec].scale == ScaleFormat::kE8m0 && kCodecTable.rows[kCodec].codeBits == kBits);

  CCL_HD static BlockScale chooseScale(float absmax, bool, float) {
    const uint32_t e = math::mxScaleExponent(absmax, kEmaxElem);
    return BlockScale{false, math::mxEncodeMultiplier(e), math::mxScaleValue(e), e};
  }
  CCL_HD static ScaleRead readScale(uint32_t stored, bool, float, float& s) {
    if (stored == math::kMxRawMarker) return ScaleRead::kRaw;
    s = math::mxScaleValue(stored);
    return ScaleRead::kOk;
  }
  CCL_HD static uint32_t quant(float v, float inv) {
    if constexpr (kBits == 8) return math::fp8EncodeFinite<fp::E4M3>(v * inv);
    return math::e2m1EncodeFinite(v * inv);
  }
  CCL_HD static uint32_t quantStochastic(float v, float inv, uint32_t r) {
    if constexpr (kBits == 8) return math::fp8EncodeStochastic<fp::E4M3>(v * inv, r);
    return math::e2m1EncodeStochastic(v * inv, r);
  }
  CCL_HD static float dequant(uint32_t code, float s) {
    if constexpr (kBits == 8) return math::fp8DecodeFinite<fp::E4M3>(code) * s;
    return math::e2m1Decode(code) * s;
  }
};

// NVIDIA NVFP4: e2m1 elements, an e4m3 scale per block (default 16) times the stream's fp32
// tensor scale t (math/quant_fp4.h).
struct Nvfp4Kind {
  static constexpr int kBits = 4;
  static constexpr int kCodec = cclCodecNvfp4;
  static_assert(kCodecTable.rows[kCodec].scale == ScaleFormat::kE4m3Tensor &&
                kCodecTable.rows[kCodec].scaleDivisor == math::kE2m1Max && kCodecTable.rows[kCodec].codeBits == kBits);

  CCL_HD static BlockScale chooseScale(float absmax, bool, float t) {
    const uint32_t code = math::nvfp4BlockScaleCode(absmax, t);
    const float scale = math::fp8DecodeFinite<fp::E4M3>(code) * t;  // 0, or at least 2^-9 t: normal (t >= 2^-117)
    return BlockScale{false, scale > 0.0f ? 1.0f / scale : 0.0f, scale, code};
  }
  CCL_HD static ScaleRead readScale(uint32_t stored, bool, float t, float& s) {
    if (stored == kE4m3RawMarker) return ScaleRead::kRaw;
    if (stored > fp::E4M3::kMaxFinite) return ScaleRead::kInvalid;  // negative or NaN: no encoder writes it
    s = math::fp8DecodeFinite<fp::E4M3>(stored) * t;
    return ScaleRead::kOk;
  }
  CCL_HD static uint32_t quant(float v, float inv) { return math::e2m1EncodeFinite(v * inv); }
  CCL_HD static uint32_t quantStochastic(float v, float inv, uint32_t r) {
    return math::e2m1EncodeStochastic(v * inv, r);
  }
  CCL_HD static float dequant(uint32_t code, float s) { return math::e2m1Decode(code) * s; }
};

// The scale a block is encoded with, for the CPU loops and the kernels alike. absmax is its
// largest |x|, unused when nonFinite (the block holds a NaN or an infinity). A raw scale
// sends the block raw or, in a fixed-length stream, marks it non-finite. A fixed-length
// stream has no room for a finite block whose fp32 scale would fall below kMinScale: that
// block is quantized with kMinScale (|x| / kMinScale stays within the code range). fp16
// scales are never fixed-length, and e8m0 and e4m3 scales are never raw for a finite block.
// t is the stream's tensor scale (1 for codecs without one).
template <class K>
CCL_HD BlockScale blockScale(float absmax, bool nonFinite, bool fp16, bool fixedLength, float t) {
  if (nonFinite) return BlockScale{true, 0.0f, 0.0f, rawMarkerOf(K::kCodec, fp16)};
  const BlockScale s = K::chooseScale(absmax, fp16, t);
  if (!s.raw || !fixedLength) return s;
  return BlockScale{false, 1.0f / math::kMinScale, math::kMinScale, fp::floatBits(math::kMinScale)};
}

// Calls fn(Kind{}) for a quantizer codec (on the host: the CPU loops and the kernel
// launches both dispatch here); throws for any other.
template <class Fn>
decltype(auto) withQuantizerKind(int codec, Fn&& fn) {
  switch (codec) {
    case cclCodecFp8E4m3:
      return fn(Fp8Kind<fp::E4M3>{});
    case cclCodecFp8E5m2:
      return fn(Fp8Kind<fp::E5M2>{});
    case cclCodecMxfp8E4m3:
      return fn(MxKind<8>{});
    case cclCodecMxfp4:
      return fn(MxKind<4>{});
    case cclCodecNvfp4:
      return fn(Nvfp4Kind{});
    case cclCodecInt8:
      return fn(IntKind<8>{});
    case cclCodecInt4:
      return fn(IntKind<4>{});
    case cclCodecInt2:
      return fn(IntKind<2>{});
    case cclCodecInt2Midrise:
      return fn(MidriseKind{});
    default:
      throw Error(cclInternalError, "not a quantizer codec");
  }
}

}  // namespace ccl::codec
