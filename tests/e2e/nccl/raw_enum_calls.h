// SPDX-License-Identifier: BSD-3-Clause
// NCCL calls with enum arguments given as plain ints, made from C (raw_enum_calls.c), as a C
// program, a binding (ctypes, cffi) or a caller built against another NCCL version makes them.
// In C an enum variable may hold any int, so these values are passed as they are; in C++
// making an ncclDataType_t of 16 or -1 is already undefined, so the tests cannot build them.
#pragma once

#include <nccl.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

ncclResult_t rawAllReduce(const void* sendbuff, void* recvbuff, size_t count, int datatype, int op, ncclComm_t comm);
ncclResult_t rawBroadcast(const void* sendbuff, void* recvbuff, size_t count, int datatype, int root, ncclComm_t comm);
ncclResult_t rawSend(const void* sendbuff, size_t count, int datatype, int peer, ncclComm_t comm);
ncclResult_t rawRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, int datatype, int residence, ncclComm_t comm);
ncclResult_t rawRedOpDestroy(int op, ncclComm_t comm);
const char* rawGetErrorString(int result);

#ifdef __cplusplus
}
#endif
