#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A silent host (silent_host.cc): three ranks, each in a network namespace of its own behind a
# bridge (perf/slowlink/links.sh, no rate limit). After one call, the last rank is stopped
# (SIGSTOP) for three times CCL_PEER_SILENCE_MS and resumed: nobody may take it for lost. Then
# its bridge port goes down: from then on nothing of it arrives and nothing reaches it, as when
# a host loses power. The other two must find it, name it in an error, shrink it away
# (CCL_SHRINK_ALIVE) and make a call; twice: idle between calls, then inside a call. A third
# trial stops the last rank for good while the others are inside a call (CCL_TIMEOUT 3 s): the
# call must fail naming it, and the shrink must leave it out although its kernel still
# accepts connections. CCL_TIMEOUT is
# 60 s, longer than the wait, so only the pulses can find it. Prints each rank's JSON line
# (detected_s: seconds from the cut to the communicator's error).
#   tests/faults/silent_host.sh BUILD_DIR
# Needs root (network namespaces); exits 77 (skipped) without.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1/tests/faults/silent_host
[[ -x $bin ]] || { echo "silent_host.sh: $bin not built" >&2; exit 1; }
if ! ip netns add "cclsh-probe-$$" 2>/dev/null; then
  echo "silent_host.sh: cannot create network namespaces here (root needed): skipped"
  exit 77
fi
ip netns del "cclsh-probe-$$"

ranks=3
# shellcheck source=../../perf/slowlink/links.sh
source "$here/../../perf/slowlink/links.sh"
links_setup
build_links
silence=${CCL_PEER_SILENCE_MS:-500}
export CCL_PEER_SILENCE_MS=$silence CCL_TIMEOUT=60 CCL_SOCKET_IFNAME=$ifname CCL_TRANSPORT=ucx UCX_NET_DEVICES=$ifname

# Waits (10 s at most) until rank FROM reaches rank TO's host: a connection to a port nobody
# listens on is refused once the path works, and unreachable while the port brought back up
# is not yet forwarding or a neighbour entry the cut left failed has not been renewed.
wait_reachable() {
  rank_exec "$1" python3 - "$(rank_addr "$2")" <<'PY'
import errno, socket, sys, time
end = time.time() + 10
while True:
    s = socket.socket()
    s.settimeout(1)
    try:
        s.connect((sys.argv[1], 9))
        sys.exit(0)
    except ConnectionRefusedError:
        sys.exit(0)
    except OSError as e:
        if time.time() > end:
            sys.exit("silent_host.sh: %s still unreachable: %s" % (sys.argv[1], e))
        time.sleep(0.1)
    finally:
        s.close()
PY
}

# One trial of MODE (idle or call); its ranks' JSON lines on stdout; non-zero if one is wrong.
trial() {
  local mode=$1 r i n line status=0
  local pids=()
  rm -f "$work"/id "$work"/ready.* "$work"/silenced "$work"/silenced.tmp "$work"/result.*
  # The last rank's port comes back from the previous trial's cut: every rank must reach
  # it (and it them) before the trial starts, or its rendezvous fails with no route to host.
  ip -n "$hub" link set "slh$last" up
  for ((r = 0; r < last; r++)); do
    wait_reachable "$last" "$r" || return 1
    wait_reachable "$r" "$last" || return 1
  done
  # Stopped: CCL_TIMEOUT short, so that the call fails in time and names the stopped rank.
  local timeout=60
  [[ $mode == stopped ]] && timeout=3
  for ((r = 0; r < ranks; r++)); do
    CCL_TIMEOUT=$timeout rank_exec "$r" "$bin" "$r" "$ranks" "$work" "$mode" >"$work/out.$r" 2>"$work/err.$r" &
    pids+=($!)
    children+=($!)
  done
  for ((i = 0; i < 300; i++)); do
    n=$(find "$work" -maxdepth 1 -name 'ready.*' | wc -l)
    [[ $n -eq $ranks ]] && break
    sleep 0.1
  done
  if [[ $n -ne $ranks ]]; then
    echo "silent_host.sh: $mode: only $n of $ranks ranks made their communicator" >&2
    cat "$work"/err.* >&2
    return 1
  fi
  # The rank's own process (what rank_exec started in the background is a shell around it).
  local victim
  victim=$(cat "$work/ready.$last")

  if [[ $mode != stopped ]]; then
    # Stopped, not silent: its kernel still acknowledges the pulses.
    kill -STOP "$victim"
    sleep "$(awk -v s="$silence" 'BEGIN { print 3 * s / 1000 }')"
    kill -CONT "$victim"
    sleep 0.5
  fi

  # Silent (its bridge port down), or stopped for good. The time is written first, so
  # detected_s is not understated.
  python3 -c 'import struct, sys, time; open(sys.argv[1], "wb").write(struct.pack("d", time.time()))' \
    "$work/silenced.tmp"
  if [[ $mode == stopped ]]; then
    kill -STOP "$victim"
  else
    ip -n "$hub" link set "slh$last" down
  fi
  mv "$work/silenced.tmp" "$work/silenced"

  for ((r = 0; r < last; r++)); do
    wait "${pids[$r]}" || { echo "silent_host.sh: $mode: rank $r exited with $?" >&2; status=1; }
  done
  kill -9 "$victim" "${pids[$last]}" 2>/dev/null || true
  wait "${pids[$last]}" 2>/dev/null || true
  for ((r = 0; r < last; r++)); do
    line=$(cat "$work/result.$r" 2>/dev/null || echo '{}')
    echo "$line"
    python3 - "$line" "$last" <<'PY' || status=1
import json, sys
r = json.loads(sys.argv[1])
want = {"found": True, "early": False, "named": True, "shrunk_to": int(sys.argv[2]), "after_ok": True}
bad = {k: r.get(k) for k, v in want.items() if r.get(k) != v}
if bad:
    print("silent_host.sh: %s rank %s: %s (want %s)" % (r.get("mode"), r.get("rank"), bad, {k: want[k] for k in bad}),
          file=sys.stderr)
    sys.exit(1)
PY
  done
  [[ $status -eq 0 ]] || cat "$work"/err.* >&2
  return $status
}

last=$((ranks - 1))
status=0
for mode in idle call stopped; do trial "$mode" || status=1; done
exit $status
