# SPDX-License-Identifier: BSD-3-Clause
"""Host streams (cclHostStreamCreate): ccl calls that enqueue and return, as NCCL's calls do
on a CUDA stream, so that Python computes while the collective runs."""
from __future__ import annotations

import ctypes
import threading
from typing import Any, List, Optional

from . import _group
from ._errors import CclInvalidUsage, Result, check, error_for
from ._lib import lib

_tls = threading.local()


class HostStream:
    """A ccl host stream. The calls a thread makes while the stream is current (inside
    ``with stream:``) check their arguments, enqueue the operation on the stream and return;
    operations run in order on a thread of the stream. Their arrays must stay untouched (not
    read for results, not written) until :meth:`synchronize` returns: the stream keeps them
    alive until then. A failure of an enqueued call is raised by the next synchronize (and
    shows in :meth:`ccl.Comm.async_error`). Calls of one ``ccl.group()`` use one stream.

    Example::

        s = ccl.HostStream()
        with s:
            comm.allreduce(grads, in_place=True)   # returns at once
        compute_something_else()
        s.synchronize()                             # grads holds the sum
    """

    def __init__(self) -> None:
        h = ctypes.c_void_p()
        check(lib.cclHostStreamCreate(ctypes.byref(h)), "cclHostStreamCreate")
        self._handle: Optional[int] = h.value
        self._keep: List[Any] = []
        self._lock = threading.Lock()

    @property
    def handle(self) -> int:
        """The cclStream_t, for passing to the C API."""
        if self._handle is None:
            raise ValueError("the host stream was destroyed")
        return self._handle

    def synchronize(self) -> None:
        """Waits until everything enqueued so far has run; raises its first failure."""
        kept = self._kept()
        code = lib.cclHostStreamSynchronize(self.handle)
        # The message first: releasing may run finalizers (a Feedback's) that call ccl.
        err = error_for(code, "cclHostStreamSynchronize") if code != 0 else None
        self._release(kept)
        if err is not None:
            raise err

    def query(self) -> bool:
        """True when everything enqueued so far has run (then the arrays are free again)."""
        kept = self._kept()
        code = lib.cclHostStreamQuery(self.handle)
        if code == 0:
            self._release(kept)
            return True
        if code == 7:  # cclInProgress
            return False
        raise error_for(code, "cclHostStreamQuery")

    def destroy(self) -> None:
        """Waits for what is enqueued, then frees the stream. Idempotent. Refused inside a
        ccl.group() that has calls on the stream (they are enqueued at its end)."""
        if self._handle is None:
            return
        if _group.holds(self):
            # cclGroupEnd would enqueue them on the freed stream; as cclCommDestroy refuses a
            # communicator with calls queued in an open group.
            raise CclInvalidUsage(Result.INVALID_USAGE, "cclHostStreamDestroy",
                                  "the open group has calls on this stream; destroy it after the group")
        h, self._handle = self._handle, None
        code = lib.cclHostStreamDestroy(h)
        self._keep = []
        if code != 0:
            raise error_for(code, "cclHostStreamDestroy")

    def _keep_alive(self, *objs: Any) -> None:
        """Called once a call has been enqueued (its caller still holds the objects)."""
        with self._lock:
            self._keep.extend(o for o in objs if o is not None)

    def _kept(self) -> int:
        with self._lock:
            return len(self._keep)

    def _release(self, count: int) -> None:
        """Drops the first `count` kept objects: those of calls enqueued before a wait that
        has seen them run. Another thread may have enqueued more meanwhile: theirs stay."""
        with self._lock:
            del self._keep[:count]

    def __enter__(self) -> "HostStream":
        stack = getattr(_tls, "stack", None)
        if stack is None:
            stack = _tls.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _tls.stack.pop()

    def __del__(self) -> None:
        try:
            self.destroy()
        except Exception:
            pass

    def __repr__(self) -> str:
        return "ccl.HostStream(%s)" % ("destroyed" if self._handle is None else hex(self._handle))


def current_stream() -> Optional[HostStream]:
    """The host stream this thread's calls go on (the innermost ``with stream:``), or None."""
    stack = getattr(_tls, "stack", None)
    return stack[-1] if stack else None
