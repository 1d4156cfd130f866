// Version, error strings and the per-thread last-error message.
#include "ccl/ccl.h"

extern "C" {

CCL_API cclResult_t cclGetVersion(int* version) {
  if (!version) return cclInvalidArgument;
  *version = CCL_VERSION_CODE;
  return cclSuccess;
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

}  // extern "C"
