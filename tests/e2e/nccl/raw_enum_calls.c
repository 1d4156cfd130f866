// SPDX-License-Identifier: BSD-3-Clause
#include "raw_enum_calls.h"

ncclResult_t rawAllReduce(const void* sendbuff, void* recvbuff, size_t count, int datatype, int op, ncclComm_t comm) {
  return ncclAllReduce(sendbuff, recvbuff, count, (ncclDataType_t)datatype, (ncclRedOp_t)op, comm, NULL);
}

ncclResult_t rawBroadcast(const void* sendbuff, void* recvbuff, size_t count, int datatype, int root, ncclComm_t comm) {
  return ncclBroadcast(sendbuff, recvbuff, count, (ncclDataType_t)datatype, root, comm, NULL);
}

ncclResult_t rawSend(const void* sendbuff, size_t count, int datatype, int peer, ncclComm_t comm) {
  return ncclSend(sendbuff, count, (ncclDataType_t)datatype, peer, comm, NULL);
}

ncclResult_t rawRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, int datatype, int residence, ncclComm_t comm) {
  return ncclRedOpCreatePreMulSum(op, scalar, (ncclDataType_t)datatype, (ncclScalarResidence_t)residence, comm);
}

ncclResult_t rawRedOpDestroy(int op, ncclComm_t comm) { return ncclRedOpDestroy((ncclRedOp_t)op, comm); }

const char* rawGetErrorString(int result) { return ncclGetErrorString((ncclResult_t)result); }
