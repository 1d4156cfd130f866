#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Slow-link allreduce comparison: ccl (no codec, fp8, int8, int4, top-k 1 %) against Open
# MPI's MPI_Allreduce (ob1/tcp) and Gloo's ring allreduces, on the same emulated links.
#
# Builds RANKS network namespaces, each joined to a bridge (in its own namespace) by a veth
# pair, limits both ends of every veth with tbf to RATE, checks the rate with a raw TCP
# stream, runs every implementation with the same sizes and prints one table of busbw and
# ratios. Everything it creates is deleted on exit, also when interrupted.
# With NODES set, two levels instead (links.sh): NODES namespaces ("nodes") of LOCAL ranks
# each, one limited veth per node, shared memory between the ranks of a node (ccl: UCX's
# posix/sysv/cma; Open MPI: vader; Gloo has none and uses TCP over the node's loopback).
#
# Usage (root): perf/slowlink/run.sh [build-dir]      (default: build)
# Environment (defaults in brackets):
#   RANKS [4]  or  NODES and LOCAL [2] (NODES × LOCAL ranks)
#   RATES ["1gbit 10gbit"]  BYTES [64M]  ITERS [3]  WARMUP [1]
#   CODECS ["none fp8_e4m3 int8 int4 topk"]  GLOO_ALGOS ["ring_chunked ring"]
#   MPI_ALGOS ["default ring", with NODES "default ring han"]  (ring: coll_tuned_allreduce_algorithm
#     4; han: Open MPI's hierarchical coll/han)
#   REPEATS [1] runs of every implementation per rate (interleaved; the table shows the median)
#   RETRIES [1] extra attempts of a run that failed (each failure is reported)
#   RUN_TIMEOUT [180] seconds per run   STREAM_SECONDS [3]   BURST_<rate> e.g. BURST_1gbit [256kb]
# CCL_*, UCX_* and OMPI_MCA_* variables in the environment reach the ranks unchanged, except
# that one level forces UCX_TLS=tcp,self; two levels default it to tcp,sm,self. Every rank gets
# CCL_HOST_ID=node<n>, n its node (one level: its own namespace).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:-build}" && pwd)
ranks=${RANKS:-4}
nodes=${NODES:-}
node_ranks=1
[[ -z $nodes ]] || { node_ranks=${LOCAL:-2}; ranks=$((nodes * node_ranks)); }
rates=${RATES:-1gbit 10gbit}
bytes=${BYTES:-64M}
iters=${ITERS:-3}
warmup=${WARMUP:-1}
codecs=${CODECS-none fp8_e4m3 int8 int4 topk}
gloo_algos=${GLOO_ALGOS-ring_chunked ring}
mpi_algos=${MPI_ALGOS-default ring${nodes:+ han}}
run_timeout=${RUN_TIMEOUT:-180}
repeats=${REPEATS:-1}
retries=${RETRIES:-1}
stream_seconds=${STREAM_SECONDS:-3}

ccl_bin=$build/perf/slowlink/slowlink_ccl_allreduce
gloo_bin=$build/perf/slowlink/slowlink_gloo_allreduce
mpi_bin=$build/perf/slowlink/slowlink_mpi_allreduce

die() {
  echo "run.sh: $*" >&2
  exit 1
}
[[ $(id -u) == 0 ]] || die "needs root (network namespaces, tc)"
[[ -x $ccl_bin ]] || die "missing $ccl_bin (cmake --build $build --target slowlink_ccl_allreduce)"
[[ $ranks -ge 2 && $ranks -le 200 ]] || die "RANKS (NODES × LOCAL) must be in 2..200"
[[ -z $nodes || $nodes -ge 2 ]] || die "NODES must be at least 2"
[[ -x $gloo_bin ]] || { echo "# Gloo bench not built: Gloo rows skipped" >&2; gloo_algos=""; }
[[ -x $mpi_bin ]] || { echo "# MPI bench not built: MPI rows skipped" >&2; mpi_algos=""; }

