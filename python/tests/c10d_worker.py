# SPDX-License-Identifier: BSD-3-Clause
"""One rank of the c10d backend tests (test_c10d.py starts N of them with torchrun-style
env). Each case checks its own results and exits non-zero, with the reason, on a mismatch.
The default group is gloo; the ccl group ("cclz") spans the same ranks, so every case can
compute the same thing both ways and compare."""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import ccl
import ccl.torch

RANK = int(os.environ["RANK"])
SIZE = int(os.environ["WORLD_SIZE"])


def fail(msg: str) -> None:
    print(f"rank {RANK}: FAIL: {msg}", flush=True)
    sys.exit(1)


def expect_close(name, got, want, rtol=0.0, atol=0.0):
    if got.dtype != want.dtype or got.shape != want.shape:
        fail(f"{name}: {got.dtype}{tuple(got.shape)} vs {want.dtype}{tuple(want.shape)}")
    g, w = got.double(), want.double()
    if not torch.allclose(g, w, rtol=rtol, atol=atol):
        i = (g - w).abs().argmax()
        fail(f"{name}: differs from gloo by {(g - w).abs().max().item():.3g} at {i.item()} "
             f"({g.flatten()[i].item()} vs {w.flatten()[i].item()})")


def groups(**cclz_kw):
    dist.init_process_group("gloo")
    return dist.group.WORLD, dist.new_group(backend="cclz", **cclz_kw)


DTYPES = {  # dtype -> (rtol, atol) against gloo, whose float sums run in another order
    torch.float32: (1e-5, 1e-5), torch.float64: (1e-12, 1e-12), torch.bfloat16: (2e-2, 2e-2),
    torch.float16: (2e-3, 2e-3), torch.int32: (0, 0), torch.int64: (0, 0), torch.uint8: (0, 0),
    torch.int8: (0, 0),
}


