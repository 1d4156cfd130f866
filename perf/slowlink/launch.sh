#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs one command as every rank of an emulated cluster on this machine: NODES nodes of LOCAL
# ranks each (links.sh's two levels: the ranks of a node share memory, each node reaches the
# others through one veth limited to RATE with tbf), then prints the bytes that crossed each
# node's veth and its loopback. Everything it creates is deleted on exit, also when
# interrupted.
#
# Usage (root): perf/slowlink/launch.sh [--mpi] [--] COMMAND [ARGS...]
#   default  COMMAND starts once per rank, in its node's namespaces, with RANK, WORLD_SIZE,
#            LOCAL_RANK and LOCAL_WORLD_SIZE set; every "{id}" in ARGS becomes the path of a
#            fresh file for a rendezvous (gpt_train's --rendezvous). Rank 0's output is
#            shown, the others' when they fail.
#   --mpi    mpirun -np NODES×LOCAL COMMAND ARGS (all_reduce_perf and the other MPI-launched
#            programs): mpirun runs in node 0, one daemon per node through
#            mpi_netns_agent.sh, LOCAL slots per node, Open MPI's ob1 over tcp (between nodes,
#            on the veth), vader (within a node) and self.
# Every rank gets CCL_HOST_ID=node<n>, CCL_SOCKET_IFNAME and UCX_NET_DEVICES set to the
# node's veth, UCX_TLS [tcp,sm,self] and OMP_NUM_THREADS [1].
# Environment (defaults in brackets): NODES [2]  LOCAL [2]  RATE [1gbit] (none: no limit)
#   RUN_TIMEOUT [600] seconds  BURST_<rate> (tbf burst, as run.sh)  LOGS (a directory that
#   receives every rank's output). CCL_*, UCX_* and OMPI_MCA_* variables reach the ranks.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mpi=0
[[ ${1:-} == --mpi ]] && { mpi=1; shift; }
[[ ${1:-} == -- ]] && shift
[[ $# -ge 1 ]] || { echo "usage: launch.sh [--mpi] [--] COMMAND [ARGS...]" >&2; exit 2; }
nodes=${NODES:-2}
node_ranks=${LOCAL:-2}
rate=${RATE:-1gbit}
run_timeout=${RUN_TIMEOUT:-600}
logs=${LOGS:-}

die() {
  echo "launch.sh: $*" >&2
  exit 1
}
[[ $(id -u) == 0 ]] || die "needs root (network namespaces, tc)"
command -v "$1" >/dev/null || die "no such command: $1"

# shellcheck source=links.sh
source "$here/links.sh"
# shellcheck disable=SC2317 # called by links_cleanup
links_on_exit() { if [[ -n $logs ]]; then mkdir -p "$logs" && cp "$work"/out.* "$logs"/ 2>/dev/null; fi; }
links_setup || die "cannot set up the links"
build_links
[[ $rate == none ]] || limit_links "$rate"
echo "# $nodes nodes × $node_ranks ranks, links $rate, UCX_TLS=${UCX_TLS:-tcp,sm,self}; $(nproc) cores," \
  "load $(cut -d' ' -f1-3 /proc/loadavg)"
export CCL_SOCKET_IFNAME=$ifname UCX_NET_DEVICES=$ifname UCX_TLS=${UCX_TLS:-tcp,sm,self}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

# "<sent on the veth> <received on it> <sent on the loopback>" bytes of every node, one line each.
counters() { for ((n = 0; n < nodes; n++)); do node_dev_bytes "$n"; done; }

before=$(counters)
status=0
if [[ $mpi == 1 ]]; then
  for ((n = 0; n < nodes; n++)); do echo "$(node_ns "$n") slots=$node_ranks"; done >"$work/hosts"
  ip netns exec "$(node_ns 0)" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    timeout "$run_timeout" mpirun --allow-run-as-root -np "$ranks" --hostfile "$work/hosts" --bind-to none \
    --mca plm_rsh_agent "$here/mpi_netns_agent.sh" --mca plm_rsh_no_tree_spawn 1 \
    --mca pml ob1 --mca btl tcp,vader,self --mca btl_tcp_if_include "$ifname" --mca oob_tcp_if_include "$ifname" \
    "$@" 2>&1 | tee "$work/out.0" || status=${PIPESTATUS[0]}
else
  args=()
  for a in "$@"; do args+=("${a//\{id\}/$work/id}"); done
  pids=()
  touch "$work/out.0"
  for ((i = 0; i < ranks; i++)); do
    rank_exec "$i" env RANK="$i" WORLD_SIZE="$ranks" LOCAL_RANK=$((i % node_ranks)) LOCAL_WORLD_SIZE="$node_ranks" \
      timeout "$run_timeout" "${args[@]}" >"$work/out.$i" 2>&1 &
    pids+=($!)
    children+=($!)
  done
  tail -n +1 -f --pid="${pids[0]}" "$work/out.0" &
  children+=($!)
  tailer=$!
  for ((i = 0; i < ranks; i++)); do
    s=0
    wait "${pids[i]}" || s=$?
    [[ $s == 0 ]] && continue
    status=$s
    echo "launch.sh: rank $i exited with status $s" >&2
    [[ $i == 0 ]] || tail -n 20 "$work/out.$i" >&2
  done
  wait "$tailer" || true
fi

# What crossed each node's veth and its loopback during the run (interface counters).
after=$(counters)
echo "# traffic during the run (MB): node, out through its veth, in through its veth, on its loopback"
paste <(echo "$before") <(echo "$after") | awk '{ printf "#   node%d %10.2f %10.2f %10.2f\n", NR - 1, ($4 - $1) / 1e6, ($5 - $2) / 1e6, ($6 - $3) / 1e6 }'
exit "$status"
