// The per-codec parts of the block quantisers: how a block's scale is chosen, stored and
// read back, and how one element is quantised and dequantised. The math itself lives in
// codecs/math/ (shared with the CUDA kernels); these structs only bind it to the wire layout.
#pragma once

#include <cstdint>
#include <cstring>

#include "codecs/codec.h"
#include "codecs/math/quant_fp8.h"
#include "codecs/math/quant_int.h"
#include "common/error.h"

namespace ccl::codec {

// A block's scale as the encoder uses it: multiply by `inv` to quantise, by `scale` to
// dequantise. `raw` sends the block raw instead.
struct BlockScale {
  bool raw = false;
  float inv = 0.0f;
  float scale = 0.0f;
  uint32_t stored = 0;  // the scale's bits as written (fp32, fp16 or e8m0)
};

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

// fp32 scale s (finite, >= 0); inv = 1/s, 0 for an all-zero block.
inline BlockScale f32Scale(float absmax, float divisor) {
  BlockScale bs;
  const float s = absmax / divisor;
  if (absmax > 0.0f && !(s >= math::kMinScale)) return BlockScale{true, 0, 0, kF32RawMarker};
  bs.scale = s;
  bs.inv = s > 0.0f ? 1.0f / s : 0.0f;
  bs.stored = fp::floatBits(s);
  return bs;
}

// Reads a stored fp32/fp16 scale; false for the raw marker. Throws for a value the encoder
// never writes (negative, infinite, another NaN), which only a corrupt stream has.
inline bool readLinearScale(uint32_t stored, bool fp16, float& s) {
  if (fp16) {
    if (stored == kF16RawMarker) return false;
    s = fp::halfToFloat(static_cast<uint16_t>(stored));
  } else {
    if (stored == kF32RawMarker) return false;
    s = fp::bitsFloat(stored);
  }
  if (!(s >= 0.0f) || !math::isFiniteBits(s)) throw Error(cclInvalidUsage, "compressed stream: invalid block scale");
  return true;
}

template <int kBitsT>
struct IntKind {
  static constexpr int kBits = kBitsT;
  static constexpr int kQmax = (1 << (kBits - 1)) - 1;
  static constexpr uint32_t kMask = (1u << kBits) - 1;

  static BlockScale chooseScale(float absmax, bool fp16) {
    if (!fp16) return f32Scale(absmax, static_cast<float>(kQmax));
    const float s = absmax / static_cast<float>(kQmax);
    if (absmax > 0.0f && !(s >= math::kMinHalfScale && s <= math::kMaxHalfScale))
      return BlockScale{true, 0, 0, kF16RawMarker};
    const uint16_t h = math::halfScaleRoundUp(s);
    BlockScale bs;
    bs.scale = fp::halfToFloat(h);
    bs.inv = bs.scale > 0.0f ? 1.0f / bs.scale : 0.0f;
    bs.stored = h;
    return bs;
  }
  static bool readScale(uint32_t stored, bool fp16, float& s) { return readLinearScale(stored, fp16, s); }

  static uint32_t quant(float v, float inv) {
    return static_cast<uint32_t>(math::quantIntNearest(v * inv, kQmax)) & kMask;
  }
  static uint32_t quantStochastic(float v, float inv, uint32_t r) {
    return static_cast<uint32_t>(math::quantIntStochastic(v * inv, kQmax, r)) & kMask;
  }
  static float dequant(uint32_t code, float s) {
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

template <class F>
struct Fp8Kind {
  static constexpr int kBits = 8;
  static BlockScale chooseScale(float absmax, bool) { return f32Scale(absmax, math::fp8MaxFinite<F>()); }
  static bool readScale(uint32_t stored, bool, float& s) { return readLinearScale(stored, false, s); }
  static uint32_t quant(float v, float inv) { return math::fp8EncodeFinite<F>(v * inv); }
  static uint32_t quantStochastic(float v, float inv, uint32_t r) { return math::fp8EncodeStochastic<F>(v * inv, r); }
  static float dequant(uint32_t code, float s) { return math::fp8DecodeFinite<F>(code) * s; }
};

// OCP MX with e4m3 elements: the scale is 2^(E-127), stored as its e8m0 exponent E.
struct MxKind {
  static constexpr int kBits = 8;
  static constexpr int kEmaxElem = 8;
  static BlockScale chooseScale(float absmax, bool) {
    const uint32_t e = math::mxScaleExponent(absmax, kEmaxElem);
    BlockScale bs;
    bs.inv = math::mxEncodeMultiplier(e);
    bs.scale = math::mxScaleValue(e);
    bs.stored = e;
    return bs;
  }
  static bool readScale(uint32_t stored, bool, float& s) {
    if (stored == math::kMxRawMarker) return false;
    s = math::mxScaleValue(stored);
    return true;
  }
  static uint32_t quant(float v, float inv) { return math::fp8EncodeFinite<fp::E4M3>(v * inv); }
  static uint32_t quantStochastic(float v, float inv, uint32_t r) {
    return math::fp8EncodeStochastic<fp::E4M3>(v * inv, r);
  }
  static float dequant(uint32_t code, float s) { return math::fp8DecodeFinite<fp::E4M3>(code) * s; }
};

}  // namespace ccl::codec