def rand(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    hi = 3 if dtype in (torch.uint8, torch.int8) else 1000  # sums of SIZE ranks stay in range
    return torch.randint(0, hi, shape, generator=g).to(dtype)


def case_ops() -> None:
    """Every op against gloo on random inputs: all reduce ops, dtypes, uneven alltoall."""
    gloo, cz = groups()
    seed = 100 * RANK
    for dtype, (rtol, atol) in DTYPES.items():
        seed += 1
        ops = [dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT]
        if dtype.is_floating_point:
            ops.append(dist.ReduceOp.AVG)
        for op in ops:
            if op == dist.ReduceOp.AVG or (op == dist.ReduceOp.PRODUCT and not dtype.is_floating_point):
                x = rand((37,), dtype, seed).clamp(0, 2) if not dtype.is_floating_point else rand((37,), dtype, seed)
            else:
                x = rand((37,), dtype, seed)
            a, b = x.clone(), x.clone()
            if op == dist.ReduceOp.AVG:
                dist.all_reduce(a, op=dist.ReduceOp.SUM, group=gloo)
                a = (a.double() / SIZE).to(dtype)
            else:
                dist.all_reduce(a, op=op, group=gloo)
            dist.all_reduce(b, op=op, group=cz)
            expect_close(f"all_reduce {op} {dtype}", b, a, rtol, atol)
            for root in {0, SIZE - 1}:
                if op == dist.ReduceOp.AVG:
                    continue  # gloo has no reduce avg
                a, b = x.clone(), x.clone()
                dist.reduce(a, dst=root, op=op, group=gloo)
                dist.reduce(b, dst=root, op=op, group=cz)
                if RANK == root:
                    expect_close(f"reduce {op} {dtype} root {root}", b, a, rtol, atol)
        x = rand((5, 3), dtype, seed + 7)
        for root in range(SIZE):
            a, b = x.clone(), x.clone()
            dist.broadcast(a, src=root, group=gloo)
            dist.broadcast(b, src=root, group=cz)
            expect_close(f"broadcast {dtype} root {root}", b, a)
        la = [torch.empty_like(x) for _ in range(SIZE)]
        lb = [torch.empty_like(x) for _ in range(SIZE)]
        dist.all_gather(la, x, group=gloo)
        dist.all_gather(lb, x, group=cz)
        for r in range(SIZE):
            expect_close(f"all_gather {dtype} [{r}]", lb[r], la[r])
        fa, fb = torch.empty(SIZE * 5, 3, dtype=dtype), torch.empty(SIZE * 5, 3, dtype=dtype)
        dist.all_gather_into_tensor(fa, x, group=gloo)
        dist.all_gather_into_tensor(fb, x, group=cz)
        expect_close(f"all_gather_into_tensor {dtype}", fb, fa)
        big = rand((SIZE * 6,), dtype, seed + 9)
        ra, rb = torch.empty(6, dtype=dtype), torch.empty(6, dtype=dtype)
        dist.reduce_scatter_tensor(ra, big, group=gloo)
        dist.reduce_scatter_tensor(rb, big, group=cz)
        expect_close(f"reduce_scatter_tensor {dtype}", rb, ra, rtol, atol)
        parts = list(big.chunk(SIZE))
        rl = torch.empty(6, dtype=dtype)
        dist.reduce_scatter(rl, parts, group=cz)
        expect_close(f"reduce_scatter (list) {dtype}", rl, ra, rtol, atol)
        # Uneven all_to_all_single: rank i sends (i + j) % 3 + 1 rows of 2 to rank j.
        ins = [(RANK + j) % 3 + 1 for j in range(SIZE)]
        outs = [(j + RANK) % 3 + 1 for j in range(SIZE)]
        src = rand((sum(ins), 2), dtype, seed + 11)
        oa, ob = torch.empty(sum(outs), 2, dtype=dtype), torch.empty(sum(outs), 2, dtype=dtype)
        dist.all_to_all_single(oa, src, outs, ins, group=gloo)
        dist.all_to_all_single(ob, src, outs, ins, group=cz)
        expect_close(f"all_to_all_single uneven {dtype}", ob, oa)
        ea, eb = torch.empty(SIZE * 4, dtype=dtype), torch.empty(SIZE * 4, dtype=dtype)
        even = rand((SIZE * 4,), dtype, seed + 13)
        dist.all_to_all_single(ea, even, group=gloo)
        dist.all_to_all_single(eb, even, group=cz)
        expect_close(f"all_to_all_single {dtype}", eb, ea)
        # The list form with the same uneven parts (gloo's list form wants equal sizes, so its
        # single-tensor result is the reference).
        lb = [torch.empty(outs[j], 2, dtype=dtype) for j in range(SIZE)]
        dist.all_to_all(lb, list(src.split(ins)), group=cz)
        expect_close(f"all_to_all (list) uneven {dtype}", torch.cat(lb), oa)
        # Its inputs are only read: any strides (columns of a wider tensor here).
        wide = torch.cat([src.reshape(-1, 2), torch.zeros_like(src.reshape(-1, 2))], dim=1)
        lc = [torch.empty(outs[j], 2, dtype=dtype) for j in range(SIZE)]
        dist.all_to_all(lc, list(wide[:, :2].split(ins)), group=cz)
        expect_close(f"all_to_all (list) of strided inputs {dtype}", torch.cat(lc), oa)
        for root in {0, SIZE - 1}:
            ga = [torch.empty_like(x) for _ in range(SIZE)] if RANK == root else None
            gb = [torch.empty_like(x) for _ in range(SIZE)] if RANK == root else None
            dist.gather(x, ga, dst=root, group=gloo)
            dist.gather(x, gb, dst=root, group=cz)
            if RANK == root:
                for r in range(SIZE):
                    expect_close(f"gather {dtype} root {root} [{r}]", gb[r], ga[r])
            sl = [rand((4,), dtype, seed + 19 + r) for r in range(SIZE)] if RANK == root else None
            sa, sb = torch.empty(4, dtype=dtype), torch.empty(4, dtype=dtype)
            dist.scatter(sa, sl, src=root, group=gloo)
            dist.scatter(sb, sl, src=root, group=cz)
            expect_close(f"scatter {dtype} root {root}", sb, sa)
        # send/recv around the ring, and the coalesced allreduce
        nxt, prv = (RANK + 1) % SIZE, (RANK - 1) % SIZE
        got = torch.empty(3, 3, dtype=dtype)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, x[:3].contiguous(), nxt, cz),
                                       dist.P2POp(dist.irecv, got, prv, cz)])
        for r in reqs:
            r.wait()
        want = torch.empty(3, 3, dtype=dtype)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, x[:3].contiguous(), nxt, gloo),
                                       dist.P2POp(dist.irecv, want, prv, gloo)])
        for r in reqs:
            r.wait()
        expect_close(f"send/recv {dtype}", got, want)
    ts = [rand((n,), torch.float32, 500 + n + RANK) for n in (3, 1000, 17)]
    ta, tb = [t.clone() for t in ts], [t.clone() for t in ts]
    dist.all_reduce_coalesced(ta, group=gloo)
    dist.all_reduce_coalesced(tb, group=cz)
    for i in range(3):
        expect_close(f"all_reduce_coalesced [{i}]", tb[i], ta[i], 1e-5, 1e-5)
    works = [dist.all_reduce(torch.full((64,), float(i)), group=cz, async_op=True) for i in range(20)]
    for i, w in enumerate(works):
        w.wait()
        if w.result()[0][0].item() != i * SIZE:
            fail(f"async allreduce {i}: {w.result()[0][0].item()}")
    dist.barrier(group=cz)
    print(f"rank {RANK}: ops ok", flush=True)


