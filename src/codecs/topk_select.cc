// SPDX-License-Identifier: BSD-3-Clause
#include "codecs/topk_select.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

#include "codecs/math/radix_select.h"
#include "codecs/math/rng.h"
#include "codecs/select_x86.h"
#include "codecs/vector_clones.h"

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
  // Hands a large block back (kKeepScratchBytes) once the call is done with it.
  void trim() {
    if (cap * sizeof(uint32_t) > kKeepScratchBytes) idx.reset(), cap = 0;
  }
};

struct TrimOnExit {
  Scratch& s;
  ~TrimOnExit() { s.trim(); }
};

struct KthKey {
  uint32_t key;       // the k-th largest key
  size_t tiesToTake;  // how many elements with exactly that key belong to the top k
};

// A round's bins cost more than its keys when few keys are left: those are finished by
// std::nth_element (the keys are whole; they already agree on the digits chosen so far).
constexpr size_t kFewKeys = 256;

// The smallest and largest of keys[0, m), m >= 1.
CCL_VECTOR_CLONES void keyRange(const uint32_t* keys, size_t m, uint32_t& lo, uint32_t& hi) {
  uint32_t a = keys[0], b = keys[0];
  for (size_t i = 1; i < m; ++i) {
    a = std::min(a, keys[i]);
    b = std::max(b, keys[i]);
  }
  lo = a;
  hi = b;
}

KthKey kthBySorting(uint32_t* keys, size_t m, uint64_t rank) {
  std::nth_element(keys, keys + (rank - 1), keys + m, std::greater<>());
  const uint32_t key = keys[rank - 1];
  size_t above = 0;
  for (size_t i = 0; i < m; ++i) above += keys[i] > key ? 1 : 0;
  return KthKey{key, static_cast<size_t>(rank - above)};
}

// Radix select (codecs/math/radix_select.h) of the k-th largest of keys[0, m), narrowing
// keys to the matching ones after each round; keys is reordered. 1 <= k <= m. A round counts
// and walks only the bins from the smallest to the largest remaining key's digit: the keys
// left share the digits above, so theirs are ordered as the keys are. For the few hundred
// candidates of a small input that is far fewer than a round's 2048 bins.
KthKey radixSelect(uint32_t* keys, size_t m, size_t k) {
  uint32_t prefix = 0;
  uint64_t rank = k;
  // Four histograms, summed after counting: keys of one input often fall in a handful of
  // bins, and increments of one counter wait for each other through memory.
  constexpr int kWays = 4;
  // Padded: at exactly 8 KiB apart, a load from one would wait for the others' stores.
  uint32_t hist[kWays][math::kRadixMaxBins + 16];
  for (int round = 0; round < math::kRadixRounds; ++round) {
    if (m <= kFewKeys) return kthBySorting(keys, m, rank);
    uint32_t lo, hi;
    keyRange(keys, m, lo, hi);
    const uint32_t first = math::radixDigit(lo, round), last = math::radixDigit(hi, round);
    for (auto& h : hist) std::fill(h + first, h + last + 1, 0u);
    size_t i = 0;
    for (; i + kWays <= m; i += kWays) {
      for (int w = 0; w < kWays; ++w) ++hist[w][math::radixDigit(keys[i + w], round)];
    }
    for (; i < m; ++i) ++hist[0][math::radixDigit(keys[i], round)];
    for (uint32_t b = first; b <= last; ++b) hist[0][b] += hist[1][b] + hist[2][b] + hist[3][b];
    const uint32_t bucket = math::radixPickBin(hist[0], first, last, rank);
    prefix |= bucket << math::radixShift(round);
    // The keys left agree on the digits above this round's, so its bucket is a key range.
    m = detail::keepInRange(keys, keys, m, prefix, prefix | ((1u << math::radixShift(round)) - 1), keys);
  }
  return KthKey{prefix, static_cast<size_t>(rank)};
}

