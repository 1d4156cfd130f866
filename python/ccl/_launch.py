# SPDX-License-Identifier: BSD-3-Clause
"""init_from_env: a communicator for a job started by torchrun or any launcher that sets
torchrun's environment variables."""
from __future__ import annotations

import datetime
import itertools
import os
import time
from typing import Any, Mapping, Optional, Union

from ._comm import Comm, Config, UniqueId, get_unique_id
from ._lib import UNIQUE_ID_BYTES

# Each call of init_from_env exchanges its id under its own key; every rank calls it the same
# number of times, in the same order, so the n-th calls of all ranks meet.
_calls = itertools.count()


def _env_int(env: Mapping[str, str], name: str) -> int:
    if name not in env:
        raise RuntimeError("ccl.init_from_env: %s is not set; start the job with torchrun or set RANK, "
                           "WORLD_SIZE, MASTER_ADDR and MASTER_PORT" % name)
    try:
        return int(env[name])
    except ValueError:
        raise RuntimeError("ccl.init_from_env: %s=%r is not an integer" % (name, env[name])) from None


def _exchange_file(path: str, rank: int, make, timeout: float) -> UniqueId:
    """Rank 0 writes the id to `path` (atomically: write, then rename); the others wait for it."""
    if rank == 0:
        uid = make()
        tmp = "%s.tmp.%d" % (path, os.getpid())
        with open(tmp, "wb") as f:
            f.write(bytes(uid))
        os.replace(tmp, path)
        return uid
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path, "rb") as f:
                data = f.read()
            if len(data) == UNIQUE_ID_BYTES:
                return UniqueId(data)
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("ccl.init_from_env: rank %d waited %.0f s for rank 0 to write the unique id to %s"
                               % (rank, timeout, path))
        time.sleep(0.01)


def _exchange_store(store: Any, key: str, rank: int, make) -> UniqueId:
    """Through a torch.distributed Store: rank 0 sets the key, the others get it (get waits)."""
    if rank == 0:
        uid = make()
        store.set(key, bytes(uid))
        return uid
    return UniqueId(bytes(store.get(key)))


def _tcp_store(env: Mapping[str, str], rank: int, world: int, timeout: float) -> Any:
    try:
        import torch.distributed as dist
    except ImportError:
        raise RuntimeError("ccl.init_from_env: torch is not importable, so the unique id cannot travel through a "
                           "TCPStore; set CCL_UNIQUE_ID_FILE to a path every rank can read") from None
    host = env.get("MASTER_ADDR")
    if not host:
        raise RuntimeError("ccl.init_from_env: MASTER_ADDR is not set")
    port = _env_int(env, "MASTER_PORT")
    # Under torchrun the agent already serves a store on MASTER_PORT; every worker is a client.
    agent = env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    return dist.TCPStore(host, port, world, is_master=rank == 0 and not agent,
                         timeout=datetime.timedelta(seconds=timeout), wait_for_workers=False)


def init_from_env(config: Union[Config, Mapping[str, Any], None] = None, *, store: Any = None,
                  timeout: float = 300.0, env: Optional[Mapping[str, str]] = None) -> Comm:
    """A communicator over the job's ranks, from torchrun-style environment variables.

    Reads RANK and WORLD_SIZE. ``comm.local_rank`` is ccl's own (cclCommTopology, from the
    ranks' host identities), which equals torchrun's LOCAL_RANK when ranks are placed as
    torchrun places them. Rank 0 creates the unique id and passes it to the others through,
    in this order of preference:

    * `store`: any torch.distributed Store (e.g. the one of an existing process group);
    * the file named by CCL_UNIQUE_ID_FILE (on a file system every rank sees). It must not
      exist when the job starts (the other ranks would read a stale id); rank 0 removes it
      once every rank has joined;
    * a torch.distributed.TCPStore at MASTER_ADDR:MASTER_PORT (needs torch). Under torchrun
      the agent's store is used; otherwise rank 0 serves one on MASTER_PORT, so a process
      group that later wants the same port needs another one (or pass its store here).

    `timeout` (seconds) bounds the wait for the id; joining is bounded by CCL_TIMEOUT.
    """
    env = os.environ if env is None else env
    rank = _env_int(env, "RANK")
    world = _env_int(env, "WORLD_SIZE")
    if not 0 <= rank < world:
        raise RuntimeError("ccl.init_from_env: RANK=%d is outside [0, WORLD_SIZE=%d)" % (rank, world))
    # torchrun's agent store outlives restarted workers: a restart must not read the id that
    # the previous attempt's rank 0 left there.
    key = "ccl/unique_id/%s/%d" % (env.get("TORCHELASTIC_RESTART_COUNT", "0"), next(_calls))
    path = env.get("CCL_UNIQUE_ID_FILE")
    if store is not None:
        uid = _exchange_store(store, key, rank, get_unique_id)
    elif path:
        uid = _exchange_file(path, rank, get_unique_id, timeout)
    else:
        store = _tcp_store(env, rank, world, timeout)
        uid = _exchange_store(store, key, rank, get_unique_id)
    try:
        return Comm(world, uid, rank, config)
    finally:
        if path and store is None and rank == 0:
            # Every rank has joined, so every rank has read it; or this rank's init failed, and
            # the id is of no use. Either way a stale file would mislead the next job.
            try:
                os.remove(path)
            except OSError:
                pass