# shellcheck source=links.sh
source "$here/links.sh"
links_setup || die "cannot set up the links"
if [[ -n $nodes ]]; then
  ucx_tls=${UCX_TLS:-tcp,sm,self} mpi_btl=tcp,vader,self layout="$nodes nodes × $node_ranks ranks"
else
  ucx_tls=tcp,self mpi_btl=tcp,self layout="$ranks ranks"
fi

# From the first namespace (rank 0's) to the second (rank 1's, or node 1's in two levels).
measure_stream() {
  local rate=$1 out
  out=$work/stream-$rate.txt
  ip netns exec "$(node_ns 1)" timeout 60 python3 "$here/tcp_stream.py" recv "$(node_addr 1)" 5201 >"$out" &
  children+=($!)
  sleep 0.5
  ip netns exec "$(node_ns 0)" timeout 60 python3 "$here/tcp_stream.py" send "$(node_addr 1)" 5201 "$stream_seconds"
  wait "${children[-1]}"
  echo "# raw TCP stream $(node_ns 0) -> $(node_ns 1) at $rate: $(cat "$out")"
}

# Waits for the given pids (one per rank, in rank order); fails if any failed (timeout: 124).
wait_all() {
  local rc=0 status i=0
  for pid in "$@"; do
    status=0
    wait "$pid" || status=$?
    [[ $status == 0 ]] || { echo "# process $i exited with status $status" >&2; rc=$status; }
    i=$((i + 1))
  done
  return $rc
}

# A ccl variant is codec[+fb|+loco][@algorithm]: the codec and feedback go to the bench (-v),
# the algorithm to CCL_ALGO (default: the caller's CCL_ALGO, else the library's choice).
run_ccl() {
  local variant=$1 dir=$2 max_err pids=() codec algo
  codec=${variant%%@*}
  algo=${CCL_ALGO:-auto}
  [[ $variant == *@* ]] && algo=${variant#*@}
  case ${codec%%+*} in
    none) max_err=1e-5 ;; int8) max_err=0.02 ;; fp8_e4m3) max_err=0.1 ;; int4) max_err=0.3 ;; *) max_err=1 ;;
  esac
  # CCL_CODEC=auto says what it chose and the time its model predicted (INFO, api layer).
  local debug=()
  [[ $codec == auto* ]] && debug=(CCL_DEBUG=INFO CCL_DEBUG_SUBSYS=api)
  for ((i = 0; i < ranks; i++)); do
    rank_exec "$i" env "${debug[@]}" CCL_SOCKET_IFNAME=$ifname UCX_TLS="$ucx_tls" UCX_NET_DEVICES=$ifname CCL_ALGO="$algo" \
      timeout "$run_timeout" "$ccl_bin" -r "$i" -n "$ranks" -b "$bytes" -i "$iters" -w "$warmup" \
      -f "$dir/id" -v "$variant" -e "$max_err" >"$dir/out.$i" 2>"$dir/err.$i" &
    pids+=($!)
    children+=($!)
  done
  wait_all "${pids[@]}"
}

run_gloo() {
  local algo=$1 dir=$2 pids=()
  mkdir -p "$dir/store"
  for ((i = 0; i < ranks; i++)); do
    rank_exec "$i" timeout "$run_timeout" "$gloo_bin" -r "$i" -n "$ranks" -b "$bytes" \
      -i "$iters" -w "$warmup" -f "$dir/store" -a "$(rank_addr "$i")" -v "$algo" >"$dir/out.$i" 2>"$dir/err.$i" &
    pids+=($!)
    children+=($!)
  done
  wait_all "${pids[@]}"
}

