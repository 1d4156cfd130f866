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

_LIB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")
_NAME = "libccl_nccl.so"


def library_path() -> str:
    """The face's shared library in this package; raises FileNotFoundError if it has none."""
    for name in (_NAME + ".0", _NAME):
        path = os.path.join(_LIB_DIR, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"this ccl package has no NCCL face ({_NAME} not in {_LIB_DIR}): it was built "
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
