# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# Emulated slow links between ranks, sourced by perf/slowlink/run.sh, perf/slowlink/launch.sh
# and by the trainer's experiments: network namespaces, each joined by a veth pair to a bridge
# in a hub namespace, both ends of every veth limited with tbf (this kernel has no netem).
# Names and addresses are unique to the calling process; nothing outside them is touched.
#
# One level (the default): `ranks` namespaces of one rank each. Two levels: the caller also
# sets `nodes` and `node_ranks` (ranks = nodes × node_ranks): `nodes` namespaces ("nodes") of
# `node_ranks` ranks each, one limited veth per node. The ranks of a node share its network
# namespace and also an IPC and a UTS namespace of the node's own (host name node<n>). UCX
# 1.13 reaches a peer through shared memory only when both have the same boot id and the
# same IPC namespace, so within a node it uses shared memory and between nodes TCP through
# the node's veth; the host name separates the nodes for ccl's transport (README.md, "Two
# levels"). Those two namespaces are bind-mounted under $nsdir so that the MPI launch agent
# can enter them by the node's name.
#
# The caller sets `ranks` (and `nodes`, `node_ranks`) and calls links_setup once (it installs
# an EXIT trap that deletes the namespaces, kills what runs in them and the pids in
# `children`, removes `work` and calls `links_on_exit` if defined), then build_links and
# limit_links RATE. rank_ns I and rank_addr I name rank I's namespace and address (its node's
# in two levels); its interface is $ifname. rank_exec I COMMAND... runs COMMAND as rank I:
# in its node's namespaces, with CCL_HOST_ID=node<n> (n = the node, or the rank in one level).

links_setup() {
  prefix=cclsl-$$
  hub=$prefix-hub
  subnet=10.251.$(($$ % 250))
  ifname=slink # the veth end inside every rank (node) namespace
  nsdir=/run/cclsl # IPC and UTS namespaces of the nodes: $nsdir/<node namespace>.{ipc,uts}
  nodes=${nodes:-}
  node_ranks=${node_ranks:-1}
  [[ -n $nodes ]] || node_ranks=1
  if [[ -n $nodes ]]; then
    [[ $nodes -ge 1 && $node_ranks -ge 1 && $((nodes * node_ranks)) -le 200 ]] || {
      echo "links.sh: nodes × ranks per node must be in 1..200" >&2
      return 1
    }
    ranks=$((nodes * node_ranks))
  fi
  if ip -o -4 addr show 2>/dev/null | grep -q " $subnet\."; then
    echo "links.sh: $subnet.0/24 is in use on this host" >&2
    return 1
  fi
  work=$(mktemp -d /tmp/cclsl-$$.XXXXXX)
  namespaces=()
  nsfiles=()
  children=()
  trap links_cleanup EXIT
  trap 'echo "interrupted" >&2; exit 130' INT TERM
}

links_cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if declare -F links_on_exit >/dev/null; then links_on_exit || true; fi
  for pid in "${children[@]}"; do kill "$pid" 2>/dev/null || true; done
  for ns in "${namespaces[@]}"; do
    # Only processes inside this run's namespaces (they were started by the caller).
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  for f in "${nsfiles[@]}"; do
    umount "$f" 2>/dev/null || true
    rm -f "$f"
  done
  rmdir "$nsdir" 2>/dev/null || true # left when another run still has nodes there
  rm -rf "$work"
  exit "$status"
}

# Namespaces behind the hub: one per node (two levels) or per rank (one level).
link_count() { echo "${nodes:-$ranks}"; }
rank_node() { echo $(($1 / node_ranks)); }
node_ns() { echo "$prefix-$1"; }
node_addr() { echo "$subnet.$(($1 + 1))"; }
rank_ns() { node_ns "$(rank_node "$1")"; }
rank_addr() { node_addr "$(rank_node "$1")"; }

rank_exec() {
  local n
  n=$(rank_node "$1")
  shift
  if [[ -n $nodes ]]; then
    ip netns exec "$(node_ns "$n")" nsenter --ipc="$nsdir/$(node_ns "$n").ipc" --uts="$nsdir/$(node_ns "$n").uts" \
      env CCL_HOST_ID="node$n" "$@"
  else
    ip netns exec "$(node_ns "$n")" env CCL_HOST_ID="node$n" "$@"
  fi
}

