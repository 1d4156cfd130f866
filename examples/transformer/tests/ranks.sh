# SPDX-License-Identifier: BSD-3-Clause
# Sourced by kill_rank.sh and elastic.sh: makes `dir` (a scratch folder, removed at exit with
# every rank still running) and `pids` (the ranks' processes).
#   start_ranks N TRAIN ARGS...   starts N ranks of TRAIN as processes (RANK and WORLD_SIZE in
#                                 their environment, the unique id through $dir/id, rank 0's
#                                 log in $dir/log.jsonl, rank r's output in $dir/out.r)
#   wait_for_steps WHO            waits until rank 0 has logged 3 steps (up to 60 s); WHO
#                                 names the caller in its complaint
#   kill_after_steps WHO VICTIM...  wait_for_steps, then SIGKILLs the ranks VICTIM... together
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
start_ranks() {
  local n=$1 train=$2 r
  shift 2
  export CCL_TIMEOUT=${CCL_TIMEOUT:-30} WORLD_SIZE=$n
  for r in $(seq 0 $((n - 1))); do
    RANK=$r "$train" "$@" --rendezvous "$dir/id" --log "$dir/log.jsonl" >"$dir/out.$r" 2>&1 &
    pids[r]=$!
  done
}
logged_steps() { grep -c '"type":"step"' "$dir/log.jsonl" 2>/dev/null || true; }
wait_for_steps() {
  for _ in $(seq 6000); do
    [ "$(logged_steps)" -ge 3 ] 2>/dev/null && break
    sleep 0.01
  done
  if ! [ "$(logged_steps)" -ge 3 ] 2>/dev/null; then
    echo "$1: the ranks did not start training"; cat "$dir"/out.*; exit 1
  fi
}
kill_after_steps() {
  local who=$1 victim
  shift
  wait_for_steps "$who"
  for victim in "$@"; do kill -9 "${pids[victim]}"; done
  for victim in "$@"; do wait "${pids[victim]}" 2>/dev/null; done
}
