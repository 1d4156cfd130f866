// SPDX-License-Identifier: BSD-3-Clause
// Inner loops of the block quantizers for x86 CPUs with AVX2 and F16C, used when the CPU has
// them. GCC vectorises the portable loops of quantizer_loops.h, but into more instructions than
// these: it rounds fp8 in integer steps that one fp32 addition does here, decodes fp8
// without the vector fp16 conversion used here, and clamps, masks and packs integer codes in
// steps the saturating packs do at once (perf/codecs/README.md has the side-by-side
// measurements). Every function here is bit-equal to the shared element math of
// codecs/math/ (K::quant, K::dequant) for every value the encoder can give it, which
// tests/unit/codecs checks code by code, so the CPU tests still check what the GPU computes.
//
// Each function handles a prefix of a block (a multiple of its vector width) and returns its
// length; the caller finishes the block with the portable math. Included by quantizer_loops.h only.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "codecs/quantizer_kinds.h"
#include "codecs/x86.h"

namespace ccl::codec::detail::x86 {

template <class K>
constexpr bool kIsFp8 =
    std::is_same_v<K, Fp8Kind<fp::E4M3>> || std::is_same_v<K, Fp8Kind<fp::E5M2>> || std::is_same_v<K, MxKind<8>>;

template <class K>
constexpr bool kIsInt = std::is_same_v<K, IntKind<8>> || std::is_same_v<K, IntKind<4>>;

// The kinds these loops encode and decode; int2 they only decode (it encodes through the
// portable loops).
template <class K>
constexpr bool kCovers = CCL_CODECS_X86 && (kIsFp8<K> || kIsInt<K>);
template <class K>
constexpr bool kDecodes = kCovers<K> || (CCL_CODECS_X86 && std::is_same_v<K, IntKind<2>>);

#if CCL_CODECS_X86

template <bool kAccumulate>
CCL_X86_TARGET __attribute__((always_inline)) inline void put(float* o, __m256 v) {
  if constexpr (kAccumulate) v = _mm256_add_ps(_mm256_loadu_ps(o), v);
  _mm256_storeu_ps(o, v);
}

// Dequantizes the first elements of a block with scale s into o (stored or added); returns
// how many. codes is the block's packed codes.
//
// fp8: a code is an fp16 value once its bits are moved into place. e5m2 is the top byte of
// an fp16, and e4m3's exponent and mantissa shifted left by 7 (sign at bit 15) are an fp16
// worth exactly 2^-8 of the e4m3 value, subnormals included. vcvtph2ps converts 8 of them in
// one instruction and ignores DAZ, so the result is the same whatever a host process set in
// MXCSR. Multiplying by 256 * s instead of 256 and then s is the same single rounding of the
// same real product.
//
// int8/int4/int2: the codes are sign-extended to int32 (int4 and int2 by shifting each field
// to the top of its lane and back), converted exactly, and multiplied by s, as
// math::dequantInt does.
template <class K, bool kAccumulate>
CCL_X86_TARGET __attribute__((always_inline)) inline uint32_t dequantize(const uint8_t* codes, uint32_t len, float s,
                                                                         float* o) {
  const uint32_t n = len & ~15u;
  if constexpr (kIsFp8<K>) {
    constexpr bool kE4m3 = !std::is_same_v<K, Fp8Kind<fp::E5M2>>;
    constexpr uint32_t kMaxMag = kE4m3 ? fp::E4M3::kMaxFinite : fp::E5M2::kMaxFinite;
    const float mult = kE4m3 ? s * 256.0f : s;
    // Only a scale the encoder never writes (above 2^120) overflows 256 * s.
    if (!(mult <= std::numeric_limits<float>::max())) return 0;
    const __m128i signMask = _mm_set1_epi8(static_cast<char>(0x80));
    const __m128i magMask = _mm_set1_epi8(0x7f);
    const __m128i maxMag = _mm_set1_epi8(static_cast<char>(kMaxMag));
    const __m256i e4m3Bits = _mm256_set1_epi16(static_cast<short>(0xbfff));
    const __m256 m = _mm256_set1_ps(mult);
    for (uint32_t i = 0; i < n; i += 16) {
      __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i));
      // Codes the encoder never writes (NaN, e5m2's infinities) become the largest finite.
      c = _mm_or_si128(_mm_and_si128(c, signMask), _mm_min_epu8(_mm_and_si128(c, magMask), maxMag));
      __m256i half;
      if constexpr (kE4m3) {
        // Sign-extended, shifted by 7: the sign's copy at bit 14 is the one bit to clear.
        half = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(c), 7), e4m3Bits);
      } else {
        half = _mm256_slli_epi16(_mm256_cvtepu8_epi16(c), 8);
      }
      put<kAccumulate>(o + i, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(half)), m));
      put<kAccumulate>(o + i + 8, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(half, 1)), m));
    }
  } else if constexpr (std::is_same_v<K, IntKind<8>>) {
    const __m256 m = _mm256_set1_ps(s);
    for (uint32_t i = 0; i < n; i += 16) {
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i));
      put<kAccumulate>(o + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c)), m));
      put<kAccumulate>(o + i + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(c, 8))), m));
    }
  } else if constexpr (std::is_same_v<K, IntKind<4>>) {
    const __m256 m = _mm256_set1_ps(s);
    // Element j of a 4-byte word is its nibble j (element 2i in the low nibble of byte i).
    const __m256i toTop = _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0);
    for (uint32_t i = 0; i < n; i += 16) {
      uint32_t w[2];
      std::memcpy(w, codes + i / 2, 8);
      for (int k = 0; k < 2; ++k) {
        const __m256i q = _mm256_srai_epi32(_mm256_sllv_epi32(_mm256_set1_epi32(static_cast<int>(w[k])), toTop), 28);
        put<kAccumulate>(o + i + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(q), m));
      }
    }
  } else {
    static_assert(std::is_same_v<K, IntKind<2>>);
    const __m256 m = _mm256_set1_ps(s);
    // Element j of a 4-byte word is its 2-bit field j (element 4i + t at bit 2t of byte i).
    const __m256i lowToTop = _mm256_setr_epi32(30, 28, 26, 24, 22, 20, 18, 16);
    const __m256i highToTop = _mm256_setr_epi32(14, 12, 10, 8, 6, 4, 2, 0);
    for (uint32_t i = 0; i < n; i += 16) {
      uint32_t w;
      std::memcpy(&w, codes + i / 4, 4);
      const __m256i word = _mm256_set1_epi32(static_cast<int>(w));
      const __m256i lo = _mm256_srai_epi32(_mm256_sllv_epi32(word, lowToTop), 30);
      const __m256i hi = _mm256_srai_epi32(_mm256_sllv_epi32(word, highToTop), 30);
      put<kAccumulate>(o + i, _mm256_mul_ps(_mm256_cvtepi32_ps(lo), m));
      put<kAccumulate>(o + i + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(hi), m));
    }
  }
  return n;
}

