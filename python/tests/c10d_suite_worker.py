# SPDX-License-Identifier: BSD-3-Clause
"""One rank of the c10d checks that PyTorch's own test suites led to (test_c10d_suite.py starts
N of them, as test_c10d.py starts c10d_worker.py): the defects its distributed suite found in
cclz, each against gloo on the same ranks, and the public behaviours PyTorch's gloo
process-group tests (test/distributed/test_c10d_gloo.py) check, written here against those
behaviours for cclz."""
import os
import sys

import torch
import torch.distributed as dist

import ccl.torch  # noqa: F401  (registers cclz)
from c10d_worker import RANK, SIZE, expect_close, expect_raises, fail, finish, groups


def expect_equal(name, got, want):
    expect_close(name, got, want, 0.0, 0.0)


def case_coalesced_gather_layout() -> None:
    """all_gather_coalesced writes outputs[rank][input], as c10d documents, whatever the
    number of inputs: equal to the world size (where a transposed reading fits and is wrong),
    fewer, and more."""
    gloo, cz = groups()
    for ninputs in sorted({SIZE, 1, SIZE + 1}):
        ins = [torch.full((i + 2,), float(10 * i + RANK)) for i in range(ninputs)]
        results = {}
        for name, group in (("gloo", gloo), ("cclz", cz)):
            outs = [[torch.empty_like(t) for t in ins] for _ in range(SIZE)]
            dist.all_gather_coalesced(outs, ins, group=group)
            results[name] = outs
        for r in range(SIZE):
            for i in range(ninputs):
                want = torch.full((i + 2,), float(10 * i + r))
                expect_equal(f"all_gather_coalesced {ninputs} inputs: outputs[{r}][{i}]", results["cclz"][r][i], want)
                expect_equal(f"all_gather_coalesced {ninputs} inputs vs gloo [{r}][{i}]", results["cclz"][r][i],
                             results["gloo"][r][i])
    # One list per rank, each with one tensor per input: anything else is refused on the caller.
    expect_raises(ValueError, "output lists", lambda: dist.all_gather_coalesced(
        [[torch.empty(2)]] * (SIZE + 1), [torch.ones(2)], group=cz))
    print(f"rank {RANK}: coalesced gather layout ok", flush=True)


def case_inference_mode() -> None:
    """Outputs made under torch.inference_mode() are written by the backend's worker in that
    mode: list-form all_gather, gather and all_gather_coalesced, as on gloo."""
    gloo, cz = groups()
    for name, group in (("gloo", gloo), ("cclz", cz)):
        with torch.inference_mode():
            x = torch.full((3,), float(RANK))
            outs = [torch.empty(3) for _ in range(SIZE)]
            dist.all_gather(outs, x, group=group)
            for r in range(SIZE):
                expect_equal(f"{name} all_gather under inference_mode [{r}]", outs[r], torch.full((3,), float(r)))
            gathered = [torch.empty(3) for _ in range(SIZE)] if RANK == 0 else None
            dist.gather(x, gathered, dst=0, group=group)
            if RANK == 0:
                for r in range(SIZE):
                    expect_equal(f"{name} gather under inference_mode [{r}]", gathered[r], torch.full((3,), float(r)))
            lists = [[torch.empty(3)] for _ in range(SIZE)]
            dist.all_gather_coalesced(lists, [x], group=group)
            for r in range(SIZE):
                expect_equal(f"{name} all_gather_coalesced under inference_mode [{r}]", lists[r][0],
                             torch.full((3,), float(r)))
    print(f"rank {RANK}: inference mode ok", flush=True)


def case_debug_detail() -> None:
    """Under TORCH_DISTRIBUTED_DEBUG=DETAIL (set by the test), PyTorch wraps the group in its
    checking wrapper, which asks the backend for sequence numbers: every collective runs, the
    numbers agree across ranks and count the collectives, and a mismatch across ranks is
    still caught by the wrapper."""
    if os.environ.get("TORCH_DISTRIBUTED_DEBUG") != "DETAIL":
        fail("run with TORCH_DISTRIBUTED_DEBUG=DETAIL")
    _, cz = groups()
    before = cz._get_backend(torch.device("cpu")).__class__.__name__
    x = torch.ones(4)
    dist.all_reduce(x, group=cz)
    dist.broadcast(x, src=0, group=cz)
    outs = [torch.empty(4) for _ in range(SIZE)]
    dist.all_gather(outs, x, group=cz)
    dist.barrier(group=cz)
    expect_equal("all_reduce then broadcast under DETAIL", x, torch.full((4,), float(SIZE)))
    seq = cz._get_sequence_number_for_group()
    seqs = [None] * SIZE
    dist.all_gather_object(seqs, seq)
    if len(set(seqs)) != 1 or seq < 4:
        fail(f"sequence numbers {seqs} (backend {before}): equal on every rank and at least 4 expected")
    # The wrapper's own check: ranks calling different collectives get an error naming both.
    try:
        if RANK == 0:
            dist.all_reduce(torch.ones(4), group=cz)
        else:
            dist.broadcast(torch.ones(4), src=0, group=cz)
    except RuntimeError as e:
        if "ALLREDUCE" not in str(e) and "BROADCAST" not in str(e):
            fail(f"the debug wrapper's mismatch error does not name the collectives: {e}")
    else:
        fail("ranks called different collectives and no error was raised under DETAIL")
    print(f"rank {RANK}: debug detail ok (sequence number {seq})", flush=True)


