// Helpers shared by the codec tests: parameter construction, encode/decode into vectors,
// and the input patterns every codec is checked on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "codecs/codec.h"

namespace ccl::codec::test {

Params params(cclCodec_t codec);

std::vector<uint8_t> encodeVec(const Params& p, const std::vector<float>& x, float* residual = nullptr);
std::vector<float> decodeVec(const std::vector<uint8_t>& s, size_t n);

enum class Pattern { kRandom, kConstant, kZero, kDenormal, kHuge, kMixed, kNonFinite };
const char* patternName(Pattern p);
const std::vector<Pattern>& allPatterns();
std::vector<float> makeInput(Pattern p, size_t n, uint32_t seed);

// The documented per-element bound of a quantiser for x[i] in its block (see codec.h);
// 0 means the element must arrive exactly.
std::vector<double> quantizerBound(const Params& p, const std::vector<float>& x);

// Index of the first element with |x - y| > bound (exact equality of bits, or both NaN,
// when the bound is 0), or -1.
long firstViolation(const std::vector<float>& x, const std::vector<float>& y, const std::vector<double>& bound);

std::vector<cclCodec_t> quantizerCodecs();

}  // namespace ccl::codec::test
