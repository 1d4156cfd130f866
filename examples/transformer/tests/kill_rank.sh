#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# kill_rank.sh N VICTIM GPT_TRAIN ARGS...: starts N ranks of GPT_TRAIN as processes (RANK and
# WORLD_SIZE in their environment, the unique id through a rendezvous file), kills rank VICTIM
# with SIGKILL once rank 0 has logged a few steps, and passes when every other rank exits with
# an error (not a signal) that names the site and the ccl call that failed, within
# CCL_TIMEOUT: none hangs.
set -u
n=$1 victim=$2 train=$3
shift 3
. "$(dirname "$0")/ranks.sh"
start_ranks "$n" "$train" "$@"
kill_after_steps kill_rank "$victim"
killed=$(date +%s%N)
status=0
for r in $(seq 0 $((n - 1))); do
  [ "$r" = "$victim" ] && continue
  while kill -0 "${pids[r]}" 2>/dev/null; do
    if [ $(( ($(date +%s%N) - killed) / 1000000000 )) -gt "$CCL_TIMEOUT" ]; then
      echo "kill_rank: rank $r still runs $CCL_TIMEOUT s after rank $victim died"; status=1; break
    fi
    sleep 0.05
  done
  wait "${pids[r]}" 2>/dev/null
  rc=$?
  ms=$(( ($(date +%s%N) - killed) / 1000000 ))
  line=$(grep '^gpt_train:' "$dir/out.$r" | tail -1)
  echo "rank $r: exit $rc after $ms ms: $line"
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 128 ]; then echo "kill_rank: rank $r did not fail cleanly"; status=1; fi
  if ! printf '%s\n' "$line" | grep -qE '(tp\.fwd|tp\.bwd|tp\.grad|pp\.fwd|pp\.bwd|dp\.grad|dp\.param|emb\.sync|stat|eval) ccl[A-Za-z/]+.* failed'; then
    echo "kill_rank: rank $r's error names no site and call"; cat "$dir/out.$r"; status=1
  fi
done
exit $status
