// SPDX-License-Identifier: BSD-3-Clause
// Element math of the symmetric per-block absmax integer quantizers (int8, int4, int2),
// shared by the CPU loops and the CUDA kernels. A block with absmax m gets the scale
// s = m / qmax (stored as fp32, or as fp16 rounded up so |x|/s never exceeds qmax) and each
// element the integer q = round(x / s) in [-qmax, qmax]; decoding gives q * s.
#pragma once

#include <cstdint>

#include "codecs/math/rng.h"
#include "common/floatconv.h"

namespace ccl::codec::math {

CCL_HD int intQmax(int bits) { return (1 << (bits - 1)) - 1; }

// True for finite x (exponent not all ones).
CCL_HD bool isFiniteBits(float x) { return (fp::floatBits(x) & 0x7f800000u) != 0x7f800000u; }

CCL_HD float absf(float x) { return fp::bitsFloat(fp::floatBits(x) & 0x7fffffffu); }

// Largest of a and |x| for finite values; the NaN check is separate (isFiniteBits).
CCL_HD float absMaxStep(float a, float x) {
  const float ax = absf(x);
  return ax > a ? ax : a;
}

// fp16 code of the smallest fp16 value >= s (s finite, >= 0): round to nearest, then step
// up one code if that rounded down. Keeps |x| / stored_scale <= qmax.
CCL_HD uint16_t halfScaleRoundUp(float s) {
  uint16_t h = fp::floatToHalf(s);
  return fp::halfToFloat(h) < s ? static_cast<uint16_t>(h + 1) : h;
}

// Smallest fp32 scale we quantize with; a smaller non-zero absmax sends its block raw,
// because 1/s would overflow.
constexpr float kMinScale = 0x1p-126f;
constexpr float kMinHalfScale = 0x1p-14f;  // fp16 min normal
constexpr float kMaxHalfScale = 65504.0f;

// Round to nearest even of v = x * inv (|v| < 2^22), clamped to [-qmax, qmax]. Adding
// 1.5 * 2^23 rounds v to an integer held in the low mantissa bits, so the integer is read
// from the bits and clamped as an integer (cheaper than a float clamp and a conversion).
CCL_HD int32_t quantIntNearest(float v, int qmax) {
  const int32_t q = static_cast<int32_t>(fp::floatBits(v + 12582912.0f)) - 0x4b400000;
  return q > qmax ? qmax : (q < -qmax ? -qmax : q);
}

// Stochastic rounding of v: floor(v + u), u uniform in [0,1), so E[q] = v (up to 2^-24).
CCL_HD int32_t quantIntStochastic(float v, int qmax, uint32_t randomBits) {
  // v + 128 + u >= 0 for |v| <= 127, so truncation is floor.
  const float shifted = v + 128.0f + rngUniform(randomBits);
  const int32_t q = static_cast<int32_t>(shifted) - 128;
  return q > qmax ? qmax : (q < -qmax ? -qmax : q);
}

CCL_HD float dequantInt(int32_t q, float scale) { return static_cast<float>(q) * scale; }

// The mid-rise 2-bit quantizer (four levels (q - 1.5) s, q in 0..3, s = absmax / 1.5): v =
// x / s lies in [-1.5, 1.5], so v + 1.5 in [0, 3] rounds to the code. Clamped, since v may
// pass 1.5 by the rounding of 1/s.
constexpr float kMidriseHalfRange = 1.5f;
CCL_HD uint32_t quantMidriseNearest(float v) {
  const int32_t q = static_cast<int32_t>(fp::floatBits(v + kMidriseHalfRange + 12582912.0f)) - 0x4b400000;
  return static_cast<uint32_t>(q > 3 ? 3 : (q < 0 ? 0 : q));
}
// floor(v + 1.5 + u): unbiased, E[(q - 1.5) s] = x. Truncation is floor for the values
// >= 0 and gives 0 for those in (-1, 0), which only a v below -1.5 by rounding reaches.
CCL_HD uint32_t quantMidriseStochastic(float v, uint32_t randomBits) {
  const int32_t q = static_cast<int32_t>(v + kMidriseHalfRange + rngUniform(randomBits));
  return static_cast<uint32_t>(q > 3 ? 3 : (q < 0 ? 0 : q));
}
CCL_HD float dequantMidrise(uint32_t code, float scale) {
  return (static_cast<float>(code) - kMidriseHalfRange) * scale;
}

// Packing: int8 one per byte (two's complement); int4 two per byte, element 2i in the low
// nibble; int2 four per byte, element 4i in the lowest two bits. Fields are two's complement.
CCL_HD uint8_t packInt4(int32_t lo, int32_t hi) {
  return static_cast<uint8_t>((static_cast<uint32_t>(lo) & 0xfu) | ((static_cast<uint32_t>(hi) & 0xfu) << 4));
}
CCL_HD int32_t unpackInt4(uint8_t byte, int which) {
  const int32_t v = (byte >> (4 * which)) & 0xf;
  return v >= 8 ? v - 16 : v;
}
CCL_HD uint8_t packInt2(int32_t a, int32_t b, int32_t c, int32_t d) {
  return static_cast<uint8_t>((static_cast<uint32_t>(a) & 3u) | ((static_cast<uint32_t>(b) & 3u) << 2) |
                              ((static_cast<uint32_t>(c) & 3u) << 4) | ((static_cast<uint32_t>(d) & 3u) << 6));
}
CCL_HD int32_t unpackInt2(uint8_t byte, int which) {
  const int32_t v = (byte >> (2 * which)) & 3;
  return v >= 2 ? v - 4 : v;
}

}  // namespace ccl::codec::math
