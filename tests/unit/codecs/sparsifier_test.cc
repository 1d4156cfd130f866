// SPDX-License-Identifier: BSD-3-Clause
// Sparsifiers: top-k equals a std::nth_element reference (ties to the lower index), randk
// keeps the same positions for a seed whatever the values, threshold keeps |x| >= t, values
// and indices arrive exactly, and the index encoding is the smaller one.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>

#include "codec_test_util.h"
#include "codecs/topk_select.h"
#include "common/error.h"
#include "common/floatconv.h"

namespace ccl::codec::test {
namespace {

// Reference: order indices by (|x| desc with NaN largest, index asc); nth_element picks the k first.
std::vector<uint32_t> referenceTopK(const std::vector<float>& x, size_t k) {
  std::vector<uint32_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0u);
  auto key = [&](uint32_t i) { return fp::floatBits(x[i]) & 0x7fffffffu; };
  auto before = [&](uint32_t a, uint32_t b) { return key(a) != key(b) ? key(a) > key(b) : a < b; };
  if (k < idx.size()) std::nth_element(idx.begin(), idx.begin() + k, idx.end(), before);
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::vector<uint32_t> nonZeroPositions(const std::vector<float>& x, const std::vector<float>& y) {
  std::vector<uint32_t> kept;
  for (size_t i = 0; i < y.size(); ++i) {
    if (fp::floatBits(y[i]) != 0) kept.push_back(static_cast<uint32_t>(i));
    if (fp::floatBits(y[i]) != 0 && !(std::isnan(x[i]) && std::isnan(y[i]))) {
      EXPECT_EQ(x[i], y[i]) << i;
    }
  }
  return kept;
}

// A thread that encoded a large tensor keeps at most a few kKeepScratchBytes blocks of
// working memory afterwards, not memory in proportion to the tensor (before: 4 bytes per
// element per list, held for the thread's life; tests/faults saw 47 MB after one call).
TEST(SparsifierScratch, ALargeEncodeHandsItsWorkingMemoryBack) {
  auto heapInUse = [] {
    const struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
  };
  const size_t n = size_t{4} << 20;
  const std::vector<float> x = makeInput(Pattern::kRandom, n, 3);
  for (cclCodec_t codec : {cclCodecTopK, cclCodecThreshold, cclCodecRandK}) {
    Params p = params(codec);
    p.keepRatio = 0.25;
    p.threshold = 0.5f;
    (void)encodeVec(p, std::vector<float>(64, 1.0f));  // the thread's small blocks, made
    const size_t before = heapInUse();
    const std::vector<uint8_t> out = encodeVec(p, x);
    const size_t after = heapInUse();
    const size_t kept = after - std::min(after, before + out.capacity());
    EXPECT_LE(kept, 4 * kKeepScratchBytes)
        << cclCodecName(codec) << " kept " << kept << " bytes after encoding " << n << " elements";
  }
}

TEST(TopK, SelectionEqualsNthElementReference) {
  std::mt19937 rng(5);
  for (size_t n : {1ul, 2ul, 7ul, 100ul, 1000ul, 4097ul, 100003ul, 1000003ul}) {
    for (Pattern pat : allPatterns()) {
      if (n > 200000 && pat != Pattern::kRandom && pat != Pattern::kMixed) continue;  // keeps the test fast
      auto x = makeInput(pat, n, static_cast<uint32_t>(n));
      // Many ties: quantize a random input coarsely.
      if (pat == Pattern::kMixed) {
        for (auto& v : x) v = std::round(v * 1e17f);
      }
      for (size_t k : {size_t{1}, n / 100, n / 7, n - 1, n}) {
        if (k == 0 || k > n) continue;
        std::vector<uint32_t> got;
        selectTopK(x.data(), n, k, got);
        ASSERT_EQ(got, referenceTopK(x, k)) << "n=" << n << " k=" << k << " " << patternName(pat);
      }
    }
  }
}

// Thresholds for the compaction tests: none, every key, the keys of some elements (so keys
// equal to the bound occur), infinity and the largest NaN key.
std::vector<uint32_t> boundsFor(const std::vector<uint32_t>& keys) {
  std::vector<uint32_t> t = {0u, 1u, 0x7f800000u, 0x7fffffffu};
  for (size_t i = 0; i < keys.size(); i += 1 + keys.size() / 7) t.push_back(keys[i]);
  return t;
}

std::vector<uint32_t> keysOf(const std::vector<float>& x) {
  std::vector<uint32_t> k(x.size());
  for (size_t i = 0; i < x.size(); ++i) k[i] = magnitudeKey(fp::floatBits(x[i]));
  return k;
}

std::vector<size_t> compactionLengths() {
  std::vector<size_t> n;
  for (size_t i = 0; i <= 70; ++i) n.push_back(i);
  for (size_t i : {127ul, 128ul, 1001ul, 65543ul}) n.push_back(i);
  return n;
}

// The candidate pass (select_x86.h's AVX2 loop and its portable twin) writes exactly the
// indices whose key reaches the bound, in order, for every pattern, length and density.
TEST(TopKSelect, CollectAtLeastEqualsTheDefinition) {
  for (Pattern pat : allPatterns()) {
    for (size_t n : compactionLengths()) {
      const auto x = makeInput(pat, n, static_cast<uint32_t>(n) + 11);
      const auto keys = keysOf(x);
      for (uint32_t t : boundsFor(keys)) {
        std::vector<uint32_t> want;
        for (size_t i = 0; i < n; ++i) {
          if (keys[i] >= t) want.push_back(static_cast<uint32_t>(i));
        }
        withEachLoopKind([&] {
          std::vector<uint32_t> got(n);
          got.resize(detail::collectAtLeast(x.data(), n, t, got.data()));
          ASSERT_EQ(got, want) << patternName(pat) << " n=" << n << " t=" << t;
        });
      }
    }
  }
  if (!detail::x86::cpuHasThem()) GTEST_SKIP() << "no AVX2 here: only the portable loop was checked";
}

// keepInRange keeps exactly the values whose keys are in [lo, hi], in order: keys in place
// (a radix round), other values into a new array (the end of top-k), and values in place.
TEST(TopKSelect, KeepInRangeEqualsTheDefinition) {
  for (Pattern pat : allPatterns()) {
    for (size_t n : compactionLengths()) {
      const auto keys = keysOf(makeInput(pat, n, static_cast<uint32_t>(n) + 12));
      std::vector<uint32_t> values(n);
      for (size_t i = 0; i < n; ++i) values[i] = static_cast<uint32_t>(7 * i + 3);
      for (uint32_t lo : boundsFor(keys)) {
        for (uint32_t hi : {lo, lo | 0x3ffu, lo | 0x1fffffu, 0x7fffffffu}) {
          std::vector<uint32_t> wantKeys, wantValues;
          for (size_t i = 0; i < n; ++i) {
            if (keys[i] < lo || keys[i] > hi) continue;
            wantKeys.push_back(keys[i]);
            wantValues.push_back(values[i]);
          }
          const std::string where = std::string(patternName(pat)) + " n=" + std::to_string(n) + " [" +
                                    std::to_string(lo) + ", " + std::to_string(hi) + "]";
          withEachLoopKind([&] {
            auto inPlace = keys;
            inPlace.resize(detail::keepInRange(inPlace.data(), inPlace.data(), n, lo, hi, inPlace.data()));
            ASSERT_EQ(inPlace, wantKeys) << where << " keys in place";
            std::vector<uint32_t> out(n);
            out.resize(detail::keepInRange(keys.data(), values.data(), n, lo, hi, out.data()));
            ASSERT_EQ(out, wantValues) << where << " values to out";
            auto valuesInPlace = values;
            valuesInPlace.resize(
                detail::keepInRange(keys.data(), valuesInPlace.data(), n, lo, hi, valuesInPlace.data()));
            ASSERT_EQ(valuesInPlace, wantValues) << where << " values in place";
          });
        }
      }
    }
  }
  if (!detail::x86::cpuHasThem()) GTEST_SKIP() << "no AVX2 here: only the portable loop was checked";
}

// The selection is exact whatever its estimate: one that every element reaches, one that
// fewer than k reach (the second pass over every element), and one that only NaN reaches.
TEST(TopK, AnyEstimateGivesTheReference) {
  for (Pattern pat : allPatterns()) {
    const size_t n = 3001;
    const auto x = makeInput(pat, n, 17);
    const auto keys = keysOf(x);
    for (size_t k : {size_t{1}, n / 100, n / 2, n - 1}) {
      for (uint32_t guess : boundsFor(keys)) {
        std::vector<uint32_t> got;
        detail::selectTopKAbove(x.data(), n, k, guess, got);
        ASSERT_EQ(got, referenceTopK(x, k)) << patternName(pat) << " k=" << k << " guess=" << guess;
      }
    }
  }
}

// Rows whose first column is small fool a sample taken at a fixed stride that divides the
// row length; the selection is exact whatever the sample sees.
TEST(TopK, ColumnStructuredInputEqualsReference) {
  for (size_t row : {16ul, 64ul}) {
    const size_t n = 1 << 16;
    auto x = makeInput(Pattern::kRandom, n, 21);
    for (size_t i = 0; i < n; i += row) x[i] *= 1e-3f;
    for (size_t k : {n / 100, n / 10}) {
      std::vector<uint32_t> got;
      selectTopK(x.data(), n, k, got);
      ASSERT_EQ(got, referenceTopK(x, k)) << "row=" << row << " k=" << k;
    }
  }
}

TEST(TopK, EncodeDecodeKeepsExactlyTheTopValues) {
  for (size_t n = 0; n <= 1000; ++n) {
    Params p = params(cclCodecTopK);
    p.keepRatio = 0.01 + (n % 10) * 0.1;
    const auto x = makeInput(Pattern::kRandom, n, static_cast<uint32_t>(n));
    const auto s = encodeVec(p, x);
    ASSERT_LE(s.size(), maxEncodedBytes(p, n));
    const auto y = decodeVec(s, n);
    const auto ref = referenceTopK(x, keptCount(p, n));
    for (uint32_t i : ref) ASSERT_EQ(fp::floatBits(x[i]), fp::floatBits(y[i])) << "n=" << n << " i=" << i;
    size_t zeros = 0;
    for (float v : y) zeros += v == 0.0f;
    ASSERT_EQ(zeros, n - ref.size()) << n;
  }
}

TEST(TopK, OnePercentFitsTwoPercentOfFp32) {
  Params p = params(cclCodecTopK);
  p.keepRatio = 0.01;
  const size_t n = 1 << 20;
  const auto s = encodeVec(p, makeInput(Pattern::kRandom, n, 3));
  EXPECT_LE(8.0 * s.size() / n, 0.02 * 32);
}

TEST(TopK, Fp16ValuesRoundOnce) {
  Params p = params(cclCodecTopK);
  p.keepRatio = 0.1;
  p.fp16Values = true;
  const auto x = makeInput(Pattern::kRandom, 5000, 3);
  const auto y = decodeVec(encodeVec(p, x), x.size());
  for (uint32_t i : referenceTopK(x, keptCount(p, x.size()))) ASSERT_EQ(fp::halfToFloat(fp::floatToHalf(x[i])), y[i]);
}

TEST(RandK, SamePositionsForTheSameSeedWhateverTheValues) {
  Params p = params(cclCodecRandK);
  p.keepRatio = 0.05;
  p.seed = 1234;
  const size_t n = 10007;
  const auto a = makeInput(Pattern::kRandom, n, 1);
  const auto b = makeInput(Pattern::kMixed, n, 2);
  const auto pa = nonZeroPositions(a, decodeVec(encodeVec(p, a), n));
  const auto pb = nonZeroPositions(b, decodeVec(encodeVec(p, b), n));
  EXPECT_EQ(pa, pb);
  EXPECT_EQ(pa.size(), keptCount(p, n));
  p.seed = 1235;
  EXPECT_NE(pa, nonZeroPositions(a, decodeVec(encodeVec(p, a), n)));
  // Positions are spread: every element is drawn with about the same frequency.
  std::vector<int> hits(100, 0);
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    p.seed = seed;
    for (uint32_t i :
         nonZeroPositions(std::vector<float>(100, 1.0f), decodeVec(encodeVec(p, std::vector<float>(100, 1.0f)), 100)))
      ++hits[i];
  }
  for (int h : hits) EXPECT_NEAR(h, 2000 * 0.05, 40);
}

TEST(RandK, SumOfTwoRanksStaysSparse) {
  Params p = params(cclCodecRandK);
  p.keepRatio = 0.01;
  p.seed = 99;
  const size_t n = 50000;
  std::vector<float> acc(n, 0.0f);
  for (uint32_t rank = 0; rank < 4; ++rank) {
    const auto s = encodeVec(p, makeInput(Pattern::kRandom, n, rank + 10));
    decodeAccumulate(s.data(), s.size(), Expect{n, cclCodecRandK}, acc.data());
  }
  EXPECT_LE(static_cast<size_t>(std::count_if(acc.begin(), acc.end(), [](float v) { return v != 0.0f; })),
            keptCount(p, n));
}

TEST(Threshold, KeepsAtLeastThresholdAndMarksNonFiniteInputs) {
  for (size_t n = 0; n <= 1000; ++n) {
    Params p = params(cclCodecThreshold);
    p.threshold = 0.5f * (n % 7);
    const auto x = makeInput(n % 2 ? Pattern::kNonFinite : Pattern::kRandom, n, static_cast<uint32_t>(n));
    const auto y = decodeVec(encodeVec(p, x), n);
    if (std::any_of(x.begin(), x.end(), [](float v) { return !std::isfinite(v); })) {
      // A NaN or an infinity marks the stream: every element arrives as NaN.
      for (size_t i = 0; i < n; ++i) ASSERT_TRUE(std::isnan(y[i])) << n << " " << i;
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      const bool keep = std::isnan(x[i]) || std::fabs(x[i]) >= p.threshold;
      if (keep) {
        ASSERT_TRUE(std::isnan(x[i]) ? std::isnan(y[i]) : x[i] == y[i]) << n << " " << i;
      } else {
        ASSERT_EQ(y[i], 0.0f) << n << " " << i;
      }
    }
  }
}

// Every sparsifier, with and without a residual: a non-finite input value the selection may
// not keep (a random sample, a top-k smaller than the non-finite values, a NaN under a
// threshold) is never lost silently. The stream is marked, decodes and accumulates as NaN,
// and the residual keeps nothing of it (0), so the next call starts clean.
TEST(Sparsifiers, ANonFiniteInputMarksTheStreamAndLeavesNoResidual) {
  for (cclCodec_t c : {cclCodecTopK, cclCodecRandK, cclCodecThreshold}) {
    Params p = params(c);
    p.threshold = 1.0f;
    std::vector<float> x = makeInput(Pattern::kRandom, 5000, 3);
    x[1234] = NAN;
    x[77] = INFINITY;
    x[4000] = -INFINITY;
    std::vector<float> residual(x.size(), 0.25f);
    const auto s = encodeVec(p, x, residual.data());
    EXPECT_TRUE(inspect(s.data(), s.size()).flags & kFlagNonFinite) << cclCodecName(c);
    const auto y = decodeVec(s, x.size());
    EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](float v) { return std::isnan(v); })) << cclCodecName(c);
    std::vector<float> acc(x.size(), 1.0f);
    decodeAccumulate(s.data(), s.size(), Expect{x.size(), c}, acc.data());
    EXPECT_TRUE(std::all_of(acc.begin(), acc.end(), [](float v) { return std::isnan(v); })) << cclCodecName(c);
    for (size_t i : {77u, 1234u, 4000u}) EXPECT_EQ(residual[i], 0.0f) << cclCodecName(c) << " " << i;
    EXPECT_TRUE(std::all_of(residual.begin(), residual.end(), [](float v) { return std::isfinite(v); }));
    x[1234] = x[77] = x[4000] = 0.5f;
    const auto clean = encodeVec(p, x);
    EXPECT_FALSE(inspect(clean.data(), clean.size()).flags & kFlagNonFinite) << cclCodecName(c);
  }
}

