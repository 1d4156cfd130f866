// SPDX-License-Identifier: BSD-3-Clause
#include "codecs/lowrank.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "codecs/elements.h"
#include "codecs/math/rng.h"
#include "common/error.h"

namespace ccl::codec::lowrank {

State stateOf(float* feedback, size_t n, const LowRankShape& s) {
  return {feedback, feedback + n, feedback + n + s.cols * s.rank};
}

void initialQ(uint64_t seed, size_t cols, uint32_t r, float* q) {
  const math::RngKey key = math::rngKey(seed);
  for (size_t i = 0; i < cols * r; ++i) q[i] = math::rngUniform(math::rngBits(key, i)) - 0.5f;
}

void project(const float* m, size_t rows, size_t cols, const float* q, uint32_t r, float* p) {
  std::vector<double> acc(r);
  for (size_t i = 0; i < rows; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    const float* mi = m + i * cols;
    for (size_t j = 0; j < cols; ++j) {
      const double v = mi[j];
      const float* qj = q + j * r;
      for (uint32_t k = 0; k < r; ++k) acc[k] += v * qj[k];
    }
    for (uint32_t k = 0; k < r; ++k) p[i * r + k] = static_cast<float>(acc[k]);
  }
}

void orthonormalize(float* p, size_t rows, uint32_t r) {
  std::vector<double> col(rows);
  for (uint32_t k = 0; k < r; ++k) {
    double before = 0;
    for (size_t i = 0; i < rows; ++i) {
      col[i] = p[i * r + k];
      before += col[i] * col[i];
    }
    // Twice: after one pass a nearly dependent column keeps rounding noise along the earlier
    // (fp32-stored) columns, which normalising would blow up.
    for (int pass = 0; pass < 2; ++pass)
      for (uint32_t j = 0; j < k; ++j) {
        double dot = 0;
        for (size_t i = 0; i < rows; ++i) dot += col[i] * p[i * r + j];
        for (size_t i = 0; i < rows; ++i) col[i] -= dot * p[i * r + j];
      }
    double norm = 0;
    for (size_t i = 0; i < rows; ++i) norm += col[i] * col[i];
    // Less than 1e-5 of the column left is within the fp32 rounding of P: the column is in
    // the span of the earlier ones and becomes zero.
    const bool independent = norm > 1e-10 * before && norm > 0 && std::isfinite(norm);
    const double inv = independent ? 1.0 / std::sqrt(norm) : 0.0;
    for (size_t i = 0; i < rows; ++i) p[i * r + k] = independent ? static_cast<float>(col[i] * inv) : 0.0f;
  }
}

void projectBack(const float* m, size_t rows, size_t cols, const float* p, uint32_t r, float* q) {
  std::vector<double> acc(cols * r, 0.0);
  for (size_t i = 0; i < rows; ++i) {
    const float* mi = m + i * cols;
    const float* pi = p + i * r;
    for (size_t j = 0; j < cols; ++j) {
      const double v = mi[j];
      for (uint32_t k = 0; k < r; ++k) acc[j * r + k] += v * pi[k];
    }
  }
  for (size_t i = 0; i < cols * r; ++i) q[i] = static_cast<float>(acc[i]);
}

void expand(const float* p, const float* q, size_t cols, uint32_t r, size_t n, float scale, bool accumulate,
            float* out) {
  for (size_t i = 0; i < n; ++i) {
    const float* pi = p + (i / cols) * r;
    const float* qj = q + (i % cols) * r;
    double v = 0;
    for (uint32_t k = 0; k < r; ++k) v += static_cast<double>(pi[k]) * qj[k];
    const float y = static_cast<float>(v) * scale;
    out[i] = accumulate ? out[i] + y : y;
  }
}

size_t workFloats(const LowRankShape& s) { return s.rows * s.cols + s.cols * s.rank + s.rows * s.rank; }

Work workOf(float* area, const LowRankShape& s) {
  return {area, area + s.rows * s.cols, area + s.rows * s.cols + s.cols * s.rank};
}

void allReduceStart(const Params& p, const void* x, cclDataType_t type, size_t n, float* feedback, float* area) {
  const LowRankShape s = lowRankShape(p, n);
  const Work w = workOf(area, s);
  const State state = feedback ? stateOf(feedback, n, s) : State{};
  withElementType(type, [&](auto tag) {
    using T = decltype(tag);
    const auto* in = static_cast<const typename T::Storage*>(x);
    const bool add = feedback && p.residualFeedback;
    for (size_t i = 0; i < n; ++i) w.m[i] = add ? T::load(in, i) + state.residual[i] : T::load(in, i);
  });
  std::fill(w.m + n, w.m + s.rows * s.cols, 0.0f);
  // Every rank starts from the same Q: the seed's, or the sum the previous call agreed on.
  if (feedback && p.warmStart && *state.set == 1.0f)
    std::memcpy(w.q, state.q, s.cols * s.rank * sizeof(float));
  else
    initialQ(p.seed, s.cols, s.rank, w.q);
  project(w.m, s.rows, s.cols, w.q, s.rank, w.p);
}

void allReduceMiddle(const Params& p, size_t n, float* feedback, float* area) {
  const LowRankShape s = lowRankShape(p, n);
  const Work w = workOf(area, s);
  orthonormalize(w.p, s.rows, s.rank);
  projectBack(w.m, s.rows, s.cols, w.p, s.rank, w.q);
  if (!feedback || !p.residualFeedback) return;
  // This rank's own loss, M_i - P Q_i^T, before Q is summed.
  const State state = stateOf(feedback, n, s);
  expand(w.p, w.q, s.cols, s.rank, n, -1.0f, false, state.residual);
  for (size_t i = 0; i < n; ++i) state.residual[i] += w.m[i];
}

void allReduceFinish(const Params& p, size_t n, float divisor, float* feedback, const float* area, void* y,
                     cclDataType_t type) {
  const LowRankShape s = lowRankShape(p, n);
  const Work w = workOf(const_cast<float*>(area), s);
  std::vector<float> out(n);
  expand(w.p, w.q, s.cols, s.rank, n, 1.0f / divisor, false, out.data());
  withElementType(type, [&](auto tag) {
    using T = decltype(tag);
    auto* o = static_cast<typename T::Storage*>(y);
    for (size_t i = 0; i < n; ++i) T::store(o, i, out[i]);
  });
  if (!feedback) return;
  const State state = stateOf(feedback, n, s);
  std::memcpy(state.q, w.q, s.cols * s.rank * sizeof(float));
  *state.set = 1.0f;
}

}  // namespace ccl::codec::lowrank

