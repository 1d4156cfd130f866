// SPDX-License-Identifier: BSD-3-Clause
/*
 * The collectives with their enum arguments as plain ints, implemented in C: a C caller may
 * pass any int where the header says cclDataType_t or cclRedOp_t, while in C++ an
 * out-of-range enum value is undefined behaviour in the test itself.
 */
#ifndef CCL_TESTS_RAW_ENUM_CALLS_H_
#define CCL_TESTS_RAW_ENUM_CALLS_H_

#include <ccl/ccl.h>

#ifdef __cplusplus
extern "C" {
#endif

cclResult_t rawAllReduce(const void* send, void* recv, size_t count, int type, int op, cclComm_t comm);
cclResult_t rawBroadcast(const void* send, void* recv, size_t count, int type, int root, cclComm_t comm);
cclResult_t rawBcast(void* buff, size_t count, int type, int root, cclComm_t comm);
cclResult_t rawReduce(const void* send, void* recv, size_t count, int type, int op, int root, cclComm_t comm);
cclResult_t rawAllGather(const void* send, void* recv, size_t count, int type, cclComm_t comm);
cclResult_t rawReduceScatter(const void* send, void* recv, size_t count, int type, int op, cclComm_t comm);
cclResult_t rawAlltoAll(const void* send, void* recv, size_t count, int type, cclComm_t comm);
cclResult_t rawGather(const void* send, void* recv, size_t count, int type, int root, cclComm_t comm);
cclResult_t rawScatter(const void* send, void* recv, size_t count, int type, int root, cclComm_t comm);
cclResult_t rawSend(const void* send, size_t count, int type, int peer, cclComm_t comm);
cclResult_t rawRecv(void* recv, size_t count, int type, int peer, cclComm_t comm);
/* cclGetErrorString of any int, known code or not. */
const char* rawErrorString(int code);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CCL_TESTS_RAW_ENUM_CALLS_H_ */
