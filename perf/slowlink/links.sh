# SPDX-License-Identifier: BSD-3-Clause
# Emulated slow links between ranks, sourced by perf/slowlink/run.sh and by the trainer's
# experiments: RANKS network namespaces, each joined by a veth pair to a bridge in a hub
# namespace, both ends of every veth limited with tbf (this kernel has no netem). Names and
# addresses are unique to the calling process; nothing outside them is touched.
#
# The caller sets `ranks` and calls links_setup once (it installs an EXIT trap that deletes
# the namespaces, kills what runs in them and the pids in `children`, removes `work` and calls
# `links_on_exit` if defined), then build_links and limit_links RATE. rank_ns I and rank_addr I
# name rank I's namespace and address; its interface is $ifname.

links_setup() {
  prefix=cclsl-$$
  hub=$prefix-hub
  subnet=10.251.$(($$ % 250))
  ifname=slink # the veth end inside every rank namespace
  if ip -o -4 addr show 2>/dev/null | grep -q " $subnet\."; then
    echo "links.sh: $subnet.0/24 is in use on this host" >&2
    return 1
  fi
  work=$(mktemp -d /tmp/cclsl-$$.XXXXXX)
  namespaces=()
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
  rm -rf "$work"
  exit "$status"
}

rank_ns() { echo "$prefix-$1"; }
rank_addr() { echo "$subnet.$(($1 + 1))"; }

build_links() {
  ip netns add "$hub"
  namespaces+=("$hub")
  ip -n "$hub" link add slbr type bridge
  ip -n "$hub" link set slbr up
  for ((i = 0; i < ranks; i++)); do
    local ns
    ns=$(rank_ns "$i")
    ip netns add "$ns"
    namespaces+=("$ns")
    ip -n "$ns" link set lo up
    ip link add "$ifname" netns "$ns" type veth peer name "slh$i" netns "$hub"
    ip -n "$ns" addr add "$(rank_addr "$i")/24" dev "$ifname"
    ip -n "$ns" link set "$ifname" up
    ip -n "$hub" link set "slh$i" master slbr
    ip -n "$hub" link set "slh$i" up
  done
}

# tbf on both ends: rank -> bridge on the rank's veth, bridge -> rank on the hub's veth.
# The burst must hold one GSO packet (64 KB) and absorb timer slack, but stay small next
# to one allreduce's traffic so that it adds little beyond the rate.
limit_links() {
  local rate=$1 burst_var="BURST_$1" burst
  burst=${!burst_var:-}
  if [[ -z $burst ]]; then case $rate in 1gbit) burst=256kb ;; *) burst=1mb ;; esac; fi
  for ((i = 0; i < ranks; i++)); do
    tc -n "$(rank_ns "$i")" qdisc replace dev "$ifname" root tbf rate "$rate" burst "$burst" latency 20ms
    tc -n "$hub" qdisc replace dev "slh$i" root tbf rate "$rate" burst "$burst" latency 20ms
  done
  echo "# links: tbf rate $rate burst $burst latency 20ms on both ends of each of $ranks veth pairs"
}

# Bytes sent through the tbf qdiscs so far and packets they dropped:
# "<into bridge> <out of bridge> <dropped up> <dropped down>".
qdisc_bytes() {
  local up=0 down=0 dup=0 ddown=0 n d
  for ((i = 0; i < ranks; i++)); do
    read -r n d < <(tc -s -n "$(rank_ns "$i")" qdisc show dev "$ifname" | awk '/Sent/ {gsub(",", ""); print $2, $7; exit}')
    up=$((up + n)) dup=$((dup + d))
    read -r n d < <(tc -s -n "$hub" qdisc show dev "slh$i" | awk '/Sent/ {gsub(",", ""); print $2, $7; exit}')
    down=$((down + n)) ddown=$((ddown + d))
  done
  echo "$up $down $dup $ddown"
}

