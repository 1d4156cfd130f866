// SPDX-License-Identifier: BSD-3-Clause
// Index sets of the sparsifiers on the wire: LEB128 gaps (first index, then index - previous
// - 1, 7 bits per byte, low groups first) or a bitmap of n bits (bit i of byte i/8 set when
// index i is kept). The encoder picks whichever is smaller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"

namespace ccl::codec {

size_t gapBytes(const std::vector<uint32_t>& idx);
inline size_t bitmapBytes(size_t n) { return (n + 7) / 8; }

// Returns the bytes written (gapBytes(idx)).
size_t writeGaps(const std::vector<uint32_t>& idx, uint8_t* out);
void writeBitmap(const std::vector<uint32_t>& idx, size_t n, uint8_t* out);

[[noreturn]] inline void badIndices(const char* what) {
  throw Error(cclInvalidUsage, std::string("compressed stream: bad index section: ") + what);
}

// Calls fn(rank, index) for each of the nnz indices of a gap section of `bytes` bytes,
// checking that every index is below n, that there are exactly nnz and that the section is
// used to its end. Throws Error(cclInvalidUsage) at the first problem.
template <class Fn>
void forEachGapIndex(const uint8_t* in, size_t bytes, uint64_t nnz, uint64_t n, Fn fn) {
  size_t pos = 0;
  uint64_t next = 0;  // smallest index the next entry may have
  for (uint64_t r = 0; r < nnz; ++r) {
    uint64_t gap = 0;
    for (int shift = 0;; shift += 7) {
      if (pos >= bytes) badIndices("truncated");
      if (shift > 28) badIndices("gap too long");
      const uint8_t b = in[pos++];
      gap |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    const uint64_t index = next + gap;
    if (index >= n) badIndices("index out of range");
    fn(r, index);
    next = index + 1;
  }
  if (pos != bytes) badIndices("trailing bytes");
}

// As forEachGapIndex for a bitmap of n bits (bits past n must be 0, exactly nnz set).
template <class Fn>
void forEachBitmapIndex(const uint8_t* in, uint64_t nnz, uint64_t n, Fn fn) {
  const size_t bytes = bitmapBytes(n);
  if (n % 8 && (in[bytes - 1] >> (n % 8)) != 0) badIndices("bits past the end");
  uint64_t r = 0;
  for (size_t byte = 0; byte < bytes; ++byte) {
    uint32_t bits = in[byte];
    while (bits) {
      const int bit = __builtin_ctz(bits);
      bits &= bits - 1;
      if (r == nnz) badIndices("more bits set than kept elements");
      fn(r++, byte * 8 + bit);
    }
  }
  if (r != nnz) badIndices("fewer bits set than kept elements");
}

}  // namespace ccl::codec
