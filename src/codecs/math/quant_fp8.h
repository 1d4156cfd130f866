// Element math of the fp8 quantisers, shared by the CPU loops and the CUDA kernels.
// Per-block fp32 scale: s = absmax / max_finite, elements fp8(x / s) with saturation.
// MX (OCP Microscaling v1.0): the scale is a power of two 2^(E-127) stored as an e8m0 byte,
// E = floor(log2(absmax)) - emax_elem + 127 (emax_elem = 8 for e4m3); elements that land
// above the format's max after scaling saturate, as the spec prescribes.
#pragma once

#include <cstdint>

#include "codecs/math/quant_int.h"
#include "codecs/math/rng.h"
#include "common/floatconv.h"

namespace ccl::codec::math {

// Largest finite value of F: 448 (e4m3) or 57344 (e5m2).
template <class F>
constexpr float fp8MaxFinite() {
  return F::kSignBit == 0x80u && F::kMaxFinite == 0x7eu ? 448.0f : 57344.0f;
}
static_assert(fp::E4M3::kMaxFinite == 0x7eu && fp::E5M2::kMaxFinite == 0x7bu);

// Stochastic rounding to format F (saturating): the fp32 bits below F's last place are
// compared against random bits, so the value rounds up with probability equal to its
// distance from the lower neighbour, in units of that place.
template <class F>
CCL_HD uint32_t fp8EncodeStochastic(float f, uint32_t randomBits) {
  const uint32_t u = fp::floatBits(f);
  const uint32_t sign = (u >> 31) ? F::kSignBit : 0u;
  const uint32_t a = u & 0x7fffffffu;
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + 1 - F::kBias) << 23;
  constexpr int kShift = 23 - F::kManBits;
  const uint32_t normal =
      ((a + (randomBits >> (32 - kShift))) >> kShift) - (static_cast<uint32_t>(127 - F::kBias) << F::kManBits);
  const float scaled = fp::bitsFloat(a < kMinNormalBits ? a : 0u) *
                       fp::bitsFloat(static_cast<uint32_t>(127 + F::kBias - 1 + F::kManBits) << 23);
  // scaled < 2^kMan: adding u in [0,1) and truncating is floor(scaled + u).
  const uint32_t subnormal = static_cast<uint32_t>(static_cast<int32_t>(scaled + rngUniform(randomBits)));
  uint32_t code = a < kMinNormalBits ? subnormal : normal;
  code = ((a >= 0x7f800000u) | (code > F::kMaxFinite)) ? F::kMaxFinite : code;
  return a > 0x7f800000u ? F::kCanonicalNaN : (sign | code);
}

// e8m0 scale exponent (biased, 0..254) for a finite absmax >= 0 and element emax.
CCL_HD uint32_t mxScaleExponent(float absmax, int emaxElem) {
  const int32_t biasedExp = static_cast<int32_t>((fp::floatBits(absmax) >> 23) & 0xffu);
  // A subnormal or zero absmax has floor(log2) <= -127: the smallest scale, E = 0.
  const int32_t e = biasedExp == 0 ? 0 : biasedExp - emaxElem;
  return static_cast<uint32_t>(e < 0 ? 0 : e);
}

// 2^(127 - E): what the encoder multiplies by. Normal for every E the encoder produces.
CCL_HD float mxEncodeMultiplier(uint32_t e) { return fp::bitsFloat((254u - e) << 23); }

// v * 2^(E - 127) in two normal steps so E = 0 needs no denormal constant; exact whenever
// the result is representable.
CCL_HD float mxApplyScale(float v, uint32_t e) {
  const int32_t p = static_cast<int32_t>(e) - 127;
  const int32_t p1 = p / 2;
  const int32_t p2 = p - p1;
  return v * fp::bitsFloat(static_cast<uint32_t>(p1 + 127) << 23) *
         fp::bitsFloat(static_cast<uint32_t>(p2 + 127) << 23);
}

constexpr uint8_t kMxRawMarker = 0xff;  // e8m0 NaN

}  // namespace ccl::codec::math