def case_recv_any_source() -> None:
    """A receive from any source is refused on the caller, with a message naming what to do
    (NVIDIA's NCCL has none either); a receive naming its source works."""
    _, cz = groups()
    expect_raises(RuntimeError, "src=", lambda: dist.recv(torch.empty(2), group=cz))
    if RANK == 0:
        dist.send(torch.full((2,), 7.0), dst=1, group=cz)
    elif RANK == 1:
        t = torch.empty(2)
        dist.recv(t, src=0, group=cz)
        expect_equal("recv from 0", t, torch.full((2,), 7.0))
    print(f"rank {RANK}: recv any source ok", flush=True)


def case_uneven_reduce_scatter() -> None:
    """List-form reduce_scatter with parts of different sizes per rank (rank 0's empty), as
    gloo and PyTorch's NCCL backend take it."""
    gloo, cz = groups()
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):
        ins = [torch.arange(r * 3, dtype=torch.float32) + 100 * RANK for r in range(SIZE)]
        got = {}
        for name, group in (("gloo", gloo), ("cclz", cz)):
            out = torch.empty(RANK * 3)
            dist.reduce_scatter(out, [t.clone() for t in ins], op=op, group=group)
            got[name] = out
        expect_equal(f"uneven reduce_scatter {op}", got["cclz"], got["gloo"])
    print(f"rank {RANK}: uneven reduce_scatter ok", flush=True)


def case_root_tensor() -> None:
    """BroadcastOptions.rootTensor and ReduceOptions.rootTensor name a tensor of the list (one
    per call): anything but 0 is refused on the caller."""
    _, cz = groups()
    pg = cz._get_backend(torch.device("cpu"))
    for opts, call in ((dist.BroadcastOptions(), pg.broadcast), (dist.ReduceOptions(), pg.reduce)):
        opts.rootRank = 0
        for bad in (-1, 1):
            opts.rootTensor = bad
            expect_raises(ValueError, "rootTensor", lambda: call([torch.ones(2)], opts))
    print(f"rank {RANK}: root tensor ok", flush=True)


