#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs ccl's Python package into the torch environment (scripts/python_install.sh) and
# runs its tests: the bindings, the torch.distributed backend and the DDP hook.
# Arguments are passed to pytest (e.g. -k allreduce, -x).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
py=$("$root/scripts/python_install.sh")
# -P: the current folder is not put on sys.path, so `import ccl` finds the installed package,
# never a source folder (which has no libccl inside).
exec "$py" -P -m pytest -q python/tests "$@"
