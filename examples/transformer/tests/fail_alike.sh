#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# fail_alike.sh N REGEX GPT_TRAIN ARGS...: starts N ranks of GPT_TRAIN as processes (as
# kill_rank.sh does; @DIR@ in ARGS stands for the scratch folder) and passes when every rank
# exits with an error (not a signal), the same last "gpt_train:" line on every rank, matching
# REGEX, and no rank took the failure for a lost rank (--elastic's "going on"): a file that
# rank 0 cannot write must stop the whole run alike, not look like rank 0 was lost. With
# FAIL_ALIKE_REMOVE=SUB the folder @DIR@/SUB is made before the start and moved away (at once,
# unlike a removal that rank 0's next file could race) once rank 0 has logged 3 steps: a path
# that could be written at the start and no longer can.
set -u
n=$1 regex=$2 train=$3
shift 3
. "$(dirname "$0")/ranks.sh"
args=("${@//@DIR@/$dir}")
remove=${FAIL_ALIKE_REMOVE:-}
[ -z "$remove" ] || mkdir -p "$dir/$remove"
start_ranks "$n" "$train" "${args[@]}"
if [ -n "$remove" ]; then
  wait_for_steps fail_alike
  mv "$dir/$remove" "$dir/$remove.moved"
fi
status=0
lines=()
for r in $(seq 0 $((n - 1))); do
  wait "${pids[r]}"
  rc=$?
  line=$(grep '^gpt_train:' "$dir/out.$r" | tail -1)
  lines+=("$line")
  echo "rank $r: exit $rc: $line"
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 128 ]; then echo "fail_alike: rank $r did not fail cleanly"; status=1; fi
  if ! printf '%s\n' "$line" | grep -qE -- "$regex"; then echo "fail_alike: rank $r's error does not match '$regex'"; status=1; fi
  if grep -q 'elastic: going on\|leaves the run' "$dir/out.$r"; then
    echo "fail_alike: rank $r took the failure for a lost rank"; cat "$dir/out.$r"; status=1
  fi
done
if [ "$(printf '%s\n' "${lines[@]}" | sort -u | wc -l)" -ne 1 ]; then echo "fail_alike: the ranks did not fail alike"; status=1; fi
exit $status
