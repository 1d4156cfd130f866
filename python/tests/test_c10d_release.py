# SPDX-License-Identifier: BSD-3-Clause
"""The cclz backend's worker thread never frees the tensors of a call it has run, and keeps none
of a call that was waited for.

When Python has dropped a tensor and the Work of a call, the call's task holds their last
reference. Freed on the worker thread, the tensor's Python object needs the GIL there; if
the interpreter is finalizing at that moment (the program exits while a call runs or has
just failed, as the survivors of a dead peer do), Python ends that thread with pthread_exit
inside a noexcept destructor and the process dies of SIGABRT ("terminate called without an
active exception"). The backend releases finished tasks on a caller's thread instead: the one
that waits for the call, posts the next one or destroys the group; this checks, in a process of
its own, on which thread such a tensor's Python object is freed, and that a call that was waited
for holds none of its tensors afterwards."""
import os
import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch")

SCRIPT = r"""
import os, threading, time, weakref
import torch, torch.distributed as dist
import ccl.torch
dist.init_process_group("cclz")
freed = []
t = torch.ones(16)
t.tag = "kept"  # a Python attribute: torch keeps the Python object while C++ holds the tensor
weakref.finalize(t, lambda: freed.append(threading.get_ident()))
dist.all_reduce(t, async_op=True)
del t  # the running call's task now holds the only reference
time.sleep(0.5)  # the call has run
dist.barrier()  # the next call releases the finished one, on this thread
time.sleep(0.2)
print("freed on", "main" if freed == [threading.main_thread().ident] else ("other" if freed else "none"))
dist.destroy_process_group()
"""


# What a finished call held is released by wait() on the caller's thread, once nothing of the
# worker's holds it: the tensors of a call that was waited for are freed when the caller drops
# them (and the Work), on its thread, not at the next call (they stayed alive until then, a
# large tensor pinned between training phases, the backend's own scratch tensors too).
SCRIPT_WAITED = r"""
import threading, weakref
import torch, torch.distributed as dist
import ccl.torch
dist.init_process_group("cclz")
main = threading.main_thread().ident


def watched(n):
    t = torch.ones(n)
    t.tag = "kept"  # a Python attribute: torch keeps the Python object while C++ holds the tensor
    freed = []
    weakref.finalize(t, lambda: freed.append(threading.get_ident()))
    return t, freed


def where(freed):
    return "main" if freed == [main] else ("other" if freed else "none")


t, freed = watched(1 << 20)
dist.all_reduce(t)  # synchronous: returns from wait()
del t
print("all_reduce:", where(freed))
inp, freed_in = watched(4)
out, freed_out = watched(4)
work = dist.all_gather_into_tensor(out, inp, async_op=True)
work.wait()
del work, inp, out
print("all_gather_into_tensor:", where(freed_in), where(freed_out))
inp, freed_in = watched(3)
outs = [torch.zeros(3)]
dist.all_gather(outs, inp)  # the backend gathers into a tensor of its own, then copies out
del inp
print("all_gather:", where(freed_in))
dist.destroy_process_group()
"""


# A call whose Work is dropped without wait() holds its tensors only while it runs: dropped after
# the call completed, the Work releases them on the caller's thread when it goes; dropped before,
# they are released once the call completes, on Python's main thread (a pending call), with no
# other call after it (they stayed alive until the next call). Two ranks: rank 1 joins the second
# call only once rank 0 has dropped its Work and tensor, so that call is still running then.
SCRIPT_DROPPED = r"""
import threading, time, weakref
import torch, torch.distributed as dist
import ccl.torch
dist.init_process_group("cclz")
rank = dist.get_rank()
store = dist.distributed_c10d._get_default_store()
main = threading.main_thread().ident


def watched(n):
    t = torch.ones(n)
    t.tag = "kept"  # a Python attribute: torch keeps the Python object while C++ holds the tensor
    freed = []
    weakref.finalize(t, lambda: freed.append(threading.get_ident()))
    return t, freed


def where(freed):
    return "main" if freed == [main] else ("other" if freed else "none")


t, freed = watched(1 << 20)
work = dist.all_reduce(t, async_op=True)
while not work.is_completed():  # no wait(): it would release what the call held
    time.sleep(0.001)
del t
print("completed, Work kept:", where(freed))
del work
print("completed, Work dropped:", where(freed))

t, freed = watched(16)
if rank == 0:
    dist.all_reduce(t, async_op=True)  # its Work is dropped at once
    del t
    print("running, Work dropped:", where(freed))
    store.set("dropped", "1")
else:
    store.wait(["dropped"])
    dist.all_reduce(t, async_op=True)
    del t
while not freed:  # no other call comes: released once the call has completed
    time.sleep(0.001)
print("completed after its Work was dropped:", where(freed))
dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(script: str) -> str:
    import ccl.torch._build

    ccl.torch._build.load()
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout + out.stderr


def run_ranks(script: str, nranks: int, timeout: float = 120) -> list:
    import ccl.torch._build

    ccl.torch._build.load()
    port = free_port()
    procs = []
    for rank in range(nranks):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(nranks), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout)[0])
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        outs = [p.communicate()[0] for p in procs]
        pytest.fail(f"did not finish within {timeout} s (a tensor never released?):\n" + "\n".join(
            o[-2000:] for o in outs))
    for rank, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {rank} exited with {p.returncode}:\n{out[-4000:]}"
    return outs


def test_finished_call_frees_its_tensors_on_the_callers_thread():
    out = run(SCRIPT)
    assert "freed on main" in out, out[-4000:]


def test_a_waited_call_keeps_none_of_its_tensors():
    out = run(SCRIPT_WAITED)
    for line in ("all_reduce: main", "all_gather_into_tensor: main main", "all_gather: main"):
        assert line in out, out[-4000:]


def test_a_dropped_work_keeps_its_tensors_only_while_the_call_runs():
    outs = run_ranks(SCRIPT_DROPPED, 2)
    for rank, out in enumerate(outs):
        for line in ("completed, Work kept: none", "completed, Work dropped: main",
                     "completed after its Work was dropped: main"):
            assert line in out, f"rank {rank}: {line!r} not in:\n{out[-4000:]}"
    assert "running, Work dropped: none" in outs[0], outs[0][-4000:]
