// SPDX-License-Identifier: BSD-3-Clause
// An NCCL program (C, NCCL's headers only, ranks as threads) that picks compression for one
// call through NCCL 2.31's per-collective configuration: its vendor option list carries ccl's
// codec option (CCL_NCCL_VENDOR_ID and CCL_NCCL_OPTION_CODEC, the numbers ccl.h documents). The
// first all-reduce (int8) must differ from the exact sum and stay within int8's bound; the
// next one (no config) must be exact; a config without NCCL's magic, and ccl's option naming
// no codec, are ncclInvalidArgument. check_coll_config.sh reads the face's statistics (one
// compressed all-reduce) from the destroy-time summary.
#include <math.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl/nccl_2_32.h"

enum { kRanks = 2, kCount = 65536 };
#define kVendor 0x0cc1a5 /* CCL_NCCL_VENDOR_ID */
#define kCodecOption 1   /* CCL_NCCL_OPTION_CODEC */

static ncclUniqueId gId;
static int gFailed = 0;
static pthread_mutex_t gLock = PTHREAD_MUTEX_INITIALIZER;

static void fail(int rank, const char* what) {
  pthread_mutex_lock(&gLock);
  fprintf(stderr, "rank %d: %s (%s)\n", rank, what, ncclGetLastError(NULL));
  gFailed = 1;
  pthread_mutex_unlock(&gLock);
}

static float input(int rank, int i) { return (float)sin(0.001 * i + rank) * (float)(1 + rank); }

static void* rankMain(void* arg) {
  const int rank = (int)(long)arg;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, kRanks, gId, rank) != ncclSuccess) {
    fail(rank, "ncclCommInitRank");
    return NULL;
  }
  float* buf = malloc(sizeof(float) * kCount);
  double worst = 0, largest = 0;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < kCount; ++i) buf[i] = input(rank, i);
    ncclConfigExt_t codec = {NULL, {kVendor, kCodecOption}, {0}};
    codec.val.s = "int8";
    ncclCollConfig_t config = NCCL_COLLCONFIG_INITIALIZER;
    config.ext = &codec;
    if (ncclAllReduceConfig(buf, buf, kCount, ncclFloat32, ncclSum, comm, NULL, round == 0 ? &config : NULL) !=
        ncclSuccess) {
      fail(rank, "ncclAllReduceConfig");
      break;
    }
    worst = 0;
    largest = 0;
    for (int i = 0; i < kCount; ++i) {
      const double want = (double)input(0, i) + (double)input(1, i);
      largest = fmax(largest, fabs(want));
      worst = fmax(worst, fabs(buf[i] - want));
    }
    if (round == 0 && !(worst > 0 && worst <= 0.02 * largest)) fail(rank, "the int8 all-reduce is not int8's");
    if (round == 1 && worst > 1e-6 * largest) fail(rank, "the all-reduce without a config is not exact");
  }
  ncclConfigExt_t bad = {NULL, {kVendor, kCodecOption}, {0}};
  bad.val.s = "no-such-codec";
  ncclCollConfig_t config = NCCL_COLLCONFIG_INITIALIZER;
  config.ext = &bad;
  if (ncclAllReduceConfig(buf, buf, kCount, ncclFloat32, ncclSum, comm, NULL, &config) != ncclInvalidArgument)
    fail(rank, "a codec option naming no codec was accepted");
  ncclCollConfig_t unset;
  memset(&unset, 0, sizeof(unset));
  unset.size = sizeof(unset);
  if (ncclAllReduceConfig(buf, buf, kCount, ncclFloat32, ncclSum, comm, NULL, &unset) != ncclInvalidArgument)
    fail(rank, "a config without NCCL's magic was accepted");
  free(buf);
  if (ncclCommDestroy(comm) != ncclSuccess) fail(rank, "ncclCommDestroy");
  return NULL;
}

int main(void) {
  if (ncclGetUniqueId(&gId) != ncclSuccess) {
    fprintf(stderr, "ncclGetUniqueId: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  pthread_t threads[kRanks];
  for (long r = 0; r < kRanks; ++r) pthread_create(&threads[r], NULL, rankMain, (void*)r);
  for (int r = 0; r < kRanks; ++r) pthread_join(threads[r], NULL);
  printf("%s\n", gFailed ? "FAILED" : "ok");
  return gFailed;
}