def case_gloo_behaviours() -> None:
    """What PyTorch's gloo process-group tests check of results, on cclz (values computed for
    any world size): broadcast by root, empty and bool tensors; every reduce op; coalesced
    allreduce; scatter, gather and allgather for every root; many asynchronous calls in
    flight; a barrier that finishes earlier calls; send and receive between every pair;
    reduce_scatter in its tensor and coalesced forms; broadcast_coalesced."""
    _, cz = groups()
    W = SIZE
    for root in range(W):
        t = torch.tensor([float(RANK)])
        dist.broadcast(t, src=root, group=cz)
        expect_equal(f"broadcast from {root}", t, torch.tensor([float(root)]))
    empty = torch.tensor([])
    dist.broadcast(empty, src=0, group=cz)
    if empty.numel() != 0:
        fail("broadcast of an empty tensor")
    b = torch.tensor([True, False, False, True]) if RANK == 0 else torch.zeros(4, dtype=torch.bool)
    dist.broadcast(b, src=0, group=cz)
    expect_equal("broadcast of bool", b, torch.tensor([True, False, False, True]))
    flags = torch.tensor([RANK == 0, False, True])
    dist.all_reduce(flags, group=cz)  # a sum of booleans is their or
    expect_equal("all_reduce of bool", flags, torch.tensor([True, False, True]))
    import math
    table = {dist.ReduceOp.SUM: W * (W + 1) / 2, dist.ReduceOp.PRODUCT: float(math.factorial(W)),
             dist.ReduceOp.MIN: 1.0, dist.ReduceOp.MAX: float(W), dist.ReduceOp.AVG: (W + 1) / 2}
    for op, want in table.items():
        t = torch.tensor([float(RANK + 1)])
        dist.all_reduce(t, op=op, group=cz)
        expect_close(f"all_reduce {op}", t, torch.tensor([want]), 1e-6, 0)
        for root in range(W):
            t = torch.tensor([float(RANK + 1)])
            dist.reduce(t, dst=root, op=op, group=cz)
            if RANK == root:
                expect_close(f"reduce {op} to {root}", t, torch.tensor([want]), 1e-6, 0)
    pair = [torch.tensor([float(RANK + 1)]), torch.tensor([float((RANK + 1) ** 2)])]
    dist.all_reduce_coalesced(pair, group=cz)
    expect_equal("all_reduce_coalesced", torch.cat(pair),
                 torch.tensor([W * (W + 1) / 2, W * (W + 1) * (2 * W + 1) / 6]))
    for root in range(W):
        out = torch.empty(1)
        dist.scatter(out, [torch.tensor([float(root)])] * W if RANK == root else None, src=root, group=cz)
        expect_equal(f"scatter from {root}", out, torch.tensor([float(root)]))
        outs = [torch.empty(2) for _ in range(W)] if RANK == root else None
        column = torch.tensor([[float(RANK), -1.0], [float(RANK), -1.0]])[:, 0]  # not contiguous
        dist.gather(column, outs, dst=root, group=cz)
        if RANK == root:
            expect_equal(f"gather of a non-contiguous input to {root}", torch.stack(outs),
                         torch.arange(W, dtype=torch.float32).repeat_interleave(2).reshape(W, 2))
    outs = [torch.empty(2, 2).t() for _ in range(W)]  # non-contiguous outputs too
    dist.all_gather(outs, torch.tensor([[float(RANK)] * 2] * 4)[:, 0].reshape(2, 2), group=cz)
    for r in range(W):
        expect_equal(f"all_gather of non-contiguous tensors [{r}]", outs[r], torch.full((2, 2), float(r)))
    works = [dist.all_reduce(torch.tensor([float(i + RANK)]), group=cz, async_op=True) for i in range(200)]
    for w in works:
        w.wait()
    inputs = [torch.full((3, 3), float(i + RANK)) for i in range(200)]
    works = [dist.broadcast(t, src=i % W, group=cz, async_op=True) for i, t in enumerate(inputs)]
    for w in works:
        w.wait()
    for i, t in enumerate(inputs):
        expect_equal(f"async broadcast {i}", t, torch.full((3, 3), float(i + i % W)))
    dropped = [torch.full((50, 50), float(i)) for i in range(16)]
    for t in dropped:
        dist.all_reduce(t, group=cz, async_op=True)  # the handles are dropped
    dist.barrier(group=cz)
    for i, t in enumerate(dropped):
        expect_equal(f"all_reduce {i} finished by the barrier", t, torch.full((50, 50), float(i * W)))
    for peer in range(W):
        if peer == RANK:
            continue
        # Lower rank sends first, so the pair's calls match.
        send, recv = torch.tensor([float(RANK)]), torch.empty(1)
        if RANK < peer:
            dist.send(send, dst=peer, group=cz, tag=0)
            dist.recv(recv, src=peer, group=cz, tag=0)
        else:
            dist.recv(recv, src=peer, group=cz, tag=0)
            dist.send(send, dst=peer, group=cz, tag=0)
        expect_equal(f"send/recv with {peer}", recv, torch.tensor([float(peer)]))
    full = torch.arange(20 * W * 20, dtype=torch.float32).reshape(20 * W, 20)
    out = torch.empty(20, 20)
    dist.reduce_scatter_tensor(out, full, group=cz)
    expect_equal("reduce_scatter_tensor", out, full.chunk(W)[RANK] * W)
    shapes = [(5, 5), (10, 10), (15, 15)]
    ins = [torch.arange(s[0] * W * s[1], dtype=torch.float32).reshape(s[0] * W, s[1]) + RANK for s in shapes]
    outs = [torch.empty(s) for s in shapes]
    cz.reduce_scatter_tensor_coalesced(outs, ins).wait()
    for s, i, o in zip(shapes, ins, outs):
        base = (i - RANK).chunk(W)[RANK]
        expect_equal(f"reduce_scatter_tensor_coalesced {s}", o, base * W + W * (W - 1) / 2)
    gathered = [torch.empty(s[0] * W, s[1]) for s in shapes]
    parts = [torch.full(s, float(RANK)) for s in shapes]
    cz.allgather_into_tensor_coalesced(gathered, parts).wait()
    for s, g in zip(shapes, gathered):
        want = torch.cat([torch.full(s, float(r)) for r in range(W)])
        expect_equal(f"allgather_into_tensor_coalesced {s}", g, want)
    for root in range(W):
        tensors = [torch.arange(60, dtype=torch.float64 if k % 2 else torch.float32)[2 * k:2 * k + 2] * (RANK + 1)
                   for k in range(30)]
        dist._broadcast_coalesced(cz, tensors, 256, root)
        for k, t in enumerate(tensors):
            want = torch.arange(60, dtype=t.dtype)[2 * k:2 * k + 2] * (root + 1)
            expect_equal(f"broadcast_coalesced from {root}, tensor {k}", t, want)
    print(f"rank {RANK}: gloo behaviours ok", flush=True)