# mpirun runs inside rank 0's namespace; the hostfile names the namespaces (one slot per rank
# of each) and the launch agent turns "ssh <namespace> orted ..." into "ip netns exec
# <namespace> sh -c 'orted ...'" (two levels: also in the node's IPC and UTS namespaces).
run_mpi() {
  local algo=$1 dir=$2 extra=()
  for ((n = 0; n < $(link_count); n++)); do echo "$(node_ns "$n") slots=$node_ranks"; done >"$dir/hosts"
  case $algo in
    ring) extra=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4) ;;
    han) extra=(--mca coll_han_priority 100) ;;
  esac
  ip netns exec "$(rank_ns 0)" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    timeout "$run_timeout" mpirun --allow-run-as-root -np "$ranks" --hostfile "$dir/hosts" --bind-to none \
    --mca plm_rsh_agent "$here/mpi_netns_agent.sh" --mca plm_rsh_no_tree_spawn 1 \
    --mca pml ob1 --mca btl "$mpi_btl" --mca btl_tcp_if_include "$ifname" --mca oob_tcp_if_include "$ifname" \
    "${extra[@]}" "$mpi_bin" -b "$bytes" -i "$iters" -w "$warmup" -v "$algo" >"$dir/out.0" 2>"$dir/err.0" &
  children+=($!)
  wait_all "$!"
}

# Runs one implementation, records its RESULT lines, the qdisc bytes it moved and (two levels)
# the bytes on the nodes' loopbacks. A failed run is retried up to RETRIES times in a fresh
# directory; the log says so.
measure() {
  local rate=$1 impl=$2 variant=$3 repeat=$4 attempt=0 dir before after ok=0 lo_before lo_after lo="" lo_note=""
  while :; do
    dir=$work/$rate-$impl-$variant-$repeat-$attempt
    mkdir -p "$dir"
    before=$(qdisc_bytes)
    lo_before=$(lo_bytes)
    if "run_$impl" "$variant" "$dir"; then ok=1; break; fi
    echo "# FAILED: $rate $impl $variant (attempt $((attempt + 1)), stderr follows)" >&2
    tail -n 5 "$dir"/err.* >&2 || true
    attempt=$((attempt + 1))
    [[ $attempt -le $retries ]] || break
  done
  if [[ $ok == 1 ]]; then
    after=$(qdisc_bytes)
    lo_after=$(lo_bytes)
    read -r b_up b_down b_dup b_ddown <<<"$before"
    read -r a_up a_down a_dup a_ddown <<<"$after"
    [[ -z $nodes ]] || lo=" lo=$((lo_after - lo_before))" lo_note="; $((lo_after - lo_before)) bytes on the nodes' loopbacks"
    cat "$dir"/out.* | grep '^RESULT' | sed "s/\$/ rate=$rate repeat=$repeat tc_up=$((a_up - b_up)) tc_down=$((a_down - b_down))$lo/" \
      >>"$work/results.txt"
    grep -h ':0 \[ccl INFO\].*CCL_CODEC=auto chose' "$dir"/err.* 2>/dev/null | sed "s/^[^]]*\] /# $rate $variant: /" \
      >>"$work/predictions.txt" || true
    echo "# tc $rate $impl $variant: $((a_up - b_up)) bytes into the bridge, $((a_down - b_down)) bytes out of it;" \
      "packets dropped: $((a_dup - b_dup)) into, $((a_ddown - b_ddown)) out of it$lo_note"
  else
    echo "RESULT impl=$impl variant=$variant rank=0 failed=1 rate=$rate repeat=$repeat" >>"$work/results.txt"
  fi
}

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $layout, $bytes fp32 sum allreduce, $warmup warm-up + $iters timed calls per run, $repeats run(s) each"
build_links
touch "$work/results.txt"
for rate in $rates; do
  limit_links "$rate"
  measure_stream "$rate"
  for ((r = 0; r < repeats; r++)); do
    for algo in $mpi_algos; do measure "$rate" mpi "$algo" "$r"; done
    for algo in $gloo_algos; do measure "$rate" gloo "$algo" "$r"; done
    for codec in $codecs; do measure "$rate" ccl "$codec" "$r"; done
  done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
[[ -s $work/predictions.txt ]] && sort -u "$work/predictions.txt"
python3 "$here/report.py" "$work/results.txt" "$((warmup + iters))"