// fp8 codes of the magnitudes of eight values y (signs dropped), saturated at F's largest
// finite value. With E = max(exponent of |y|, F's smallest normal exponent Emin) and c =
// 2^(E + 23 - mantissa bits), the fp32 sum |y| + c has F's last place at |y| as its own, so
// the addition rounds |y| to F's grid, subnormals included. It rounds in MXCSR's mode
// (nearest-even unless the process changed it), as the element math does for F's
// subnormals. The integer difference of the sum's bits and c's is the rounded |y| in F's
// last places, m, and the code is m + ((E - Emin) << mantissa bits), which also covers a
// rounding up to the next power of two. Saturating before rounding equals saturating after
// (F's largest value is on its grid); an infinite or NaN y saturates as the element math does.
template <class F>
CCL_X86_TARGET __attribute__((always_inline)) inline __m256i fp8Magnitudes(__m256 y) {
  constexpr int kShift = 23 - F::kManBits;
  constexpr int32_t kMinNormal = (127 + 1 - F::kBias) << 23;
  const __m256 a = _mm256_min_ps(_mm256_and_ps(y, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))),
                                 _mm256_set1_ps(math::fp8MaxFinite<F>()));
  const __m256i e = _mm256_max_epi32(_mm256_and_si256(_mm256_castps_si256(a), _mm256_set1_epi32(0x7f800000)),
                                     _mm256_set1_epi32(kMinNormal));
  const __m256i c = _mm256_add_epi32(e, _mm256_set1_epi32(kShift << 23));
  const __m256i m = _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(a, _mm256_castsi256_ps(c))), c);
  return _mm256_add_epi32(m, _mm256_srli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(kMinNormal)), kShift));
}

