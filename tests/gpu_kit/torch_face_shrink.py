# SPDX-License-Identifier: BSD-3-Clause
"""ProcessGroupNCCL's shrink under ccl's face (run with LD_PRELOAD of libccl_nccl.so by the
device kit's run.sh): three processes on device 0 with the nccl backend pass checked
all-reduces of CUDA tensors; the last one then ends without a word (os._exit, as a crash
would), and the other two, told which rank ended (by their launcher, as torchrun's agent
knows), call torch.distributed.shrink_group without it (NCCL's ncclCommShrink with
NCCL_SHRINK_ABORT, which the face makes a cclCommShrink) and pass three checked all-reduces
on the smaller group. The launcher hosts the job's store, which must outlive any rank.
Exits 0 when all passed, 1 when one failed, 77 without torch, a CUDA device or
torch.distributed.shrink_group.

    --cpu   the same script on CPU tensors over ccl's own cclz backend (ccl.torch), for a
            machine without a device: the launcher, the store, the shrink and the checks"""
import datetime
import multiprocessing as mp
import os
import socket
import sys
import tempfile
import time

RANKS = 3
LOST = RANKS - 1
N = (1 << 20) + 37


def value(rank, torch, device):
    return (torch.arange(N, device=device, dtype=torch.float32) % 13 - 6) * (rank + 1)


def checked_all_reduce(dist, torch, device, ranks, me, group, what):
    """An all-reduce of every rank's value(rank) on `group` (whose members are `ranks`)."""
    y = value(me, torch, device)
    dist.all_reduce(y, group=group)
    if device == "cuda":
        torch.cuda.synchronize()
    want = sum(value(r, torch, device) for r in ranks)
    good = torch.equal(y, want)
    print(f"{'ok  ' if good else 'FAIL'} rank {me}: {what}", flush=True)
    return good


def rank_main(rank, port, folder, cpu):
    import torch
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", port, RANKS, False, timeout=datetime.timedelta(seconds=60))
    timeout = datetime.timedelta(seconds=60)
    if cpu:
        import ccl.torch  # noqa: F401  (registers cclz)

        device = "cpu"
        dist.init_process_group("cclz", store=store, rank=rank, world_size=RANKS, timeout=timeout)
    else:
        device = "cuda"
        torch.cuda.set_device(0)
        dist.init_process_group("nccl", store=store, rank=rank, world_size=RANKS, device_id=torch.device("cuda", 0),
                                timeout=timeout)
    ok = all(checked_all_reduce(dist, torch, device, range(RANKS), rank, None, f"all_reduce {k + 1} of 3 ranks")
             for k in range(3))
    if rank == LOST:
        os._exit(0 if ok else 1)  # gone, its communicator neither destroyed nor aborted
    path = os.path.join(folder, "lost")
    start = time.monotonic()
    while not os.path.exists(path):  # the launcher's word: which rank's process ended
        if time.monotonic() - start > 60:
            print(f"FAIL rank {rank}: the launcher did not name the lost rank", flush=True)
            os._exit(1)
        time.sleep(0.01)
    lost = int(open(path).read())
    # SHRINK_ABORT: the lost rank's communicator is aborted, not waited for (where torch has it).
    abort = getattr(dist.distributed_c10d, "SHRINK_ABORT", None)
    small = dist.shrink_group([lost]) if abort is None else dist.shrink_group([lost], shrink_flags=abort)
    left = [r for r in range(RANKS) if r != lost]
    renumbered = small.rank() == left.index(rank) and small.size() == len(left)
    print(f"{'ok  ' if renumbered else 'FAIL'} rank {rank}: rank {small.rank()} of {small.size()} after the shrink",
          flush=True)
    ok = ok and renumbered
    for k in range(3):
        ok = checked_all_reduce(dist, torch, device, left, rank, small, f"all_reduce {k + 1} on the shrunk group") and ok
    dist.destroy_process_group(small)
    os._exit(0 if ok else 1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    cpu = "--cpu" in sys.argv[1:]
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"skipped: no torch ({e})")
        return 77
    if cpu:
        try:
            import ccl.torch  # noqa: F401
        except ImportError as e:
            print(f"skipped: no ccl.torch ({e})")
            return 77
    elif not torch.cuda.is_available():
        print("skipped: no device (torch.cuda.is_available() is False)")
        return 77
    if not hasattr(dist, "shrink_group"):
        print(f"skipped: torch {torch.__version__} has no torch.distributed.shrink_group")
        return 77
    print(f"torch {torch.__version__}, device {'cpu' if cpu else torch.cuda.get_device_name(0)}, "
          f"LD_PRELOAD={os.environ.get('LD_PRELOAD', '')}", flush=True)
    port = free_port()
    store = dist.TCPStore("127.0.0.1", port, RANKS, True, timeout=datetime.timedelta(seconds=60),
                          wait_for_workers=False)
    ctx = mp.get_context("spawn")  # a fresh process per rank, as torchrun makes them
    with tempfile.TemporaryDirectory() as folder:
        procs = [ctx.Process(target=rank_main, args=(r, port, folder, cpu)) for r in range(RANKS)]
        for p in procs:
            p.start()
        procs[LOST].join(120)
        if procs[LOST].exitcode is None:
            procs[LOST].kill()
        with open(os.path.join(folder, "lost.tmp"), "w") as f:
            f.write(str(LOST))
        os.rename(os.path.join(folder, "lost.tmp"), os.path.join(folder, "lost"))
        codes = []
        for p in procs:
            p.join(120)
            if p.exitcode is None:
                p.kill()
                p.join()
                print(f"FAIL rank {procs.index(p)} still ran 120 s after the loss")
            codes.append(p.exitcode)
    ok = codes[LOST] == 0 and all(c == 0 for c in codes)
    print(f"exit codes {codes}")
    print("PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
