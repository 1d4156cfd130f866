// SPDX-License-Identifier: BSD-3-Clause
// Counter-based random numbers: the value for element i depends only on (seed, i), so any
// element can be drawn independently (one thread per element on a GPU, vector lanes on the
// CPU) and the same seed always yields the same bits.
#pragma once

#include <cstdint>

#include "common/floatconv.h"

namespace ccl::codec::math {

// Two 32-bit keys derived once per call from the 64-bit seed (splitmix64 finaliser).
struct RngKey {
  uint32_t k0;
  uint32_t k1;
};

CCL_HD RngKey rngKey(uint64_t seed) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return RngKey{static_cast<uint32_t>(z), static_cast<uint32_t>(z >> 32)};
}

// A 32-bit integer hash with good avalanche (two multiply-xorshift rounds).
CCL_HD uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// 32 random bits for counter `i` under `key`.
CCL_HD uint32_t rngBits(RngKey key, uint64_t i) {
  const uint32_t lo = static_cast<uint32_t>(i);
  const uint32_t hi = static_cast<uint32_t>(i >> 32);
  return mix32(mix32(lo ^ key.k0) + (hi ^ key.k1));
}

// Uniform in [0, 1) with 24 bits, exactly representable in fp32.
CCL_HD float rngUniform(uint32_t bits) { return static_cast<float>(static_cast<int32_t>(bits >> 8)) * 0x1p-24f; }

}  // namespace ccl::codec::math
