// SPDX-License-Identifier: BSD-3-Clause
// Helpers shared by the codec tests: parameter construction, encode/decode into vectors,
// and the input patterns every codec is checked on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codecs/codec.h"
#include "codecs/x86.h"

namespace ccl::codec::test {

Params params(cclCodec_t codec);

std::vector<uint8_t> encodeVec(const Params& p, const std::vector<float>& x, float* residual = nullptr);
std::vector<float> decodeVec(const std::vector<uint8_t>& s, size_t n);

enum class Pattern { kRandom, kConstant, kZero, kDenormal, kHuge, kMixed, kNonFinite };
const char* patternName(Pattern p);
const std::vector<Pattern>& allPatterns();
std::vector<float> makeInput(Pattern p, size_t n, uint32_t seed);

// The documented per-element bound of a quantizer for x[i] in its block (see codec.h);
// 0 means the element must arrive exactly, HUGE_VAL that it arrives as NaN (a block with a
// non-finite element in a fixed-length stream).
std::vector<double> quantizerBound(const Params& p, const std::vector<float>& x);

// Index of the first element with |x - y| > bound (exact equality of bits, or both NaN,
// when the bound is 0), or -1.
long firstViolation(const std::vector<float>& x, const std::vector<float>& y, const std::vector<double>& bound);

std::vector<cclCodec_t> quantizerCodecs();

// While alive, the codecs run their portable loops even where the CPU has the x86 ones
// (src/codecs/x86.h), so that one machine tests both. Single-threaded tests only.
class PortableLoopsOnly {
 public:
  PortableLoopsOnly() : was_(detail::x86::allowed.exchange(false)) {}
  ~PortableLoopsOnly() { detail::x86::allowed.store(was_); }
  PortableLoopsOnly(const PortableLoopsOnly&) = delete;
  PortableLoopsOnly& operator=(const PortableLoopsOnly&) = delete;

 private:
  bool was_;
};

// Runs check() with the x86 loops where the CPU has them, then with the portable loops only;
// failures say which.
template <class F>
void withEachLoopKind(F check) {
  {
    SCOPED_TRACE(detail::x86::cpuHasThem() ? "x86 loops" : "portable loops (no AVX2 here)");
    check();
  }
  if (!detail::x86::cpuHasThem()) return;
  PortableLoopsOnly only;
  SCOPED_TRACE("portable loops");
  check();
}

}  // namespace ccl::codec::test
