// SPDX-License-Identifier: BSD-3-Clause
// FNV-1a over 64-bit words: the digests ranks compare (a call's key and signature, a
// topology, a shrink's agreement). Not for anything an adversary chooses.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace ccl {

inline uint64_t fnv1a(std::initializer_list<uint64_t> values, uint64_t h = 0xcbf29ce484222325ull) {
  for (uint64_t v : values) h = (h ^ v) * 0x100000001b3ull;
  return h;
}

}  // namespace ccl
