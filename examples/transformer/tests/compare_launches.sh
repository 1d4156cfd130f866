#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# compare_launches.sh MPIRUN N GPT_TRAIN ARGS...: trains with N ranks as MPI processes and
# with N ranks as threads of one process; the two checkpoints must be identical bit for bit
# (the same algorithms reduce in the same order whatever the launch).
set -eu
mpirun=$1 n=$2 train=$3
shift 3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$mpirun" --allow-run-as-root --oversubscribe --bind-to none -np "$n" "$train" "$@" --checkpoint "$dir/processes.ck"
"$train" "$@" --ranks "$n" --checkpoint "$dir/threads.ck"
cmp "$dir/processes.ck" "$dir/threads.ck"
echo "$n ranks: processes and threads wrote identical checkpoints"