def train(model, group, steps, hook_state=None, seed=0, hook=None):
    ddp = nn.parallel.DistributedDataParallel(model, process_group=group, bucket_cap_mb=1)
    if hook_state is not None:
        ddp.register_comm_hook(hook_state, hook or ccl.torch.hooks.compressed_allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(seed + RANK)
    target = torch.randn(64, 8, generator=torch.Generator().manual_seed(7))
    losses = []
    for _ in range(steps):
        x = torch.randn(16, 64, generator=g)
        loss = nn.functional.mse_loss(ddp(x), torch.tanh(x @ target))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    final = torch.stack(losses[-5:]).mean()
    dist.all_reduce(final, group=group)
    return final.item() / SIZE


def make_model():
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 8))


def case_ddp() -> None:
    """DDP on the ccl backend gives gloo's parameters (sum order aside)."""
    gloo, cz = groups()
    ma, mb = make_model(), make_model()
    la = train(ma, gloo, 30)
    lb = train(mb, cz, 30)
    for (n, pa), pb in zip(ma.named_parameters(), mb.parameters()):
        expect_close(f"DDP parameter {n}", pb.detach(), pa.detach(), 1e-4, 1e-5)
    if abs(la - lb) > 1e-5:
        fail(f"final loss {lb} vs gloo's {la}")
    print(f"rank {RANK}: ddp ok: loss gloo {la:.6f} ccl {lb:.6f}", flush=True)


def case_hook() -> None:
    """ccl's DDP hook (int8 or int4 with per-bucket feedback) on the ccl group and on gloo's:
    the loss stays within the margin of uncompressed gloo's and the wire carries less."""
    codec = os.environ.get("HOOK_CODEC", "int8")
    margin = float(os.environ.get("HOOK_MARGIN", "0.02"))
    gloo, cz = groups()
    base = train(make_model(), gloo, 60)
    for name, group in (("cclz", cz), ("gloo", gloo)):
        state = ccl.torch.hooks.CompressionState(group, compression=codec, feedback="residual")
        loss = train(make_model(), group, 60, hook_state=state)
        s = state.stats().allreduce
        state.close()
        if not s.wire_bytes < s.raw_bytes:
            fail(f"hook on {name}: wire {s.wire_bytes} not below raw {s.raw_bytes}")
        if abs(loss - base) > margin * abs(base):
            fail(f"hook on {name}: loss {loss} vs uncompressed gloo {base} (margin {margin:.0%})")
        print(f"rank {RANK}: hook {codec} on {name} ok: loss {loss:.6f} vs {base:.6f}, raw {s.raw_bytes} "
              f"wire {s.wire_bytes}", flush=True)


