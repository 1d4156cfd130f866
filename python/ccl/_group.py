# SPDX-License-Identifier: BSD-3-Clause
"""cclGroupStart/End as a context manager, and keeping buffers alive until the group runs."""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Optional

from ._errors import check, error_for
from ._lib import lib

_tls = threading.local()


def depth() -> int:
    """How many ccl.group() blocks this thread is inside."""
    return getattr(_tls, "depth", 0)


def keep_alive(*objs: Any, stream: Optional[Any] = None) -> None:
    """Inside a group the calls run at the outermost cclGroupEnd: the arrays they use must
    live until then, even if the caller dropped them (e.g. an output allocated by ccl), and so
    must the communicator, whose cclCommDestroy is refused while the group holds calls of it.
    A call on a host stream (`stream`) is enqueued there only at that cclGroupEnd: the stream
    takes its objects then, not before, since a wait on the stream meanwhile (from any thread)
    drops what the stream kept and has not seen these calls."""
    if depth():
        _tls.keep.extend(objs)
        if stream is not None:
            _tls.handoff.append((stream, objs))


def holds(stream: Any) -> bool:
    """True when this thread's open group has calls to enqueue on `stream` at its end."""
    return bool(depth()) and any(s is stream for s, _ in _tls.handoff)


@contextlib.contextmanager
def group() -> Iterator[None]:
    """Runs the ccl calls of the block together (cclGroupStart ... cclGroupEnd).

    Calls inside are checked when made and run when the outermost block exits, so arrays
    returned inside the block hold their results only after it. Sends and receives that
    depend on each other (e.g. an exchange between two ranks) must be in one group. Groups
    nest; one thread may drive several communicators in one group. If the block raises, the
    group is still closed (its queued calls run or fail) and the block's exception propagates.
    """
    check(lib.cclGroupStart(), "cclGroupStart")
    if not depth():
        _tls.keep, _tls.handoff = [], []
    _tls.depth = depth() + 1
    try:
        yield
    except BaseException:
        _end()
        raise
    else:
        err = _end()
        if err is not None:
            raise err


def _end() -> Optional[BaseException]:
    """cclGroupEnd; the error it returned, if any."""
    # ctypes releases the GIL here too: the group's calls may block for a while.
    code = lib.cclGroupEnd()
    # Read the message now: dropping the kept objects below may run finalizers that call ccl.
    err = error_for(code, "cclGroupEnd") if code != 0 else None
    _tls.depth -= 1
    if not _tls.depth:
        # The calls on host streams are enqueued now (a failed group enqueued none, and the
        # stream then only keeps the objects until its next wait).
        for stream, objs in _tls.handoff:
            stream._keep_alive(*objs)
        _tls.keep, _tls.handoff = [], []
    return err
