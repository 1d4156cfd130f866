// SPDX-License-Identifier: BSD-3-Clause
// One-sided puts and signals (ncclPutSignal, ncclSignal, ncclWaitSignal). They write into the
// windows of other ranks from the GPU, which only NVIDIA's NCCL can do: they go to the real
// communicator when there is one and the memory is device memory; ccl's host communicator has
// no one-sided operations, so otherwise they are refused with ncclInvalidUsage.
#include "common/cuda_probe.h"
#include "common/error.h"
#include "nccl/comm.h"
#include "nccl/face_error.h"
#include "nccl/group.h"
#include "nccl/real_nccl.h"

namespace ccl::nccl {
namespace {

// The real communicator of an operable communicator; inside a group, the real group is opened.
ncclComm_t realFor(ncclComm& c, const char* what) {
  checkNotSuspended(c);
  CCL_CHECK(c.real, cclInvalidUsage,
            std::string(what) + " need NVIDIA's NCCL on a device, which this communicator has not: " + c.realWhy);
  group::enterReal();
  return c.real;
}

}  // namespace
}  // namespace ccl::nccl

using namespace ccl;
using namespace ccl::nccl;

extern "C" {

ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                            ncclComm_t comm, cudaStream_t stream) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclPutSignal, localbuff, count, datatype, peer, peerWin, peerWinOffset, sigIdx, ctx,
                                 flags, comm, stream);
  return faceGuard("ncclPutSignal", [&] {
    const ncclDataType_t dtype = checkedDataType(datatype);  // any int may come: read as one first
    ncclComm& c = usable(comm);
    CCL_CHECK(localbuff || count == 0, cclInvalidArgument, "localbuff is NULL");
    CCL_CHECK(peerWin, cclInvalidArgument, "peerWin is NULL");
    CCL_CHECK(findWindow(peerWin).device, cclInvalidUsage,
              "one-sided puts need a window on device memory (served by NVIDIA's NCCL); peerWin registers host "
              "memory");
    CCL_CHECK(count == 0 || cuda::isDevicePointer(localbuff), cclInvalidUsage,
              "one-sided puts need device memory (served by NVIDIA's NCCL); localbuff is host memory");
    ncclComm_t r = realFor(c, "one-sided puts");
    real::checkResult(
        CCL_REAL(ncclPutSignal)(localbuff, count, dtype, peer, peerWin, peerWinOffset, sigIdx, ctx, flags, r, stream),
        "ncclPutSignal");
  });
}

ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclSignal, peer, sigIdx, ctx, flags, comm, stream);
  return faceGuard("ncclSignal", [&] {
    ncclComm_t r = realFor(usable(comm), "signals");
    real::checkResult(CCL_REAL(ncclSignal)(peer, sigIdx, ctx, flags, r, stream), "ncclSignal");
  });
}

ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream) {
  CCL_RETURN_IF_CALLED_FROM_REAL(ncclWaitSignal, nDesc, signalDescs, comm, stream);
  return faceGuard("ncclWaitSignal", [&] {
    ncclComm& c = usable(comm);
    CCL_CHECK(nDesc >= 0, cclInvalidArgument, "nDesc " + std::to_string(nDesc) + " is negative");
    CCL_CHECK(signalDescs || nDesc == 0, cclInvalidArgument, "signalDescs is NULL");
    ncclComm_t r = realFor(c, "signals");
    real::checkResult(CCL_REAL(ncclWaitSignal)(nDesc, signalDescs, r, stream), "ncclWaitSignal");
  });
}

}  // extern "C"

CCL_NCCL_ALIAS(ncclPutSignal)
CCL_NCCL_ALIAS(ncclSignal)
CCL_NCCL_ALIAS(ncclWaitSignal)
