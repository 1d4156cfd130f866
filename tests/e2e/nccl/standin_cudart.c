/* SPDX-License-Identifier: BSD-3-Clause */
/* A stand-in for CUDA 13's libcudart.so.13, of the few functions ccl's CUDA probe
 * (common/cuda_probe.cc) loads: it reports one device and answers pointer queries as the real
 * runtime does for host memory, writing the whole of CUDA 13's cudaPointerAttributes (88
 * bytes), so the NCCL face runs here as on a machine with a GPU: its init makes (or fails to
 * make) NVIDIA's communicator, and every pointer check goes through the probe. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum { kSuccess = 0, kInvalidValue = 1, kInsufficientDriver = 35, kMemoryTypeUnregistered = 0 };

typedef struct {
  int type;
  int device;
  void* devicePointer;
  void* hostPointer;
  long reserved[8];
} PointerAttributes; /* cudaPointerAttributes of CUDA 13 */

/* CCLTEST_CUDART_DRIVER_TOO_OLD=1: as CUDA 13's runtime on a driver older than it
 * (cudaErrorInsufficientDriver, 35), where no device can be used through this runtime. */
int cudaGetDeviceCount(int* count) {
  const char* old = getenv("CCLTEST_CUDART_DRIVER_TOO_OLD");
  if (old && old[0] == '1') return kInsufficientDriver;
  *count = 1;
  return kSuccess;
}

int cudaPointerGetAttributes(PointerAttributes* attributes, const void* ptr) {
  memset(attributes, 0, sizeof(*attributes));
  attributes->type = kMemoryTypeUnregistered;
  attributes->device = -2;
  attributes->hostPointer = (void*)ptr;
  return kSuccess;
}

int cudaMemcpy(void* dst, const void* src, size_t bytes, int kind) {
  (void)kind;
  memmove(dst, src, bytes);
  return kSuccess;
}

int cudaGetDevice(int* device) {
  *device = 0;
  return kSuccess;
}

int cudaSetDevice(int device) { return device == 0 ? kSuccess : kInvalidValue; }

/* Host memory stands for the device's (the pointer queries above call it host memory). */
int cudaMalloc(void** ptr, size_t bytes) {
  *ptr = malloc(bytes ? bytes : 1);
  return *ptr ? kSuccess : 2; /* cudaErrorMemoryAllocation */
}

int cudaFree(void* ptr) {
  free(ptr);
  return kSuccess;
}