def case_futures() -> None:
    """A call's Future holds its result once wait() returns (as gloo's); a Future callback may
    issue a call on the same group and wait for it, and so PyTorch's own PowerSGD DDP hook,
    whose callbacks do, trains on cclz as on gloo (it hung at its first compressed step)."""
    gloo, cz = groups()
    for i in range(300):
        x = torch.full((4,), float(RANK + 1))
        work = dist.all_reduce(x, group=cz, async_op=True)
        work.wait()
        if not work.get_future().done():
            fail(f"call {i}: its Future is not done once wait() returned")
        expect_close("all_reduce after wait()", work.get_future().value()[0], torch.full((4,), SIZE * (SIZE + 1) / 2))

    def nested(fut):
        y = torch.ones(3)
        dist.all_reduce(y, group=cz)  # on the group whose completion runs this callback
        return fut.value()[0] + y

    x = torch.ones(3)
    got = dist.all_reduce(x, group=cz, async_op=True).get_future().then(nested).wait()
    expect_close("a call inside a Future callback", got, torch.full((3,), 2.0 * SIZE))
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

    losses = {}
    for name, group in (("gloo", gloo), ("cclz", cz)):
        state = psgd.PowerSGDState(process_group=group, matrix_approximation_rank=2, start_powerSGD_iter=2,
                                   min_compression_rate=0.1, random_seed=0)
        losses[name] = train(make_model(), group, 12, hook_state=state, hook=psgd.powerSGD_hook)
    if abs(losses["cclz"] - losses["gloo"]) > 1e-4 * abs(losses["gloo"]):
        fail(f"PowerSGD's hook: loss {losses['cclz']} on cclz vs {losses['gloo']} on gloo")
    print(f"rank {RANK}: futures ok: PowerSGD hook loss cclz {losses['cclz']:.6f} gloo {losses['gloo']:.6f}",
          flush=True)


def case_reinit() -> None:
    """destroy_process_group, then init_process_group("cclz") again in the same process, on
    one store and with a subgroup: a new communicator never reads an old one's id from the
    store (PyTorch numbers the groups from the start again; it used to fail with the old
    rendezvous's "connection refused")."""
    store = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), SIZE, RANK == 0,
                          timeout=datetime.timedelta(seconds=60))
    for i in range(3):
        dist.init_process_group("cclz", store=store, rank=RANK, world_size=SIZE)
        x = torch.full((3,), float(RANK + i))
        dist.all_reduce(x)
        expect_close(f"all_reduce after init {i}", x, torch.full((3,), float(sum(range(SIZE)) + SIZE * i)))
        sub = dist.new_group(list(range(SIZE)))
        y = torch.ones(2)
        dist.all_reduce(y, group=sub)
        expect_close(f"subgroup all_reduce after init {i}", y, torch.full((2,), float(SIZE)))
        dist.destroy_process_group()
    dist.init_process_group("gloo", store=dist.PrefixStore("finish", store), rank=RANK, world_size=SIZE)
    print(f"rank {RANK}: reinit ok", flush=True)


def case_coalesced_refusal() -> None:
    """A send or receive refused inside batch_isend_irecv (a receive buffer that is not
    contiguous) fails the batch's works, with the refusal, instead of raising inside PyTorch's
    coalescing manager, which then left the group coalescing: every later call was recorded and
    never run, and all_reduce returned its input unreduced."""
    dist.init_process_group("cclz", timeout=datetime.timedelta(seconds=20))
    peer = (RANK + 1) % SIZE
    ops = [dist.P2POp(dist.isend, torch.ones(2), peer),
           dist.P2POp(dist.irecv, torch.zeros(4)[::2], (RANK - 1) % SIZE)]
    works = dist.batch_isend_irecv(ops)
    try:
        for w in works:
            w.wait()
        fail("a batch with a non-contiguous receive buffer did not fail")
    except ValueError as e:
        if "contiguous" not in str(e):
            fail(f"the batch failed with another error: {e}")
    x = torch.full((2,), float(RANK + 1))
    dist.all_reduce(x)
    expect_close("all_reduce after a refused batch", x, torch.full((2,), SIZE * (SIZE + 1) / 2))
    print(f"rank {RANK}: coalesced refusal ok", flush=True)


