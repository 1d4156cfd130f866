#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs a command (an MPI job of an NCCL program with CCL_DEBUG=INFO) and fails unless it
# succeeds and every rank's destroy-time summary shows compressed allreduce calls with fewer
# bytes on the wire than raw:
#   ... [ccl INFO] NCCL face: stats allreduce rank=R nranks=N calls=C compressed=K raw=B wire=W ratio=... codec_s=...
# usage: check_stats_summary.sh RANKS COMMAND...
set -u
ranks=${1:?usage: check_stats_summary.sh RANKS COMMAND...}
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" >"$log" 2>&1
rc=$?
# The program's own lines and the summary; the per-init INFO chatter is left out.
grep -v '\[ccl INFO\]' "$log"
grep 'NCCL face: stats ' "$log"
if [ $rc -ne 0 ]; then
  echo "FAILED: the job exited with $rc; its full output:"
  cat "$log"
  exit 1
fi
awk -v ranks="$ranks" '
  /NCCL face: stats allreduce / {
    for (i = 1; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] }
    ++lines
    if (v["compressed"] + 0 <= 0) { print "FAILED: rank " v["rank"] ": no compressed allreduce call"; bad = 1 }
    if (!(v["wire"] + 0 < v["raw"] + 0)) { print "FAILED: rank " v["rank"] ": allreduce wire " v["wire"] " >= raw " v["raw"]; bad = 1 }
  }
  END {
    if (lines != ranks) { print "FAILED: " lines + 0 " allreduce summary lines, expected " ranks; bad = 1 }
    if (!bad) print "stats summary: every rank sent compressed allreduce data, wire < raw"
    exit bad
  }' "$log"
