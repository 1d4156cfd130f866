// SPDX-License-Identifier: BSD-3-Clause
#include "codecs/index_coding.h"

#include <cstring>

namespace ccl::codec {

namespace {
inline size_t varintBytes(uint32_t v) {
  return v < (1u << 7) ? 1 : v < (1u << 14) ? 2 : v < (1u << 21) ? 3 : v < (1u << 28) ? 4 : 5;
}
}  // namespace

size_t gapBytes(const std::vector<uint32_t>& idx) {
  size_t bytes = 0;
  uint32_t next = 0;
  for (uint32_t i : idx) {
    bytes += varintBytes(i - next);
    next = i + 1;
  }
  return bytes;
}

size_t writeGaps(const std::vector<uint32_t>& idx, uint8_t* out) {
  uint8_t* const start = out;
  uint32_t next = 0;
  for (uint32_t i : idx) {
    uint32_t gap = i - next;
    while (gap >= 0x80) {
      *out++ = static_cast<uint8_t>(gap | 0x80);
      gap >>= 7;
    }
    *out++ = static_cast<uint8_t>(gap);
    next = i + 1;
  }
  return static_cast<size_t>(out - start);
}

void writeBitmap(const std::vector<uint32_t>& idx, size_t n, uint8_t* out) {
  std::memset(out, 0, bitmapBytes(n));
  for (uint32_t i : idx) out[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
}

}  // namespace ccl::codec