def case_hook_error() -> None:
    """A hook call that fails reaches DDP's backward() as ccl's own error, not as a value
    DDP cannot read ("Unable to cast ... to Tensor")."""
    _, cz = groups()
    state = ccl.torch.hooks.CompressionState(cz, compression="int8")
    state.comm.destroy()  # every hook call now fails
    try:
        train(make_model(), cz, 1, hook_state=state)
    except Exception as e:  # noqa: BLE001 - what DDP raised is the subject
        text = str(e)
        if "Unable to cast" in text or "destroyed" not in text.lower():
            fail(f"backward() raised {type(e).__name__}: {text[:300]}")
        print(f"rank {RANK}: hook error ok: {type(e).__name__}", flush=True)
        return
    fail("backward() succeeded with a failing hook")


def case_hook_timeout() -> None:
    """The hook's communicator waits its state's timeout (2 s here), not CCL_TIMEOUT (60 s
    in this test's environment): rank 1 never runs backward, so rank 0's hook call fails."""
    import time

    gloo, _ = groups()
    state = ccl.torch.hooks.CompressionState(gloo, compression="int8", timeout=2)
    model = make_model()
    ddp = nn.parallel.DistributedDataParallel(model, process_group=gloo, bucket_cap_mb=1)
    ddp.register_comm_hook(state, ccl.torch.hooks.compressed_allreduce_hook)
    if RANK == 0:
        start = time.monotonic()
        try:
            ddp(torch.randn(4, 64)).sum().backward()
            fail("backward() succeeded with a peer that never took part")
        except Exception as e:  # noqa: BLE001 - what DDP raised is the subject
            took = time.monotonic() - start
            if not 1.5 <= took < 30:
                fail(f"the hook's call failed after {took:.1f} s, not near its 2 s timeout: {str(e)[:200]}")
            print(f"rank 0: hook timeout ok after {took:.1f} s", flush=True)
    dist.barrier(group=gloo)
    state.comm.abort()


