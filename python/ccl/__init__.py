# SPDX-License-Identifier: BSD-3-Clause
"""ccl: collective communication with built-in compression — Python bindings.

A thin layer over ccl's C ABI (ctypes; no compiled glue): communicators, collectives on
NumPy arrays and PyTorch CPU tensors, compression and error feedback, groups, counters.

    import ccl, numpy as np
    comm = ccl.init_from_env()                 # torchrun-style RANK / WORLD_SIZE / MASTER_*
    y = comm.allreduce(np.ones(4, np.float32), op="sum")
    y = comm.allreduce(grad, compression=ccl.Compression("int8", block=32))
"""
from __future__ import annotations

import os as _os

from ._buffers import Buffer
from ._comm import SPLIT_NOCOLOR, Comm, Config, OpStats, Stats, UniqueId, get_unique_id
from ._compression import Compression, Feedback, codec_error_bound, codec_from_name, codec_name, codec_names
from ._errors import (CclError, CclInProgress, CclInternalError, CclInvalidArgument, CclInvalidUsage, CclRemoteError,
                      CclSystemError, CclUnhandledCudaError, Result, last_error)
from ._group import group
from ._stream import HostStream, current_stream
from ._launch import init_from_env
from ._lib import LIBRARY_VERSION_CODE as _CODE
from ._lib import find_in_package as _find_in_package
from ._lib import library_path as _library_path
from ._lib import package_dirs as _package_dirs
from ._types import Codec, DataType, FeedbackKind, Op, OpKind

__version__ = "%d.%d.%d" % (_CODE // 10000, _CODE // 100 % 100, _CODE % 100)
version_code = _CODE
"""CCL_VERSION_CODE of the loaded libccl (MAJOR*10000 + MINOR*100 + PATCH)."""

def get_include() -> str:
    """The folder holding ccl/ccl.h, for compiling against libccl (e.g. a torch extension)."""
    found = _find_in_package("include", "ccl", "ccl.h")
    return _os.path.dirname(_os.path.dirname(found)) if found else _os.path.join(_package_dirs()[0], "include")


def get_library_dir() -> str:
    """The folder holding the package's libccl.so, for -L and an RPATH."""
    found = _find_in_package("lib")
    return found if found else _os.path.join(_package_dirs()[0], "lib")


def library_path() -> str:
    """The path of the libccl these bindings loaded."""
    return _library_path


__all__ = [
    "Buffer", "CclError", "CclInProgress", "CclInternalError", "CclInvalidArgument", "CclInvalidUsage",
    "CclRemoteError", "CclSystemError", "CclUnhandledCudaError", "Codec", "Comm", "Compression", "Config",
    "DataType", "Feedback", "FeedbackKind", "HostStream", "Op", "OpKind", "OpStats", "Result", "SPLIT_NOCOLOR", "Stats",
    "UniqueId", "codec_error_bound", "codec_from_name", "codec_name", "codec_names", "get_include",
    "current_stream", "get_library_dir", "get_unique_id", "group", "init_from_env", "last_error", "library_path", "version_code",
]
