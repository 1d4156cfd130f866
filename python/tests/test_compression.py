# SPDX-License-Identifier: BSD-3-Clause
"""Compressed collectives: results within the codec's documented bound (cclCodecErrorBound),
fewer bytes on the wire than raw, error feedback, the communicator's default codec."""
import numpy as np
import pytest

import ccl
from conftest import pool

N = 32768  # 128 KiB of fp32: above CCL_CODEC_MIN_BYTES (64 KiB), below which calls go uncompressed


def _x(rank, count=N, seed=0):
    rng = np.random.default_rng(seed * 7919 + rank)
    return rng.standard_normal(count).astype(np.float32)


def _bound(comp, abs_values, quantizations):
    """The documented bound of every element, with the buffer's largest |value| as absMax."""
    m = float(abs_values.max())
    return np.array([comp.error_bound(float(v), m, quantizations) for v in abs_values])


def _assert_within(got, want, bound, what):
    err = np.abs(got.astype(np.float64) - want)
    worst = int(np.argmax(err - bound))
    assert np.all(err <= bound), "%s: |error| %g > bound %g at %d" % (what, err[worst], bound[worst], worst)
    assert err.max() > 0, "%s: exact result, so nothing was compressed" % what


def _allreduce_int8(comm, block):
    n, r = comm.size, comm.rank
    comp = ccl.Compression("int8", block=block)
    xs = [_x(i) for i in range(n)]
    want = np.sum([x.astype(np.float64) for x in xs], axis=0)
    y = comm.allreduce(xs[r], compression=comp)
    abs_sum = np.sum([np.abs(x.astype(np.float64)) for x in xs], axis=0)
    _assert_within(y, want, _bound(comp, abs_sum, n), "int8 allreduce")
    # Every rank gets the same bits.
    same = comm.allgather(y)
    assert all(np.array_equal(same[0], same[i]) for i in range(n))
    s = comm.stats()["allreduce"]
    assert s.compressed_calls >= 1, s
    assert 0 < s.wire_bytes < s.raw_bytes, s
    return s.raw_bytes / s.wire_bytes


@pytest.mark.parametrize("block", [32, 128])
def test_int8_allreduce_bound_and_wire_bytes(ranks, block):
    ratios = ranks.run(_allreduce_int8, block, own_comm=True)
    assert min(ratios) > 2.0, ratios  # int8 of fp32 with a 4-byte scale per block: close to 4x


def _other_collectives(comm, codec):
    n, r = comm.size, comm.rank
    comp = ccl.Compression(codec)
    xs = [_x(i, seed=3) for i in range(n)]
    absmax = lambda a: np.abs(a.astype(np.float64))  # noqa: E731
    # allgather: one quantization of each rank's block.
    y = comm.allgather(xs[r], compression=comp)
    for i in range(n):
        _assert_within(y[i], xs[i], _bound(comp, absmax(xs[i]), 1), "%s allgather block %d" % (codec, i))
    # reduce-scatter: n - 1 quantizations.
    full = [_x(i, N * n, seed=4) for i in range(n)]
    k = full[0].size // n
    y = comm.reduce_scatter(full[r], compression=comp)
    want = np.sum([f.astype(np.float64) for f in full], axis=0)[r * k:(r + 1) * k]
    abs_sum = np.sum([np.abs(f.astype(np.float64)) for f in full], axis=0)[r * k:(r + 1) * k]
    _assert_within(y, want, _bound(comp, abs_sum, max(n - 1, 1)), "%s reduce_scatter" % codec)
    # broadcast from rank 1, and send/recv: one quantization.
    b = xs[r].copy()
    comm.broadcast(b, 1, compression=comp)
    _assert_within(b, xs[1], _bound(comp, absmax(xs[1]), 1), "%s broadcast" % codec)
    got = np.empty(N, np.float32)
    with ccl.group():
        comm.send(xs[r], (r + 1) % n, compression=comp)
        comm.recv(got, (r - 1) % n, compression=comp)
    _assert_within(got, xs[(r - 1) % n], _bound(comp, absmax(xs[(r - 1) % n]), 1), "%s send/recv" % codec)
    # all-to-all (Ex takes a codec, no feedback).
    # (Its threshold applies to one rank's block: each is N elements.)
    a = comm.alltoall(np.stack([_x(r * n + j, N, seed=5) for j in range(n)]), compression=comp)
    for j in range(n):
        src = _x(j * n + r, N, seed=5)
        if j == r:  # a rank's own block does not travel
            np.testing.assert_array_equal(a[j], src)
        else:
            _assert_within(a[j], src, _bound(comp, absmax(src), 1), "%s alltoall from %d" % (codec, j))
    st = comm.stats()
    for op in ("allgather", "reducescatter", "broadcast", "send", "alltoall"):
        assert st[op].compressed_calls >= 1, (op, st[op])
        if op != "broadcast" or r == 1:  # a broadcast's leaves send nothing
            assert st[op].wire_bytes < st[op].raw_bytes, (op, st[op])


