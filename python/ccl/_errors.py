# SPDX-License-Identifier: BSD-3-Clause
"""Exceptions: every failing ccl call raises a CclError subclass chosen by its result code."""
from __future__ import annotations

import enum
from typing import Dict, Type, Union

from ._lib import lib


class Result(enum.IntEnum):
    """cclResult_t (the same values as ncclResult_t)."""
    SUCCESS = 0
    UNHANDLED_CUDA_ERROR = 1
    SYSTEM_ERROR = 2
    INTERNAL_ERROR = 3
    INVALID_ARGUMENT = 4
    INVALID_USAGE = 5
    REMOTE_ERROR = 6
    IN_PROGRESS = 7


class CclError(RuntimeError):
    """A ccl call failed.

    Attributes:
        code: the :class:`Result` the C function returned.
        function: the C function's name (``"cclAllReduce"``).
        message: what ``cclGetLastError`` recorded about the failure (may be empty).
    """

    code: Union[Result, int] = Result.INTERNAL_ERROR

    def __init__(self, code: int, function: str, message: str = ""):
        try:
            self.code = Result(code)
        except ValueError:
            self.code = code  # a code newer than these bindings: keep the number
        self.function = function
        self.message = message
        name = lib.cclGetErrorString(int(code)).decode(errors="replace")
        text = "%s failed: %s (%s)" % (function, name, getattr(self.code, "name", code))
        if message:
            text += ": " + message
        super().__init__(text)

    def __reduce__(self):
        # The default rebuilds an exception from self.args, the one formatted text, which this
        # __init__ does not take: without this an error raised in a worker process could not be
        # unpickled by its parent (multiprocessing, concurrent.futures), nor copied.
        return (type(self), (int(self.code), self.function, self.message))


class CclUnhandledCudaError(CclError):
    """A CUDA call failed inside ccl."""


class CclSystemError(CclError):
    """A system call or the network failed, or a wait passed its deadline (CCL_TIMEOUT)."""


class CclInternalError(CclError):
    """An internal check of ccl failed."""


class CclInvalidArgument(CclError, ValueError):
    """An argument was refused (bad count, dtype, root, codec parameter...)."""


class CclInvalidUsage(CclError):
    """A call was made in a state that does not allow it (a destroyed or aborted communicator,
    ranks that disagree on a call, ...)."""


class CclRemoteError(CclError):
    """A peer failed or went away."""


class CclInProgress(CclError):
    """A non-blocking operation has not completed yet."""


_BY_CODE: Dict[int, Type[CclError]] = {
    Result.UNHANDLED_CUDA_ERROR: CclUnhandledCudaError,
    Result.SYSTEM_ERROR: CclSystemError,
    Result.INTERNAL_ERROR: CclInternalError,
    Result.INVALID_ARGUMENT: CclInvalidArgument,
    Result.INVALID_USAGE: CclInvalidUsage,
    Result.REMOTE_ERROR: CclRemoteError,
    Result.IN_PROGRESS: CclInProgress,
}


def last_error() -> str:
    """The message of this thread's last failing ccl call ('' if none)."""
    return lib.cclGetLastError(None).decode(errors="replace")


def error_for(code: int, function: str) -> CclError:
    """The exception for result `code` of `function`, with this thread's last error message.
    Must be called on the thread that made the call (the message is per thread)."""
    return _BY_CODE.get(code, CclError)(code, function, last_error())


def check(code: int, function: str) -> None:
    """Raises the matching CclError unless `code` is cclSuccess."""
    if code != 0:
        raise error_for(code, function)
