# SPDX-License-Identifier: BSD-3-Clause
"""Groups, communicator splitting, counters, and the GIL being released during calls."""
import threading
import time

import numpy as np
import pytest

import ccl


def _group(comm):
    n, r = comm.size, comm.rank
    a = np.full(5, r + 1, np.float32)
    with ccl.group():
        s = comm.allreduce(a)  # the result is written at the end of the group
        g = comm.allgather(np.array([r], np.int64))
        with ccl.group():  # nested: runs with the outer group
            b = comm.broadcast(np.full(3, r, np.int32), 0)
    np.testing.assert_array_equal(s, np.full(5, n * (n + 1) / 2, np.float32))
    np.testing.assert_array_equal(g, np.arange(n).reshape(n, 1))
    np.testing.assert_array_equal(b, np.zeros(3, np.int32))
    # An output ccl allocated inside a group and dropped by the caller stays alive until the
    # group has run (the call wrote into it at cclGroupEnd).
    with ccl.group():
        comm.allreduce(np.ones(1 << 16, np.float32))
    # All-to-all by hand: every rank sends to and receives from every other in one group.
    outs = [np.zeros(4, np.int32) for _ in range(n)]
    with ccl.group():
        for p in range(n):
            comm.send(np.full(4, 10 * r + p, np.int32), p)
            comm.recv(outs[p], p)
    for p in range(n):
        np.testing.assert_array_equal(outs[p], np.full(4, 10 * p + r, np.int32))
    # A body that raises still closes the group; the exception propagates.
    with pytest.raises(ZeroDivisionError):
        with ccl.group():
            comm.allreduce(np.ones(2, np.float32))
            1 / 0
    # A call refused inside the group: its error is raised where it is made.
    with pytest.raises(ValueError):
        with ccl.group():
            comm.allreduce(np.ones(2, np.float32), np.ones(3, np.float32))
    np.testing.assert_array_equal(comm.allreduce(np.ones(2, np.float32)), [n, n])


def test_groups(ranks):
    ranks.run(_group)


def _split(comm):
    n, r = comm.size, comm.rank
    # Two halves by parity, ordered backwards by key.
    sub = comm.split(r % 2, key=-r)
    members = [i for i in range(n) if i % 2 == r % 2]
    assert sub.size == len(members)
    assert sub.rank == sorted(members, reverse=True).index(r)
    got = sub.allgather(np.array([r], np.int32)).reshape(-1)
    np.testing.assert_array_equal(got, sorted(members, reverse=True))
    sub.destroy()
    # Rank 0 stays out.
    sub = comm.split(None if r == 0 else 1)
    if r == 0:
        assert sub is None
    else:
        assert sub.size == n - 1 and sub.rank == r - 1
        with sub:
            np.testing.assert_array_equal(sub.allreduce(np.ones(2, np.int64)), [n - 1, n - 1])
    with pytest.raises(ValueError, match="color"):
        comm.split(-5)


def test_split(ranks):
    ranks.run(_split, own_comm=True)


def _stats(comm):
    n = comm.size
    before = comm.stats()
    comm.allreduce(np.ones(1000, np.float32))
    comm.gather(np.ones(10, np.int8), 0)
    s = comm.stats()
    assert s.allreduce.calls == before.allreduce.calls + 1
    assert s["gather"].calls == before["gather"].calls + 1
    assert s.allreduce.raw_bytes > before.allreduce.raw_bytes
    assert s.allreduce.wire_bytes - before.allreduce.wire_bytes == s.allreduce.raw_bytes - before.allreduce.raw_bytes
    assert s.total.calls == sum(v.calls for v in s.values())
    assert set(s) == {k.name.lower() for k in ccl.OpKind} and len(s.as_dict()) == 10
    assert s.allreduce.compression_ratio == pytest.approx(1.0) and n >= 2
    # No default codec: nothing counted as left uncompressed; one node: nothing across nodes.
    assert s.uncompressed == {} and s.across_raw_bytes == 0 and s.across_wire_bytes == 0


def test_stats(ranks2):
    ranks2.run(_stats)


def _gil_released(comm):
    """Rank 0 blocks in recv for about a second while its second thread counts in Python.
    If the call held the GIL the counter would not move until it returned."""
    if comm.rank == 1:
        time.sleep(1.0)
        comm.send(np.arange(4, dtype=np.float32), 0)
        return None
    ticks = []
    stop = threading.Event()
    blocked = threading.Event()

    def count():
        blocked.wait(5)
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    out = np.zeros(4, np.float32)
    blocked.set()
    start = time.monotonic()
    comm.recv(out, 1)
    end = time.monotonic()
    stop.set()
    t.join(5)
    np.testing.assert_array_equal(out, np.arange(4, dtype=np.float32))
    during = [x for x in ticks if start < x < end]
    assert end - start > 0.5, "recv did not block; the test proves nothing"
    assert len(during) > 50, "only %d ticks while recv blocked for %.2f s: the GIL was held" % (
        len(during), end - start)
    return len(during)


def test_gil_released_while_blocked(ranks2):
    ranks2.run(_gil_released, own_comm=True)


def test_ranks_as_threads_of_one_process():
    """Both ranks of one communicator driven by two Python threads: each call blocks until the
    other thread's call arrives, which only happens if the first released the GIL."""
    comms = ccl.Comm.init_all(2)
    results, errors = [None, None], []

    def rank(i):
        try:
            x = np.full(1 << 15, i + 1, np.float32)
            for _ in range(20):
                results[i] = comms[i].allreduce(x)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "ranks as threads deadlocked (GIL held during a call?)"
    assert not errors, errors
    for i in range(2):
        np.testing.assert_array_equal(results[i], np.full(1 << 15, 3, np.float32))
        comms[i].destroy()


def test_one_thread_drives_all_ranks_in_a_group():
    comms = ccl.Comm.init_all(3)
    xs = [np.full(6, i, np.int32) for i in range(3)]
    with ccl.group():
        outs = [c.allreduce(x) for c, x in zip(comms, xs)]
    for o in outs:
        np.testing.assert_array_equal(o, np.full(6, 3, np.int32))
    for c in comms:
        c.destroy()
