# SPDX-License-Identifier: BSD-3-Clause
"""Ranks as processes for the tests: a pool of worker processes that each hold one rank of a
communicator, and run the test functions they are sent.

Starting processes and joining a communicator costs far more than a small collective, so a
pool lives for the whole session and many tests run on it. Every run has a deadline: a rank
that raises fails the test with its traceback, and a run that does not finish in time kills
the pool (a fresh one serves the next test), so no test can hang the suite.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback

import ccl

_CTX = mp.get_context("spawn")  # no fork: the parent may have threads (ccl's rendezvous service)

# A collective whose peer died fails within this many seconds instead of CCL_TIMEOUT's default.
WORKER_ENV = {"CCL_TIMEOUT": "20"}
RUN_TIMEOUT = 40.0


def _serve(rank, nranks, conn, env):
    os.environ.update(env)
    import ccl as ccl_

    comm = None
    while True:
        msg = conn.recv()
        if msg is None:
            break
        kind, payload, args = msg
        try:
            if kind == "join":  # (re)join the pool's communicator
                if comm is not None and not comm.closed:
                    comm.destroy()
                comm = ccl_.Comm(nranks, payload, rank)
                conn.send(("ok", None))
                continue
            fn, uid = payload
            if uid is not None:  # a communicator of the run's own
                with ccl_.Comm(nranks, uid, rank) as own:
                    result = fn(own, *args)
            elif fn.__code__.co_argcount and fn.__code__.co_varnames[0] == "comm":
                result = fn(comm, *args)
            else:  # a function that makes its own communicators: gets (rank, nranks)
                result = fn(rank, nranks, *args)
            conn.send(("ok", result))
        except BaseException as e:  # noqa: BLE001 - everything goes back to the test
            conn.send(("err", "".join(traceback.format_exception(type(e), e, e.__traceback__))))
    if comm is not None and not comm.closed:
        comm.destroy()


class RankFailure(AssertionError):
    pass


class Ranks:
    """`n` worker processes; run(fn, *args) calls fn(comm, *args) on every rank and returns
    the list of results by rank."""

    def __init__(self, n: int, env: dict | None = None):
        self.n = n
        self.env = dict(WORKER_ENV, **(env or {}))
        self.procs, self.conns = [], []
        for r in range(n):
            parent, child = _CTX.Pipe()
            p = _CTX.Process(target=_serve, args=(r, n, child, self.env), daemon=True)
            p.start()
            child.close()
            self.procs.append(p)
            self.conns.append(parent)
        self.broken = False
        self._exchange([("join", ccl.get_unique_id(), ())] * n, 60.0)

    def _exchange(self, msgs, timeout):
        for c, m in zip(self.conns, msgs):
            c.send(m)
        deadline = time.monotonic() + timeout
        results, errors = [None] * self.n, []
        for r, c in enumerate(self.conns):
            if not c.poll(max(0.0, deadline - time.monotonic())):
                self.kill()
                raise TimeoutError("rank %d did not finish within %.0f s (the pool was killed)" % (r, timeout))
            try:
                status, value = c.recv()
            except EOFError:
                self.kill()
                raise RankFailure("rank %d died (exit code %s)" % (r, self.procs[r].exitcode)) from None
            if status == "ok":
                results[r] = value
            else:
                errors.append("---- rank %d ----\n%s" % (r, value))
        if errors:
            # The ranks that passed may be waiting on a broken communicator: start afresh.
            self.kill()
            raise RankFailure("\n".join(errors))
        return results

    def run(self, fn, *args, timeout: float = RUN_TIMEOUT, own_comm: bool = False):
        """fn(comm, *args) on every rank with the pool's communicator, or with one made for
        this run only (own_comm; destroyed afterwards). A fn whose first parameter is not
        named `comm` gets (rank, nranks, *args) and makes what it needs itself."""
        if self.broken:
            raise RuntimeError("the pool was killed")
        uid = ccl.get_unique_id() if own_comm else None
        return self._exchange([("run", (fn, uid), args)] * self.n, timeout)

    def kill(self):
        self.broken = True
        for p in self.procs:
            if p.is_alive():
                p.kill()
        for p in self.procs:
            p.join(5)

    def close(self):
        if not self.broken:
            for c in self.conns:
                try:
                    c.send(None)
                except OSError:
                    pass
            for p in self.procs:
                p.join(10)
        self.kill()
