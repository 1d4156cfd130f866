# SPDX-License-Identifier: BSD-3-Clause
"""Fault trial: a rank of a 4-process DDP job on ccl's torch.distributed backend dies mid-step.

Each trial starts 4 processes of this script (--worker) that train a small MLP with
DistributedDataParallel over a process group of the ``cclz`` backend (no gloo anywhere);
every other trial (odd seed + trial) also registers ccl's DDP comm hook (ccl.torch.hooks,
int8 with error feedback), whose allreduces run on a ccl communicator of their own. At a
step drawn from --seed, a random fraction of a step after the drawn rank has started it,
the parent sends that rank SIGKILL (or SIGSTOP with --signal stop: a rank that hangs
instead of dying). The contract checked: every other rank raises a Python exception out of
its training step whose text names ccl's error (its text for the code, "unreachable",
"CCL_TIMEOUT"...) within the process group's timeout (--timeout, which the backend gives
ccl as the communicator's deadline; CCL_TIMEOUT is set to the same for the hook's
communicator) plus --margin, then exits with an error status: no survivor hangs or dies of
a signal. Every rank reports a checksum of its parameters at each step; replicas that
disagree after a step that returned count as wrong results. Why: a framework user sees ccl
only through these exceptions, and a job whose survivors hang until an outside watchdog
kills them cannot be restarted promptly by its launcher (torchrun, a scheduler).

What the backend does on error, the question that TORCH_NCCL_ASYNC_ERROR_HANDLING and
TORCH_NCCL_BLOCKING_WAIT answer for ProcessGroupNCCL (they are ProcessGroupNCCL's and mean
nothing to cclz): the cclz backend has no watchdog thread and never aborts its
communicator or the process by itself. Each call runs on the group's worker thread; a ccl
call that fails (ccl's own deadline, "no progress for ... ms (CCL_TIMEOUT)", bounds every
wait) completes its Work and Future with a DistBackendError carrying ccl's text ("ccl:
cclAllReduce failed: remote process exited or there was a network error: ... UCX receive
from rank 3 failed: the peer is unreachable"). The error surfaces where the program waits:
DDP's reducer waits on the Future at the end of backward(), so loss.backward() raises;
work.wait() rethrows it (and raises DistBackendError itself if the call has not completed
within the timeout); is_completed() is True and is_success() False. ccl marks the failed
communicator, so every later call on the group fails at once ("the communicator failed
earlier"). A rank that never waits on a failed Work does not learn of the error. What then
frees the communicator is the program's choice, and each trial draws one for its
survivors: nothing (an uncaught exception; torch does not destroy process groups at exit,
so cclCommDestroy is never called and the process simply ends), dist.destroy_process_group()
(cclCommDestroy) or dist.distributed_c10d._abort_process_group() (Backend.abort:
cclCommAbort, what a watchdog would do); both return within milliseconds on the failed
group. Each survivor also posts one more all_reduce after the exception and calls
work.wait(), which must raise, not return and not hang. With the hook, the group's own
communicator has not failed: that call fails on its own (at once after a SIGKILL, after the
timeout after a SIGSTOP). With the hook, backward() raises the hook's own ccl error (its
Future is chained with then(), which DDP's reducer reads as a failure), and the hook's
communicator waits the group's timeout (CompressionState's timeout).

With --shrink the survivors go on instead (kind ddp_shrink). The parent hosts the job's
TCPStore, as torchrun's agent does (TORCHELASTIC_USE_AGENT_STORE): shrink_group makes the
smaller group through the store, which must outlive any rank (hosted by rank 0, as a plain
init_process_group does, it dies with rank 0 and every shrink times out). Once their launcher
(here, the parent, through a file) names the lost rank, each calls torch.distributed.shrink_group on the
default group (cclz: ccl's cclCommShrink, nothing sent to the lost rank), shrinks the hook's
state with it, wraps the model in a new DDP on the smaller group (which broadcasts rank 0's
parameters: survivors may have been one step apart), takes rank 0's step and momentum, and
trains to the last step. Checked: every survivor finishes, and the replicas agree after
every step on the smaller group.

    <torch venv python> ddp_kill.py --trials N --seed S [--signal kill|stop] [--timeout 10] [--shrink]

One JSON line per trial on stdout (tests/faults' shape); exits 0 when every trial is ok,
1 otherwise, 77 when torch or ccl.torch cannot be imported (the test is then skipped).
"""
import argparse
import datetime
import json
import os
import queue
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

