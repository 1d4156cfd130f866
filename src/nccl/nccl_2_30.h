// SPDX-License-Identifier: BSD-3-Clause
// What NCCL 2.29 and 2.30 added to nccl.h and nccl_device/core.h, for a face compiled against
// the 2.28 headers: the declarations of the functions PyTorch 2.15 imports from libnccl.so.2
// and the types they use, with NVIDIA's signatures and enum values. Programs that call these
// functions while built against older headers (the face's tests) include this file too.
// Against 2.30 headers or newer the types come from NVIDIA's headers; the function
// declarations are repeated, which C and C++ allow when they are identical.
#pragma once

#include <nccl.h>
#include <stdint.h>

// The NCCL release whose ABI the face implements, and which ncclGetVersion reports: the
// functions above 2.28 arrived by 2.32 (these declarations checked against 2.30.7's headers,
// the release PyTorch 2.15 ships with; nccl_2_32.h's against 2.31.2's and 2.32.3's). A
// caller that gates a function on the version finds it exported.
#define CCL_NCCL_ABI_MAJOR 2
#define CCL_NCCL_ABI_MINOR 32
#define CCL_NCCL_ABI_PATCH 3
#define CCL_NCCL_ABI_VERSION_CODE (CCL_NCCL_ABI_MAJOR * 10000 + CCL_NCCL_ABI_MINOR * 100 + CCL_NCCL_ABI_PATCH)

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 30, 0)

#define NCCL_SUSPEND_MEM 0x01

typedef enum {
  ncclStatGpuMemSuspend = 0,
  ncclStatGpuMemSuspended = 1,
  ncclStatGpuMemPersist = 2,
  ncclStatGpuMemTotal = 3
} ncclCommMemStat_t;

typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;

#endif

#ifdef __cplusplus
extern "C" {
#endif

ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);

ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                          ncclConfig_t* config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                           ncclConfig_t* config);

ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);

ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm);

ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);

ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);

ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                           size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                            ncclComm_t comm, cudaStream_t stream);

ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);

ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream);

// Host functions of the device API (nccl_device/core.h).
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);

ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);
ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);

#ifdef __cplusplus
}
#endif
