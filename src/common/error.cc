// SPDX-License-Identifier: BSD-3-Clause
#include "common/error.h"

#include <cstring>

namespace ccl {

void throwSystemError(const std::string& what, int err) {
  throw Error(cclSystemError, what + ": " + std::strerror(err));
}

}  // namespace ccl
