#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Open MPI launch agent (mpirun --mca plm_rsh_agent) for run.sh and launch.sh: the "host
# names" in its hostfile are network namespaces links.sh created, and "ssh host command"
# becomes "ip netns exec host sh -c command". In links.sh's two-level layout the command also
# enters the node's IPC and UTS namespaces. Either way it runs with CCL_HOST_ID=node<n>, which
# the daemon passes on to the ranks it starts. Refuses any name that is not such a namespace.
set -euo pipefail
host=${1:?usage: mpi_netns_agent.sh NAMESPACE COMMAND...}
shift
# Open MPI may pass ssh-style options before the host; none are expected here.
[[ $host =~ ^cclsl-[0-9]+-[0-9]+$ ]] || { echo "mpi_netns_agent: refusing host '$host'" >&2; exit 1; }
[[ -e /var/run/netns/$host ]] || { echo "mpi_netns_agent: no namespace $host" >&2; exit 1; }
nsdir=/run/cclsl # as links.sh
if [[ -e $nsdir/$host.ipc ]]; then
  exec ip netns exec "$host" nsenter --ipc="$nsdir/$host.ipc" --uts="$nsdir/$host.uts" \
    env CCL_HOST_ID="node${host##*-}" /bin/sh -c "$*"
fi
exec ip netns exec "$host" env CCL_HOST_ID="node${host##*-}" /bin/sh -c "$*"
