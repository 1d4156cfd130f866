#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# elastic.sh N VICTIM STEPS GPT_TRAIN ARGS...: starts N data-parallel ranks of GPT_TRAIN with
# --elastic and --steps STEPS as processes (as kill_rank.sh does), kills rank VICTIM (not 0,
# which writes the log) with SIGKILL once rank 0 has logged a few steps, and passes when every
# other rank goes on without it: each says it went on with N-1 ranks, exits 0, and the log
# reaches the last step with finite losses. STEPS must leave the kill time to land: a run that
# ends first fails the check (no rank says it went on).
set -u
n=$1 victim=$2 steps=$3 train=$4
shift 4
. "$(dirname "$0")/ranks.sh"
start_ranks "$n" "$train" "$@" --elastic --steps "$steps"
kill_after_steps elastic "$victim"
status=0
for r in $(seq 0 $((n - 1))); do
  [ "$r" = "$victim" ] && continue
  wait "${pids[r]}"
  rc=$?
  went_on=$(grep -c "elastic: going on with $((n - 1)) ranks" "$dir/out.$r")
  echo "rank $r: exit $rc; $(grep 'elastic: going on' "$dir/out.$r" | tail -1)"
  if [ "$rc" -ne 0 ] || [ "$went_on" -ne 1 ]; then
    echo "elastic: rank $r did not go on without rank $victim"; cat "$dir/out.$r"; status=1
  fi
done
last=$(grep '"type":"step"' "$dir/log.jsonl" | tail -1)
echo "last step logged: $last"
if ! printf '%s\n' "$last" | grep -q "\"step\":$((steps - 1)),"; then
  echo "elastic: the log does not reach step $((steps - 1))"; status=1
fi
if grep '"type":"step"' "$dir/log.jsonl" | grep -qiE '"loss":(nan|inf|-inf)'; then
  echo "elastic: a logged loss is not finite"; status=1
fi
exit $status
