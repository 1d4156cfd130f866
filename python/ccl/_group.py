# SPDX-License-Identifier: BSD-3-Clause
"""cclGroupStart/End as a context manager, and keeping buffers alive until the group runs."""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

from ._errors import check, error_for
from ._lib import lib

_tls = threading.local()


def depth() -> int:
    """How many ccl.group() blocks this thread is inside."""
    return getattr(_tls, "depth", 0)


def keep_alive(*objs: Any) -> None:
    """Inside a group the calls run at the outermost cclGroupEnd: the arrays they use must
    live until then, even if the caller dropped them (e.g. an output allocated by ccl)."""
    if depth():
        _tls.keep.extend(objs)


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
        _tls.keep = []
    _tls.depth = depth() + 1
    try:
        yield
    except BaseException:
        _end()
        raise
    else:
        code = _end()
        if code != 0:
            raise error_for(code, "cclGroupEnd")


def _end() -> int:
    # ctypes releases the GIL here too: the group's calls may block for a while.
    code = lib.cclGroupEnd()
    _tls.depth -= 1
    if not _tls.depth:
        _tls.keep = []
    return code
