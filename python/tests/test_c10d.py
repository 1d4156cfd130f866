# SPDX-License-Identifier: BSD-3-Clause
"""ccl's torch.distributed backend ("cclz") and DDP hook, against gloo: each test starts N
processes of c10d_worker.py with torchrun-style env and expects every one to exit 0."""
import os
import socket
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(case: str, nranks: int, timeout: float = 240, worker: str = "c10d_worker.py", **env) -> list:
    port = free_port()
    procs = []
    for rank in range(nranks):
        e = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(nranks), LOCAL_RANK=str(rank),
                 MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1", **env)
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, worker), case], env=e,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout)[0])
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail(f"{case} with {nranks} ranks did not finish within {timeout} s")
    for rank, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"{case}: rank {rank} exited with {p.returncode}:\n{out[-4000:]}"
    return outs


@pytest.fixture(scope="module", autouse=True)
def extension():
    """Compiles the backend once, before the ranks race to (torch's build lock serialises them)."""
    import ccl.torch._build

    ccl.torch._build.load()


@pytest.mark.parametrize("nranks", [2, 3])
def test_every_op_matches_gloo(nranks):
    launch("ops", nranks)


@pytest.mark.parametrize("nranks", [2, 4])
def test_ddp_matches_gloo(nranks):
    launch("ddp", nranks)


def test_futures_hold_the_result_and_callbacks_may_call_the_group():
    launch("futures", 2)


def test_reinit_in_the_same_process():
    launch("reinit", 2)


def test_a_refused_call_in_a_batch_fails_the_batch_not_the_group():
    launch("coalesced_refusal", 2)


@pytest.mark.parametrize("codec,margin", [("int8", "0.01"), ("int4", "0.05")])
def test_ddp_hook_compressed_with_feedback(codec, margin):
    outs = launch("hook", 2, HOOK_CODEC=codec, HOOK_MARGIN=margin)
    assert "hook " + codec + " on cclz ok" in outs[0] and "on gloo ok" in outs[0]


def test_fsdp2_matches_gloo():
    launch("fsdp", 2)


def test_compression_by_group_options_and_environment():
    # CCL_CODEC_SHM=on: on one host every peer is over shared memory, where the default codec
    # is otherwise not applied.
    launch("compressed_group", 2, CCL_CODEC="int8", CCL_CODEC_SHM="on")


def test_ddp_hook_error_reaches_backward():
    launch("hook_error", 2)


def test_ddp_hook_waits_its_timeout():
    launch("hook_timeout", 2, timeout=120, CCL_TIMEOUT="60")


def test_bad_input_raises_clear_errors():
    launch("errors", 2)


def test_timeout_is_honoured():
    outs = launch("timeout", 2, timeout=120)
    assert "timeout ok" in outs[1]


def test_readme_ddp_example():
    """The README's DDP script runs under torchrun and reports fewer wire than raw bytes."""
    import re

    example = os.path.join(HERE, "..", "examples", "ddp.py")
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    out = subprocess.run([torchrun, "--nproc-per-node", "2", "--master-port", str(free_port()), example],
                         env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    m = re.search(r"loss (\S+)  allreduce: raw (\S+) MB, wire (\S+) MB", out.stdout)
    assert m, out.stdout
    loss, raw, wire = map(float, m.groups())
    assert wire < raw / 4 and loss < 1.0, m.group(0)


def test_shrink_group_after_a_rank_dies():
    outs = launch("shrink", 3, CCL_TIMEOUT="30")
    for rank in (0, 1):
        assert "shrink ok" in outs[rank], outs[rank][-2000:]
