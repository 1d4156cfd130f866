#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# slow_train.sh RANKS RATE LOG GPT_TRAIN ARGS...: trains with RANKS ranks as processes, each in
# a network namespace of its own, the links between them limited to RATE (tbf, perf/slowlink's
# links.sh), ranks talking UCX over TCP; rank 0 writes the JSONL log LOG. Root only. Prints the
# raw TCP rate measured between two ranks first.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
links=$here/../../../perf/slowlink
ranks=$1 rate=$2 log=$3 train=$4
shift 4
[[ $(id -u) == 0 ]] || { echo "slow_train.sh: needs root (network namespaces, tc)" >&2; exit 1; }
# shellcheck source=../../../perf/slowlink/links.sh
source "$links/links.sh"
links_setup
build_links >/dev/null
limit_links "$rate" >/dev/null
out=$work/stream.txt
ip netns exec "$(rank_ns 1)" timeout 30 python3 "$links/tcp_stream.py" recv "$(rank_addr 1)" 5201 >"$out" &
children+=($!)
sleep 0.3
ip netns exec "$(rank_ns 0)" timeout 30 python3 "$links/tcp_stream.py" send "$(rank_addr 1)" 5201 1
wait "${children[-1]}"
echo "slow_train.sh: $rate links, raw TCP stream $(cat "$out")"
pids=()
for ((i = 0; i < ranks; i++)); do
  # CCL_TRANSPORT=ucx: ranks in namespaces of one machine share its host identity, and the
  # shared-memory channel would join them past the slow links.
  ip netns exec "$(rank_ns "$i")" env RANK="$i" WORLD_SIZE="$ranks" CCL_SOCKET_IFNAME=$ifname CCL_TRANSPORT=ucx UCX_TLS=tcp,self \
    UCX_NET_DEVICES=$ifname OMP_NUM_THREADS=1 "$train" "$@" --rendezvous "$work/id" --log "$log" \
    >"$work/out.$i" 2>&1 &
  pids+=($!)
  children+=($!)
done
status=0
for ((i = 0; i < ranks; i++)); do
  wait "${pids[i]}" || { status=$?; echo "slow_train.sh: rank $i exited with $status" >&2; tail -n 5 "$work/out.$i" >&2; }
done
cat "$work/out.0"
exit $status
