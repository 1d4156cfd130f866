// SPDX-License-Identifier: BSD-3-Clause
#include "nccl/face_error.h"

#include "api/comm.h"
#include "common/log.h"

namespace ccl::nccl {

static thread_local std::string tlsLastError;
static thread_local uint64_t tlsLastSerial = 0;

ncclResult_t recordError(const char* fn, cclResult_t code, const std::string& message, bool log) {
  tlsLastError = std::string(fn) + ": " + message;
  tlsLastSerial = nextErrorSerial();
  if (log) CCL_WARN("%s (%s)", tlsLastError.c_str(), cclGetErrorString(code));
  return static_cast<ncclResult_t>(code);
}

const char* lastError(const void* key) { return api::newerError(key, tlsLastSerial, tlsLastError); }

ncclDataType_t checkedDataType(const ncclDataType_t& datatype) {
  const int raw = rawEnum(datatype);
  CCL_CHECK(raw >= 0 && raw < static_cast<int>(ncclNumTypes), cclInvalidArgument,
            "datatype " + std::to_string(raw) + " is not an ncclDataType_t (0.." +
                std::to_string(static_cast<int>(ncclNumTypes) - 1) + ")");
  return static_cast<ncclDataType_t>(raw);
}

ncclRedOp_t checkedRedOp(const ncclRedOp_t& op) {
  const int raw = rawEnum(op);
  CCL_CHECK(raw >= 0 && raw <= static_cast<int>(ncclMaxRedOp), cclInvalidArgument,
            "op " + std::to_string(raw) + " is not an ncclRedOp_t (built-in ops are 0.." +
                std::to_string(static_cast<int>(ncclNumOps) - 1) + ", ncclRedOpCreatePreMulSum's from " +
                std::to_string(static_cast<int>(ncclNumOps)) + ")");
  return static_cast<ncclRedOp_t>(raw);
}

void cclCheck(cclResult_t result, const char* what) {
  if (result == cclSuccess) return;
  throw CclFailure(result, std::string(what) + " failed: " + cclGetLastError(nullptr));
}

}  // namespace ccl::nccl
