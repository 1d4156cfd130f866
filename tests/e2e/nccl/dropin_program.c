// SPDX-License-Identifier: BSD-3-Clause
// A program written for NCCL and linked against ccl's drop-in libnccl.so.2, as it would be
// against NVIDIA's: check_dropin_soname.sh reads what the link recorded and runs it.
#include <nccl.h>
#include <stdio.h>

#include "nccl/nccl_2_30.h"

int main(void) {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) {
    fprintf(stderr, "ncclGetVersion failed: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  printf("ncclGetVersion: %d\n", version);
  return version == CCL_NCCL_ABI_VERSION_CODE ? 0 : 1;
}
