// SPDX-License-Identifier: BSD-3-Clause
// Element math of the 4-bit float quantizers (OCP MXFP4 and NVIDIA NVFP4), shared by the CPU
// loops and the CUDA kernels. Their elements are E2M1 (OCP MX v1.0): a sign bit, two
// exponent bits (bias 1) and one mantissa bit, no infinity or NaN; the magnitudes of codes
// 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6 (code 1 the only subnormal). Element 2i of a block
// is the low nibble of byte i, as int4's.
// - MXFP4: one e8m0 scale X = 2^(floor(log2 absmax) - 2) per 32 elements (emax_elem = 2:
//   the absmax lands in [4, 8) after scaling; what lies above 6 saturates, as the spec says).
// - NVFP4: one e4m3 scale per 16 elements, times one fp32 scale T per tensor (here: per
//   stream) chosen so that the stream's absmax maps to 448 * 6: T = absmax / 2688. A block's
//   scale is e4m3(absmax_b / 6 / T) * T, rounded to nearest; its elements e2m1(x / scale).
#pragma once

#include <cstdint>

#include "codecs/math/quant_fp8.h"
#include "codecs/math/quant_int.h"
#include "codecs/math/rng.h"
#include "common/floatconv.h"

namespace ccl::codec::math {

constexpr float kE2m1Max = 6.0f;
constexpr int kE2m1Emax = 2;  // floor(log2(6))

// Magnitude of E2M1 code c (0..7), built as fp32 bits with integer operations, no table (a
// GPU kernel would keep a table in local memory): codes 2..7 are (c + 252) << 22 (1, 1.5,
// 2, 3, 4, 6), the subnormal code 1 is 0.5 = 252 << 22, code 0 is 0.
CCL_HD float e2m1Magnitude(uint32_t c) {
  const uint32_t bits = (c + 252u - static_cast<uint32_t>(c == 1u)) << 22;
  return fp::bitsFloat(bits & (0u - static_cast<uint32_t>(c != 0u)));
}

// Decodes a 4-bit E2M1 code (sign in bit 3). Every code is finite: nothing a corrupt stream
// holds can put a non-finite value into a result.
CCL_HD float e2m1Decode(uint32_t code) {
  const float m = e2m1Magnitude(code & 7u);
  return fp::bitsFloat(fp::floatBits(m) | ((code & 8u) << 28));
}

// Saturating round-to-nearest-even of a finite v to E2M1: the code counts the midpoints
// below |v|, a tie going to the even code (0.25 to 0, 0.75 to 1.0, 1.25 to 1.0, 1.75 to 2,
// 2.5 to 2, 3.5 to 4, 5 to 4); beyond 5 it is 6. The sign is kept, zero's too.
CCL_HD uint32_t e2m1EncodeFinite(float v) {
  const float a = absf(v);
  const uint32_t c = static_cast<uint32_t>(a > 0.25f) + static_cast<uint32_t>(a >= 0.75f) +
                     static_cast<uint32_t>(a > 1.25f) + static_cast<uint32_t>(a >= 1.75f) +
                     static_cast<uint32_t>(a > 2.5f) + static_cast<uint32_t>(a >= 3.5f) +
                     static_cast<uint32_t>(a > 5.0f);
  return ((fp::floatBits(v) >> 28) & 8u) | c;
}

// Stochastic rounding of a finite v to E2M1: between its neighbours lo <= |v| < hi it
// rounds up with probability (|v| - lo) / (hi - lo); |v| >= 6 saturates to 6.
CCL_HD uint32_t e2m1EncodeStochastic(float v, uint32_t randomBits) {
  const float a = absf(v);
  const uint32_t lo = static_cast<uint32_t>(a >= 0.5f) + static_cast<uint32_t>(a >= 1.0f) +
                      static_cast<uint32_t>(a >= 1.5f) + static_cast<uint32_t>(a >= 2.0f) +
                      static_cast<uint32_t>(a >= 3.0f) + static_cast<uint32_t>(a >= 4.0f) +
                      static_cast<uint32_t>(a >= 6.0f);
  // The step above code lo: 0.5 up to 2, then 1, then 2 (none past 6).
  const float step = lo < 4 ? 0.5f : (lo < 6 ? 1.0f : 2.0f);
  const bool up = lo < 7 && a - e2m1Magnitude(lo) > rngUniform(randomBits) * step;
  return ((fp::floatBits(v) >> 28) & 8u) | (lo + (up ? 1u : 0u));
}

// The smallest tensor scale: e4m3's smallest subnormal (2^-9) times it is fp32's smallest
// normal, so every non-zero block scale has a finite inverse.
constexpr float kNvfp4MinTensorScale = 0x1p-117f;  // wire.h's kMinTensorScaleBits

// NVFP4's tensor scale for a stream whose largest finite |x| is absmax: absmax / (448 * 6),
// at least kNvfp4MinTensorScale (a stream of zeros or of tiny values still has one).
CCL_HD float nvfp4TensorScale(float absmax) {
  const float t = absmax / (448.0f * kE2m1Max);
  return t >= kNvfp4MinTensorScale ? t : kNvfp4MinTensorScale;
}

// NVFP4's block scale code: e4m3(absmax_b / 6 / t), rounded to nearest even and saturating.
CCL_HD uint32_t nvfp4BlockScaleCode(float absmax, float t) { return fp8EncodeFinite<fp::E4M3>(absmax / kE2m1Max / t); }

}  // namespace ccl::codec::math
