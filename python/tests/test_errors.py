# SPDX-License-Identifier: BSD-3-Clause
"""Bad input raises a clear Python exception (never a crash or a hang); failures of the C
library raise CclError subclasses carrying the result code and cclGetLastError's text."""
import threading
import time

import numpy as np
import pytest

import ccl
from conftest import pool


class FakeCudaArray:
    """Something that offers its memory through DLPack on a CUDA device (no GPU needed)."""

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **kwargs):
        raise AssertionError("ccl must not import a CUDA buffer")


def _bad_arguments(comm):
    n, r = comm.size, comm.rank
    x = np.ones(8, np.float32)
    with pytest.raises(TypeError, match="out has dtype float64 but x has dtype float32"):
        comm.allreduce(x, np.zeros(8, np.float64))
    with pytest.raises(ValueError, match="out has 7 elements, but x has 8"):
        comm.allreduce(x, np.zeros(7, np.float32))
    with pytest.raises(ValueError, match="must hold size \\* x.size = %d" % (8 * n)):
        comm.allgather(x, np.zeros(8 * n + 1, np.float32))
    with pytest.raises(ValueError, match="not C-contiguous.*ascontiguousarray"):
        comm.allreduce(np.ones((4, 4), np.float32)[:, 1])
    with pytest.raises(ValueError, match="not C-contiguous"):
        comm.allreduce(x, np.zeros(16, np.float32)[::2])
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        comm.allreduce(x, ro)
    with pytest.raises(ValueError, match="x is read-only"):
        comm.allreduce(ro, in_place=True)
    comm.allreduce(ro)  # a read-only input is fine
    with pytest.raises(ValueError, match="read-only"):
        comm.recv(bytes(8), (r + 1) % n)
    with pytest.raises(ValueError, match="NCCL face"):
        comm.allreduce(FakeCudaArray())
    with pytest.raises(TypeError, match="dtype bool, which ccl does not carry"):
        comm.allreduce(np.zeros(4, bool))
    with pytest.raises(TypeError, match="dtype int16"):
        comm.allreduce(np.zeros(4, np.int16))
    with pytest.raises(TypeError, match="non-native byte order"):
        comm.allreduce(np.zeros(4, ">f4"))
    with pytest.raises(TypeError, match="NumPy array, a PyTorch CPU tensor.*got list"):
        comm.allreduce([1.0, 2.0])
    with pytest.raises(TypeError, match="x is None"):
        comm.allreduce(None)
    with pytest.raises(ValueError, match="unknown reduction op 'mean'"):
        comm.allreduce(x, op="mean")
    with pytest.raises(ValueError, match="root 9 is outside"):
        comm.broadcast(x, 9)
    with pytest.raises(ValueError, match="peer -1 is outside"):
        comm.send(x, -1)
    with pytest.raises(ValueError, match="do not split into %d equal blocks" % n):
        comm.reduce_scatter(np.ones(n * 3 + 1, np.float32))
    with pytest.raises(ValueError, match="overlap"):
        buf = np.zeros(16, np.float32)
        comm.allreduce(buf[:8], buf[4:12])
    with pytest.raises(ValueError, match="in_place=True writes into x"):
        comm.allreduce(x, np.zeros(8, np.float32), in_place=True)
    with pytest.raises(TypeError, match="compression must be"):
        comm.allreduce(x, compression=42)
    with pytest.raises(TypeError, match="feedback must be"):
        comm.allreduce(x, feedback="residual")
    with pytest.raises(TypeError, match="x is None"):
        comm.scatter(None, 0)
    # After all of that the communicator still works.
    np.testing.assert_array_equal(comm.allreduce(x), np.full(8, n, np.float32))


def test_bad_arguments_raise_before_any_call(ranks):
    ranks.run(_bad_arguments)


def _destroyed(comm):
    x = np.ones(4, np.float32)
    comm.allreduce(x)
    comm.destroy()
    comm.destroy()  # twice is harmless
    assert comm.closed
    with pytest.raises(ccl.CclInvalidUsage, match="destroyed") as e:
        comm.allreduce(x)
    assert e.value.code == ccl.Result.INVALID_USAGE
    with pytest.raises(ccl.CclInvalidUsage):
        comm.stats()
    with pytest.raises(ccl.CclInvalidUsage):
        comm.split(0)


def test_destroyed_communicator(ranks2):
    ranks2.run(_destroyed, own_comm=True)


def _finalized(comm):
    comm.allreduce(np.ones(4, np.float32))
    comm.finalize()
    with pytest.raises(ccl.CclInvalidUsage) as e:
        comm.allreduce(np.ones(4, np.float32))
    assert "cclAllReduce" in str(e.value) and e.value.message


def test_finalized_communicator(ranks2):
    ranks2.run(_finalized, own_comm=True)


def _mismatch(comm):
    """Ranks that disagree on a compressed call's codec: every rank fails, none hangs."""
    block = 32 if comm.rank == 0 else 64
    x = np.ones(32768, np.float32)
    t = time.monotonic()
    with pytest.raises(ccl.CclError) as e:
        comm.allreduce(x, compression=ccl.Compression("int8", block=block))
    assert time.monotonic() - t < 15
    return int(e.value.code), e.value.message


def test_ranks_disagreeing_fail_everywhere(ranks2):
    for code, message in ranks2.run(_mismatch, own_comm=True):
        assert code in (ccl.Result.INVALID_USAGE, ccl.Result.REMOTE_ERROR), (code, message)
        assert message


