# SPDX-License-Identifier: BSD-3-Clause
"""Loading libccl and declaring its C functions and structs for ctypes.

The structs mirror include/ccl/ccl.h (and compression.h, which it includes) field for
field. Every versioned struct starts with ``size, magic, version``; the bindings fill
``size`` with the layout they know, which the library accepts from older and newer
callers alike.
"""
from __future__ import annotations

import ctypes
import os
import sys
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_size_t, c_uint,
                    c_ulonglong, c_void_p)

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))

# The header version these bindings were written against (CCL_VERSION_CODE of ccl.h).
HEADER_MAJOR, HEADER_MINOR, HEADER_PATCH = 0, 3, 0
HEADER_VERSION_CODE = HEADER_MAJOR * 10000 + HEADER_MINOR * 100 + HEADER_PATCH

UNIQUE_ID_BYTES = 128
CONFIG_UNDEF_INT = -(2**31)
CONFIG_MAGIC = 0xCC1C0F19
COMPRESSION_MAGIC = 0xCC1C0DEC
STATS_MAGIC = 0xCC15A7A5

c_comm_p = c_void_p      # cclComm_t: opaque
c_feedback_p = c_void_p  # cclFeedback_t: opaque
c_result = c_int         # cclResult_t and the other enums are ints in the C ABI


class UniqueIdStruct(Structure):
    _fields_ = [("internal", c_char * UNIQUE_ID_BYTES)]


class CompressionStruct(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("magic", c_uint),
        ("version", c_uint),
        ("codec", c_int),
        ("blockSize", c_int),
        ("bits", c_int),
        ("scaleBits", c_int),
        ("keepRatio", c_double),
        ("threshold", c_float),
        ("stochasticRounding", c_int),
        ("seed", c_ulonglong),
        ("rank", c_int),
        ("rows", c_size_t),
        ("cols", c_size_t),
        ("warmStart", c_int),
    ]


class ConfigStruct(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("magic", c_uint),
        ("version", c_uint),
        ("blocking", c_int),
        ("commName", c_char_p),
        ("timeoutMs", c_int),
        ("compression", POINTER(CompressionStruct)),
        ("hostId", c_char_p),
        ("intraCompression", POINTER(CompressionStruct)),
    ]


class OpStatsStruct(Structure):
    _fields_ = [
        ("calls", c_ulonglong),
        ("compressedCalls", c_ulonglong),
        ("rawBytes", c_ulonglong),
        ("wireBytes", c_ulonglong),
        ("codecSeconds", c_double),
    ]


def package_dirs() -> list[str]:
    """The package's folders. Usually one; an editable install (pip install -e) has two: the
    source folder with the Python files, and the installed one with lib/ and include/."""
    pkg = sys.modules.get(__package__ or "ccl")
    dirs = [os.path.abspath(d) for d in getattr(pkg, "__path__", [])]
    return dirs if dirs else [_PKG_DIR]


def find_in_package(*parts: str) -> str | None:
    """The first package folder's path `parts` that exists."""
    for d in package_dirs():
        path = os.path.join(d, *parts)
        if os.path.exists(path):
            return path
    return None


def _candidates() -> list[str]:
    """Where libccl may be, in order: CCL_LIBRARY (a development override), then the copy
    installed inside this package."""
    out = []
    env = os.environ.get("CCL_LIBRARY")
    if env:
        out.append(env)
    for d in package_dirs():
        # The SONAME file first: it is what a program linked against libccl would load.
        for name in ("libccl.so.%d" % HEADER_MAJOR, "libccl.so"):
            out.append(os.path.join(d, "lib", name))
    return out


def _load() -> tuple[ctypes.CDLL, str]:
    tried = []
    for path in _candidates():
        if not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            # CDLL, not PyDLL: ctypes releases the GIL around every call into a CDLL, so a rank
            # blocked in a collective does not stop the process's other Python threads.
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("ccl: cannot load libccl; tried:\n  " + "\n  ".join(tried) +
                      "\nReinstall the package (pip install ./python from the ccl repository) or set "
                      "CCL_LIBRARY to a libccl.so.")


