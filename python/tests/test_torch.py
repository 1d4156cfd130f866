# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch CPU tensors: every dtype ccl carries that torch can express (bfloat16 and fp8
included), outputs allocated as tensors, in place, compression, and refusals."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ccl  # noqa: E402
from refs import OPS  # noqa: E402

TORCH_DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64",
                "bfloat16", "float8_e4m3fn", "float8_e5m2"]


def _t(dtype, rank, shape, seed=0):
    import torch

    g = torch.Generator().manual_seed(seed * 1009 + rank)
    lo = 0 if dtype.startswith("uint") else -2
    return torch.randint(lo, 3, shape, generator=g).to(getattr(torch, dtype))


def _ref(op, ts):
    import torch

    a = torch.stack([t.to(torch.float64) for t in ts])
    r = {"sum": lambda: a.sum(0), "prod": lambda: a.prod(0), "max": lambda: a.max(0).values,
         "min": lambda: a.min(0).values, "avg": lambda: a.sum(0) / len(ts)}[op]()
    if op == "avg" and not ts[0].is_floating_point():
        r = torch.trunc(r)
    return r


def _eq(got, want64, what, op="sum"):
    import torch

    assert isinstance(got, torch.Tensor), "%s: got %s, not a tensor" % (what, type(got).__name__)
    g = got.to(torch.float64)
    if op == "avg" and got.is_floating_point():
        # the average rounds once to the output type: up to half its ulp (e5m2: 2 bits)
        assert torch.allclose(g, want64, rtol=0.13, atol=0.07), (what, g, want64)
    else:
        assert torch.equal(g, want64), (what, g, want64)


def _collectives(comm, dtype):
    import torch

    n, r = comm.size, comm.rank
    ops = OPS if not dtype.startswith("float8") else ["sum", "max", "min", "avg", "prod"]
    for i, op in enumerate(ops):
        ts = [_t(dtype, k, (3, 5), seed=i) for k in range(n)]
        want = _ref(op, ts)
        y = comm.allreduce(ts[r], op=op)
        assert y.dtype == ts[r].dtype and y.shape == (3, 5)
        _eq(y, want, "allreduce %s" % op, op)
        x = ts[r].clone()
        assert comm.allreduce(x, op=op, in_place=True) is x
        _eq(x, want, "allreduce %s in place" % op, op)
        full = [_t(dtype, k, (n * 2, 3), seed=10 + i) for k in range(n)]
        _eq(comm.reduce_scatter(full[r], op=op), _ref(op, full)[2 * r:2 * r + 2], "reduce_scatter %s" % op, op)
    ts = [_t(dtype, k, (4,), seed=20) for k in range(n)]
    _eq(comm.allgather(ts[r]), torch.stack(ts).to(torch.float64), "allgather")
    b = ts[r].clone()
    comm.broadcast(b, n - 1)
    _eq(b, ts[n - 1].to(torch.float64), "broadcast")
    a = torch.stack([_t(dtype, r * n + j, (2,), seed=21) for j in range(n)])
    want = torch.stack([_t(dtype, j * n + r, (2,), seed=21) for j in range(n)]).to(torch.float64)
    _eq(comm.alltoall(a), want, "alltoall")
    out = torch.empty(4, dtype=ts[r].dtype)
    with ccl.group():
        comm.send(ts[r], (r + 1) % n)
        comm.recv(out, (r - 1) % n)
    _eq(out, ts[(r - 1) % n].to(torch.float64), "send/recv")


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_dtypes(ranks, dtype):
    ranks.run(_collectives, dtype)


def _bf16_compressed(comm):
    import torch

    n, r = comm.size, comm.rank
    comp = ccl.Compression("int8", block=64)
    xs = [torch.randn(65536, generator=torch.Generator().manual_seed(k)).to(torch.bfloat16) for k in range(n)]
    want = torch.stack([x.to(torch.float64) for x in xs]).sum(0)
    y = comm.allreduce(xs[r], compression=comp, feedback=ccl.Feedback("residual"))
    assert y.dtype == torch.bfloat16
    abs_sum = torch.stack([x.to(torch.float64).abs() for x in xs]).sum(0)
    m = float(abs_sum.max())
    # The codec's bound for an element of the buffer's largest magnitude bounds every element,
    # plus bf16's last rounding of the output (half an ulp: 2^-8 relative).
    bound = comp.error_bound(m, m, n + 2) + float(want.abs().max()) * 2.0 ** -8
    err = (y.to(torch.float64) - want).abs().max().item()
    assert 0 < err <= bound, (err, bound)
    s = comm.stats()["allreduce"]
    assert s.compressed_calls == 1 and s.wire_bytes < s.raw_bytes, s


def test_bfloat16_compressed_allreduce(ranks2):
    ranks2.run(_bf16_compressed, own_comm=True)


def _refusals(comm):
    import torch

    x = torch.ones(8)
    with pytest.raises(ValueError, match="not contiguous.*contiguous\\(\\)"):
        comm.allreduce(torch.ones(4, 4).t())
    with pytest.raises(ValueError, match="tensor on meta.*NCCL face"):
        comm.allreduce(torch.ones(4, device="meta"))
    with pytest.raises(TypeError, match="out has dtype float64 but x has dtype float32"):
        comm.allreduce(x, torch.zeros(8, dtype=torch.float64))
    with pytest.raises(TypeError, match="torch.complex64"):
        comm.allreduce(torch.ones(4, dtype=torch.complex64))
    with pytest.raises(TypeError, match="torch.bool"):
        comm.allreduce(torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="layout"):
        comm.allreduce(torch.ones(4).to_sparse())
    with pytest.raises(ValueError, match="out has 4 elements"):
        comm.allreduce(x, torch.zeros(4))
    # A tensor view with an offset is contiguous and works on its own memory.
    base = torch.zeros(10)
    view = base[2:6]
    view.fill_(1.0)
    comm.allreduce(view, in_place=True)
    assert base.tolist() == [0, 0] + [float(comm.size)] * 4 + [0] * 4
    # NumPy input gives NumPy output, torch gives torch.
    assert isinstance(comm.allreduce(np.ones(2, np.float32)), np.ndarray)


def test_tensor_refusals(ranks2):
    ranks2.run(_refusals)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensor_refused():
    with ccl.Comm(1, ccl.get_unique_id(), 0) as c:
        with pytest.raises(ValueError, match="cuda.*NCCL face"):
            c.allreduce(torch.ones(4, device="cuda"))
