// SPDX-License-Identifier: BSD-3-Clause
// Scalar conversions between fp32 and the narrow float formats (fp16, bf16, fp8 e4m3/e5m2),
// written once for host and device. Rounding is to nearest, ties to even, as the CUDA
// toolkit's conversions do; callers choose between saturation to the largest finite value
// and the format's overflow value (inf, or NaN for e4m3 which has no inf).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define CCL_HD __host__ __device__ __forceinline__
#else
#define CCL_HD inline
#endif

namespace ccl::fp {

CCL_HD uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

CCL_HD float bitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

// A binary float format with kExp exponent bits and kMan mantissa bits. kIeee formats
// (fp16, e5m2) reserve the top exponent for inf/NaN; the others (e4m3 "fn") have no inf and
// use only the all-ones code as NaN.
template <int kExp, int kMan, bool kIeee>
struct Format {
  static constexpr int kExpBits = kExp;
  static constexpr int kManBits = kMan;
  static constexpr int kBias = (1 << (kExp - 1)) - 1;
  static constexpr uint32_t kSignBit = 1u << (kExp + kMan);
  static constexpr uint32_t kMaxFinite =
      kIeee ? ((((1u << kExp) - 2) << kMan) | ((1u << kMan) - 1)) : (((1u << kExp) - 1) << kMan) | ((1u << kMan) - 2);
  static constexpr uint32_t kInf = kIeee ? ((1u << kExp) - 1) << kMan : kMaxFinite + 1;  // e4m3: NaN
  static constexpr uint32_t kNaN =
      kIeee ? (((1u << kExp) - 1) << kMan) | (1u << (kMan - 1)) : ((1u << kExp) - 1) << kMan | ((1u << kMan) - 1);

  static constexpr uint32_t kCanonicalNaN = kSignBit - 1;

  // Encodes f. With `saturate`, values beyond the finite range (and infinities) become the
  // largest finite value of the right sign; without it they become inf (NaN for e4m3).
  // Written without branches (both paths computed, one selected) so element loops vectorise.
  static CCL_HD uint32_t encode(float f, bool saturate) {
    const uint32_t u = floatBits(f);
    const uint32_t sign = (u >> 31) ? kSignBit : 0u;
    const uint32_t a = u & 0x7fffffffu;
    constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + 1 - kBias) << 23;
    constexpr int kShift = 23 - kMan;
    // Normal in the target: round the fp32 mantissa to kMan bits, ties to even; a carry
    // into the exponent is the correct result.
    const uint32_t lsb = (a >> kShift) & 1u;
    const uint32_t normal =
        ((a + (1u << (kShift - 1)) - 1u + lsb) >> kShift) - (static_cast<uint32_t>(127 - kBias) << kMan);
    // Subnormal in the target: scale so one unit of the last place is 1.0 and round. The
    // product is exact (power of two), so the only rounding is the one wanted.
    const float scaled =
        bitsFloat(a < kMinNormalBits ? a : 0u) * bitsFloat(static_cast<uint32_t>(127 + kBias - 1 + kMan) << 23);
    const uint32_t subnormal = static_cast<uint32_t>(static_cast<int32_t>(roundEven(scaled)));
    uint32_t code = a < kMinNormalBits ? subnormal : normal;
    code = ((a >= 0x7f800000u) | (code > kMaxFinite)) ? (saturate ? kMaxFinite : kInf) : code;
    // NaN becomes the all-ones code without sign, whatever the input's sign and payload,
    // as cuda_fp8.h does.
    return a > 0x7f800000u ? kCanonicalNaN : (sign | code);
  }

  // Decodes without branches (selections are bit masks, so loops vectorise) and without
  // fp32 denormal arithmetic: the significand is converted as an integer and scaled by a
  // normal power of two.
  static CCL_HD float decode(uint32_t code) {
    constexpr uint32_t kExpMask = (1u << kExp) - 1;
    const uint32_t sign = (code & kSignBit) << (31 - kExp - kMan);
    const uint32_t exp = (code >> kMan) & kExpMask;
    const uint32_t man = code & ((1u << kMan) - 1);
    const uint32_t normal = exp != 0 ? 1u : 0u;
    const uint32_t sig = man | (normal << kMan);
    const uint32_t e = exp + (1u - normal);
    // sig * 2^(e - kBias - kMan); the exponent stays within fp32's normal range.
    const float mag = static_cast<float>(static_cast<int32_t>(sig)) * bitsFloat((e + 127 - kBias - kMan) << 23);
    uint32_t special, specialBits;
    if constexpr (kIeee) {
      special = exp == kExpMask ? 1u : 0u;
      specialBits = 0x7f800000u | (man != 0 ? 0x00400000u : 0u);
    } else {
      special = (code & (kSignBit - 1)) == kNaN ? 1u : 0u;
      specialBits = 0x7fc00000u;
    }
    const uint32_t mask = 0u - special;
    return bitsFloat(sign | (specialBits & mask) | (floatBits(mag) & ~mask));
  }

  // Round to nearest, ties to even, for |x| < 2^22 under the default rounding mode. Adding
  // and removing 1.5*2^23 needs no libm call, so it vectorises without SSE4.1 and is exact
  // (the compiler may not fold it: no -ffast-math).
  static CCL_HD float roundEven(float x) {
    constexpr float kMagic = 12582912.0f;
    return (x + kMagic) - kMagic;
  }
};

using Half = Format<5, 10, true>;
using E5M2 = Format<5, 2, true>;
using E4M3 = Format<4, 3, false>;

CCL_HD float halfToFloat(uint16_t h) { return Half::decode(h); }
CCL_HD uint16_t floatToHalf(float f) { return static_cast<uint16_t>(Half::encode(f, false)); }

CCL_HD float bf16ToFloat(uint16_t b) { return bitsFloat(static_cast<uint32_t>(b) << 16); }
CCL_HD uint16_t floatToBf16(float f) {
  const uint32_t u = floatBits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quietNaN = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quietNaN : rounded);
}

CCL_HD float e4m3ToFloat(uint8_t v) { return E4M3::decode(v); }
CCL_HD uint8_t floatToE4m3(float f, bool saturate = true) { return static_cast<uint8_t>(E4M3::encode(f, saturate)); }
CCL_HD float e5m2ToFloat(uint8_t v) { return E5M2::decode(v); }
CCL_HD uint8_t floatToE5m2(float f, bool saturate = true) { return static_cast<uint8_t>(E5M2::encode(f, saturate)); }

}  // namespace ccl::fp
