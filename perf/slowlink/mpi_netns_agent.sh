#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Open MPI launch agent (mpirun --mca plm_rsh_agent) for run.sh: the "host names" in its
# hostfile are network namespaces the script created, and "ssh host command" becomes
# "ip netns exec host sh -c command". Refuses any name that is not such a namespace.
set -euo pipefail
host=${1:?usage: mpi_netns_agent.sh NAMESPACE COMMAND...}
shift
# Open MPI may pass ssh-style options before the host; none are expected here.
[[ $host =~ ^cclsl-[0-9]+-[0-9]+$ ]] || { echo "mpi_netns_agent: refusing host '$host'" >&2; exit 1; }
[[ -e /var/run/netns/$host ]] || { echo "mpi_netns_agent: no namespace $host" >&2; exit 1; }
exec ip netns exec "$host" /bin/sh -c "$*"