def _abort_from_another_thread(comm):
    """A rank blocked in recv (its peer never sends) is released by abort() from another thread."""
    if comm.rank == 1:
        time.sleep(2.0)  # rank 0 aborts meanwhile; then this rank's next call fails
        with pytest.raises(ccl.CclError) as e:
            comm.allreduce(np.ones(4, np.float32))
        return int(e.value.code)
    caught = []

    def blocked():
        try:
            comm.recv(np.zeros(4, np.float32), 1)
        except ccl.CclError as e:
            caught.append(e)

    t = threading.Thread(target=blocked)
    t.start()
    time.sleep(0.3)
    start = time.monotonic()
    comm.abort()
    t.join(10)
    assert not t.is_alive(), "recv still blocked 10 s after abort()"
    assert caught and time.monotonic() - start < 5, caught
    assert comm.closed
    with pytest.raises(ccl.CclInvalidUsage):
        comm.allreduce(np.ones(4, np.float32))
    return int(caught[0].code)


def test_abort_releases_a_blocked_call(ranks2):
    codes = ranks2.run(_abort_from_another_thread, own_comm=True)
    assert codes[0] in (ccl.Result.INVALID_USAGE, ccl.Result.REMOTE_ERROR)
    assert codes[1] in (ccl.Result.REMOTE_ERROR, ccl.Result.SYSTEM_ERROR, ccl.Result.INVALID_USAGE)


def _revoke_brings_out_a_peer(comm):
    """Rank 1 waits in a receive rank 0 never sends; rank 0 revokes: rank 1 comes out, later
    calls fail on both, and the handles stay until destroy."""
    if comm.rank == 1:
        start = time.monotonic()
        with pytest.raises(ccl.CclError) as e:
            comm.recv(np.zeros(4, np.float32), 0)
        assert time.monotonic() - start < 5, "the receive waited for the timeout, not the revoke"
        code = int(e.value.code)
    else:
        time.sleep(0.3)
        comm.revoke()
        comm.revoke()  # a no-op the second time
        code = int(ccl.Result.SUCCESS)
    with pytest.raises(ccl.CclError):
        comm.allreduce(np.ones(4, np.float32))
    assert not comm.closed
    return code


def test_revoke_brings_out_a_blocked_peer(ranks2):
    codes = ranks2.run(_revoke_brings_out_a_peer, own_comm=True)
    assert codes[0] == ccl.Result.SUCCESS
    assert codes[1] == ccl.Result.REMOTE_ERROR


def test_local_errors():
    with pytest.raises(ValueError, match="128 bytes, got 5"):
        ccl.UniqueId(b"short")
    with pytest.raises(ValueError, match="rank 2 is outside"):
        ccl.Comm(2, ccl.get_unique_id(), 2)
    with pytest.raises(ValueError, match="unknown feedback kind"):
        ccl.Feedback("momentum")
    with pytest.raises(ccl.CclInvalidArgument, match="cclFeedbackCreate") as e:
        ccl.Feedback("loco", beta=1.5)
    assert e.value.code == ccl.Result.INVALID_ARGUMENT and isinstance(e.value, ValueError)
    assert ccl.last_error()  # the library's own message, per thread
    with pytest.raises(TypeError, match="config must be"):
        ccl.Comm(1, ccl.get_unique_id(), 0, config=3)


def test_single_rank_comm_and_unique_id_round_trip():
    uid = ccl.get_unique_id()
    assert ccl.UniqueId(bytes(uid)) == uid and ccl.UniqueId.fromhex(uid.hex()) == uid
    with ccl.Comm(1, bytes(uid), 0) as c:
        assert (c.rank, c.size) == (0, 1)
        np.testing.assert_array_equal(c.allreduce(np.arange(3, dtype=np.int64)), [0, 1, 2])
        assert c.async_error() == ccl.Result.SUCCESS
    assert c.closed


def _shrink_without_a_lost_rank(comm):
    """Rank 1 is lost (its communicator aborted: its listener closes as a dead process's
    would); ranks 0 and 2 shrink without it and go on, numbered in their old order, with
    every bucket's Feedback handle as it was."""
    if comm.rank == 1:
        comm.abort()
        return None
    with pytest.raises(ccl.CclError):
        comm.shrink([comm.rank])  # only the ranks that go on call it
    fb = ccl.Feedback("residual")
    x = np.linspace(-1, 1, 1 << 16, dtype=np.float32) * (comm.rank + 1)
    new = comm.shrink([1], abort=True)
    with pytest.raises(ccl.CclInvalidUsage):
        comm.allreduce(np.ones(4, np.float32))  # abort=True revoked the parent here
    total = new.allreduce(np.array([comm.rank + 1], np.int64))
    y = new.allreduce(x, compression="int8", feedback=fb)
    result = (new.rank, new.size, int(total[0]), fb.error_norm() > 0, float(np.abs(y - 4 * x / (comm.rank + 1)).max()))
    new.destroy()
    fb.close()
    return result


def test_shrink_goes_on_without_a_lost_rank():
    got = pool(3).run(_shrink_without_a_lost_rank, own_comm=True)
    assert got[1] is None
    assert got[0][:4] == (0, 2, 4, True) and got[2][:4] == (1, 2, 4, True), got
    assert got[0][4] < 0.05 and got[2][4] < 0.05, got  # int8 of [-4, 4]: within its bound