lib, library_path = _load()


def _names(name_fn: str, count_fn: str) -> list[str]:
    """An enum's names as the library spells them, in value order (cclCodecName and
    cclCodecCount, ...): the one table of them is the library's."""
    getattr(lib, name_fn).restype = c_char_p
    getattr(lib, name_fn).argtypes = [c_int]
    getattr(lib, count_fn).restype = c_int
    getattr(lib, count_fn).argtypes = []
    return [getattr(lib, name_fn)(i).decode() for i in range(getattr(lib, count_fn)())]


CODEC_NAMES = _names("cclCodecName", "cclCodecCount")
OP_KIND_NAMES = _names("cclOpKindName", "cclOpKindCount")
ALGORITHM_NAMES = _names("cclAlgorithmName", "cclAlgorithmCount")
NUM_OP_KINDS = len(OP_KIND_NAMES)
UNCOMPRESSED_REASON_NAMES = _names("cclUncompressedReasonName", "cclUncompressedReasonCount")


class StatsStruct(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("magic", c_uint),
        ("version", c_uint),
        ("op", OpStatsStruct * NUM_OP_KINDS),
        ("autoChosen", c_ulonglong * NUM_OP_KINDS),
        ("autoCompressed", c_ulonglong * NUM_OP_KINDS),
        ("deviceCommands", c_ulonglong),
        ("deviceHostFunctions", c_ulonglong),
        ("uncompressed", c_ulonglong * len(UNCOMPRESSED_REASON_NAMES)),
        ("acrossRawBytes", c_ulonglong),
        ("acrossWireBytes", c_ulonglong),
    ]




def _declare(name: str, restype, *argtypes) -> None:
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)


_SEND_RECV = (c_void_p, c_void_p, c_size_t, c_int)  # sendbuff, recvbuff, count, datatype