def case_gloo_checks() -> None:
    """The argument checks PyTorch's gloo tests make: each bad input raises on the calling
    rank, before anything is sent (a rank alone raising does not hang its peers), and the
    group works afterwards. cclz raises ValueError (gloo RuntimeError) with its own words."""
    _, cz = groups()
    pg = cz._get_backend(torch.device("cpu"))
    t1, t2, t3 = torch.zeros(1), torch.zeros(1, dtype=torch.float64), torch.zeros(2)
    W = SIZE

    def opts(kind, **kw):
        o = kind()
        for k, v in kw.items():
            setattr(o, k, v)
        return o

    checks = [
        ("root", lambda: pg.broadcast([t1], opts(dist.BroadcastOptions, rootRank=-1))),
        ("root", lambda: pg.broadcast([t1], opts(dist.BroadcastOptions, rootRank=W))),
        ("rootTensor", lambda: pg.broadcast([t1], opts(dist.BroadcastOptions, rootRank=RANK, rootTensor=1))),
        ("one tensor", lambda: pg.broadcast([t1, t3], opts(dist.BroadcastOptions, rootRank=RANK))),
        ("one tensor", lambda: pg.allreduce([], dist.AllreduceOptions())),
        ("one tensor", lambda: pg.allreduce([t1, t3], dist.AllreduceOptions())),
        ("no tensors", lambda: pg.allreduce_coalesced([], dist.AllreduceCoalescedOptions())),
        ("root", lambda: pg.scatter([t1], [], opts(dist.ScatterOptions, rootRank=W))),
        ("list of", lambda: pg.scatter([t1], [[t1] * (W - 1)], opts(dist.ScatterOptions, rootRank=RANK))),
        ("types", lambda: pg.scatter([t1], [[t2] * W], opts(dist.ScatterOptions, rootRank=RANK))),
        ("elements", lambda: pg.scatter([t1], [[t3] * W], opts(dist.ScatterOptions, rootRank=RANK))),
        ("only the root", lambda: pg.scatter([t1], [[t1] * W], opts(dist.ScatterOptions, rootRank=(RANK + 1) % W))),
        ("root", lambda: pg.gather([], [t1], opts(dist.GatherOptions, rootRank=-1))),
        ("list of", lambda: pg.gather([[t1] * (W + 1)], [t1], opts(dist.GatherOptions, rootRank=RANK))),
        ("types", lambda: pg.gather([[t2] * W], [t1], opts(dist.GatherOptions, rootRank=RANK))),
        ("only the root", lambda: pg.gather([[t1] * W], [t1], opts(dist.GatherOptions, rootRank=(RANK + 1) % W))),
        ("one output list", lambda: pg.allgather([[t1] * W, [t1] * W], [t1])),
        ("list of", lambda: pg.allgather([[t1] * (W + 1)], [t1])),
        ("elements", lambda: pg.allgather([[t1, t3] * (W // 2) + [t1] * (W % 2)], [t1])),
        ("types", lambda: pg.allgather([[t1, t2] * (W // 2) + [t1] * (W % 2)], [t1])),
        ("elements", lambda: dist.all_gather_coalesced([[torch.zeros(0)]] * W, [t1], group=cz)),
        ("types", lambda: dist.all_gather_coalesced([[t2]] * W, [t1], group=cz)),
        ("output lists", lambda: dist.all_gather_coalesced([[t1]] * (W + 1), [t1], group=cz)),
        ("root", lambda: pg.reduce([t1], opts(dist.ReduceOptions, rootRank=W))),
        ("rootTensor", lambda: pg.reduce([t1], opts(dist.ReduceOptions, rootTensor=1))),
        ("one tensor", lambda: pg.reduce([t1, t1], dist.ReduceOptions())),
    ]
    for i, (fragment, call) in enumerate(checks):
        try:
            call()
        except (ValueError, TypeError, RuntimeError) as e:
            if fragment not in str(e):
                fail(f"check {i}: the error does not say '{fragment}': {type(e).__name__}: {e}")
        else:
            fail(f"check {i} ('{fragment}'): nothing raised")
    x = torch.ones(3)
    dist.all_reduce(x, group=cz)
    expect_equal("the group after the checks", x, torch.full((3,), float(W)))
    print(f"rank {RANK}: gloo checks ok", flush=True)


if __name__ == "__main__":
    globals()["case_" + sys.argv[1]]()
    finish()
