#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# elastic_trials.sh GPT_TRAIN DATA [TRIALS] [STEPS] [ARGS...]: what --elastic does to a run
# (ARGS go to every rank: --zero for ZeRO-1). N=4 data-
# parallel ranks as processes train STEPS steps (default 300) with --elastic. In each of TRIALS
# trials (default 10) a random rank other than 0 is killed (SIGKILL) after a random number of
# logged steps. Beside them, uninterrupted runs of 4 ranks with seeds 1-5 give the
# seed-to-seed spread. Prints, per trial, the step of the kill, the time from the kill to the
# next logged step, and the final validation loss; then the spread of the uninterrupted
# runs. Model: 2 layers of 32 channels, sequences of 32 tokens.
set -u
train=$1 data=$2 trials=${3:-10} steps=${4:-300}
shift $(($# < 4 ? $# : 4))
n=4
model=(--data "$data" --layers 2 --channels 32 --heads 2 --max-seq 32 --seq 32 --batch 4 --accum 1 --no-progress
  --dp $n --steps "$steps" --val-every 0 "$@")
export CCL_TIMEOUT=${CCL_TIMEOUT:-30} WORLD_SIZE=$n OMP_NUM_THREADS=1
now() { date +%s%N; }
val_of() { grep '"type":"val"' "$1" | tail -1 | sed 's/.*"val_loss":\([0-9.]*\).*/\1/'; }
run() {  # run DIR SEED [VICTIM AT]: the ranks, and the kill if asked; prints "at wait_ms"
  local dir=$1 seed=$2 victim=${3:--1} at=${4:-0} pids=() r
  for r in $(seq 0 $((n - 1))); do
    RANK=$r "$train" "${model[@]}" --seed "$seed" --elastic --rendezvous "$dir/id" --log "$dir/log.jsonl" \
      >"$dir/out.$r" 2>&1 &
    pids[r]=$!
  done
  if [ "$victim" -ge 0 ]; then
    logged() {
      local c
      c=$(grep -c '"type":"step"' "$dir/log.jsonl" 2>/dev/null)
      echo "${c:-0}"
    }
    while [ "$(logged)" -lt "$at" ] && kill -0 "${pids[0]}" 2>/dev/null; do sleep 0.002; done
    local before killed after
    before=$(logged)
    kill -9 "${pids[victim]}"
    killed=$(now)
    while [ "$(logged)" -le "$before" ] && kill -0 "${pids[0]}" 2>/dev/null; do sleep 0.002; done
    after=$(now)
    echo "$before $(( (after - killed) / 1000000 ))"
  fi
  for r in $(seq 0 $((n - 1))); do wait "${pids[r]}" 2>/dev/null; done
}
RANDOM=7
echo "trial | killed rank | after step | kill -> next step (ms) | ranks after | final val loss"
for t in $(seq 1 "$trials"); do
  dir=$(mktemp -d)
  victim=$((1 + RANDOM % (n - 1))) at=$((5 + RANDOM % (steps - 20)))
  result=$(run "$dir" 1 "$victim" "$at")  # waits for every rank
  read -r before waited <<<"$result"
  ranks=$(grep -o 'going on with [0-9]* ranks' "$dir/out.0" | tail -1 | grep -o '[0-9]*')
  echo "$t | $victim | $before | $waited | ${ranks:-?} | $(val_of "$dir/log.jsonl")"
  rm -rf "$dir"
done
echo "uninterrupted, seeds 1-5:"
for seed in 1 2 3 4 5; do
  dir=$(mktemp -d)
  run "$dir" "$seed"
  echo "seed $seed | final val loss $(val_of "$dir/log.jsonl")"
  rm -rf "$dir"
done