def case_fsdp() -> None:
    """FSDP2 (fully_shard) on a CPU mesh over the ccl backend matches gloo's."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("cpu:gloo")
    results = {}
    for backend in ("gloo", "cclz"):
        mesh = init_device_mesh("cpu", (SIZE,)) if backend == "gloo" else None
        if mesh is None:
            from torch.distributed.device_mesh import DeviceMesh
            group = dist.new_group(backend="cclz")
            mesh = DeviceMesh.from_group(group, "cpu")
        model = make_model()
        for m in model:
            if isinstance(m, nn.Linear):
                fully_shard(m, mesh=mesh)
        fully_shard(model, mesh=mesh)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(RANK)
        for _ in range(10):
            x = torch.randn(16, 64, generator=g)
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        results[backend] = {k: v.full_tensor() for k, v in model.state_dict().items()}
    for k in results["gloo"]:
        expect_close(f"FSDP2 {k}", results["cclz"][k], results["gloo"][k], 1e-4, 1e-6)
    print(f"rank {RANK}: fsdp2 ok", flush=True)


def case_compressed_group() -> None:
    """Compression per process group (Options) and by environment (CCL_CODEC)."""
    gloo, _ = groups()
    z = dist.new_group(backend="cclz", pg_options=ccl.torch.Options(compression="int8", compress="allreduce"))
    x = torch.randn(1 << 16, generator=torch.Generator().manual_seed(RANK))
    a, b = x.clone(), x.clone()
    dist.all_reduce(a, group=gloo)
    dist.all_reduce(b, group=z)
    # Within int8's documented bound for an n-rank allreduce (n quantizations) of sums whose
    # magnitudes are at most n * max|x|.
    m = x.abs().max().reshape(1)
    dist.all_reduce(m, op=dist.ReduceOp.MAX, group=gloo)
    bound = ccl.Compression("int8").error_bound(SIZE * m.item(), SIZE * m.item(), SIZE)
    if (a - b).abs().max().item() > bound:
        fail(f"int8 allreduce error {(a - b).abs().max().item()} above the bound {bound}")
    y = torch.randn(1 << 16)
    w = y.clone()
    dist.broadcast(w, 0, group=z)  # not listed: exact
    dist.broadcast(y, 0, group=gloo)
    expect_close("broadcast on an allreduce-only codec group", w, y)
    s = ccl.torch.stats(z)["allreduce"]
    if not (s["compressed_calls"] >= 1 and s["wire_bytes"] < s["raw_bytes"] / 3):
        fail(f"group options: allreduce stats {s}")
    if ccl.torch.stats(z)["broadcast"]["compressed_calls"] != 0:
        fail("broadcast was compressed though only allreduce was listed")
    # "all" is CCL_COMPRESS's: every collective that can be compressed (the broadcast too).
    every = dist.new_group(backend="cclz", pg_options=ccl.torch.Options(compression="int8", compress="all"))
    dist.broadcast(torch.randn(1 << 16), 0, group=every)
    if ccl.torch.stats(every)["broadcast"]["compressed_calls"] != 1:
        fail(f"compress='all' left the broadcast exact: {ccl.torch.stats(every)['broadcast']}")
    if set(ccl.torch.stats(every)) != {k.name.lower() for k in ccl.OpKind}:
        fail(f"ccl.torch.stats keys {sorted(ccl.torch.stats(every))} are not ccl.OpKind's names")
    if os.environ.get("CCL_CODEC"):
        e = dist.new_group(backend="cclz")
        dist.all_reduce(x.clone(), group=e)
        s = ccl.torch.stats(e)["allreduce"]
        if s["compressed_calls"] != 1:
            fail(f"CCL_CODEC={os.environ['CCL_CODEC']}: allreduce stats {s}")
    print(f"rank {RANK}: compressed group ok", flush=True)


def expect_raises(kind, fragment, fn):
    try:
        fn()
    except kind as e:
        if fragment not in str(e):
            fail(f"{kind.__name__} without '{fragment}': {e}")
        return
    except Exception as e:  # noqa: BLE001
        fail(f"expected {kind.__name__} ('{fragment}'), got {type(e).__name__}: {e}")
    fail(f"expected {kind.__name__} ('{fragment}'), nothing raised")


def case_errors() -> None:
    """Bad input raises clear Python exceptions on the calling rank; the group still works."""
    _, cz = groups()
    expect_raises(ValueError, "contiguous", lambda: dist.all_reduce(torch.ones(8)[::2], group=cz))
    expect_raises(TypeError, "different types",
                  lambda: dist.all_gather_into_tensor(torch.empty(2 * SIZE, dtype=torch.float64), torch.ones(2),
                                                      group=cz))
    # A tensor off the CPU: torch routes meta tensors to its own kernels before any backend,
    # so the backend object is called directly (what torch does for a CUDA tensor on a
    # group whose CUDA backend is this one).
    backend = ccl.torch.backend_of(cz)
    expect_raises(ValueError, "CPU tensors", lambda: backend.allreduce([torch.empty(4, device="meta")]))
    if torch.cuda.is_available():
        expect_raises(ValueError, "CPU tensors", lambda: dist.all_reduce(torch.ones(4, device="cuda"), group=cz))
    expect_raises(TypeError, "not supported", lambda: dist.all_reduce(torch.ones(4, dtype=torch.uint16), group=cz))
    expect_raises(ValueError, "elements, not",
                  lambda: dist.all_gather_into_tensor(torch.empty(3), torch.ones(2), group=cz))
    expect_raises(ValueError, "reduce op", lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32),
                                                                   op=dist.ReduceOp.BAND, group=cz))
    expect_raises(ValueError, "splits add up",
                  lambda: dist.all_to_all_single(torch.empty(SIZE), torch.empty(SIZE), [1] * SIZE, [2] * SIZE,
                                                 group=cz))
    expect_raises(TypeError, "Options", lambda: dist.new_group(backend="cclz", pg_options={"codec": "int8"}))
    x = torch.ones(4)
    dist.all_reduce(x, group=cz)
    if x[0].item() != SIZE:
        fail(f"the group after the errors: {x}")
    print(f"rank {RANK}: errors ok", flush=True)


def case_timeout() -> None:
    """A call no peer joins fails within the group's timeout, with DistBackendError."""
    _, cz = groups(timeout=datetime.timedelta(seconds=3))
    dist.barrier(group=cz)
    if RANK == 1:
        t0 = time.monotonic()
        w = dist.all_reduce(torch.ones(4), group=cz, async_op=True)
        expect_raises(dist.DistBackendError, "", w.wait)
        took = time.monotonic() - t0
        if took > 30:
            fail(f"the lone allreduce failed after {took:.1f} s, not about 3")
        print(f"rank {RANK}: timeout ok after {took:.1f} s", flush=True)
    dist.barrier()  # gloo's: rank 0 waits for rank 1's verdict before leaving


