# SPDX-License-Identifier: BSD-3-Clause
"""Host streams from Python: calls made inside ``with stream:`` enqueue and return; results
are there after synchronize; failures of enqueued calls are raised by it."""
import gc
import time

import numpy as np
import pytest

import ccl


def _ordered_and_complete(comm):
    n, r = comm.size, comm.rank
    s = ccl.HostStream()
    x = np.full(1 << 16, r + 1, np.float32)
    with s:
        assert ccl.current_stream() is s
        comm.allreduce(x, in_place=True)  # sum 1..n
        comm.allreduce(x, in_place=True)  # then n times that: in order on the stream
        g = comm.allgather(np.array([r], np.int64))  # an output ccl allocated
        comm.broadcast(np.full(3, r, np.int32) if r == 0 else np.zeros(3, np.int32), 0)
    assert ccl.current_stream() is None
    s.synchronize()
    assert s.query()
    np.testing.assert_array_equal(x, np.full(1 << 16, n * n * (n + 1) / 2, np.float32))
    np.testing.assert_array_equal(g, np.arange(n).reshape(n, 1))
    # A stream is a per-thread setting: outside the block calls block again.
    np.testing.assert_array_equal(comm.allreduce(np.ones(2, np.float32)), [n, n])
    s.destroy()
    s.destroy()  # idempotent
    with pytest.raises(ValueError):
        s.synchronize()


def test_ordered_and_complete(ranks):
    ranks.run(_ordered_and_complete)


def _returns_before_running(comm):
    # Rank 1 comes late: rank 0's call must return at once all the same, and its result
    # arrives only after rank 1 joined.
    s = ccl.HostStream()
    x = np.full(1 << 20, 1.0, np.float32)
    if comm.rank == 1:
        time.sleep(0.5)
    t0 = time.monotonic()
    with s:
        comm.allreduce(x, in_place=True)
    enqueued = time.monotonic() - t0
    done_at_once = s.query()
    s.synchronize()
    np.testing.assert_array_equal(x[:4], [comm.size] * 4)
    s.destroy()
    return enqueued, done_at_once


def test_returns_before_running(ranks2):
    (e0, done0), _ = ranks2.run(_returns_before_running)
    assert e0 < 0.3, "rank 0 waited %.3f s in an enqueueing call" % e0
    assert not done0, "rank 0's allreduce could not have completed before rank 1 joined"


def _failure_is_raised_by_synchronize(comm):
    s = ccl.HostStream()
    # The ranks disagree on the count: arguments are fine locally, the call fails as it runs.
    x = np.ones(100 if comm.rank == 0 else 200, np.float32)
    with s:
        comm.allreduce(x, in_place=True)
    with pytest.raises(ccl.CclError) as e:
        s.synchronize()
    # Dropping the stream and the arrays does not crash what already ran.
    del s, x
    gc.collect()
    return type(e.value).__name__


def test_failure_is_raised_by_synchronize(ranks2):
    names = ranks2.run(_failure_is_raised_by_synchronize, own_comm=True)
    assert all(n in ("CclInvalidUsage", "CclRemoteError") for n in names), names


def _a_wait_keeps_what_was_enqueued_after_it_began(comm):
    # synchronize() and query() release only the arrays of calls enqueued before they asked
    # the stream: a call another thread enqueues meanwhile keeps its arrays until it has run.
    # The interleaving is made by hand: what a wait that began after the first call releases.
    s = ccl.HostStream()
    x = np.full(16, comm.rank + 1, np.float32)
    with s:
        comm.allreduce(x, in_place=True)
    seen = s._kept()
    y = np.full(1 << 16, comm.rank + 1, np.float32)
    with s:
        comm.allreduce(y, in_place=True)  # "another thread", after the wait began
    held = s._kept() - seen
    s._release(seen)
    assert held > 0 and s._kept() == held, (seen, held, s._kept())
    s.synchronize()
    assert s._kept() == 0
    np.testing.assert_array_equal(y[:2], [comm.size * (comm.size + 1) / 2] * 2)
    s.destroy()


def test_a_wait_keeps_what_was_enqueued_after_it_began(ranks2):
    ranks2.run(_a_wait_keeps_what_was_enqueued_after_it_began)