RANKS = 4
# An error "names ccl's error": ccl's own prefix or exception, and what failed.
CCL_NAMED = re.compile(r"\bccl\b|ccl[A-Z]|Ccl[A-Z]", re.I)
CAUSE_NAMED = re.compile(r"remote|unreachable|CCL_TIMEOUT|no progress|timeout|timed out|aborted|failed earlier|"
                         r"exited|did not complete", re.I)


# ---------------------------------------------------------------------------------------
# One rank (run as: ddp_kill.py --worker, with RANK, WORLD_SIZE, MASTER_ADDR/PORT set).
# ---------------------------------------------------------------------------------------

def say(kind, **fields):
    """One line to the parent on stdout: '@@ {json}'."""
    fields["kind"] = kind
    fields["t"] = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process of the host
    sys.stdout.write("@@ " + json.dumps(fields) + "\n")
    sys.stdout.flush()


def train_step(kind, step, model, wrapped, opt, g, target):
    """One step of the MLP through `wrapped` (a DDP module), after reporting the checksum of
    the parameters every replica must agree on after the steps before it."""
    import torch
    import torch.nn as nn

    checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
    say(kind, step=step, checksum=checksum.hex())
    x = torch.randn(64, 128, generator=g)
    loss = nn.functional.mse_loss(wrapped(x), torch.tanh(x @ target))
    opt.zero_grad()
    loss.backward()
    opt.step()


