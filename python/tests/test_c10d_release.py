# SPDX-License-Identifier: BSD-3-Clause
"""The cclz backend's worker thread never frees the tensors of a call it has run.

When Python has dropped a tensor and the Work of a call, the call's task holds their last
reference. Freed on the worker thread, the tensor's Python object needs the GIL there; if
the interpreter is finalizing at that moment (the program exits while a call runs or has
just failed, as the survivors of a dead peer do), Python ends that thread with pthread_exit
inside a noexcept destructor and the process dies of SIGABRT ("terminate called without an
active exception"). The backend releases finished tasks on the thread that posts the next
call (or destroys the group) instead; this checks, in a process of its own, on which thread
such a tensor's Python object is freed."""
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_finished_call_frees_its_tensors_on_the_callers_thread():
    import ccl.torch._build

    ccl.torch._build.load()
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "freed on main" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
