#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# DDP step time of a ~25 M-parameter model, 4 processes, in one run: gloo, ccl's c10d backend
# uncompressed, and ccl's DDP hook with int8 and int4 (residual error feedback), first on one
# host (loopback, shared memory), then with every rank in a network namespace of its own
# behind links limited to RATE (default 1gbit; perf/slowlink's links.sh, needs root).
#   run.sh [RATE] [ddp_bench.py flags...]      results: JSON lines on stdout, table at the end
# Env: CCL_TORCH_BENCH_CONFIGS (default "gloo cclz cclz-int8 cclz-int4"), RANKS (default 4),
# CCL_TORCH_BENCH_HOST=0 skips the one-host half, CCL_PYTHON: the python to use (default: the
# torch environment with ccl's package installed).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
rate=${1:-1gbit}
shift || true
ranks=${RANKS:-4}
configs=${CCL_TORCH_BENCH_CONFIGS:-gloo cclz cclz-int8 cclz-int4}
py=${CCL_PYTHON:-$("$root/scripts/python_install.sh")}
results=$(mktemp /tmp/ccl-ddp-bench.XXXXXX)

# run_config WHERE CONFIG: 4 ranks of ddp_bench.py; WHERE is host or links.
run_config() {
  local where=$1 config=$2 port=$((29600 + RANDOM % 1000)) pids=() i status=0
  shift 2
  for ((i = 0; i < ranks; i++)); do
    local env=(RANK=$i WORLD_SIZE=$ranks LOCAL_RANK=$i MASTER_PORT=$port OMP_NUM_THREADS=1)
    if [[ $where == host ]]; then
      env "${env[@]}" MASTER_ADDR=127.0.0.1 "$py" "$here/ddp_bench.py" --config "$config" "$@" >"$results.$i" 2>&1 &
    else
      ip netns exec "$(rank_ns "$i")" env "${env[@]}" MASTER_ADDR="$(rank_addr 0)" GLOO_SOCKET_IFNAME=$ifname \
        CCL_SOCKET_IFNAME=$ifname CCL_TRANSPORT=ucx UCX_TLS=tcp,self UCX_NET_DEVICES=$ifname \
        "$py" "$here/ddp_bench.py" --config "$config" "$@" >"$results.$i" 2>&1 &
      children+=($!)
    fi
    pids+=($!)
  done
  for ((i = 0; i < ranks; i++)); do wait "${pids[i]}" || status=$?; done
  if [[ $status != 0 ]]; then
    echo "run.sh: $config on $where failed ($status)" >&2
    tail -n 20 "$results.0" "$results.1" >&2
    return 1
  fi
  grep '^# ' "$results.0" >&2 || true
  grep '^{' "$results.0" | sed "s/^{/{\"where\": \"$where\", /" | tee -a "$results"
}

if [[ ${CCL_TORCH_BENCH_HOST:-1} != 0 ]]; then
  echo "# host: $ranks processes on one host ($(nproc) cores)"
  for c in $configs; do run_config host "$c" "$@"; done
fi

if [[ $rate != none ]]; then
  [[ $(id -u) == 0 ]] || { echo "run.sh: the slow-link half needs root (network namespaces, tc)" >&2; exit 1; }
  # shellcheck source=../slowlink/links.sh
  source "$root/perf/slowlink/links.sh"
  links_setup
  build_links >/dev/null
  limit_links "$rate"
  for c in $configs; do run_config "$rate" "$c" "$@"; done
fi
"$py" "$here/report.py" "$results"
rm -f "$results" "$results".*