@pytest.mark.parametrize("codec", ["int8", "fp8_e4m3", "int4"])
def test_other_collectives_within_bound(ranks, codec):
    ranks.run(_other_collectives, codec, own_comm=True)


def _feedback(comm, kind):
    """Repeating an allreduce of the same input: with error feedback the mean of the results
    converges on the exact sum, without it every result makes the same error."""
    n, r = comm.size, comm.rank
    comp = ccl.Compression("int4")
    xs = [_x(i, seed=9) for i in range(n)]
    want = np.sum([x.astype(np.float64) for x in xs], axis=0)
    fb = ccl.Feedback(kind, beta=0.5) if kind else None
    ys = [comm.allreduce(xs[r], compression=comp, feedback=fb).astype(np.float64) for _ in range(8)]
    first = np.abs(ys[0] - want).mean()
    mean = np.abs(np.mean(ys, axis=0) - want).mean()
    if fb is not None:
        fb.close()
        with pytest.raises(ValueError, match="closed"):
            comm.allreduce(xs[r], compression=comp, feedback=fb)
    return first, mean


def test_residual_feedback_converges(ranks2):
    plain = ranks2.run(_feedback, None, own_comm=True)
    for first, mean in plain:
        assert mean == pytest.approx(first)  # deterministic rounding: the same error every time
    for first, mean in ranks2.run(_feedback, "residual", own_comm=True):
        assert mean < 0.5 * first, (first, mean)


def test_loco_feedback_runs_and_helps(ranks2):
    for first, mean in ranks2.run(_feedback, "loco", own_comm=True):
        assert mean < first, (first, mean)


def _powersgd_warm_start(comm, warm):
    """Allreduces one full-rank matrix three times with powersgd and a Feedback("none"): the
    warm start alone iterates (each result closer to the exact sum), without it every call
    is the same; the state keeps no error."""
    rows, cols = 192, 128  # 96 KiB: above CCL_CODEC_MIN_BYTES
    xs = [_x(i, rows * cols, seed=3) for i in range(comm.size)]
    want = np.sum(xs, axis=0)
    comp = ccl.Compression("powersgd", rank=2, rows=rows, cols=cols, warm_start=warm)
    with ccl.Feedback("none") as fb:
        ys = [comm.allreduce(xs[comm.rank], compression=comp, feedback=fb) for _ in range(3)]
        assert fb.error_norm() == 0.0
    with ccl.Feedback("residual") as ef:
        assert ef.error_norm() == 0.0
        comm.allreduce(xs[comm.rank], compression=comp, feedback=ef)
        assert ef.error_norm() > 0.0
    return [float(np.linalg.norm(y - want)) for y in ys], [bool(np.array_equal(y, ys[0])) for y in ys]