namespace ccl::codec::detail {
namespace {

// P and Q of a valid stream, copied out (its sections need not be aligned in memory).
struct Factors {
  std::vector<float> p, q;
  size_t cols = 0;
  uint32_t r = 0;
};

Factors readFactors(const Header& h, const uint8_t* in) {
  Factors f;
  f.cols = h.aux;
  f.r = h.blockSize;
  const Layout l = layoutOf(h);
  f.p.resize(lowRankRows(h.count, h.aux) * f.r);
  f.q.resize(f.cols * f.r);
  std::memcpy(f.p.data(), in + l.codes, f.p.size() * sizeof(float));
  std::memcpy(f.q.data(), in + l.raw, f.q.size() * sizeof(float));
  return f;
}

// The header of n elements' stream: the rank in blockSize, the columns in aux.
Header headerOf(const Params& p, size_t n, const LowRankShape& s) {
  Header h;
  h.codec = static_cast<uint8_t>(p.codec);
  h.count = n;
  h.blockSize = s.rank;
  h.aux = s.cols;
  return h;
}

}  // namespace

size_t lowRankMaxBytes(const Params& p, size_t n) { return layoutOf(headerOf(p, n, lowRankShape(p, n))).total; }

size_t lowRankEncode(const Params& p, const void* x, cclDataType_t type, size_t n, uint8_t* out, float* residual) {
  const LowRankShape s = lowRankShape(p, n);
  const Header h = headerOf(p, n, s);
  writeHeader(h, out);
  if (n == 0) return kHeaderBytes;
  const uint32_t r = s.rank;
  std::vector<float> m(s.rows * s.cols, 0.0f), q(s.cols * r), pm(s.rows * r);
  withElementType(type, [&](auto tag) {
    using T = decltype(tag);
    const auto* src = static_cast<const typename T::Storage*>(x);
    const bool add = residual && p.residualFeedback;
    for (size_t i = 0; i < n; ++i) m[i] = add ? T::load(src, i) + residual[i] : T::load(src, i);
  });
  const lowrank::State state = residual ? lowrank::stateOf(residual, n, s) : lowrank::State{};
  if (residual && p.warmStart && *state.set == 1.0f)
    std::memcpy(q.data(), state.q, q.size() * sizeof(float));
  else
    lowrank::initialQ(p.seed, s.cols, r, q.data());
  lowrank::project(m.data(), s.rows, s.cols, q.data(), r, pm.data());
  lowrank::orthonormalize(pm.data(), s.rows, r);
  lowrank::projectBack(m.data(), s.rows, s.cols, pm.data(), r, q.data());
  const Layout l = layoutOf(h);
  std::memcpy(out + l.codes, pm.data(), pm.size() * sizeof(float));
  std::memset(out + l.codes + pm.size() * sizeof(float), 0, l.raw - l.codes - pm.size() * sizeof(float));
  std::memcpy(out + l.raw, q.data(), q.size() * sizeof(float));
  if (residual) {
    // The residual is what this encode lost: M - P Q^T.
    if (p.residualFeedback) {
      lowrank::expand(pm.data(), q.data(), s.cols, r, n, -1.0f, false, residual);
      for (size_t i = 0; i < n; ++i) residual[i] += m[i];
    }
    std::memcpy(state.q, q.data(), q.size() * sizeof(float));
    *state.set = 1.0f;
  }
  return l.total;
}

void lowRankDecode(const Header& h, const uint8_t* in, void* y, cclDataType_t type) {
  if (h.count == 0) return;
  const Factors f = readFactors(h, in);
  std::vector<float> out(h.count);
  lowrank::expand(f.p.data(), f.q.data(), f.cols, f.r, h.count, 1.0f, false, out.data());
  withElementType(type, [&](auto tag) {
    using T = decltype(tag);
    auto* dst = static_cast<typename T::Storage*>(y);
    for (size_t i = 0; i < h.count; ++i) T::store(dst, i, out[i]);
  });
}

void lowRankAccumulate(const Header& h, const uint8_t* in, float* acc) {
  if (h.count == 0) return;
  const Factors f = readFactors(h, in);
  lowrank::expand(f.p.data(), f.q.data(), f.cols, f.r, h.count, 1.0f, true, acc);
}

}  // namespace ccl::codec::detail
