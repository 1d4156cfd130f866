// SPDX-License-Identifier: BSD-3-Clause
// ncclCommSuspend/Resume and ncclCommMemStats. In NCCL, suspending releases the dynamic GPU
// memory of a communicator, which takes no operation until it is resumed. A host
// communicator holds no GPU memory: suspending it only marks it, so that operations are
// refused as NCCL refuses them, and its GPU memory counts are 0. A real NCCL communicator
// behind it is suspended, resumed and counted by NVIDIA's NCCL, which also judges repeated
// calls; for the host communicator alone they are harmless and succeed.
#include <cstring>

#include "common/error.h"
#include "nccl/comm.h"
#include "nccl/face_error.h"
#include "nccl/group.h"
#include "nccl/real_nccl.h"

using namespace ccl;
using namespace ccl::nccl;

extern "C" {

ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclCommSuspend, comm, flags);
  return faceGuard("ncclCommSuspend", [&] {
    ncclComm& c = usable(comm);
    CCL_CHECK((flags & ~NCCL_SUSPEND_MEM) == 0, cclInvalidArgument, "unknown flags " + std::to_string(flags));
    if (c.real) {
      group::enterReal();  // NCCL's suspend is collective: inside a group it joins the group
      real::checkResult(CCL_REAL(ncclCommSuspend)(c.real, flags), "ncclCommSuspend");
    }
    c.suspended.store(true);
  });
}

ncclResult_t pncclCommResume(ncclComm_t comm) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclCommResume, comm);
  return faceGuard("ncclCommResume", [&] {
    ncclComm& c = usable(comm);
    if (c.real) {
      group::enterReal();
      real::checkResult(CCL_REAL(ncclCommResume)(c.real), "ncclCommResume");
    }
    c.suspended.store(false);
  });
}

ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclCommMemStats, comm, stat, value);
  return faceGuard("ncclCommMemStats", [&] {
    ncclComm& c = usable(comm);
    CCL_CHECK(value, cclInvalidArgument, "value is NULL");
    if (c.real) {
      // ccl's host communicator adds no GPU memory to what the real one reports.
      real::checkResult(CCL_REAL(ncclCommMemStats)(c.real, stat, value), "ncclCommMemStats");
      return;
    }
    // A caller may pass any int: read it as one, since a value outside the enum's range
    // is not a valid enum value to load.
    int raw = 0;
    static_assert(sizeof(raw) == sizeof(stat));
    std::memcpy(&raw, &stat, sizeof(raw));
    switch (raw) {
      case ncclStatGpuMemSuspended:
        *value = c.suspended.load() ? 1 : 0;
        return;
      case ncclStatGpuMemSuspend:
      case ncclStatGpuMemPersist:
      case ncclStatGpuMemTotal:
        *value = 0;
        return;
      default:
        throw Error(cclInvalidArgument, "unknown stat " + std::to_string(raw));
    }
  });
}

}  // extern "C"

CCL_NCCL_ALIAS(ncclCommSuspend)
CCL_NCCL_ALIAS(ncclCommResume)
CCL_NCCL_ALIAS(ncclCommMemStats)
