#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# elastic.sh N VICTIMS STEPS GPT_TRAIN ARGS...: starts N data-parallel ranks of GPT_TRAIN with
# --elastic and --steps STEPS as processes (as kill_rank.sh does) and kills the ranks VICTIMS
# (comma-separated; rank 0 writes the log until then, the new rank 0 after) together with
# SIGKILL once rank 0 has logged a few steps. STEPS (or --stop-after in ARGS) must leave the
# kill time to land: a run that ends first fails.
#
# By default every other rank must go on without them: each says it went on with M ranks from
# some step S and exits 0, and the log reaches the last step (STEPS - 1, or --stop-after's K -
# 1: K counts the steps across the restart) with finite losses; one survivor, rank 0 of the
# shrunk world, prints the final report over M ranks, its throughput over the steps since S
# with the run's total beside them (and --sample's text). With --tp or
# --pp a data-parallel replica (the N / dp consecutive ranks of one data-parallel index) that
# lost a rank leaves whole: its other ranks must say so and exit 0, and M counts the whole
# replicas' ranks (else M = N - k). Then the state the survivors rebuilt must be exact: their
# final checkpoint must equal, byte for byte, that of N ranks stopped after S steps
# (--stop-after) and resumed from their checkpoint on M ranks.
#
# With ELASTIC_EXPECT=refuse the state cannot be rebuilt: every other rank must fail, with
# the same message, naming the ranks lost.
set -u
n=$1 victims=$2 steps=$3 train=$4
shift 4
. "$(dirname "$0")/ranks.sh"
IFS=, read -r -a lost <<<"$victims"
args=("$@")
dp_before=$n stop=0 sample=0
for i in "${!args[@]}"; do
  case "${args[i]}" in
    --dp) dp_before=${args[i + 1]} ;;
    --stop-after) stop=${args[i + 1]} ;;
    --sample) sample=${args[i + 1]} ;;
  esac
done
end=$steps  # the step the run ends before
[ "$stop" -gt 0 ] && end=$stop
replica=$((n / dp_before))  # ranks per data-parallel replica
broken=" "
for v in "${lost[@]}"; do broken+="$((v / replica)) "; done
leaves() {  # whether surviving rank $1's replica lost a rank
  case "$broken" in *" $(($1 / replica)) "*) return 0 ;; esac
  return 1
}
after=0
for r in $(seq 0 $((n - 1))); do leaves "$r" || after=$((after + 1)); done
start_ranks "$n" "$train" "$@" --elastic --steps "$steps" --checkpoint "$dir/elastic.ck"
kill_after_steps elastic "${lost[@]}"
status=0
survivor() {
  local r=$1 v
  for v in "${lost[@]}"; do [ "$r" = "$v" ] && return 1; done
  return 0
}
messages=()
reporters=()  # the survivors that printed the final report
for r in $(seq 0 $((n - 1))); do
  survivor "$r" || continue
  wait "${pids[r]}"
  rc=$?
  if [ "${ELASTIC_EXPECT:-go_on}" = refuse ]; then
    said=$(grep -o -- '--elastic: .*' "$dir/out.$r" | tail -1)
    echo "rank $r: exit $rc; $said"
    messages+=("$said")
    if [ "$rc" -eq 0 ] || [ -z "$said" ]; then
      echo "elastic: rank $r did not refuse to go on"; cat "$dir/out.$r"; status=1
    fi
    continue
  fi
  if leaves "$r"; then
    echo "rank $r: exit $rc; $(grep 'leaves the run' "$dir/out.$r" | tail -1)"
    if [ "$rc" -ne 0 ] || ! grep -q "elastic: rank $r leaves the run" "$dir/out.$r"; then
      echo "elastic: rank $r, whose replica lost a rank, did not leave"; cat "$dir/out.$r"; status=1
    fi
    continue
  fi
  went_on=$(grep -c "elastic: going on with $after ranks" "$dir/out.$r")
  echo "rank $r: exit $rc; $(grep 'elastic: going on' "$dir/out.$r" | tail -1)"
  if [ "$rc" -ne 0 ] || [ "$went_on" -ne 1 ]; then
    echo "elastic: rank $r did not go on without ranks $victims"; cat "$dir/out.$r"; status=1
  fi
  if grep -q '^layout: ' "$dir/out.$r"; then
    reporters+=("$r")
    echo "rank $r: $(grep '^layout: ' "$dir/out.$r")"
    if ! grep -q "^layout: .* over $after rank(s)" "$dir/out.$r"; then
      echo "elastic: rank $r's report does not count the $after ranks left"; status=1
    fi
    if [ "$sample" -gt 0 ] && ! grep -q '^sample:' "$dir/out.$r"; then
      echo "elastic: rank $r printed no --sample"; status=1
    fi
    # Its throughput is the ranks left's, over the steps since they went on from step S (to
    # the end), and says so; the run's total (from step 0) beside it.
    went=$(grep -o 'going on with [0-9]* ranks from step [0-9]*' "$dir/out.$r" | tail -1 | grep -o '[0-9]*$')
    since="over the $((end - went)) steps since going on without the lost rank(s) ($end steps in all), $after rank(s)"
    [ "$went" -eq 0 ] && since="over $end steps, $after rank(s)"  # nothing ran before the loss
    echo "rank $r: $(grep '^throughput: ' "$dir/out.$r")"
    if ! grep -q -F -- "$since" "$dir/out.$r"; then
      echo "elastic: rank $r's throughput is not said to be $since"; status=1
    fi
  fi
