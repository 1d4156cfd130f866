// SPDX-License-Identifier: BSD-3-Clause
// Errors at the NCCL boundary: every exported function runs its body through faceGuard,
// which maps exceptions to an ncclResult_t and records a message for ncclGetLastError.
#pragma once

#include <new>
#include <string>

#include "ccl/ccl.h"
#include "common/error.h"
#include "nccl/nccl_abi.h"

namespace ccl::nccl {

// A failure ccl already logged: recorded as the last error again, but not logged twice.
class CclFailure : public Error {
 public:
  using Error::Error;
};

// Records "fn: message" as this thread's last error, logs it at WARN when `log`, returns `code`.
ncclResult_t recordError(const char* fn, cclResult_t code, const std::string& message, bool log = true);

// The last error message of this thread ("" when nothing failed).
const char* lastError();

// Throws CclFailure carrying ccl's own message when a ccl call failed.
void cclCheck(cclResult_t result, const char* what);

template <class F>
ncclResult_t faceGuard(const char* fn, F&& f) noexcept {
  try {
    f();
    return ncclSuccess;
  } catch (const CclFailure& e) {
    return recordError(fn, e.code(), e.what(), false);
  } catch (const Error& e) {
    return recordError(fn, e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return recordError(fn, cclSystemError, "out of memory");
  } catch (const std::exception& e) {
    return recordError(fn, cclInternalError, e.what());
  } catch (...) {
    return recordError(fn, cclInternalError, "unknown exception");
  }
}

}  // namespace ccl::nccl
