#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs the same NCCL program on the same data twice, with no CCL_CODEC: once with ccl as
# libnccl.so.2 (drop-in), once with ccl preloaded in front of NVIDIA's libnccl.so; fails
# unless every rank's results are byte-identical (cmp) and not empty. The files stay in
# WORKDIR when they differ.
# usage: compare_dumps.sh WORKDIR RANKS DROPIN_DIR LIBCCL_NCCL REAL_NCCL_DIR MPIRUN [MPIRUN_ARGS...] -- PROGRAM
set -u
usage="usage: compare_dumps.sh WORKDIR RANKS DROPIN_DIR LIBCCL_NCCL REAL_NCCL_DIR MPIRUN [ARGS...] -- PROGRAM"
work=${1:?$usage} ranks=${2:?$usage} dropin=${3:?$usage} lib=${4:?$usage} real=${5:?$usage}
shift 5
mpirun=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do mpirun+=("$1"); shift; done
[ $# -eq 2 ] || { echo "$usage"; exit 2; }
program=$2
# "No CCL_CODEC" means none at all, whatever the caller's environment holds.
unset CCL_CODEC CCL_COMPRESS CCL_CODEC_MIN_BYTES CCL_FEEDBACK CCL_CODEC_SHM
mkdir -p "$work"
rm -f "$work"/dropin.rank* "$work"/preload.rank*
"${mpirun[@]}" -np "$ranks" -x LD_LIBRARY_PATH="$dropin" "$program" --dump "$work/dropin" || exit 1
"${mpirun[@]}" -np "$ranks" -x LD_PRELOAD="$lib" -x LD_LIBRARY_PATH="$real" "$program" --dump "$work/preload" || exit 1
status=0
for ((r = 0; r < ranks; ++r)); do
  a="$work/dropin.rank$r" b="$work/preload.rank$r"
  if [ ! -s "$a" ] || [ ! -s "$b" ]; then
    echo "FAILED: rank $r wrote no results ($a, $b)"
    status=1
  elif cmp "$a" "$b"; then
    echo "rank $r: $(stat -c %s "$a") bytes of results identical"
  else
    status=1
  fi
done
if [ $status -eq 0 ]; then
  echo "drop-in and LD_PRELOAD results are identical on every rank"
  rm -f "$work"/dropin.rank* "$work"/preload.rank*  # tens of MB; kept only when they differ
fi
exit $status
