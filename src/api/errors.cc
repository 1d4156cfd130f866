// SPDX-License-Identifier: BSD-3-Clause
// Version, error strings and the last-error message of each thread.
#include <string>

#include "api/comm.h"
#include "common/log.h"

namespace ccl::api {

static thread_local std::string tlsLastError;

// `comm` is not read: after cclCommAbort from another thread it may already be freed when
// the operation it interrupted reports its error here.
cclResult_t recordError(cclComm_t /*comm*/, const char* fn, cclResult_t code, const std::string& message) {
  tlsLastError = std::string(fn) + ": " + message;
  CCL_WARN("%s (%s)", tlsLastError.c_str(), cclGetErrorString(code));
  return code;
}

}  // namespace ccl::api

extern "C" {

CCL_API cclResult_t cclGetVersion(int* version) {
  return ccl::api::guard(nullptr, "cclGetVersion", [&] {
    CCL_CHECK(version, cclInvalidArgument, "version is NULL");
    *version = CCL_VERSION_CODE;
  });
}

CCL_API const char* cclGetErrorString(cclResult_t result) {
  switch (result) {
    case cclSuccess:
      return "no error";
    case cclUnhandledCudaError:
      return "unhandled cuda error (run with CCL_DEBUG=INFO for details)";
    case cclSystemError:
      return "unhandled system error (run with CCL_DEBUG=INFO for details)";
    case cclInternalError:
      return "internal error - please report this issue to the ccl developers";
    case cclInvalidArgument:
      return "invalid argument (run with CCL_DEBUG=WARN for details)";
    case cclInvalidUsage:
      return "invalid usage (run with CCL_DEBUG=WARN for details)";
    case cclRemoteError:
      return "remote process exited or there was a network error";
    case cclInProgress:
      return "operation in progress";
    default:
      return "unknown result code";
  }
}

CCL_API const char* cclGetLastError(cclComm_t) { return ccl::api::tlsLastError.c_str(); }

}  // extern "C"
