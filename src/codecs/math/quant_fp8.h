// SPDX-License-Identifier: BSD-3-Clause
// Element math of the fp8 quantizers, shared by the CPU loops and the CUDA kernels.
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

// 2^e for a normal fp32 power of two, usable in constant expressions.
CCL_HD constexpr float pow2f(int e) {
  float r = 1.0f;
  for (; e > 0; --e) r *= 2.0f;
  for (; e < 0; ++e) r *= 0.5f;
  return r;
}

// Saturating round-to-nearest-even of a finite v to format F: the quantizers' fast path
// (their blocks with NaN or Inf travel raw, so every value reaching it is finite). Equal to
// F::encode(v, true) for every finite v, with fewer operations: no inf/NaN selections.
template <class F>
CCL_HD uint32_t fp8EncodeFinite(float v) {
  static_assert(F::kSignBit == 0x80u);
  constexpr int kShift = 23 - F::kManBits;
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + 1 - F::kBias) << 23;
  const uint32_t u = fp::floatBits(v);
  const uint32_t a = u & 0x7fffffffu;
  const uint32_t normal = ((a + (1u << (kShift - 1)) - 1u + ((a >> kShift) & 1u)) >> kShift) -
                          (static_cast<uint32_t>(127 - F::kBias) << F::kManBits);
  // Below F's normal range one unit of the last place is 2^(1-bias-man): scale it to 1.0
  // (exact, a power of two) and let adding 1.5*2^23 round to the nearest even integer.
  constexpr float kUlpInverse = pow2f(F::kBias - 1 + F::kManBits);
  const uint32_t subnormal = fp::floatBits(fp::bitsFloat(a) * kUlpInverse + 12582912.0f) - 0x4b400000u;
  const uint32_t code = a < kMinNormalBits ? subnormal : normal;
  return ((u >> 24) & 0x80u) | (code < F::kMaxFinite ? code : F::kMaxFinite);
}

// Decodes an fp8 code of the quantizers' streams. Codes the encoder never writes (NaN, and
// e5m2's infinities) decode as the largest finite value, so a corrupt stream cannot put a
// non-finite value into a result. Equal to F::decode for every finite code.
template <class F>
CCL_HD float fp8DecodeFinite(uint32_t code) {
  uint32_t mag = code & 0x7fu;
  mag = mag < F::kMaxFinite ? mag : F::kMaxFinite;
  const float normal = fp::bitsFloat((mag << (23 - F::kManBits)) + (static_cast<uint32_t>(127 - F::kBias) << 23));
  constexpr float kUlp = pow2f(1 - F::kBias - F::kManBits);
  const float subnormal = static_cast<float>(static_cast<int32_t>(mag)) * kUlp;
  const float m = mag < (1u << F::kManBits) ? subnormal : normal;
  return fp::bitsFloat(fp::floatBits(m) | ((code & 0x80u) << 24));
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

// 2^(E - 127) as an fp32 value; E = 0 is the subnormal 2^-127, exact, and multiplying by
// it rounds once (slowly on some CPUs, but only blocks with absmax below 2^-119 have it).
CCL_HD float mxScaleValue(uint32_t e) { return fp::bitsFloat(e == 0 ? 0x00400000u : e << 23); }

constexpr uint8_t kMxRawMarker = 0xff;  // e8m0 NaN

}  // namespace ccl::codec::math
