/* SPDX-License-Identifier: BSD-3-Clause */
#include "raw_enum_calls.h"

cclResult_t rawAllReduce(const void* send, void* recv, size_t count, int type, int op, cclComm_t comm) {
  return cclAllReduce(send, recv, count, (cclDataType_t)type, (cclRedOp_t)op, comm, NULL);
}
cclResult_t rawBroadcast(const void* send, void* recv, size_t count, int type, int root, cclComm_t comm) {
  return cclBroadcast(send, recv, count, (cclDataType_t)type, root, comm, NULL);
}
cclResult_t rawBcast(void* buff, size_t count, int type, int root, cclComm_t comm) {
  return cclBcast(buff, count, (cclDataType_t)type, root, comm, NULL);
}
cclResult_t rawReduce(const void* send, void* recv, size_t count, int type, int op, int root, cclComm_t comm) {
  return cclReduce(send, recv, count, (cclDataType_t)type, (cclRedOp_t)op, root, comm, NULL);
}
cclResult_t rawAllGather(const void* send, void* recv, size_t count, int type, cclComm_t comm) {
  return cclAllGather(send, recv, count, (cclDataType_t)type, comm, NULL);
}
cclResult_t rawReduceScatter(const void* send, void* recv, size_t count, int type, int op, cclComm_t comm) {
  return cclReduceScatter(send, recv, count, (cclDataType_t)type, (cclRedOp_t)op, comm, NULL);
}
cclResult_t rawAlltoAll(const void* send, void* recv, size_t count, int type, cclComm_t comm) {
  return cclAlltoAll(send, recv, count, (cclDataType_t)type, comm, NULL);
}
cclResult_t rawGather(const void* send, void* recv, size_t count, int type, int root, cclComm_t comm) {
  return cclGather(send, recv, count, (cclDataType_t)type, root, comm, NULL);
}
cclResult_t rawScatter(const void* send, void* recv, size_t count, int type, int root, cclComm_t comm) {
  return cclScatter(send, recv, count, (cclDataType_t)type, root, comm, NULL);
}
cclResult_t rawSend(const void* send, size_t count, int type, int peer, cclComm_t comm) {
  return cclSend(send, count, (cclDataType_t)type, peer, comm, NULL);
}
cclResult_t rawRecv(void* recv, size_t count, int type, int peer, cclComm_t comm) {
  return cclRecv(recv, count, (cclDataType_t)type, peer, comm, NULL);
}
const char* rawErrorString(int code) { return cclGetErrorString((cclResult_t)code); }