build_links() {
  local count ns i
  count=$(link_count)
  ip netns add "$hub"
  namespaces+=("$hub")
  ip -n "$hub" link add slbr type bridge
  ip -n "$hub" link set slbr up
  for ((i = 0; i < count; i++)); do
    ns=$(node_ns "$i")
    ip netns add "$ns"
    namespaces+=("$ns")
    ip -n "$ns" link set lo up
    ip link add "$ifname" netns "$ns" type veth peer name "slh$i" netns "$hub"
    ip -n "$ns" addr add "$(node_addr "$i")/24" dev "$ifname"
    ip -n "$ns" link set "$ifname" up
    ip -n "$hub" link set "slh$i" master slbr
    ip -n "$hub" link set "slh$i" up
    if [[ -n $nodes ]]; then
      nsfiles+=("$nsdir/$ns.ipc" "$nsdir/$ns.uts")
      mkdir -p "$nsdir"
      touch "$nsdir/$ns.ipc" "$nsdir/$ns.uts"
      unshare --ipc="$nsdir/$ns.ipc" --uts="$nsdir/$ns.uts" hostname "node$i"
    fi
  done
}

# tbf on both ends: node -> bridge on the node's veth, bridge -> node on the hub's veth.
# The burst must hold one GSO packet (64 KB) and absorb timer slack, but stay small next
# to one allreduce's traffic so that it adds little beyond the rate.
limit_links() {
  local rate=$1 burst_var="BURST_$1" burst count i
  burst=${!burst_var:-}
  count=$(link_count)
  if [[ -z $burst ]]; then case $rate in 1gbit) burst=256kb ;; *) burst=1mb ;; esac; fi
  for ((i = 0; i < count; i++)); do
    tc -n "$(node_ns "$i")" qdisc replace dev "$ifname" root tbf rate "$rate" burst "$burst" latency 20ms
    tc -n "$hub" qdisc replace dev "slh$i" root tbf rate "$rate" burst "$burst" latency 20ms
  done
  echo "# links: tbf rate $rate burst $burst latency 20ms on both ends of each of $count veth pairs"
}

# Bytes node (namespace) N's tbf qdiscs have passed and packets they dropped:
# "<into bridge> <out of bridge> <dropped up> <dropped down>".
node_qdisc_bytes() {
  local up down dup ddown
  read -r up dup < <(tc -s -n "$(node_ns "$1")" qdisc show dev "$ifname" | awk '/Sent/ {gsub(",", ""); print $2, $7; exit}')
  read -r down ddown < <(tc -s -n "$hub" qdisc show dev "slh$1" | awk '/Sent/ {gsub(",", ""); print $2, $7; exit}')
  echo "$up $down $dup $ddown"
}

# The same, summed over all nodes (namespaces).
qdisc_bytes() {
  local up=0 down=0 dup=0 ddown=0 u d du dd count i
  count=$(link_count)
  for ((i = 0; i < count; i++)); do
    read -r u d du dd < <(node_qdisc_bytes "$i")
    up=$((up + u)) down=$((down + d)) dup=$((dup + du)) ddown=$((ddown + dd))
  done
  echo "$up $down $dup $ddown"
}

# Bytes sent on node (namespace) N's loopback: traffic between ranks of one node that went
# through the kernel's TCP stack instead of shared memory.
node_lo_bytes() { ip netns exec "$(node_ns "$1")" cat /sys/class/net/lo/statistics/tx_bytes; }

# Interface counters of node (namespace) N, with or without tbf: "<sent on its veth>
# <received on its veth> <sent on its loopback>" bytes.
node_dev_bytes() {
  ip netns exec "$(node_ns "$1")" sh -c "cat /sys/class/net/$ifname/statistics/tx_bytes \
    /sys/class/net/$ifname/statistics/rx_bytes /sys/class/net/lo/statistics/tx_bytes | tr '\n' ' '"
  echo
}
lo_bytes() {
  local sum=0 count i
  count=$(link_count)
  for ((i = 0; i < count; i++)); do sum=$((sum + $(node_lo_bytes "$i"))); done
  echo "$sum"
}
