// SPDX-License-Identifier: BSD-3-Clause
#include "common/error.h"

#include <atomic>
#include <cstring>

namespace ccl {

void throwSystemError(const std::string& what, int err) {
  throw Error(cclSystemError, what + ": " + std::strerror(err));
}

uint64_t nextErrorSerial() {
  static std::atomic<uint64_t> serial{0};
  return serial.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace ccl
