# SPDX-License-Identifier: BSD-3-Clause
"""Every collective and point-to-point call, every NumPy dtype, 2 and 4 ranks, against NumPy
references: new outputs, given outputs and the in-place forms."""
import numpy as np
import pytest

import ccl
from refs import NP_DTYPES, OPS, check, data, inputs, reduce_ref

COUNT = 7  # odd, and not a multiple of any rank count


def _allreduce(comm, dtype):
    n, r = comm.size, comm.rank
    for i, op in enumerate(OPS):
        xs = inputs(dtype, n, COUNT, seed=i)
        want = reduce_ref(op, xs)
        x = xs[r].copy()
        check(comm.allreduce(x, op=op), want, "allreduce %s" % op, op)
        check(x, xs[r], "allreduce %s changed its input" % op)
        out = np.full_like(x, 9)
        assert comm.allreduce(x, out, op=ccl.Op[op.upper()]) is out
        check(out, want, "allreduce %s into out" % op, op)
        assert comm.allreduce(x, op=op, in_place=True) is x
        check(x, want, "allreduce %s in place" % op, op)
        x = xs[r].copy()
        comm.allreduce(x, x, op=op)
        check(x, want, "allreduce %s with out=x" % op, op)


def _broadcast(comm, dtype):
    n, r = comm.size, comm.rank
    for root in range(n):
        xs = inputs(dtype, n, COUNT, seed=root)
        x = xs[r].copy()
        assert comm.broadcast(x, root) is x  # in place by default
        check(x, xs[root], "broadcast root %d" % root)
        out = np.zeros_like(x)
        comm.broadcast(xs[r] if r == root else None, root, out=out)
        check(out, xs[root], "broadcast root %d into out" % root)


def _reduce(comm, dtype):
    n, r = comm.size, comm.rank
    for i, op in enumerate(OPS):
        root = i % n
        xs = inputs(dtype, n, COUNT, seed=i)
        want = reduce_ref(op, xs)
        y = comm.reduce(xs[r], root, op=op)
        if r == root:
            check(y, want, "reduce %s root %d" % (op, root), op)
        else:
            assert y is None
        x = xs[r].copy()
        y = comm.reduce(x, root, op=op, in_place=True)
        if r == root:
            assert y is x
            check(x, want, "reduce %s in place" % op, op)


def _allgather(comm, dtype):
    n, r = comm.size, comm.rank
    xs = inputs(dtype, n, COUNT)
    want = np.stack(xs)
    check(comm.allgather(xs[r]), want, "allgather")
    out = np.zeros(n * COUNT, dtype)
    comm.allgather(xs[r], out)
    check(out, want.reshape(-1), "allgather into out")
    buf = np.zeros(n * COUNT, dtype)
    buf[r * COUNT:(r + 1) * COUNT] = xs[r]
    assert comm.allgather(buf, in_place=True) is buf
    check(buf, want.reshape(-1), "allgather in place")


def _reduce_scatter(comm, dtype):
    n, r = comm.size, comm.rank
    for i, op in enumerate(OPS):
        xs = inputs(dtype, n, (n, COUNT), seed=i)
        want = reduce_ref(op, xs)[r]
        check(comm.reduce_scatter(xs[r], op=op), want[None, :], "reduce_scatter %s" % op, op)
        out = np.zeros(COUNT, dtype)
        comm.reduce_scatter(xs[r].reshape(-1), out, op=op)
        check(out, want, "reduce_scatter %s into out" % op, op)
        x = xs[r].copy().reshape(-1)
        block = comm.reduce_scatter(x, op=op, in_place=True)
        check(block, want, "reduce_scatter %s in place (returned block)" % op, op)
        check(x[r * COUNT:(r + 1) * COUNT], want, "reduce_scatter %s in place (x's block)" % op, op)


def _alltoall(comm, dtype):
    n, r = comm.size, comm.rank
    xs = inputs(dtype, n, (n, COUNT))
    want = np.stack([xs[j][r] for j in range(n)])
    check(comm.alltoall(xs[r]), want, "alltoall")
    x = xs[r].copy()
    assert comm.alltoall(x, x) is x
    check(x, want, "alltoall in place")


def _gather(comm, dtype):
    n, r = comm.size, comm.rank
    xs = inputs(dtype, n, COUNT)
    for root in range(n):
        y = comm.gather(xs[r], root)
        if r == root:
            check(y, np.stack(xs), "gather root %d" % root)
        else:
            assert y is None


def _scatter(comm, dtype):
    n, r = comm.size, comm.rank
    for root in range(n):
        full = data(dtype, root, (n, COUNT), seed=5)
        # Every rank passes x here (read on root only; elsewhere it gives the block's shape).
        check(comm.scatter(full, root), full[r][None, :], "scatter root %d" % root)
        out = np.zeros(COUNT, dtype)
        comm.scatter(full if r == root else None, root, out=out)
        check(out, full[r], "scatter root %d into out" % root)


def _send_recv(comm, dtype):
    n, r = comm.size, comm.rank
    xs = inputs(dtype, n, COUNT)
    # A ring: every rank sends and receives at once, so the calls must share a group.
    out = np.zeros(COUNT, dtype)
    with ccl.group():
        comm.send(xs[r], (r + 1) % n)
        comm.recv(out, (r - 1) % n)
    check(out, xs[(r - 1) % n], "ring send/recv")
    # Pairs, outside a group: the lower rank of each pair sends first.
    peer = r ^ 1
    got = np.zeros(COUNT, dtype)
    if r < peer:
        comm.send(xs[r], peer)
        comm.recv(got, peer)
    else:
        comm.recv(got, peer)
        comm.send(xs[r], peer)
    check(got, xs[peer], "pairwise send/recv")


CASES = {"allreduce": _allreduce, "broadcast": _broadcast, "reduce": _reduce, "allgather": _allgather,
         "reduce_scatter": _reduce_scatter, "alltoall": _alltoall, "gather": _gather, "scatter": _scatter,
         "send_recv": _send_recv}


@pytest.mark.parametrize("dtype", NP_DTYPES)
@pytest.mark.parametrize("collective", list(CASES))
def test_collective(ranks, collective, dtype):
    ranks.run(CASES[collective], dtype)


def _zero_count(comm):
    e = np.zeros(0, np.float32)
    assert comm.allreduce(e).shape == (0,)
    assert comm.allgather(e).shape == (comm.size, 0)
    assert comm.broadcast(e) is e


def test_zero_count(ranks):
    ranks.run(_zero_count)


def _shapes(comm):
    n, r = comm.size, comm.rank
    x = np.arange(n * 6, dtype=np.float32).reshape(n * 2, 3)
    assert comm.allreduce(x).shape == (n * 2, 3)
    assert comm.allgather(x).shape == (n, n * 2, 3)
    assert comm.reduce_scatter(x).shape == (2, 3)
    y = np.arange(n * 3, dtype=np.float32).reshape(3, n)  # first dimension does not split: flat blocks
    assert comm.reduce_scatter(y).shape == (3,)
    # Other array kinds: the buffer protocol (bytearray) and memoryviews of arrays.
    b = bytearray(range(5))
    out = comm.allreduce(b, op="max")
    assert isinstance(out, np.ndarray) and out.dtype == np.uint8 and list(out) == [0, 1, 2, 3, 4]
    m = memoryview(np.full(4, r + 1, np.int32))
    np.testing.assert_array_equal(comm.allreduce(m), np.full(4, n * (n + 1) // 2, np.int32))


def test_shapes_and_buffer_kinds(ranks):
    ranks.run(_shapes)
