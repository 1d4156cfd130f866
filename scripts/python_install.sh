#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs ccl's Python package (python/) into the torch environment of scripts/torch_venv.sh
# and prints that environment's python. The package is rebuilt only when its inputs changed
# since the last install into that environment (a hash of them is kept next to it); the build
# folder python/build/ is reused, so a rebuild compiles only what changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
py=$("$root/scripts/torch_venv.sh")
venv=$(cd "$(dirname "$py")/.." && pwd)
stamp="$venv/.ccl-python-inputs.sha256"

# CUDA kernels in the package's libccl: CCL_PYTHON_CUDA=ON or OFF, or by default ON where this
# machine has an NVIDIA device (the main build compiles them wherever nvcc exists; a package
# for a machine without a GPU would only carry them unused).
cuda=${CCL_PYTHON_CUDA:-}
if [ -z "$cuda" ]; then
  if ls /dev/nvidia[0-9]* >/dev/null 2>&1; then cuda=AUTO; else cuda=OFF; fi
fi
# CCL_PYTHON_PREBUILT=<build folder>: the package carries that build's libccl and NCCL face
# instead of compiling its own (python/CMakeLists.txt, CCL_PREBUILT_DIR).
prebuilt=${CCL_PYTHON_PREBUILT:-}
[ -z "$prebuilt" ] || prebuilt=$(cd "$prebuilt" && pwd)
# Both always defined: the build folder python/build/ keeps its CMake cache between installs.
define=(--config-settings=cmake.define.CCL_ENABLE_CUDA="$cuda"
        --config-settings=cmake.define.CCL_PREBUILT_DIR="$prebuilt")
# Everything the wheel is made of: the package, its build files, and libccl's sources (or the
# prebuilt libraries).
inputs=$( (echo "CCL_ENABLE_CUDA=$cuda CCL_PREBUILT_DIR=$prebuilt"
           [ -z "$prebuilt" ] || cat "$prebuilt"/src/api/libccl.so "$prebuilt"/src/nccl/libccl_nccl.so 2>/dev/null || true
           find python/ccl python/CMakeLists.txt python/pyproject.toml python/README.md CMakeLists.txt cmake \
                include src -type f -not -name '*.pyc' -not -path '*/__pycache__/*' | LC_ALL=C sort |
             xargs sha256sum) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$inputs" ] || ! "$py" -c "import ccl" >/dev/null 2>&1; then
  echo "python_install: installing ./python into $venv" >&2
  start=$(date +%s)
  # No build isolation: the environment already has scikit-build-core and ninja, and this
  # keeps the install working offline.
  "$py" -m pip install -q --no-build-isolation --no-deps --force-reinstall \
    "${define[@]}" ./python >&2
  echo "python_install: installed in $(( $(date +%s) - start )) s" >&2
  echo "$inputs" > "$stamp"
fi
echo "$py"
