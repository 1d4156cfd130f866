// SPDX-License-Identifier: BSD-3-Clause
// Errors at the NCCL boundary: every exported function runs its body through faceGuard,
// which maps exceptions to an ncclResult_t and records a message for ncclGetLastError.
#pragma once

#include <cstring>
#include <new>
#include <string>
#include <type_traits>

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

// The last error message of this thread ("" when nothing failed), or, when newer, the
// asynchronous failure of the communicator whose handle (ccl's, or the face's alias of it)
// is `key` (a device call's, the watcher's news of a lost rank: recorded on other threads;
// api::newerError). The handle is not read.
const char* lastError(const void* key = nullptr);

// Throws CclFailure carrying ccl's own message when a ccl call failed.
void cclCheck(cclResult_t result, const char* what);

// An enum argument as the int the caller passed. A C caller, a binding or a program built
// against another NCCL may pass any int, and a value outside the enum's range is no value of
// the enum type: loading it as one is undefined (UBSan: "load of value 16, which is not a
// valid value for type 'ncclDataType_t'"). Its bytes are read instead, and only a value that
// was checked is used as the enum. Take the argument by reference: a copy would load it.
template <class E>
int rawEnum(const E& value) {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int));
  int raw;
  std::memcpy(&raw, &value, sizeof(raw));
  return raw;
}

// `datatype` when it is an NCCL data type; throws Error(cclInvalidArgument) otherwise.
ncclDataType_t checkedDataType(const ncclDataType_t& datatype);

// `op` when it is a reduction op value: a built-in one or one ncclRedOpCreatePreMulSum may
// return (whether that one exists on the communicator is checked where it is used); throws
// Error(cclInvalidArgument) otherwise.
ncclRedOp_t checkedRedOp(const ncclRedOp_t& op);

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