TEST(Threshold, DenseSelectionUsesTheBitmap) {
  Params p = params(cclCodecThreshold);
  p.threshold = 0.0f;  // everything kept: a bitmap (n/8 bytes) beats a byte per gap
  const size_t n = 8000;
  const auto s = encodeVec(p, makeInput(Pattern::kRandom, n, 1));
  const Header h = inspect(s.data(), s.size());
  EXPECT_TRUE(h.flags & kFlagBitmap);
  EXPECT_EQ(h.indexBytes, n / 8);
  p.threshold = 3.5f;  // a handful kept: gaps
  const auto t = encodeVec(p, makeInput(Pattern::kRandom, n, 1));
  EXPECT_FALSE(inspect(t.data(), t.size()).flags & kFlagBitmap);
}

// LEB128 bytes of the gaps between the kept positions, as the wire format defines them.
size_t expectedGapBytes(const std::vector<uint32_t>& kept) {
  size_t bytes = 0;
  uint32_t next = 0;
  for (uint32_t i : kept) {
    for (uint32_t g = i - next;; g >>= 7) {
      ++bytes;
      if (g < 128) break;
    }
    next = i + 1;
  }
  return bytes;
}

// The index section is whichever of the gaps and the bitmap is smaller, over densities from
// a few elements to all of them, and for a selection just under 1/8 dense whose long gaps
// make the gaps the larger although fewer than n/8 are kept.
TEST(Sparsifiers, IndexSectionIsTheSmallerEncoding) {
  std::vector<std::vector<float>> inputs;
  const auto random = makeInput(Pattern::kRandom, 4000, 9);
  for (float t : {0.0f, 0.05f, 0.1f, 0.12f, 0.15f, 0.2f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f}) {
    auto x = random;
    for (float& v : x) v = std::fabs(v) >= t ? 1.0f : 0.0f;
    inputs.push_back(x);
  }
  std::vector<float> spread(1 << 17, 0.0f);  // 899 positions 129 apart (2-byte gaps), then 15101 in a row
  for (size_t j = 0; j < 899; ++j) spread[129 * j] = 1.0f;
  for (size_t i = spread.size() - 15101; i < spread.size(); ++i) spread[i] = 1.0f;
  inputs.push_back(spread);
  for (const auto& x : inputs) {
    Params p = params(cclCodecThreshold);
    p.threshold = 0.5f;
    std::vector<uint32_t> kept;
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i] != 0.0f) kept.push_back(static_cast<uint32_t>(i));
    }
    const size_t gaps = expectedGapBytes(kept), bitmap = (x.size() + 7) / 8;
    const auto s = encodeVec(p, x);
    const Header h = inspect(s.data(), s.size());
    ASSERT_EQ(h.aux, kept.size());
    EXPECT_EQ(h.indexBytes, std::min(gaps, bitmap)) << kept.size() << " of " << x.size();
    EXPECT_EQ((h.flags & kFlagBitmap) != 0, bitmap < gaps) << kept.size() << " of " << x.size();
    EXPECT_EQ(decodeVec(s, x.size()), x);
  }
}

