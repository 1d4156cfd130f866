#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs coll_config_program (an NCCL program choosing int8 for one all-reduce through
# ncclCollConfig_t's vendor option) on the drop-in and checks, besides its own checks, the
# face's statistics at destroy: two all-reduces, one of them compressed.
#   check_coll_config.sh PROGRAM DROPIN_DIR
set -u
program=${1:?usage: check_coll_config.sh PROGRAM DROPIN_DIR} dir=${2:?usage: check_coll_config.sh PROGRAM DROPIN_DIR}
out=$(env -u CCL_CODEC -u CCL_COMPRESS LD_LIBRARY_PATH="$dir" CCL_DEBUG=INFO CCL_CODEC_MIN_BYTES=0 CCL_CODEC_SHM=on \
  "$program" 2>&1)
status=$?
echo "$out" | grep -E "rank [0-9]:|NCCL face: stats allreduce|^ok|^FAILED"
[ $status -eq 0 ] || { echo "FAIL: the program exited $status"; exit 1; }
for r in 0 1; do
  # calls=2 compressed=1: the two all-reduces that ran (the refused ones did not run).
  echo "$out" | grep -q "NCCL face: stats allreduce rank=$r nranks=2 calls=2 compressed=1 " ||
    { echo "FAIL: rank $r's statistics do not show one compressed all-reduce of two"; exit 1; }
done
echo "ncclCollConfig_t's vendor option: ok"
