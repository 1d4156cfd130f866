// SPDX-License-Identifier: BSD-3-Clause
#include "nccl/face_error.h"

#include "common/log.h"

namespace ccl::nccl {

static thread_local std::string tlsLastError;

ncclResult_t recordError(const char* fn, cclResult_t code, const std::string& message, bool log) {
  tlsLastError = std::string(fn) + ": " + message;
  if (log) CCL_WARN("%s (%s)", tlsLastError.c_str(), cclGetErrorString(code));
  return static_cast<ncclResult_t>(code);
}

const char* lastError() { return tlsLastError.c_str(); }

void cclCheck(cclResult_t result, const char* what) {
  if (result == cclSuccess) return;
  throw CclFailure(result, std::string(what) + " failed: " + cclGetLastError(nullptr));
}

}  // namespace ccl::nccl