_declare("cclCodecFromName", c_result, c_char_p, POINTER(c_int))
_declare("cclOpKindFromName", c_result, c_char_p, POINTER(c_int))
_declare("cclAlgorithmFromName", c_result, c_char_p, POINTER(c_int))
_declare("cclCompressListParse", c_result, c_char_p, POINTER(c_uint))
_declare("cclCodecErrorBound", c_result, POINTER(CompressionStruct), c_double, c_double, c_int, POINTER(c_double))
_declare("cclGetVersion", c_result, POINTER(c_int))
_declare("cclGetErrorString", c_char_p, c_int)
_declare("cclGetLastError", c_char_p, c_comm_p)
_declare("cclGetUniqueId", c_result, POINTER(UniqueIdStruct))
_declare("cclCommInitRank", c_result, POINTER(c_comm_p), c_int, UniqueIdStruct, c_int)
_declare("cclCommInitRankConfig", c_result, POINTER(c_comm_p), c_int, UniqueIdStruct, c_int, POINTER(ConfigStruct))
_declare("cclCommInitAll", c_result, POINTER(c_comm_p), c_int, POINTER(c_int))
_declare("cclCommSplit", c_result, c_comm_p, c_int, c_int, POINTER(c_comm_p), POINTER(ConfigStruct))
_declare("cclCommFinalize", c_result, c_comm_p)
_declare("cclCommDestroy", c_result, c_comm_p)
_declare("cclCommAbort", c_result, c_comm_p)
_declare("cclCommRevoke", c_result, c_comm_p, c_int)
_declare("cclCommShrink", c_result, c_comm_p, POINTER(c_int), c_int, POINTER(c_comm_p), POINTER(ConfigStruct), c_int)
_declare("cclCommGetAsyncError", c_result, c_comm_p, POINTER(c_int))
_declare("cclCommCount", c_result, c_comm_p, POINTER(c_int))
_declare("cclCommUserRank", c_result, c_comm_p, POINTER(c_int))
_declare("cclCommCuDevice", c_result, c_comm_p, POINTER(c_int))
_declare("cclCommTopology", c_result, c_comm_p, POINTER(c_int), POINTER(c_int), POINTER(c_int), POINTER(c_int))
_declare("cclHostStreamCreate", c_result, POINTER(c_void_p))
_declare("cclHostStreamDestroy", c_result, c_void_p)
_declare("cclHostStreamSynchronize", c_result, c_void_p)
_declare("cclHostStreamQuery", c_result, c_void_p)
_declare("cclAllReduce", c_result, *_SEND_RECV, c_int, c_comm_p, c_void_p)
_declare("cclBroadcast", c_result, *_SEND_RECV, c_int, c_comm_p, c_void_p)
_declare("cclReduce", c_result, *_SEND_RECV, c_int, c_int, c_comm_p, c_void_p)
_declare("cclAllGather", c_result, *_SEND_RECV, c_comm_p, c_void_p)
_declare("cclReduceScatter", c_result, *_SEND_RECV, c_int, c_comm_p, c_void_p)
_declare("cclAlltoAll", c_result, *_SEND_RECV, c_comm_p, c_void_p)
_declare("cclGather", c_result, *_SEND_RECV, c_int, c_comm_p, c_void_p)
_declare("cclScatter", c_result, *_SEND_RECV, c_int, c_comm_p, c_void_p)
_declare("cclSend", c_result, c_void_p, c_size_t, c_int, c_int, c_comm_p, c_void_p)
_declare("cclRecv", c_result, c_void_p, c_size_t, c_int, c_int, c_comm_p, c_void_p)
_declare("cclFeedbackCreate", c_result, POINTER(c_feedback_p), c_int, c_float, c_int)
_declare("cclFeedbackDestroy", c_result, c_feedback_p)
_declare("cclFeedbackErrorNorm", c_result, c_feedback_p, POINTER(c_double))
_declare("cclCommSetCompression", c_result, c_comm_p, POINTER(CompressionStruct))
_EX = (POINTER(CompressionStruct), c_feedback_p)
_declare("cclAllReduceEx", c_result, *_SEND_RECV, c_int, c_comm_p, c_void_p, *_EX)
_declare("cclReduceScatterEx", c_result, *_SEND_RECV, c_int, c_comm_p, c_void_p, *_EX)
_declare("cclAllGatherEx", c_result, *_SEND_RECV, c_comm_p, c_void_p, *_EX)
_declare("cclAlltoAllEx", c_result, *_SEND_RECV, c_comm_p, c_void_p, POINTER(CompressionStruct))
_declare("cclBroadcastEx", c_result, *_SEND_RECV, c_int, c_comm_p, c_void_p, POINTER(CompressionStruct))
_declare("cclSendEx", c_result, c_void_p, c_size_t, c_int, c_int, c_comm_p, c_void_p, *_EX)
_declare("cclRecvEx", c_result, c_void_p, c_size_t, c_int, c_int, c_comm_p, c_void_p, POINTER(CompressionStruct))
_declare("cclCommGetStats", c_result, c_comm_p, POINTER(StatsStruct))
_declare("cclGroupStart", c_result)
_declare("cclGroupEnd", c_result)


def library_version_code() -> int:
    v = c_int()
    if lib.cclGetVersion(ctypes.byref(v)) != 0:
        raise ImportError("ccl: cclGetVersion failed in " + library_path)
    return v.value


LIBRARY_VERSION_CODE = library_version_code()
if LIBRARY_VERSION_CODE // 100 != HEADER_VERSION_CODE // 100:
    # Struct layouts may differ between minor versions before 1.0; refuse rather than guess.
    raise ImportError("ccl: %s is version %d, these bindings are for %d.%d.x" %
                      (library_path, LIBRARY_VERSION_CODE, HEADER_MAJOR, HEADER_MINOR))
