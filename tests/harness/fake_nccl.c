/* SPDX-License-Identifier: BSD-3-Clause */
/* A stand-in for NVIDIA's NCCL that CCL_DEVICE_TRANSPORT=nccl loads in the api's device tests:
 * it makes communicators that move nothing and tells the test, through the function
 * ccltest_note_nccl_init that the test program exports, which rank made one: the test reads
 * the device current on that thread, as NVIDIA's ncclCommInitRank takes it. Transfers fail. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char internal[128];
} FakeId;

enum { kSuccess = 0, kSystemError = 2, kInvalidUsage = 5 };

int pncclGetUniqueId(FakeId* id) {
  memset(id, 0x5a, sizeof(*id));
  return kSuccess;
}

int pncclCommInitRank(void** comm, int nranks, FakeId id, int rank) {
  (void)id;
  void (*note)(int, int) = (void (*)(int, int))dlsym(RTLD_DEFAULT, "ccltest_note_nccl_init");
  if (!note) return kSystemError;
  note(rank, nranks);
  *comm = malloc(16);
  return *comm ? kSuccess : kSystemError;
}

int pncclCommDestroy(void* comm) {
  free(comm);
  return kSuccess;
}

int pncclCommAbort(void* comm) { return pncclCommDestroy(comm); }

int pncclCommGetAsyncError(void* comm, int* result) {
  (void)comm;
  *result = kSuccess;
  return kSuccess;
}

int pncclGroupStart(void) { return kSuccess; }
int pncclGroupEnd(void) { return kSuccess; }

int pncclSend(const void* buf, size_t count, int type, int peer, void* comm, void* stream) {
  (void)buf, (void)count, (void)type, (void)peer, (void)comm, (void)stream;
  return kInvalidUsage;
}

int pncclRecv(void* buf, size_t count, int type, int peer, void* comm, void* stream) {
  (void)buf, (void)count, (void)type, (void)peer, (void)comm, (void)stream;
  return kInvalidUsage;
}

const char* pncclGetErrorString(int result) { return result == kSuccess ? "no error" : "the stand-in moves nothing"; }
