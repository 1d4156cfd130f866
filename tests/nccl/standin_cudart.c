/* SPDX-License-Identifier: BSD-3-Clause */
/* A stand-in for CUDA 13's libcudart.so.13, of the few functions ccl's CUDA probe
 * (common/cuda_probe.cc) loads: it reports one device and answers pointer queries as the real
 * runtime does for host memory, writing the whole of CUDA 13's cudaPointerAttributes (88
 * bytes), so the NCCL face runs here as on a machine with a GPU: its init makes (or fails to
 * make) NVIDIA's communicator, and every pointer check goes through the probe. */
#include <stddef.h>
#include <string.h>

enum { kSuccess = 0, kInvalidValue = 1, kMemoryTypeUnregistered = 0 };

typedef struct {
  int type;
  int device;
  void* devicePointer;
  void* hostPointer;
  long reserved[8];
} PointerAttributes; /* cudaPointerAttributes of CUDA 13 */

int cudaGetDeviceCount(int* count) {
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
