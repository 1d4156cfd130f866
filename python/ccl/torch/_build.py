# SPDX-License-Identifier: BSD-3-Clause
"""Builds (once, then from torch's extension cache) the C++ half of ccl's c10d backend.

It is compiled against the installed torch with torch's own extension tooling, so that it
matches that torch's C++ ABI whichever torch the user has, and linked against the libccl
this package ships.
"""
from __future__ import annotations

import logging
import os
import pathlib
import threading

_lock = threading.Lock()
_module = None

SOURCES = ("work.cc", "backend.cc", "module.cc")


def load(verbose: bool | None = None):
    """The extension module, compiled on first use (about a minute) and cached by torch
    (TORCH_EXTENSIONS_DIR). CCL_TORCH_VERBOSE=1 shows the compiler's output."""
    global _module
    with _lock:
        if _module is not None:
            return _module
        import ccl

        if verbose is None:
            verbose = os.environ.get("CCL_TORCH_VERBOSE", "0") not in ("", "0")
        if not verbose:
            # torch's extension tooling warns at import when no CUDA runtime is present; the
            # backend is C++ only, so that is expected here.
            logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
        from torch.utils import cpp_extension
        csrc = pathlib.Path(__file__).resolve().parent / "csrc"
        lib = pathlib.Path(ccl.library_path())
        include = pathlib.Path(ccl.get_include())
        if not (include / "ccl" / "ccl.h").exists():
            # Running from the source tree (PYTHONPATH=python, CCL_LIBRARY=...): the repository's header.
            include = pathlib.Path(ccl.__file__).resolve().parents[2] / "include"
        _module = cpp_extension.load(
            name="ccl_c10d",
            sources=[str(csrc / s) for s in SOURCES],
            extra_include_paths=[str(include)],
            extra_cflags=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            extra_ldflags=[str(lib), f"-Wl,-rpath,{lib.parent}"],
            verbose=verbose,
        )
        return _module