def case_shrink() -> None:
    """torch.distributed.shrink_group on cclz after a rank's process dies: the two that go on
    get a group of their own (ccl's shrink sends nothing to the dead rank), and the DDP hook's
    state shrinks with them, keeping each bucket's feedback and its counters."""
    gloo, cz = groups()
    x = torch.ones(4)
    dist.all_reduce(x, group=cz)
    state = ccl.torch.hooks.CompressionState(cz, compression="int8", feedback="residual")
    model = make_model()
    ddp = nn.parallel.DistributedDataParallel(model, process_group=cz, bucket_cap_mb=1)
    ddp.register_comm_hook(state, ccl.torch.hooks.compressed_allreduce_hook)
    ddp(torch.randn(4, 64)).sum().backward()
    buckets = dict(state._feedback)
    before = state.stats().allreduce
    dist.barrier(group=cz)
    if RANK == SIZE - 1:
        os._exit(0)  # lost: no destroy, no goodbye
    small = dist.shrink_group([SIZE - 1], group=cz, shrink_flags=dist.distributed_c10d.SHRINK_ABORT)
    if small.size() != SIZE - 1 or small.rank() != RANK:
        fail(f"shrunk group: rank {small.rank()} of {small.size()}")
    y = torch.tensor([float(RANK + 1)])
    dist.all_reduce(y, group=small)
    want = sum(range(1, SIZE))
    if y.item() != want:
        fail(f"allreduce on the shrunk group gave {y.item()}, not {want}")
    state.shrink([SIZE - 1], process_group=small)
    if state.size != SIZE - 1 or any(state._feedback[i] is not fb for i, fb in buckets.items()):
        fail("the hook's state did not keep its size or its buckets' feedback")
    model2 = make_model()
    ddp2 = nn.parallel.DistributedDataParallel(model2, process_group=small, bucket_cap_mb=1)
    ddp2.register_comm_hook(state, ccl.torch.hooks.compressed_allreduce_hook)
    ddp2(torch.randn(4, 64)).sum().backward()
    after = state.stats().allreduce
    if not (after.calls > before.calls and after.raw_bytes > before.raw_bytes):
        fail(f"the hook's counters did not carry over: {before} then {after}")
    state.close()
    print(f"rank {RANK}: shrink ok: {small.size()} ranks, allreduce {y.item()}, hook calls {before.calls} -> "
          f"{after.calls}", flush=True)
    os._exit(0)  # the default (gloo) group still counts the lost rank: no collective teardown


def finish() -> None:
    """Ends a rank whose case passed: its groups destroyed (ccl's backends shut down there:
    workers joined, communicators destroyed), then the process, without finalizing the
    interpreter. Gloo's worker threads outlive destroy_process_group (ProcessGroupGloo has no
    shutdown) and may drop a finished work's tensors after the main thread has begun to
    finalize; taking the GIL there ends them inside a destructor: std::terminate, SIGABRT (2
    runs of 30 of case_hook; pytorch/pytorch#190489). Nothing of ccl's is left by then."""
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    globals()["case_" + sys.argv[1]]()
    finish()
