// SPDX-License-Identifier: BSD-3-Clause
#include "codec_test_util.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>

#include "codecs/wire.h"
#include "common/floatconv.h"

namespace ccl::codec::test {

Params params(cclCodec_t codec) { return defaultParams(codec); }

std::vector<uint8_t> encodeVec(const Params& p, const std::vector<float>& x, float* residual) {
  std::vector<uint8_t> out(maxEncodedBytes(p, x.size()));
  const size_t used = encode(p, x.data(), cclFloat32, x.size(), out.data(), out.size(), residual);
  out.resize(used);
  return out;
}

std::vector<float> decodeVec(const std::vector<uint8_t>& s, size_t n) {
  std::vector<float> y(n, -12345.0f);
  decode(s.data(), s.size(), Expect{n}, y.data(), cclFloat32);
  return y;
}

const char* patternName(Pattern p) {
  switch (p) {
    case Pattern::kRandom:
      return "random";
    case Pattern::kConstant:
      return "constant";
    case Pattern::kZero:
      return "zero";
    case Pattern::kDenormal:
      return "denormal";
    case Pattern::kHuge:
      return "huge";
    case Pattern::kMixed:
      return "mixed";
    case Pattern::kNonFinite:
      return "nonfinite";
  }
  return "?";
}

const std::vector<Pattern>& allPatterns() {
  static const std::vector<Pattern> all = {Pattern::kRandom, Pattern::kConstant, Pattern::kZero,     Pattern::kDenormal,
                                           Pattern::kHuge,   Pattern::kMixed,    Pattern::kNonFinite};
  return all;
}

std::vector<float> makeInput(Pattern p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    switch (p) {
      case Pattern::kRandom:
        x[i] = normal(rng);
        break;
      case Pattern::kConstant:
        x[i] = -2.75f;
        break;
      case Pattern::kZero:
        x[i] = (i & 1) ? -0.0f : 0.0f;
        break;
      case Pattern::kDenormal:
        x[i] = unit(rng) * 1e-39f;
        break;
      case Pattern::kHuge:
        x[i] = unit(rng) * FLT_MAX;
        break;
      case Pattern::kMixed:
        x[i] = std::ldexp(unit(rng), static_cast<int>(rng() % 120) - 60);
        break;
      case Pattern::kNonFinite: {
        const uint32_t r = rng() % 97;
        x[i] = r == 0 ? NAN : r == 1 ? INFINITY : r == 2 ? -INFINITY : normal(rng);
        break;
      }
    }
  }
  return x;
}

std::vector<cclCodec_t> quantizerCodecs() {
  std::vector<cclCodec_t> out;
  for (int c = 0; c < cclNumCodecs; ++c)
    if (isQuantizer(c)) out.push_back(static_cast<cclCodec_t>(c));
  return out;
}

namespace {

// Whether a finite block of absmax m travels raw: its scale is outside the scale format.
bool travelsRaw(const Params& p, double m) {
  const CodecInfo c = codecInfo(p.codec);
  if (c.scale != ScaleFormat::kLinear || m == 0 || p.fixedLength) return false;
  const double s = m / c.scaleDivisor;
  return p.fp16Scales ? (s < 0x1p-14 || s > 65504.0) : s < FLT_MIN;
}

// Bound of one block from its absmax m (finite block); 0 for a block that travels raw.
void blockBound(const Params& p, double m, const float* x, size_t len, double* out) {
  const bool raw = travelsRaw(p, m);
  // A tiny floor keeps an all-zero block from demanding equal bits (-0 arrives as +0).
  for (size_t i = 0; i < len; ++i) out[i] = raw ? 0.0 : errorBound(p, std::fabs(x[i]), m, 1) + 1e-300;
}

}  // namespace

std::vector<double> quantizerBound(const Params& p, const std::vector<float>& x) {
  std::vector<double> bound(x.size());
  // A tensor-scaled codec's unit depends on the stream's largest finite |x| as well.
  double streamMax = 0;
  for (float v : x)
    if (std::isfinite(v)) streamMax = std::max(streamMax, static_cast<double>(std::fabs(v)));
  for (size_t off = 0; off < x.size(); off += p.blockSize) {
    const size_t len = std::min<size_t>(p.blockSize, x.size() - off);
    double m = 0;
    bool finite = true;
    for (size_t i = 0; i < len; ++i) {
      finite = finite && std::isfinite(x[off + i]);
      m = std::max(m, static_cast<double>(std::fabs(x[off + i])));
    }
    if (!finite) {
      // Exact, or (fixed-length streams) NaN throughout: the caller checks that.
      std::fill_n(bound.begin() + off, len, p.fixedLength ? HUGE_VAL : 0.0);
    } else {
      blockBound(p, tensorScaled(p.codec) ? streamMax : m, x.data() + off, len, bound.data() + off);
    }
  }
  return bound;
}

long firstViolation(const std::vector<float>& x, const std::vector<float>& y, const std::vector<double>& bound) {
  for (size_t i = 0; i < x.size(); ++i) {
    if (bound[i] == 0.0) {
      const bool same = std::isnan(x[i]) ? std::isnan(y[i]) : fp::floatBits(x[i]) == fp::floatBits(y[i]);
      if (!same) return static_cast<long>(i);
    } else if (bound[i] == HUGE_VAL) {
      if (!std::isnan(y[i])) return static_cast<long>(i);
    } else if (!(std::fabs(static_cast<double>(x[i]) - y[i]) <= bound[i])) {
      return static_cast<long>(i);
    }
  }
  return -1;
}

}  // namespace ccl::codec::test
