#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fault trial: a rank of the reference trainer (examples/transformer's gpt_train, 4 ranks as
# processes) dies of SIGKILL mid-step. Each trial runs the trainer's own rank-death check,
# examples/transformer/tests/kill_rank.sh, with a victim rank and a grid of ranks (tensor x
# pipeline, pipeline x data, data only) drawn from --seed, and turns its verdict into one
# JSON line of tests/faults' shape. The contract (kill_rank.sh's): every other rank exits
# with an error status, not a signal, within CCL_TIMEOUT, and its last line names the
# trainer's site and the ccl call that failed. Why: the trainer is the project's reference
# application; a peer's death must end it promptly with a message that says where, not hang
# its survivors.
#
#   trainer_kill.sh --trials N --seed S [--gpt-train PATH] [--data PATH] [--timeout SECONDS]
#
# Defaults: <repo>/build/examples/transformer/gpt_train and the corpus that
# examples/transformer/tests/CMakeLists.txt writes in the same build
# (<gpt_train's folder>/tests/cli_corpus.txt); --timeout is CCL_TIMEOUT (default 10).
# kill_rank.sh reports each survivor's exit time after the kill, not the moment its error
# was raised: t_error holds those exit times (an upper bound of the time to the error).
# Exit status 0 when every trial is ok, 1 otherwise, 2 for bad arguments or missing files.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
kill_rank=$root/examples/transformer/tests/kill_rank.sh
train=$root/build/examples/transformer/gpt_train
data=""
trials=1 seed=1 timeout=${CCL_TIMEOUT:-10}
usage="usage: trainer_kill.sh --trials N --seed S [--gpt-train PATH] [--data PATH] [--timeout SECONDS]"
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
  case $1 in
    --trials) trials=$2 ;;
    --seed) seed=$2 ;;
    --gpt-train) train=$2 ;;
    --data) data=$2 ;;
    --timeout) timeout=$2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift 2
done
# The corpus examples/transformer/tests/CMakeLists.txt writes, in the build gpt_train is from.
[ -n "$data" ] || data=$(dirname "$train")/tests/cli_corpus.txt
[ -x "$train" ] || { echo "trainer_kill: no gpt_train at $train (build it, or pass --gpt-train)" >&2; exit 2; }
[ -f "$data" ] || { echo "trainer_kill: no data file $data (pass --data)" >&2; exit 2; }

# The model and run of the trainer's own rank_dies tests; the grids are drawn per trial.
model=(--layers 2 --channels 16 --heads 2 --max-seq 16 --seq 16 --batch 2 --steps 1000000 --no-progress --accum 2)
grids=("--tp 2 --pp 2" "--pp 2 --dp 2" "--dp 4")
n=4

json_string() {  # $1 as a JSON string: backslashes and quotes escaped, control characters dropped
  local s=${1//\\/\\\\}
  s=${s//\"/\\\"}
  printf '"%s"' "$(printf '%s' "$s" | tr -d '\000-\037')"
}

RANDOM=$seed
all_ok=1
for trial in $(seq 0 $((trials - 1))); do
  victim=$((RANDOM % n))
  grid=${grids[$((RANDOM % ${#grids[@]}))]}
  # kill_rank.sh waits for every survivor to exit; a hung one would keep it waiting, so it
  # runs under a limit (its EXIT trap then kills the ranks).
  # shellcheck disable=SC2086  # the grid is words
  out=$(OMP_NUM_THREADS=1 CCL_TIMEOUT=$timeout timeout -k 5 $((timeout + 90)) \
    "$kill_rank" $n "$victim" "$train" --data "$data" "${model[@]}" $grid 2>&1)
  status=$?
  errors=0 completed=0 hangs=0 crashes=0 times="" first="" problems=""
  started=1
  if printf '%s\n' "$out" | grep -q "did not start training"; then
    started=0 problems+="the ranks did not start training (no fault injected); "
  fi
  for r in $(seq 0 $((n - 1))); do
    [ "$r" = "$victim" ] || [ $started = 0 ] && continue
    line=$(printf '%s\n' "$out" | grep -m1 "^rank $r: exit ")
    if [ -z "$line" ] || printf '%s\n' "$out" | grep -q "^kill_rank: rank $r still runs"; then
      hangs=$((hangs + 1))
      problems+="rank $r did not exit within CCL_TIMEOUT ($timeout s); "
      [ -z "$line" ] && continue
    fi
    rc=$(printf '%s\n' "$line" | sed -n 's/^rank [0-9]*: exit \([0-9]*\) after.*/\1/p')
    ms=$(printf '%s\n' "$line" | sed -n 's/^rank [0-9]*: exit [0-9]* after \([0-9]*\) ms.*/\1/p')
    times+="${times:+, }$(awk -v ms="$ms" 'BEGIN { printf "%.3f", ms / 1000 }')"
    if [ "$rc" -ge 128 ]; then
      crashes=$((crashes + 1))
      problems+="rank $r died of signal $((rc - 128)); "
    elif [ "$rc" -eq 0 ]; then
      completed=$((completed + 1))
    elif printf '%s\n' "$out" | grep -q "^kill_rank: rank $r's error names no site"; then
      problems+="rank $r's error names no site and call: ${line#*ms: }; "
    elif ! printf '%s\n' "$out" | grep -q "^kill_rank: rank $r still runs"; then
      errors=$((errors + 1))
      [ -n "$first" ] || first="rank $r: ${line#*ms: }"
    fi
  done
  [ $status -eq 124 ] || [ $status -eq 137 ] && problems+="kill_rank.sh ran past its limit; "
  ok=false
  if [ $status -eq 0 ] && [ $errors -eq $((n - 1)) ] && [ $hangs -eq 0 ] && [ $crashes -eq 0 ]; then ok=true; fi
  if $ok; then detail="$first"; else
    detail="${problems}kill_rank.sh exit $status: $(printf '%s\n' "$out" | tail -n 3 | tr '\n' ' ')"
    all_ok=0
  fi
  detail="victim rank $victim, $grid: $detail"
  printf '{"kind": "trainer_kill", "trial": %d, "ok": %s, "survivors": %d, "errors": %d, "completed": %d, ' \
    "$trial" "$ok" $((n - 1)) $errors $completed
  printf '"hangs": %d, "wrong": 0, "crashes": %d, "t_error": [%s], "detail": %s}\n' \
    $hangs $crashes "$times" "$(json_string "${detail:0:500}")"
done
[ $all_ok -eq 1 ]
