# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch's own torch.distributed with the nccl backend, under ccl's face (run with
LD_PRELOAD of libccl_nccl.so by the device kit's run.sh): world size 1, an all-reduce and a
broadcast of CUDA tensors, then an all-reduce captured into a CUDA graph and replayed twice.
Exits 0 when all passed, 1 when one failed, 77 without torch or a CUDA device."""
import ctypes
import os
import sys


def main() -> int:
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"skipped: no torch ({e})")
        return 77
    if not torch.cuda.is_available():
        print("skipped: no device (torch.cuda.is_available() is False)")
        return 77
    preload = os.environ.get("LD_PRELOAD", "")
    face = "ccl_nccl" in preload
    # torch.cuda.nccl.version() is the NCCL torch was built with, not the library it calls; the
    # process's ncclGetVersion (the first definition in load order) is the preloaded face's.
    got = ctypes.c_int(0)
    ctypes.CDLL(None).ncclGetVersion(ctypes.byref(got))
    print(f"torch {torch.__version__} (built with NCCL {torch.cuda.nccl.version()}), "
          f"device {torch.cuda.get_device_name(0)}, ncclGetVersion {got.value}, LD_PRELOAD={preload}")
    ok = True
    if face and got.value != 23203:
        print(f"FAIL ncclGetVersion is not ccl's face (23203): {got.value}")
        ok = False
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29533", rank=0, world_size=1,
                            device_id=torch.device("cuda", 0))
    # The communicator torch made: a face communicator starts with the face's magic word.
    try:
        backend = dist.group.WORLD._get_backend(torch.device("cuda", 0))
        word = ctypes.c_uint64.from_address(backend._comm_ptr()).value
        mine = word == 0x63636C6E63636C31
        print(f"{'ok  ' if mine == face else 'FAIL'} torch's NCCL communicator "
              f"{'is' if mine else 'is not'} one of ccl's face")
        ok = ok and mine == face
    except (AttributeError, RuntimeError) as e:
        print(f"note: the communicator could not be inspected ({e})")
    n = (1 << 20) + 37
    x = torch.arange(n, device="cuda", dtype=torch.float32) % 13 - 6
    y = x.clone()
    dist.all_reduce(y)
    torch.cuda.synchronize()
    good = torch.equal(x, y)
    print(f"{'ok  ' if good else 'FAIL'} all_reduce of {n} floats")
    ok = ok and good
    z = x.clone()
    dist.broadcast(z, src=0)
    torch.cuda.synchronize()
    good = torch.equal(x, z)
    print(f"{'ok  ' if good else 'FAIL'} broadcast of {n} floats")
    ok = ok and good
    # Captured: PyTorch's graphs (Megatron, torch.compile's reduce-overhead) capture NCCL calls.
    # With one rank torch may record nothing (the graph is then empty): the face's own capture
    # checks are face_device_check's.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    w = x.clone()
    with torch.cuda.stream(s):
        dist.all_reduce(w)  # warm-up outside the capture, as PyTorch asks
        torch.cuda.synchronize()
        w.copy_(x)
        with torch.cuda.graph(g, stream=s):
            dist.all_reduce(w)
    for k in range(2):
        w.copy_(x)
        g.replay()
        torch.cuda.synchronize()
        good = torch.equal(x, w)
        print(f"{'ok  ' if good else 'FAIL'} captured all_reduce, replay {k + 1}")
        ok = ok and good
    dist.destroy_process_group()
    print("PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
