// SPDX-License-Identifier: BSD-3-Clause
// The facts of every codec in one table: name, family, code width, scale format, default
// block size and the documented error bound. Host and device code read it through
// codecInfo(); everything else that needs one of these facts (the wire layout, parameter
// checks, cclCodecName, cclCodecErrorBound, the tests) derives it from here.
#pragma once

#include <cstdint>

#include "ccl/ccl.h"
#include "common/floatconv.h"

namespace ccl::codec {

enum class Family : uint8_t { kNone, kQuantizer, kSparsifier, kLowRank };

// How a quantizer stores a block's scale.
enum class ScaleFormat : uint8_t {
  kNone,        // not a quantizer
  kLinear,      // s = absmax / scaleDivisor, stored as fp32 (or fp16 rounded up, where allowed)
  kE8m0,        // OCP MX: X = 2^(floor(log2 absmax) - log2 scaleDivisor), at least 2^-127, stored as its exponent
  kE4m3Tensor,  // NVFP4: e4m3(absmax / scaleDivisor / t) * t, t the stream's fp32 tensor scale (wire.h)
};

// How a sparsifier picks the elements it keeps.
enum class Selection : uint8_t { kNone, kLargest, kRandom, kThreshold };

// The documented bound of one encode/decode round trip of element x, in a block whose
// scale unit is u (s for linear scales, X for e8m0 ones): |x - y| <= rel * |x| + abs * u.
struct RoundTripBound {
  double rel;
  double abs;
};

struct CodecInfo {
  const char* name;  // as cclCodecName prints it and CCL_CODEC takes it
  Family family;
  uint8_t codeBits;           // quantizers: bits of one element code
  ScaleFormat scale;          // quantizers
  bool fp16Scales;            // quantizers: fp16 scales may be asked for (scaleBits 16)
  uint16_t defaultBlock;      // quantizers: elements per scale when the caller gives 0
  float scaleDivisor;         // quantizers: largest code magnitude the block's absmax maps to
  Selection selection;        // sparsifiers
  uint16_t defaultRank;       // low-rank codecs: the rank when the caller gives 0
  RoundTripBound nearest;     // quantizers rounding to nearest even
  RoundTripBound stochastic;  // quantizers rounding stochastically
};

// Why each bound holds (qmax = 2^(bits-1) - 1; F's mantissa has M bits, its smallest
// subnormal is 2^-D in units of the scale):
// - int: q = round(x/s) in [-qmax, qmax] and |x/s| <= qmax, so |x - q s| <= s/2; a
//   stochastic floor(x/s + u) misses by less than one step. fp16 scales are rounded up, so
//   s <= absmax/qmax * (1 + 2^-10); that factor is part of the unit, not of the terms.
// - int2_midrise: levels (q - 1.5) s, q in 0..3, s = absmax/1.5: x/s + 1.5 lies in [0, 3],
//   so rounding it to the nearest q misses by at most s/2 (and stochastically by less than
//   s), as int's terms.
// - fp8: a normal x/s rounds with relative error 2^-(M+1), a subnormal one with absolute
//   error 2^-(D+1); stochastic rounding doubles both.
// - mxfp8: X maps the absmax into [256, 512), above e4m3's 448, so values beyond 448 X
//   saturate: |x - 448 X| < |x|/7 for |x| < 512 X (covering the rounding error 2^-4 |x|, or
//   2^-3 |x| stochastically); subnormals as fp8 e4m3.
//   The int codecs' stochastic sum v + 128 + u is rounded in fp32 twice (at most 2^-15 of a
//   step), hence their abs term 1 + 2^-14.
// - mxfp4 (e2m1 elements 0, 0.5, 1, 1.5, 2, 3, 4, 6): X maps the absmax into [4, 8); from 1
//   to 6 a value rounds within a quarter of itself (half a step of 0.5, 1 or 2 at 1, 2, 4),
//   below 1 within 0.25 X, and what lies in (6 X, 8 X) saturates to 6 X, within |x| / 4.
//   Stochastic rounding misses by less than a step: |x| / 2, or 0.5 X below 1.
// - nvfp4: as mxfp4 in units of the block scale s = e4m3(absmax / 6 / t) * t, which is
//   within 2^-4 of absmax / 6 when normal in e4m3, else within 2^-10 t. Rounded down, it
//   saturates the block's largest values by at most |x| / 15, or 6 * 2^-10 t when subnormal;
//   so the unit (scaleUnit) is 17/16 absmax / 6 + 25 * 2^-10 t, with t = absmax / 2688 of the
//   whole stream (its absMax bounds every block's), and the terms are mxfp4's.
// On top of every term, the fp32 arithmetic of the scale, x * 1/s and q * s adds at most
// kArithmeticSlack * (|x| + u): see errorBound() in codec.h.
// - powersgd has no element-wise bound: what it loses is the part of the matrix outside the
//   r directions one power iteration finds, which depends on the spectrum, not on |x|.
struct CodecTable {
  CodecInfo rows[cclNumCodecs];
};

// The table, once; the host and the device each keep a copy of it (below).
constexpr CodecTable makeCodecTable() {
  using F = Family;
  using S = ScaleFormat;
  using L = Selection;
  // clang-format off
  return CodecTable{{
      // name          family         bits scale      fp16   block divisor   selection     rank nearest {rel, abs}         stochastic {rel, abs}
      {"none",         F::kNone,       0, S::kNone,   false,   0,      0.0f, L::kNone,      0, {0, 0},                    {0, 0}},
      {"fp8_e4m3",     F::kQuantizer,  8, S::kLinear, false, 128,    448.0f, L::kNone,      0, {0x1p-4, 0x1p-10},         {0x1p-3, 0x1p-9}},
      {"fp8_e5m2",     F::kQuantizer,  8, S::kLinear, false, 128,  57344.0f, L::kNone,      0, {0x1p-3, 0x1p-17},         {0x1p-2, 0x1p-16}},
      {"mxfp8_e4m3",   F::kQuantizer,  8, S::kE8m0,   false,  32,    256.0f, L::kNone,      0, {1.0 / 7, 0x1p-10},        {1.0 / 7, 0x1p-9}},
      {"int8",         F::kQuantizer,  8, S::kLinear, true,  128,    127.0f, L::kNone,      0, {0, 0.5},                  {0, 1 + 0x1p-14}},
      {"int4",         F::kQuantizer,  4, S::kLinear, true,  128,      7.0f, L::kNone,      0, {0, 0.5},                  {0, 1 + 0x1p-14}},
      {"int2",         F::kQuantizer,  2, S::kLinear, true,  128,      1.0f, L::kNone,      0, {0, 0.5},                  {0, 1 + 0x1p-14}},
      {"topk",         F::kSparsifier, 0, S::kNone,   false,   0,      0.0f, L::kLargest,   0, {0, 0},                    {0, 0}},
      {"randk",        F::kSparsifier, 0, S::kNone,   false,   0,      0.0f, L::kRandom,    0, {0, 0},                    {0, 0}},
      {"threshold",    F::kSparsifier, 0, S::kNone,   false,   0,      0.0f, L::kThreshold, 0, {0, 0},                    {0, 0}},
      {"powersgd",     F::kLowRank,    0, S::kNone,   false,   0,      0.0f, L::kNone,      4, {0, 0},                    {0, 0}},
      {"mxfp4",        F::kQuantizer,  4, S::kE8m0,   false,  32,      4.0f, L::kNone,      0, {0.25, 0.25},              {0.5, 0.5}},
      {"nvfp4",        F::kQuantizer,  4, S::kE4m3Tensor, false, 16,   6.0f, L::kNone,      0, {0.25, 0.25},              {0.5, 0.5}},
      {"int2_midrise", F::kQuantizer,  2, S::kLinear, true,  128,      1.5f, L::kNone,      0, {0, 0.5},                  {0, 1 + 0x1p-14}},
  }};
  // clang-format on
}

inline constexpr CodecTable kCodecTable = makeCodecTable();
#if defined(__CUDACC__)
__constant__ const CodecTable kDeviceCodecTable = makeCodecTable();
#endif

// The row of `codec` (a valid cclCodec_t value).
CCL_HD constexpr const CodecInfo& codecInfo(int codec) {
#if defined(__CUDA_ARCH__)
  return kDeviceCodecTable.rows[codec];
#else
  return kCodecTable.rows[codec];
#endif
}

// Relative slack of fp32 arithmetic inside a codec (see codecInfo's notes).
inline constexpr double kArithmeticSlack = 0x1p-22;

CCL_HD constexpr bool validCodec(int codec) { return codec >= 0 && codec < cclNumCodecs; }
CCL_HD constexpr bool isQuantizer(int codec) {
  return validCodec(codec) && codecInfo(codec).family == Family::kQuantizer;
}
CCL_HD constexpr bool isSparsifier(int codec) {
  return validCodec(codec) && codecInfo(codec).family == Family::kSparsifier;
}
CCL_HD constexpr bool isLowRank(int codec) { return validCodec(codec) && codecInfo(codec).family == Family::kLowRank; }
// Whether the codec's error is bounded element by element (cclCodecErrorBound is finite).
CCL_HD constexpr bool boundedPerElement(int codec) { return !isLowRank(codec); }
// Whether a codec's streams carry a tensor scale (nvfp4; wire.h's tensorScaleOf).
CCL_HD constexpr bool tensorScaled(int codec) {
  return validCodec(codec) && codecInfo(codec).scale == ScaleFormat::kE4m3Tensor;
}
// Bits per element code of a quantizer; 0 for other codecs.
CCL_HD constexpr int codeBits(int codec) { return validCodec(codec) ? codecInfo(codec).codeBits : 0; }

static_assert(kCodecTable.rows[cclNumCodecs - 1].name != nullptr, "every cclCodec_t value has a row");

}  // namespace ccl::codec
