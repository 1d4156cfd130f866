#include "codecs/topk_select.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

#include "codecs/math/radix_select.h"
#include "codecs/math/rng.h"

namespace ccl::codec {
namespace {

inline uint32_t keyAt(const float* v, size_t i) {
  uint32_t b;
  std::memcpy(&b, v + i, 4);
  return magnitudeKey(b);
}

// Scratch that grows and is kept per thread, so repeated calls do not allocate.
struct Scratch {
  std::unique_ptr<uint32_t[]> idx;
  size_t cap = 0;
  uint32_t* get(size_t n) {
    if (n > cap) {
      idx.reset(new uint32_t[n]);
      cap = n;
    }
    return idx.get();
  }
};

// Indices i in [0, n) with key >= t, in order, into cand; returns how many.
size_t collectAtLeast(const float* v, size_t n, uint32_t t, uint32_t* cand) {
  size_t c = 0;
  for (size_t i = 0; i < n; ++i) {
    cand[c] = static_cast<uint32_t>(i);
    c += keyAt(v, i) >= t ? 1 : 0;
  }
  return c;
}

// A key threshold that, by a strided sample, slightly more than k of n elements reach.
uint32_t estimateThreshold(const float* v, size_t n, size_t k) {
  const size_t samples = std::min<size_t>(n, 4096);
  if (samples < 64) return 0;
  std::vector<uint32_t> s(samples);
  const double stride = static_cast<double>(n) / samples;
  for (size_t j = 0; j < samples; ++j) s[j] = keyAt(v, static_cast<size_t>(j * stride));
  const double expect = static_cast<double>(samples) * k / n;
  const size_t rank = static_cast<size_t>(expect * 1.25 + 4.0 * std::sqrt(expect) + 8.0);
  if (rank >= samples) return 0;
  std::nth_element(s.begin(), s.begin() + rank, s.end(), std::greater<uint32_t>());
  return s[rank];
}

struct KthKey {
  uint32_t key;       // the k-th largest key
  size_t tiesToTake;  // how many elements with exactly that key belong to the top k
};

// Radix select (codecs/math/radix_select.h) of the k-th largest of keys[0, m), narrowing
// keys to the matching ones after each round; keys is reordered. 1 <= k <= m.
KthKey radixSelect(uint32_t* keys, size_t m, size_t k) {
  uint32_t prefix = 0;
  uint64_t rank = k;
  std::vector<size_t> hist(math::kRadixMaxBins);
  for (int round = 0; round < math::kRadixRounds; ++round) {
    const uint32_t bins = math::radixBins(round);
    std::fill_n(hist.begin(), bins, 0);
    for (size_t i = 0; i < m; ++i) ++hist[math::radixDigit(keys[i], round)];
    const uint32_t bucket = math::radixPickBin(hist.data(), 0, bins - 1, rank);
    prefix |= bucket << math::radixShift(round);
    size_t w = 0;
    for (size_t i = 0; i < m; ++i) {
      keys[w] = keys[i];
      w += math::radixDigit(keys[i], round) == bucket ? 1 : 0;
    }
    m = w;
  }
  return KthKey{prefix, static_cast<size_t>(rank)};
}

}  // namespace

void selectTopK(const float* v, size_t n, size_t k, std::vector<uint32_t>& out) {
  out.clear();
  if (k == 0) return;
  if (k >= n) {
    out.resize(n);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint32_t>(i);
    return;
  }
  thread_local Scratch candScratch, keyScratch;
  uint32_t* cand = candScratch.get(n);
  size_t c = collectAtLeast(v, n, estimateThreshold(v, n, k), cand);
  if (c < k) c = collectAtLeast(v, n, 0, cand);
  uint32_t* keys = keyScratch.get(c);
  for (size_t i = 0; i < c; ++i) keys[i] = keyAt(v, cand[i]);
  const KthKey kth = radixSelect(keys, c, k);
  out.resize(k + 1);  // the branch-free loop below stores one slot past the last taken
  size_t w = 0, ties = kth.tiesToTake;
  for (size_t i = 0; i < c; ++i) {
    const uint32_t key = keyAt(v, cand[i]);
    const bool take = key > kth.key || (key == kth.key && ties > 0);
    ties -= (key == kth.key && ties > 0) ? 1 : 0;
    out[w] = cand[i];
    w += take ? 1 : 0;
  }
  out.resize(k);
}

void selectAtLeast(const float* v, size_t n, float t, std::vector<uint32_t>& out) {
  thread_local Scratch scratch;
  uint32_t* cand = scratch.get(n);
  uint32_t tk;
  std::memcpy(&tk, &t, 4);
  const size_t c = collectAtLeast(v, n, magnitudeKey(tk), cand);
  out.assign(cand, cand + c);
}

uint32_t randomKIndex(math::RngKey key, uint64_t n, uint64_t k, uint64_t j) {
  const uint64_t lo = j * n / k;
  const uint64_t hi = (j + 1) * n / k;
  const uint32_t r = math::rngBits(key, j);
  return static_cast<uint32_t>(lo + ((static_cast<uint64_t>(r) * (hi - lo)) >> 32));
}

}  // namespace ccl::codec