def test_powersgd_warm_start_is_independent_of_feedback(ranks2):
    assert ccl.Compression("powersgd").struct.warmStart == 1
    assert ccl.Compression("powersgd", warm_start=False).struct.warmStart == -1
    with pytest.raises(TypeError):
        ccl.Compression("powersgd", warm_start=1)
    for errors, same in ranks2.run(_powersgd_warm_start, True, own_comm=True):
        assert errors[2] < errors[0] and errors[1] <= errors[0] * 1.0001, errors
    for errors, same in ranks2.run(_powersgd_warm_start, False, own_comm=True):
        assert all(same), errors


def _default_codec(rank, nranks, uid):
    x = _x(rank)
    cfg = ccl.Config(name="pytest", compression=ccl.Compression("int8"))
    with ccl.Comm(nranks, ccl.UniqueId(uid), rank, cfg) as comm:
        comm.allreduce(x)
        a = comm.stats()["allreduce"]
        comm.set_compression(None)
        comm.allreduce(x)
        b = comm.stats()["allreduce"]
        comm.set_compression("fp8_e5m2")
        comm.allreduce(x)
        c = comm.stats()["allreduce"]
        # A per-call codec "none" overrides the default.
        comm.allreduce(x, compression="none")
        d = comm.stats()["allreduce"]
    return a.compressed_calls, b.compressed_calls, c.compressed_calls, d.compressed_calls


def test_config_and_set_compression():
    # Between processes of one host ccl does not apply a *default* codec unless asked to.
    p = pool(2, env={"CCL_CODEC_SHM": "on"})
    assert p.run(_default_codec, bytes(ccl.get_unique_id())) == [(1, 1, 2, 2)] * 2


def test_error_bound_binding():
    comp = ccl.Compression("int8", block=32)
    b1 = ccl.codec_error_bound(comp, 1.0, 2.0, 1)
    assert 0 < b1 < 2.0 / 127  # at most about half a quantization step of absmax 2
    assert comp.error_bound(1.0, 2.0, 4) > b1  # more round trips, more error
    assert ccl.codec_error_bound(None, 1.0, 2.0, 3) == 0.0
    assert ccl.Compression("topk").error_bound(0.5, 1.0, 1) == 0.5  # sparsifiers: |x| or nothing
    assert ccl.Compression("powersgd").error_bound(0.5, 1.0, 1) == float("inf")
    with pytest.raises(ccl.CclInvalidArgument, match="cclCodecErrorBound"):
        comp.error_bound(3.0, 2.0, 1)  # absValue > absMax


def test_compression_fields_and_names():
    c = ccl.Compression(codec="topk", keep_ratio=0.1, bits=16, seed=7)
    s = c.struct
    assert (s.codec, s.keepRatio, s.bits, s.seed) == (int(ccl.Codec.TOPK), 0.1, 16, 7)
    c = ccl.Compression(ccl.Codec.POWERSGD, rank=2, rows=4, cols=8)
    assert (c.struct.rank, c.struct.rows, c.struct.cols) == (2, 4, 8)
    c = ccl.Compression("INT8", block=64, scale_bits=16, stochastic_rounding=True, threshold=0.5)
    assert (c.codec, c.struct.blockSize, c.struct.scaleBits, c.struct.stochasticRounding) == (ccl.Codec.INT8, 64, 16, 1)
    assert ccl.codec_names()[4] == "int8" and ccl.codec_from_name("TopK") == ccl.Codec.TOPK
    with pytest.raises(ValueError, match="unknown codec 'int9'.*int8"):
        ccl.Compression("int9")
    with pytest.raises(TypeError):
        ccl.Compression("int8", block=1.5)


def _bad_codec_parameter(comm):
    with pytest.raises(ccl.CclInvalidArgument) as e:
        comm.allreduce(_x(comm.rank), compression=ccl.Compression("int8", block=12))
    assert e.value.code == ccl.Result.INVALID_ARGUMENT and "cclAllReduceEx" in str(e.value)
    assert "block" in e.value.message.lower(), e.value.message


def test_bad_codec_parameter_raises_with_library_message(ranks2):
    ranks2.run(_bad_codec_parameter, own_comm=True)
