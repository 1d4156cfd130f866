// SPDX-License-Identifier: BSD-3-Clause
// fp::* conversions against the CUDA toolkit's own host-side conversions: every fp8 code,
// and 10^6 random floats per format (random bit patterns, so NaN, inf, subnormals and
// values past the range are all hit), with and without saturation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "codecs/math/quant_fp8.h"
#include "common/floatconv.h"

#if defined(CCL_HAVE_CUDA_FP8_ORACLE)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace ccl::fp {
namespace {

constexpr int kRandom = 1000000;

float oracleFp8ToFloat(uint8_t v, __nv_fp8_interpretation_t kind) {
  __half_raw h = __nv_cvt_fp8_to_halfraw(v, kind);
  return __half2float(__half(h));
}

uint8_t oracleFloatToFp8(float f, bool saturate, __nv_fp8_interpretation_t kind) {
  return __nv_cvt_float_to_fp8(f, saturate ? __NV_SATFINITE : __NV_NOSAT, kind);
}

// Equal values, counting any two NaNs as equal (payloads are not specified).
void expectSameFloat(float want, float got, uint32_t input) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << std::hex << "input 0x" << input;
  } else {
    EXPECT_EQ(floatBits(want), floatBits(got)) << std::hex << "input 0x" << input << " want " << want << " got " << got;
  }
}

struct Fp8Case {
  const char* name;
  __nv_fp8_interpretation_t kind;
  float (*decode)(uint8_t);
  uint8_t (*encode)(float, bool);
};

const Fp8Case kCases[] = {{"e4m3", __NV_E4M3, e4m3ToFloat, floatToE4m3}, {"e5m2", __NV_E5M2, e5m2ToFloat, floatToE5m2}};

TEST(FloatConvOracle, EveryFp8CodeDecodesAsCuda) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    for (uint32_t v = 0; v < 256; ++v) expectSameFloat(oracleFp8ToFloat(v, c.kind), c.decode(v), v);
  }
}

TEST(FloatConvOracle, EveryFp8ValueEncodesAsCuda) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    for (uint32_t v = 0; v < 256; ++v) {
      const float f = oracleFp8ToFloat(v, c.kind);
      for (bool sat : {false, true}) EXPECT_EQ(oracleFloatToFp8(f, sat, c.kind), c.encode(f, sat)) << "code " << v;
    }
  }
}

TEST(FloatConvOracle, RandomFloatsToFp8AsCuda) {
  std::mt19937 rng(1234);
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.name);
    int mismatches = 0;
    for (int i = 0; i < kRandom; ++i) {
      const uint32_t bits = rng();
      // Half the draws bit patterns; half values near the format's range, where rounding,
      // subnormals and saturation happen.
      const float f = (i & 1) ? bitsFloat(bits)
                              : std::ldexp(static_cast<float>(bits >> 8) * 0x1p-24f, static_cast<int>(bits % 40) - 24) *
                                    ((bits & 0x80) ? -1.0f : 1.0f);
      for (bool sat : {false, true}) {
        const uint8_t want = oracleFloatToFp8(f, sat, c.kind);
        const uint8_t got = c.encode(f, sat);
        if (want != got && ++mismatches < 10)
          ADD_FAILURE() << std::hex << "float 0x" << floatBits(f) << " sat " << sat << " want 0x" << int(want)
                        << " got 0x" << int(got);
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

// The quantizers' fast paths: every finite value encodes as the oracle saturates it, every
// finite code decodes as the oracle does, and non-finite codes decode to the largest finite
// value of their sign.
template <class F>
void checkQuantizerFastPaths(__nv_fp8_interpretation_t kind) {
  for (uint32_t v = 0; v < 256; ++v) {
    const float want = oracleFp8ToFloat(v, kind);
    const float got = codec::math::fp8DecodeFinite<F>(v);
    if (std::isfinite(want)) {
      EXPECT_EQ(floatBits(want), floatBits(got)) << "code " << v;
      EXPECT_EQ(oracleFloatToFp8(want, true, kind), codec::math::fp8EncodeFinite<F>(want)) << "code " << v;
    } else {
      EXPECT_EQ(got, (v & 0x80) ? -codec::math::fp8MaxFinite<F>() : codec::math::fp8MaxFinite<F>()) << "code " << v;
    }
  }
  std::mt19937 rng(4321);
  int mismatches = 0;
  for (int i = 0; i < kRandom; ++i) {
    const uint32_t bits = rng();
    const float f = (i & 1) ? bitsFloat(bits)
                            : std::ldexp(static_cast<float>(bits >> 8) * 0x1p-24f, static_cast<int>(bits % 48) - 30) *
                                  ((bits & 0x80) ? -1.0f : 1.0f);
    if (!std::isfinite(f)) continue;
    const uint8_t want = oracleFloatToFp8(f, true, kind);
    const uint32_t got = codec::math::fp8EncodeFinite<F>(f);
    if (want != got && ++mismatches < 10)
      ADD_FAILURE() << std::hex << "float 0x" << floatBits(f) << " want 0x" << int(want) << " got 0x" << got;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(FloatConvOracle, QuantizerFastPathsAsCuda) {
  checkQuantizerFastPaths<E4M3>(__NV_E4M3);
  checkQuantizerFastPaths<E5M2>(__NV_E5M2);
}

TEST(FloatConvOracle, HalfAndBf16AsCuda) {
  for (uint32_t h = 0; h < 65536; ++h) {
    __half_raw raw;
    raw.x = static_cast<unsigned short>(h);
    expectSameFloat(__half2float(__half(raw)), halfToFloat(static_cast<uint16_t>(h)), h);
    __nv_bfloat16_raw braw;
    braw.x = static_cast<unsigned short>(h);
    expectSameFloat(__bfloat162float(__nv_bfloat16(braw)), bf16ToFloat(static_cast<uint16_t>(h)), h);
  }
  std::mt19937 rng(99);
  int mismatches = 0;
  for (int i = 0; i < kRandom; ++i) {
    const float f = bitsFloat(rng());
    const __half_raw want = __half_raw(__float2half_rn(f));
    const __nv_bfloat16_raw wantB = __nv_bfloat16_raw(__float2bfloat16_rn(f));
    const bool halfOk = std::isnan(f) ? std::isnan(halfToFloat(floatToHalf(f))) : want.x == floatToHalf(f);
    const bool bfOk = std::isnan(f) ? std::isnan(bf16ToFloat(floatToBf16(f))) : wantB.x == floatToBf16(f);
    if ((!halfOk || !bfOk) && ++mismatches < 10)
      ADD_FAILURE() << std::hex << "float 0x" << floatBits(f) << " half " << want.x << " vs " << floatToHalf(f)
                    << " bf16 " << wantB.x << " vs " << floatToBf16(f);
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace ccl::fp

#else

TEST(FloatConvOracle, SkippedWithoutCudaHeaders) {
  GTEST_SKIP() << "cuda_fp8.h not found (set CCL_CUDA_FP8_HEADER_DIR): fp8/fp16/bf16 conversions not checked "
                  "against the CUDA toolkit";
}

#endif