done
if [ "${ELASTIC_EXPECT:-go_on}" = refuse ]; then
  if [ "$(printf '%s\n' "${messages[@]}" | sort -u | wc -l)" -ne 1 ]; then
    echo "elastic: the survivors did not fail alike"; status=1
  fi
  for v in "${lost[@]}"; do
    printf '%s\n' "${messages[0]}" | grep -q "\b$v\b" || { echo "elastic: the message does not name rank $v"; status=1; }
  done
  exit $status
fi
if [ "${#reporters[@]}" -ne 1 ]; then
  echo "elastic: ${#reporters[@]} survivors printed the final report (${reporters[*]:-none}), not one"; status=1
fi
last=$(grep '"type":"step"' "$dir/log.jsonl" | tail -1)
echo "last step logged: $last"
if ! printf '%s\n' "$last" | grep -q "\"step\":$((end - 1)),"; then
  echo "elastic: the log does not end at step $((end - 1))"; status=1
fi
if grep '"type":"step"' "$dir/log.jsonl" | grep -qiE '"loss":(nan|inf|-inf)'; then
  echo "elastic: a logged loss is not finite"; status=1
fi
[ $status -eq 0 ] || exit $status

# The same steps without the loss: N ranks to step S, then N - k from its checkpoint.
first=0
while leaves "$first" || ! survivor "$first"; do first=$((first + 1)); done
from=$(grep -o 'going on with [0-9]* ranks from step [0-9]*' "$dir/out.$first" | tail -1 | grep -o '[0-9]*$')
run_ranks() {  # run_ranks RANKS SUBDIR ARGS...
  local ranks=$1 sub=$2 r rc=0
  shift 2
  mkdir -p "$dir/$sub"
  for r in $(seq 0 $((ranks - 1))); do
    WORLD_SIZE=$ranks RANK=$r "$train" "$@" --rendezvous "$dir/$sub/id" >"$dir/$sub/out.$r" 2>&1 &
    pids[r]=$!
  done
  for r in $(seq 0 $((ranks - 1))); do wait "${pids[r]}" || rc=1; done
  [ $rc -eq 0 ] || { echo "elastic: the run without a loss ($sub) failed"; cat "$dir/$sub"/out.*; exit 1; }
}
pids=()
if [ "$from" -gt 0 ]; then
  run_ranks "$n" before "$@" --steps "$steps" --stop-after "$from" --checkpoint "$dir/before.ck"
  resume=(--resume "$dir/before.ck")
else
  resume=()
fi
for i in "${!args[@]}"; do  # the survivors' data-parallel width; --stop-after from the resumed step
  [ "${args[i]}" = --dp ] && args[i + 1]=$((after / replica))
  [ "${args[i]}" = --stop-after ] && args[i + 1]=$((stop - from))
done
run_ranks "$after" after "${args[@]}" --steps "$steps" "${resume[@]}" --checkpoint "$dir/after.ck"
if cmp -s "$dir/elastic.ck" "$dir/after.ck"; then
  echo "elastic: the survivors' final checkpoint equals that of $n ranks to step $from and $after from there"
else
  echo "elastic: the survivors' final checkpoint differs from that of $n ranks to step $from and $after from there"
  cmp "$dir/elastic.ck" "$dir/after.ck" | head -3
  status=1
fi
exit $status
