// Scalar conversions between fp32 and the narrow float formats (fp16, bf16, fp8 e4m3/e5m2),
// written once for host and device. Rounding is to nearest, ties to even, as the CUDA
// toolkit's conversions do; callers choose between saturation to the largest finite value
// and the format's overflow value (inf, or NaN for e4m3 which has no inf).
#pragma once

#include <cstdint>
#include <cmath>
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
  static constexpr int kBias = (1 << (kExp - 1)) - 1;
  static constexpr uint32_t kSignBit = 1u << (kExp + kMan);
  static constexpr uint32_t kMaxFinite = kIeee ? ((((1u << kExp) - 2) << kMan) | ((1u << kMan) - 1))
                                               : (((1u << kExp) - 1) << kMan) | ((1u << kMan) - 2);
  static constexpr uint32_t kInf = kIeee ? ((1u << kExp) - 1) << kMan : kMaxFinite + 1;  // e4m3: NaN
  static constexpr uint32_t kNaN = kIeee ? (((1u << kExp) - 1) << kMan) | (1u << (kMan - 1))
                                         : ((1u << kExp) - 1) << kMan | ((1u << kMan) - 1);

  // Encodes f. With `saturate`, values beyond the finite range (and infinities) become the
  // largest finite value of the right sign; without it they become inf (NaN for e4m3).
  static CCL_HD uint32_t encode(float f, bool saturate) {
    uint32_t u = floatBits(f);
    uint32_t sign = (u >> 31) ? kSignBit : 0u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | kNaN;
    if (a == 0x7f800000u) return sign | (saturate ? kMaxFinite : kInf);
    uint32_t code;
    constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + 1 - kBias) << 23;
    if (a < kMinNormalBits) {
      // Subnormal in the target: scale so one unit of the last place is 1.0 and round.
      // The product is exact (power of two), so the only rounding is the one wanted.
      float scaled = bitsFloat(a) * bitsFloat(static_cast<uint32_t>(127 + kBias - 1 + kMan) << 23);
      code = static_cast<uint32_t>(roundEven(scaled));
    } else {
      constexpr int kShift = 23 - kMan;
      uint32_t lsb = (a >> kShift) & 1u;
      a += (1u << (kShift - 1)) - 1u + lsb;
      code = (a >> kShift) - (static_cast<uint32_t>(127 - kBias) << kMan);
    }
    if (code > kMaxFinite) code = saturate ? kMaxFinite : kInf;
    return sign | code;
  }

  static CCL_HD float decode(uint32_t code) {
    uint32_t sign = (code & kSignBit) ? 0x80000000u : 0u;
    uint32_t exp = (code >> kMan) & ((1u << kExp) - 1);
    uint32_t man = code & ((1u << kMan) - 1);
    if (kIeee && exp == (1u << kExp) - 1) return bitsFloat(sign | 0x7f800000u | (man ? 0x00400000u : 0u));
    if (!kIeee && (code & ~kSignBit) == kNaN) return bitsFloat(sign | 0x7fc00000u);
    if (exp == 0) {
      float mag = static_cast<float>(man) * bitsFloat(static_cast<uint32_t>(127 + 1 - kBias - kMan) << 23);
      return bitsFloat(floatBits(mag) | sign);
    }
    return bitsFloat(sign | ((exp + 127 - kBias) << 23) | (man << (23 - kMan)));
  }

 private:
  // Half to even under the default rounding mode; rintf vectorises with -fno-math-errno.
  static CCL_HD float roundEven(float x) { return rintf(x); }
};

using Half = Format<5, 10, true>;
using E5M2 = Format<5, 2, true>;
using E4M3 = Format<4, 3, false>;

CCL_HD float halfToFloat(uint16_t h) { return Half::decode(h); }
CCL_HD uint16_t floatToHalf(float f) { return static_cast<uint16_t>(Half::encode(f, false)); }

CCL_HD float bf16ToFloat(uint16_t b) { return bitsFloat(static_cast<uint32_t>(b) << 16); }
CCL_HD uint16_t floatToBf16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

CCL_HD float e4m3ToFloat(uint8_t v) { return E4M3::decode(v); }
CCL_HD uint8_t floatToE4m3(float f, bool saturate = true) { return static_cast<uint8_t>(E4M3::encode(f, saturate)); }
CCL_HD float e5m2ToFloat(uint8_t v) { return E5M2::decode(v); }
CCL_HD uint8_t floatToE5m2(float f, bool saturate = true) { return static_cast<uint8_t>(E5M2::encode(f, saturate)); }

}  // namespace ccl::fp
