// SPDX-License-Identifier: BSD-3-Clause
// Version, error strings, the last error, and debug re-initialisation.
#include "common/error.h"
#include "nccl/face_error.h"
#include "nccl/real_nccl.h"

using namespace ccl;
using namespace ccl::nccl;

extern "C" {

// A face built against newer headers than the ABI it claims would export less than callers
// of those headers expect: the claimed version must move with the headers.
static_assert(CCL_NCCL_ABI_VERSION_CODE >= NCCL_VERSION_CODE,
              "nccl_2_30.h: raise CCL_NCCL_ABI_* to the headers' version");

// The NCCL version whose ABI this library implements, so version checks of callers pass.
ncclResult_t pncclGetVersion(int* version) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclGetVersion, version);
  return faceGuard("ncclGetVersion", [&] {
    CCL_CHECK(version, cclInvalidArgument, "version is NULL");
    *version = CCL_NCCL_ABI_VERSION_CODE;
  });
}

const char* pncclGetErrorString(ncclResult_t result) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclGetErrorString, result);
  return cclGetErrorString(static_cast<cclResult_t>(result));
}

// Messages are kept per thread, for every communicator; `comm` is accepted as in NCCL.
const char* pncclGetLastError(ncclComm_t) { return lastError(); }

// ccl reads its log settings once per process; there is nothing to re-initialise.
void pncclResetDebugInit() {}

}  // extern "C"

// NCCL exports this helper of ncclResetDebugInit too; same behaviour here.
extern "C" __attribute__((visibility("default"))) void ncclResetDebugInitInternal() {
  if (ccl::nccl::real::calledFromReal(__builtin_return_address(0)))
    reinterpret_cast<void (*)()>(ccl::nccl::real::symbol("ncclResetDebugInitInternal"))();
}

CCL_NCCL_ALIAS(ncclGetVersion)
CCL_NCCL_ALIAS(ncclGetErrorString)
CCL_NCCL_ALIAS(ncclGetLastError)
CCL_NCCL_ALIAS(ncclResetDebugInit)