// A key threshold that, by a sample of about n/16 elements (at most 4096), slightly more than
// k of n elements reach; 0 (every element) when n is too small to sample. The sample is runs
// of 16 consecutive elements, which load as vectors (single elements cost a cache miss each),
// run r from the r-th of equal windows at an offset that a Weyl sequence moves around the
// window: at a fixed offset, a matrix whose rows are a multiple of the window long would show
// the sample only some of its columns (perf/codecs/README.md has what that cost). The rank
// asked of the sample is the expected count of top-k elements in it plus three standard
// deviations, as if the samples were independent. A miss only costs time: an estimate above
// the k-th key (fewer than k candidates) means a second pass over every element, one far
// below means more candidates.
uint32_t estimateThreshold(const float* v, size_t n, size_t k) {
  constexpr size_t kMaxSamples = 4096, kRun = 16;
  const size_t runs = std::min(n / 16, kMaxSamples) / kRun;
  if (runs < 4) return 0;
  const size_t samples = runs * kRun, window = n / runs;
  const double expect = static_cast<double>(samples) * k / n;
  const size_t rank = static_cast<size_t>(expect + 3.0 * std::sqrt(expect) + 4.0);
  if (rank >= samples) return 0;
  uint32_t s[kMaxSamples];
  uint32_t weyl = 0;
  for (size_t r = 0; r < runs; ++r) {
    weyl += 0x9e3779b9u;  // 2^32 / golden ratio: offsets spread evenly, with no short period
    const size_t start = r * window + ((uint64_t{weyl} * (window - kRun + 1)) >> 32);
    for (size_t q = 0; q < kRun; ++q) s[r * kRun + q] = keyAt(v, start + q);
  }
  return radixSelect(s, samples, rank + 1).key;
}

}  // namespace

namespace detail {

size_t collectAtLeast(const float* v, size_t n, uint32_t t, uint32_t* cand) {
  size_t c = 0, i = 0;
  if (x86::available()) c = x86::collectAtLeast(v, n, t, cand, i);
  for (; i < n; ++i) {
    cand[c] = static_cast<uint32_t>(i);
    c += keyAt(v, i) >= t ? 1 : 0;
  }
  return c;
}

size_t keepInRange(const uint32_t* keys, const uint32_t* values, size_t m, uint32_t lo, uint32_t hi, uint32_t* out) {
  size_t w = 0, i = 0;
  if (x86::available()) w = x86::keepInRange(keys, values, m, lo, hi, out, i);
  for (; i < m; ++i) {
    const bool in = keys[i] >= lo && keys[i] <= hi;
    out[w] = values[i];
    w += in ? 1 : 0;
  }
  return w;
}

}  // namespace detail

void selectTopK(const float* v, size_t n, size_t k, std::vector<uint32_t>& out) {
  out.clear();
  if (k == 0) return;
  if (k >= n) {
    out.resize(n);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint32_t>(i);
    return;
  }
  detail::selectTopKAbove(v, n, k, estimateThreshold(v, n, k), out);
}

void detail::selectTopKAbove(const float* v, size_t n, size_t k, uint32_t guess, std::vector<uint32_t>& out) {
  thread_local Scratch candScratch, keyScratch;
  const TrimOnExit trimCand{candScratch}, trimKeys{keyScratch};
  uint32_t* cand = candScratch.get(n);
  size_t c = detail::collectAtLeast(v, n, guess, cand);
  if (c < k) c = detail::collectAtLeast(v, n, 0, cand);
  // The candidates' keys, and a copy for the radix select to reorder.
  uint32_t* keys = keyScratch.get(2 * c);
  for (size_t i = 0; i < c; ++i) keys[i] = keyAt(v, cand[i]);
  std::memcpy(keys + c, keys, c * sizeof(uint32_t));
  const KthKey kth = radixSelect(keys + c, c, k);
  // Usually every candidate with the k-th key belongs to the top k, and the top k are those
  // whose key reaches it.
  out.resize(c);
  if (detail::keepInRange(keys, cand, c, kth.key, 0x7fffffffu, out.data()) == k) {
    out.resize(k);
    return;
  }
  out.resize(k + 1);  // the branch-free loop below stores one slot past the last taken
  size_t w = 0, ties = kth.tiesToTake;
  for (size_t i = 0; i < c; ++i) {
    const uint32_t key = keys[i];
    // Bitwise, not short-circuit: a branch here would be mispredicted at every tie and every
    // candidate that falls short.
    const size_t tie = static_cast<size_t>(key == kth.key) & static_cast<size_t>(ties > 0);
    ties -= tie;
    out[w] = cand[i];
    w += static_cast<size_t>(key > kth.key) | tie;
  }
  out.resize(k);
}

void selectAtLeast(const float* v, size_t n, float t, std::vector<uint32_t>& out) {
  thread_local Scratch scratch;
  const TrimOnExit trim{scratch};
  uint32_t* cand = scratch.get(n);
  uint32_t tk;
  std::memcpy(&tk, &t, 4);
  const size_t c = detail::collectAtLeast(v, n, magnitudeKey(tk), cand);
  out.assign(cand, cand + c);
}

uint32_t randomKIndex(math::RngKey key, uint64_t n, uint64_t k, uint64_t j) {
  const uint64_t lo = j * n / k;
  const uint64_t hi = (j + 1) * n / k;
  const uint32_t r = math::rngBits(key, j);
  return static_cast<uint32_t>(lo + ((static_cast<uint64_t>(r) * (hi - lo)) >> 32));
}

}  // namespace ccl::codec
