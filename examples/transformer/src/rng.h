// SPDX-License-Identifier: BSD-3-Clause
// A small deterministic generator (splitmix64) for initialisation, data order and sampling:
// the same seed gives the same numbers on every machine and compiler.
#pragma once

#include <cmath>
#include <cstdint>

namespace gpt {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 bits.
  float uniform() { return static_cast<float>(next() >> 40) * 0x1p-24f; }
  // Standard normal (Box-Muller; one of the pair).
  float normal() {
    const double u1 = (static_cast<double>(next() >> 11) + 1.0) * 0x1p-53;
    const double u2 = static_cast<double>(next() >> 11) * 0x1p-53;
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }

 private:
  uint64_t state_;
};

// A hash of several values, for draws that depend on (seed, step, index) alone.
inline uint64_t mixKey(uint64_t a, uint64_t b, uint64_t c = 0) {
  Rng r(a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull ^ c * 0x94d049bb133111ebull);
  return r.next();
}

}  // namespace gpt