// fp8 codes of v * inv, bit-equal to math::fp8EncodeFinite for every value (fp8Magnitudes).
// The signed packs carry each value's sign from its fp32 bits to bit 7 of a byte; within each
// 128-bit half they interleave groups of four, which `order` restores.
template <class K>
CCL_X86_TARGET inline uint32_t quantizeFp8(const float* v, uint32_t len, float inv, uint8_t* codes) {
  using F = std::conditional_t<std::is_same_v<K, Fp8Kind<fp::E5M2>>, fp::E5M2, fp::E4M3>;
  const uint32_t n = len & ~31u;
  const __m256 m = _mm256_set1_ps(inv);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (uint32_t i = 0; i < n; i += 32) {
    // Packed a half at a time, so that the loop's values and constants fit in registers.
    __m256i mag16[2], sign16[2];
    for (int h = 0; h < 2; ++h) {
      const __m256 y0 = _mm256_mul_ps(_mm256_loadu_ps(v + i + 16 * h), m);
      const __m256 y1 = _mm256_mul_ps(_mm256_loadu_ps(v + i + 16 * h + 8), m);
      mag16[h] = _mm256_packs_epi32(fp8Magnitudes<F>(y0), fp8Magnitudes<F>(y1));
      sign16[h] = _mm256_packs_epi32(_mm256_castps_si256(y0), _mm256_castps_si256(y1));
    }
    const __m256i mag = _mm256_packs_epi16(mag16[0], mag16[1]);
    const __m256i sign = _mm256_packs_epi16(sign16[0], sign16[1]);
    const __m256i b = _mm256_or_si256(mag, _mm256_and_si256(sign, _mm256_set1_epi8(static_cast<char>(0x80))));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + i), _mm256_permutevar8x32_epi32(b, order));
  }
  return n;
}

// int8/int4: vroundps rounds y = v * inv to nearest-even whatever MXCSR says (the portable
// math rounds in MXCSR's mode, nearest-even unless a process changed it), the saturating
// packs narrow to bytes, and a byte min/max clamps to [-qmax, qmax]. That equals
// math::quantIntNearest for every |y| < 2^31, which covers every value the encoder makes
// (|y| <= qmax (1 + 2^-22) for an element of a block whose scale is absmax / qmax).
// int4 codes are then packed two to a byte, element 2i in the low nibble.
template <int kBits>
CCL_X86_TARGET inline uint32_t quantizeInt(const float* v, uint32_t len, float inv, uint8_t* dst) {
  constexpr int kQmax = (1 << (kBits - 1)) - 1;
  const uint32_t n = len & ~31u;
  const __m256 m = _mm256_set1_ps(inv);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (uint32_t i = 0; i < n; i += 32) {
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      const __m256 y = _mm256_mul_ps(_mm256_loadu_ps(v + i + 8 * k), m);
      q[k] = _mm256_cvttps_epi32(_mm256_round_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    // Within each 128-bit half the packs interleave groups of four; `order` restores them.
    __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    b = _mm256_permutevar8x32_epi32(b, order);
    b = _mm256_max_epi8(b, _mm256_set1_epi8(-kQmax));
    if constexpr (kBits == 8) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), b);
    } else {
      static_assert(kBits == 4);
      b = _mm256_min_epi8(b, _mm256_set1_epi8(kQmax));
      // In each 16-bit lane, byte 0 keeps the low nibble of element 2j and gets the low nibble
      // of element 2j + 1 above it.
      const __m256i nib = _mm256_or_si256(_mm256_and_si256(b, _mm256_set1_epi16(0x000f)),
                                          _mm256_and_si256(_mm256_srli_epi16(b, 4), _mm256_set1_epi16(0x00f0)));
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(nib, nib), 0x08);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i / 2), _mm256_castsi256_si128(packed));
    }
  }
  return n;
}

// Quantizes the first elements of a block (round-to-nearest) into dst as the stream stores
// them; returns how many (a multiple of 16 elements, so whole bytes for int4).
template <class K>
inline uint32_t quantize(const float* v, uint32_t len, float inv, uint8_t* dst) {
  if constexpr (kIsFp8<K>) {
    return quantizeFp8<K>(v, len, inv, dst);
  } else {
    return quantizeInt<K::kBits>(v, len, inv, dst);
  }
}

#else

template <class K, bool kAccumulate>
uint32_t dequantize(const uint8_t*, uint32_t, float, float*) {
  return 0;
}
template <class K>
uint32_t quantize(const float*, uint32_t, float, uint8_t*) {
  return 0;
}

#endif

}  // namespace ccl::codec::detail::x86
