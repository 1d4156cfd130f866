#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Makes (once) the Python virtual environment that ccl's framework tests and benchmarks use:
# PyPI's torch (the CUDA build: about 2.8 GB of wheels, 5 GB installed; it imports and runs its
# CPU paths without a GPU), NumPy, pytest, expecttest (which PyTorch's own test suite imports),
# and the build tools of ccl's Python package. A second run
# finds everything present and touches nothing. Prints the environment's python on stdout.
#   CCL_TORCH_VENV  where the environment lives (default ~/.cache/ccl/torch-venv)
#   CCL_TORCH_SPEC  the torch requirement (default torch==2.15.*)
set -euo pipefail
venv=${CCL_TORCH_VENV:-$HOME/.cache/ccl/torch-venv}
spec=${CCL_TORCH_SPEC:-torch==2.15.*}
py=$venv/bin/python

if ! dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q "install ok installed"; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
[ -x "$py" ] || /usr/bin/python3 -m venv "$venv" >&2

# One import tells whether anything is missing; pip runs only then.
if ! "$py" - "$spec" >/dev/null 2>&1 <<'PYEOF'
import sys, importlib.metadata as md
from packaging.requirements import Requirement
for req in [sys.argv[1], "numpy", "scikit-build-core>=0.10", "ninja", "packaging", "pytest", "ml_dtypes", "expecttest"]:
    r = Requirement(req)
    if not r.specifier.contains(md.version(r.name), prereleases=True):
        sys.exit(1)
PYEOF
then
  echo "torch_venv: installing $spec and the build tools into $venv (once; several minutes)" >&2
  "$py" -m pip install -q --upgrade pip >&2
  "$py" -m pip install -q "$spec" numpy "scikit-build-core>=0.10" ninja packaging pytest ml_dtypes expecttest >&2
fi
echo "$py"
