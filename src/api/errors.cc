// SPDX-License-Identifier: BSD-3-Clause
// Version, error strings and the last-error message of each thread.
#include <string>

#include "api/comm.h"
#include "common/log.h"

namespace ccl::api {

static thread_local std::string tlsLastError;
static thread_local uint64_t tlsLastSerial = 0;

// `comm` is not read: after cclCommAbort from another thread it may already be freed when
// the operation it interrupted reports its error here.
cclResult_t recordError(cclComm_t /*comm*/, const char* fn, cclResult_t code, const std::string& message) {
  tlsLastError = std::string(fn) + ": " + message;
  tlsLastSerial = nextErrorSerial();
  CCL_WARN("%s (%s)", tlsLastError.c_str(), cclGetErrorString(code));
  return code;
}

void recordAsyncMessage(cclComm_t comm, const std::string& message) {
  std::lock_guard lock(comm->life.asyncMutex);
  if (comm->life.asyncSerial != 0) return;
  comm->life.asyncMessage = message;
  comm->life.asyncSerial = nextErrorSerial();
}

const char* newerError(cclComm_t comm, uint64_t threadSerial, const std::string& threadMessage) {
  static thread_local std::string copy;  // the communicator's message, as this thread read it
  if (comm && comm->magic == cclComm::kMagic) {
    std::lock_guard lock(comm->life.asyncMutex);
    if (comm->life.asyncSerial > threadSerial) {
      copy = comm->life.asyncMessage;
      return copy.c_str();
    }
  }
  return threadMessage.c_str();
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

CCL_API const char* cclGetLastError(cclComm_t comm) {
  return ccl::api::newerError(comm, ccl::api::tlsLastSerial, ccl::api::tlsLastError);
}

}  // extern "C"