def worker(args):
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    import ccl.torch

    rank = int(os.environ["RANK"])
    torch.set_num_threads(1)
    # The group's timeout is what the backend gives ccl as the communicator's deadline
    # (cclConfig_t.timeoutMs); CCL_TIMEOUT (set by the parent) covers the hook's communicator.
    dist.init_process_group("cclz", timeout=datetime.timedelta(seconds=args.timeout))
    torch.manual_seed(0)  # the same initial model everywhere (DDP broadcasts it anyway)
    model = nn.Sequential(nn.Linear(128, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 512),
                          nn.GELU(), nn.Linear(512, 16))
    # Small buckets: several allreduces per step, overlapping backward.
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.5)
    if args.hook:
        state = ccl.torch.hooks.CompressionState(dist.group.WORLD, compression="int8", feedback="residual",
                                                 timeout=args.timeout)
        ddp.register_comm_hook(state, ccl.torch.hooks.compressed_allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(1000 + rank)
    target = torch.randn(128, 16, generator=torch.Generator().manual_seed(7))
    try:
        for step in range(args.steps):
            train_step("step", step, model, ddp, opt, g, target)
    except Exception as e:  # noqa: BLE001 - what a training loop sees is the point
        say("error", type=type(e).__name__, text=str(e).replace("\n", " ")[:600])
        if args.shrink:
            go_on(args, dist, torch, nn, ddp, model, opt, g, target, state if args.hook else None, step)
            return
        # One more collective on the group: work.wait() must raise (not return, not hang).
        start = time.monotonic()
        try:
            dist.all_reduce(torch.ones(4), async_op=True).wait()
            outcome = "returned"
        except Exception as e2:  # noqa: BLE001
            outcome = type(e2).__name__ + ": " + str(e2).replace("\n", " ")[:300]
        say("followup", seconds=time.monotonic() - start, outcome=outcome)
        # Then what the program does with the group: nothing (an uncaught exception: torch
        # does not destroy the group at exit, so neither is ccl's communicator destroyed,
        # and the interpreter may finalize while the backend's thread still ends a call),
        # dist.destroy_process_group() (cclCommDestroy) or torch's abort (Backend.abort:
        # cclCommAbort, what a watchdog does). Both must return; then the process exits 1,
        # not by a signal.
        start = time.monotonic()
        if args.on_error == "destroy":
            dist.destroy_process_group()
        elif args.on_error == "abort":
            dist.distributed_c10d._abort_process_group()
        say("teardown", seconds=time.monotonic() - start)
        sys.exit(1)
    say("done")
    dist.destroy_process_group()


def go_on(args, dist, torch, nn, ddp, model, opt, g, target, state, step):
    """--shrink: the survivors' way on after the error, without the lost rank."""
    import ccl.torch

    start = time.monotonic()
    path = os.path.join(args.shrink, "lost")
    while not os.path.exists(path):  # what the launcher knows: which rank's process ended
        if time.monotonic() - start > 2 * args.timeout:
            raise RuntimeError("the launcher did not name the lost rank")
        time.sleep(0.01)
    with open(path) as f:
        lost = int(f.read())
    small = dist.shrink_group([lost], shrink_flags=dist.distributed_c10d.SHRINK_ABORT)
    if state is not None:
        state.shrink([lost], process_group=small)
    # Survivors may be one step apart (a rank whose buckets all completed before the loss took
    # its optimizer step): rank 0's parameters (DDP broadcasts them), momentum and step go on.
    ddp2 = nn.parallel.DistributedDataParallel(model, process_group=small, bucket_cap_mb=0.5)
    if state is not None:
        ddp2.register_comm_hook(state, ccl.torch.hooks.compressed_allreduce_hook)
    for p in model.parameters():
        buf = opt.state.get(p, {}).get("momentum_buffer")
        if buf is None:
            buf = torch.zeros_like(p)
            opt.state.setdefault(p, {})["momentum_buffer"] = buf
        dist.broadcast(buf, group_src=0, group=small)
    at = torch.tensor([step], dtype=torch.int64)
    dist.broadcast(at, group_src=0, group=small)
    say("shrunk", seconds=time.monotonic() - start, ranks=small.size(), rank=small.rank(), step=int(at.item()))
    for step in range(int(at.item()), args.steps):
        train_step("step_after", step, model, ddp2, opt, g, target)
    if state is not None:
        state.close()
    say("done")
    dist.destroy_process_group()


# ---------------------------------------------------------------------------------------
# The parent: one trial.
# ---------------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reader(rank, stream, events):
    """Forwards the '@@' lines of one worker to the parent's queue."""
    for line in stream:
        if line.startswith("@@ "):
            try:
                events.put((rank, json.loads(line[3:])))
            except ValueError:
                pass
    events.put((rank, {"kind": "eof"}))


def one_line(text):
    return " ".join(str(text).split())[:600]


def run_trial(args, trial, logdir):
    rng = random.Random(args.seed * 1000003 + trial)
    stop = args.signal == "stop"
    hook = (args.seed + trial) % 2 == 1  # trials alternate between DDP's allreduce and ccl's hook
    victim = rng.randrange(RANKS)
    kill_step = rng.randint(2, args.steps - 4)
    delay_fraction = rng.random()  # where in the step, as a fraction of the last step's time
    on_error = rng.choice(("exit", "destroy", "abort"))  # what the survivors do after the exception
    shrinking = args.shrink is not None
    kind = "ddp_shrink" if shrinking else "ddp_stop" if stop else "ddp_kill"
    result = {"kind": kind, "trial": trial, "ok": False, "survivors": RANKS - 1,
              "errors": 0, "completed": 0, "hangs": 0, "wrong": 0, "crashes": 0, "t_error": [], "detail": ""}

    port = free_port()
    store = None
    if shrinking:  # the launcher's store (torchrun's agent store): it outlives any rank
        import torch.distributed as dist

        store = dist.TCPStore("127.0.0.1", port, RANKS, True, timeout=datetime.timedelta(seconds=60),
                              wait_for_workers=False)
    events = queue.Queue()
    procs, errfiles = [], []
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--timeout", str(args.timeout), "--steps",
           str(args.steps), "--on-error", on_error] + (["--hook"] if hook else []) + \
        (["--shrink", logdir + f"/trial{trial}"] if shrinking else [])
    if shrinking:
        os.makedirs(logdir + f"/trial{trial}", exist_ok=True)
    for rank in range(RANKS):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(RANKS), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1", CCL_TIMEOUT=str(args.timeout))
        if shrinking:
            env["TORCHELASTIC_USE_AGENT_STORE"] = "True"
        err = open(os.path.join(logdir, f"trial{trial}.rank{rank}.stderr"), "w+")
        errfiles.append(err)
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        procs.append(p)
        threading.Thread(target=reader, args=(rank, p.stdout, events), daemon=True).start()

    steps = {r: {} for r in range(RANKS)}  # rank -> step -> checksum
    step_times = []  # the victim's step start times
    errors, followups, teardowns, eof = {}, {}, {}, set()
    after = {r: {} for r in range(RANKS)}  # --shrink: rank -> step -> checksum on the smaller group
    shrunk, done = {}, set()
    t_kill = None
    start_deadline = time.monotonic() + args.startup
    problem = ""

    def handle(rank, ev):
        k = ev["kind"]
        if k == "step":
            steps[rank][ev["step"]] = ev["checksum"]
            if rank == victim:
                step_times.append(ev["t"])
        elif k == "error":
            errors[rank] = ev
        elif k == "followup":
            followups[rank] = ev
        elif k == "teardown":
            teardowns[rank] = ev
        elif k == "step_after":
            after[rank][ev["step"]] = ev["checksum"]
        elif k == "shrunk":
            shrunk[rank] = ev
        elif k == "done":
            done.add(rank)
        elif k == "eof":
            eof.add(rank)

    # Until the victim starts the chosen step (or something goes wrong first).
    while t_kill is None:
        try:
            rank, ev = events.get(timeout=0.05)
            handle(rank, ev)
        except queue.Empty:
            pass
        if steps[victim].get(kill_step) is not None:
            # Into the step: a fraction of the previous step's duration after its start.
            last = step_times[-1] - step_times[-2] if len(step_times) >= 2 else 0.05
            time.sleep(delay_fraction * last)
            os.kill(procs[victim].pid, signal.SIGSTOP if stop else signal.SIGKILL)
            t_kill = time.monotonic()
            if shrinking:  # the launcher names the process that ended (a stopped one is killed)
                if stop:
                    os.kill(procs[victim].pid, signal.SIGKILL)
                with open(logdir + f"/trial{trial}/lost.tmp", "w") as f:
                    f.write(str(victim))
                os.rename(logdir + f"/trial{trial}/lost.tmp", logdir + f"/trial{trial}/lost")
        elif errors or eof or any(p.poll() is not None for p in procs):
            problem = "a rank failed or ended before the fault was injected"
            break
        elif time.monotonic() > start_deadline:
            problem = f"the job did not reach step {kill_step} within {args.startup} s"
            break

    # The survivors: an error within the timeout (plus a margin for the chain of detection),
    # then an exit; nothing may still run at the exit deadline. The follow-up call may take
    # a second timeout (with the hook, after a SIGSTOP), hence twice the timeout.
    survivors = [r for r in range(RANKS) if r != victim]
    exit_deadline = (t_kill or time.monotonic()) + 2 * args.timeout + args.exit_grace
    if shrinking:  # and the steps left on the smaller group
        exit_deadline += args.startup
    exited = {}  # rank -> when its process ended
    if problem:  # no fault was injected: nothing to wait for
        for p in procs:
            p.kill()
    while time.monotonic() < exit_deadline and len(exited) < len(survivors):
        try:
            rank, ev = events.get(timeout=0.05)
            handle(rank, ev)
        except queue.Empty:
            pass
        for r in survivors:
            if r not in exited and procs[r].poll() is not None:
                exited[r] = time.monotonic()
    hung = [r for r in survivors if r not in exited and not problem]
    result["hangs"] = len(hung)
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
    time.sleep(0.1)  # what the readers still hold
    while True:
        try:
            handle(*events.get_nowait())
        except queue.Empty:
            break

    texts = []
    for r in survivors:
        code = procs[r].returncode
        err = errors.get(r)
        t = err["t"] - t_kill if err is not None and t_kill is not None else None
        if t is not None:
            result["t_error"].append(round(t, 3))
        if r in hung:
            texts.append(f"rank {r} raised after {t:.1f} s but did not exit" if t is not None else
                         f"rank {r} neither raised nor exited")
        elif code < 0 and problem:
            continue  # stopped by this script: no fault was injected
        elif code < 0:
            result["crashes"] += 1  # a signal this script did not send
            texts.append(f"rank {r} died of signal {-code}")
        elif code == 0 and err is None:
            result["completed"] += 1
        elif shrinking and err is not None and code == 0 and r in done and r in shrunk:
            named = CCL_NAMED.search(err["text"]) and CAUSE_NAMED.search(err["text"])
            if named and t is not None and t <= args.timeout + args.margin:
                result["errors"] += 1
                texts.append(f"rank {r} {err['type']}: {err['text']}")
            else:
                texts.append(f"rank {r}'s error came late or names no ccl error: {err['type']}: {err['text']}")
        elif err is not None and code != 0:
            named = CCL_NAMED.search(err["text"]) and CAUSE_NAMED.search(err["text"])
            if named and t is not None and t <= args.timeout + args.margin:
                result["errors"] += 1
                texts.append(f"rank {r} {err['type']}: {err['text']}")
            elif not named:
                texts.append(f"rank {r}'s error names no ccl error: {err['type']}: {err['text']}")
            else:
                texts.append(f"rank {r} raised {t:.1f} s after the fault, past {args.timeout}+{args.margin} s")
        else:
            errfiles[r].seek(0)
            tail = errfiles[r].read()[-300:]
            texts.append(f"rank {r} exited {code} without a training-step exception: {tail}")
    # Replicas must agree after every step they all returned from (victim included, until it died).
    for step in sorted({s for r in range(RANKS) for s in steps[r]}):
        sums = {steps[r][step] for r in range(RANKS) if step in steps[r]}
        if len(sums) > 1:
            result["wrong"] += 1
            texts.insert(0, f"replicas disagree before step {step}: {sorted(sums)}")
    unfinished = 0
    if shrinking:  # on the smaller group: every survivor to the last step, replicas alike
        for step in sorted({s for r in survivors for s in after[r]}):
            sums = {after[r][step] for r in survivors if step in after[r]}
            if len(sums) > 1:
                result["wrong"] += 1
                texts.insert(0, f"replicas disagree before step {step} on the smaller group: {sorted(sums)}")
        for r in survivors:
            if r not in done and r not in hung and not problem:
                texts.insert(0, f"rank {r} did not finish on the smaller group")
                unfinished += 1
    # A follow-up wait() that returned on a group with a dead member is a wrong result.
    for r, f in followups.items():
        if f["outcome"] == "returned":
            result["wrong"] += 1
            texts.insert(0, f"rank {r}: an all_reduce after the fault returned successfully")

    result["ok"] = (not problem and unfinished == 0 and result["errors"] == len(survivors) and result["hangs"] == 0
                    and result["crashes"] == 0 and result["wrong"] == 0)
    where = f"victim rank {victim} at step {kill_step}{' (hook int8)' if hook else ''}, then {on_error}"
    if problem:
        # The last line a rank that ended wrote on stderr says why.
        why = ""
        for r, p in enumerate(procs):
            errfiles[r].seek(0)
            lines = [line for line in errfiles[r].read().splitlines() if line.strip()]
            if p.returncode not in (0, -signal.SIGKILL) and lines:
                why = f"; rank {r} exited {p.returncode}: {lines[-1]}"
                break
        detail = problem + why
    elif result["ok"] and shrinking:
        took = max(v["seconds"] for v in shrunk.values())
        at = min(v["step"] for v in shrunk.values())
        detail = (f"all {len(survivors)} survivors shrank within {took:.2f} s of their error and trained steps "
                  f"{at}-{args.steps - 1} on {len(survivors)} ranks, replicas alike; {texts[0]}")
    elif result["ok"]:
        waits = max(f["seconds"] for f in followups.values()) if followups else float("nan")
        teardown = max(t["seconds"] for t in teardowns.values()) if teardowns else float("nan")
        detail = (f"the next wait() raised within {waits:.2f} s, {on_error} took {teardown:.2f} s, all survivors "
                  f"exited {max(exited.values()) - t_kill:.1f} s after the fault; {texts[0]}")
    else:
        detail = "; ".join(texts) or "survivors did not report"
        if result["hangs"]:
            limit = 2 * args.timeout + args.exit_grace
            detail = f"{result['hangs']} survivor(s) still ran {limit:g} s after the fault; " + detail
    result["detail"] = one_line(f"{where}: {detail}")
    for f in errfiles:
        f.close()
    del store
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--signal", choices=("kill", "stop"), default="kill")
    ap.add_argument("--timeout", type=int, default=10, help="process group timeout and CCL_TIMEOUT, seconds")
    ap.add_argument("--margin", type=float, default=5.0, help="seconds past --timeout an error may come")
    ap.add_argument("--exit-grace", type=float, default=15.0,
                    help="seconds past twice --timeout by which every survivor must have exited")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--startup", type=float, default=120.0, help="seconds the job may take to reach the fault")
    ap.add_argument("--logs", help="keep the workers' stderr in this folder")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--hook", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--on-error", choices=("exit", "destroy", "abort"), default="exit", help=argparse.SUPPRESS)
    ap.add_argument("--shrink", nargs="?", const="", default=None,
                    help="the survivors shrink the group and train on (the workers get the trial's folder)")
    args = ap.parse_args()
    if args.steps < 6 or args.timeout < 1:
        ap.error("--steps must be at least 6 and --timeout at least 1")
    if args.worker:
        worker(args)
        return 0
    try:
        import torch  # noqa: F401
        import ccl.torch._build
        # Compile (or find in torch's cache) the backend once, before four ranks race to.
        ccl.torch._build.load()
    except Exception as e:  # noqa: BLE001
        print(f"SKIP: torch with ccl.torch is not importable by {sys.executable}: {e} "
              "(make it with scripts/python_install.sh)", file=sys.stderr)
        return 77
    logdir = args.logs or tempfile.mkdtemp(prefix="ddp_kill.")
    os.makedirs(logdir, exist_ok=True)
    all_ok = True
    for trial in range(args.trials):
        r = run_trial(args, trial, logdir)
        print(json.dumps(r), flush=True)
        all_ok &= r["ok"]
    if not args.logs:
        import shutil

        shutil.rmtree(logdir, ignore_errors=True)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