TEST(Sparsifiers, ResidualKeepsWhatWasNotSent) {
  for (cclCodec_t c : {cclCodecTopK, cclCodecRandK, cclCodecThreshold}) {
    Params p = params(c);
    p.keepRatio = 0.1;
    p.threshold = 1.0f;
    const auto x = makeInput(Pattern::kRandom, 3001, 1);
    std::vector<float> e = makeInput(Pattern::kRandom, x.size(), 2);
    std::vector<float> v(x.size());
    for (size_t i = 0; i < x.size(); ++i) v[i] = x[i] + e[i];
    const auto y = decodeVec(encodeVec(p, x, e.data()), x.size());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(e[i], v[i] - y[i]) << cclCodecName(c) << " " << i;
  }
}

}  // namespace
}  // namespace ccl::codec::test

namespace ccl::codec::test {
namespace {

// Random-k's stages around a sum of its streams' values (runStage): the news out of a stream
// is 0, or NaN when its input held a NaN or an infinity; news that is not 0 (summed over the
// ranks) marks a finite stream, which then decodes as NaN everywhere; news of 0 leaves it as
// it was. Other stages are refused.
TEST(RandK, StagesCarryTheNonFiniteFlag) {
  Params p = params(cclCodecRandK);
  p.keepRatio = 0.1;
  p.seed = 5;
  const size_t n = 1000;
  auto finite = makeInput(Pattern::kRandom, n, 3);
  auto poisoned = finite;
  poisoned[17] = INFINITY;
  float news = -1.0f;
  const auto bad = encodeVec(p, poisoned);
  runStage(p, kRandKNewsOut, bad.data(), &news, cclFloat32, 1, 1.0f, nullptr);
  EXPECT_TRUE(std::isnan(news));
  auto good = encodeVec(p, finite);
  runStage(p, kRandKNewsOut, good.data(), &news, cclFloat32, 1, 1.0f, nullptr);
  EXPECT_EQ(fp::floatBits(news), 0u);
  const auto before = decodeVec(good, n);
  const float zero = 0.0f, sum = news + std::nanf("");
  runStage(p, kRandKNewsIn, &zero, good.data(), cclFloat32, 1, 1.0f, nullptr);
  EXPECT_EQ(decodeVec(good, n), before);
  runStage(p, kRandKNewsIn, &sum, good.data(), cclFloat32, 1, 1.0f, nullptr);
  for (float y : decodeVec(good, n)) ASSERT_TRUE(std::isnan(y));
  EXPECT_THROW(runStage(p, 2, bad.data(), &news, cclFloat32, 1, 1.0f, nullptr), Error);
  EXPECT_THROW(runStage(params(cclCodecTopK), kRandKNewsOut, bad.data(), &news, cclFloat32, 1, 1.0f, nullptr), Error);
}

}  // namespace
}  // namespace ccl::codec::test
