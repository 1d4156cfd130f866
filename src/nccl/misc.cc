// SPDX-License-Identifier: BSD-3-Clause
// Version, error strings, the last error, and debug re-initialisation.
#include <cstddef>

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
// ncclCollConfig_t as NCCL 2.31.2 and 2.32.3 lay it out: callers pass it by pointer.
static_assert(sizeof(ncclCollConfig_t) == 72 && offsetof(ncclCollConfig_t, ext) == 16 &&
              offsetof(ncclCollConfig_t, algSelection) == 40 && offsetof(ncclCollConfig_t, forceAlgSelection) == 48 &&
              offsetof(ncclCollConfig_t, CTAPolicy) == 52 && offsetof(ncclCollConfig_t, userProfilerTag) == 56 &&
              offsetof(ncclCollConfig_t, launchCompletionEvent) == 64);
static_assert(sizeof(ncclConfigExt_t) == 24 && offsetof(ncclConfigExt_t, key) == 8 &&
              offsetof(ncclConfigExt_t, val) == 16);

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
  // Any int may come: a value that is no cclResult_t is not converted to one.
  const int raw = rawEnum(result);
  if (raw < 0 || raw >= cclNumResults) return "unknown result code";
  return cclGetErrorString(static_cast<cclResult_t>(raw));
}

// Messages are kept per thread; with a communicator, its asynchronous failure's when that is
// newer (NCCL's string "could be ... a result of previously launched asynchronous
// operations"), found by the handle's value: the handle is not read (another thread's abort
// may be freeing it).
const char* pncclGetLastError(ncclComm_t comm) { return lastError(comm); }

// ccl reads its log settings once per process; there is nothing to re-initialise.
void pncclResetDebugInit() {}

// NCCL 2.32's TLS for NVIDIA's own sockets: passed to the real library, which owns those
// sockets (its layout is read only there). ccl's bootstrap and transports do not encrypt:
// without NVIDIA's 2.32 library the call is refused, never taken silently.
ncclResult_t pncclSetEncryption(const ncclEncryptionConfig_t* config) {
  return faceGuard("ncclSetEncryption", [&] {
    CCL_CHECK(config, cclInvalidArgument, "config is NULL");
    CCL_CHECK(real::has("pncclSetEncryption"), cclInvalidUsage,
              "ncclSetEncryption needs NVIDIA's NCCL 2.32 or later underneath (" + real::describe() +
                  "); ccl's own sockets (bootstrap, UCX) are not encrypted");
    const ncclResult_t r = CCL_REAL(ncclSetEncryption)(config);
    real::checkResult(r, "pncclSetEncryption");
  });
}

}  // extern "C"

// NCCL exports this helper of ncclResetDebugInit too; same behaviour here.
extern "C" __attribute__((visibility("default"))) void ncclResetDebugInitInternal() {
  if (ccl::nccl::real::calledFromReal(__builtin_return_address(0)))
    reinterpret_cast<void (*)()>(ccl::nccl::real::symbol("ncclResetDebugInitInternal"))();
}

CCL_NCCL_ALIAS(ncclGetVersion)
CCL_NCCL_ALIAS(ncclSetEncryption)
CCL_NCCL_ALIAS(ncclGetErrorString)
CCL_NCCL_ALIAS(ncclGetLastError)
CCL_NCCL_ALIAS(ncclResetDebugInit)
