# SPDX-License-Identifier: BSD-3-Clause
"""The NCCL face shipped in this package, for programs that reach NCCL themselves.

PyTorch's ``nccl`` backend loads NVIDIA's ``libnccl.so.2`` through an RPATH, which
``LD_LIBRARY_PATH`` cannot override; preloading ccl's face puts it in front::

    LD_PRELOAD=$(python -m ccl.preload) torchrun ... train.py

``python -m ccl.preload`` prints that path (exit status 1, with the reason on stderr, when this
package was built without the face: no NVIDIA ``nccl.h`` at build time).
"""
from __future__ import annotations

import os
import sys

from ._lib import find_in_package, package_dirs

_NAME = "libccl_nccl.so"


def library_path() -> str:
    """The face's shared library in this package; raises FileNotFoundError if it has none."""
    # In every package folder, as libccl is found: an editable install keeps lib/ in the
    # installed folder, not in the source folder next to this file.
    for name in (_NAME + ".0", _NAME):
        path = find_in_package("lib", name)
        if path:
            return path
    lib_dirs = " or ".join(os.path.join(d, "lib") for d in package_dirs())
    raise FileNotFoundError(f"this ccl package has no NCCL face ({_NAME} not in {lib_dirs}): it was built "
                            "without NVIDIA's nccl.h")


def main() -> int:
    try:
        print(library_path())
    except FileNotFoundError as e:
        print(f"ccl.preload: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
