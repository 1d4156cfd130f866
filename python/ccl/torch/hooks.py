# SPDX-License-Identifier: BSD-3-Clause
"""A DDP communication hook that all-reduces gradient buckets compressed by ccl.

    state = ccl.torch.hooks.CompressionState(process_group, compression="int4", feedback="residual")
    ddp.register_comm_hook(state, ccl.torch.hooks.compressed_allreduce_hook)

The state holds what PyTorch's ``powerSGD_hook`` state holds for its method: a ccl
communicator over the process group's ranks (made when the state is made: every rank of
the group must make it, in the same order as its other collectives), the codec, and one
error-feedback handle per bucket, so that what int4 loses on a bucket in one step is added
to the same bucket in the next. The process group may use any backend (gloo, cclz, ...):
ccl only borrows it to hand its unique id to the other ranks.

Each hook call runs on one worker thread per state, in bucket order, and completes the
Future it returned; the GIL is released while ccl works, so backward keeps computing the
next buckets meanwhile.
"""
from __future__ import annotations

import concurrent.futures
from typing import Union

import ccl

__all__ = ["CompressionState", "compressed_allreduce_hook"]


class CompressionState:
    """State of :func:`compressed_allreduce_hook`.

    compression: a ccl.Compression or a codec name ("int8", "int4", "fp8_e4m3", ...).
    feedback: "residual" (plain error feedback), "loco" (LoCo's compensation: a moving
        average of the error with weight ``beta``, reset every ``reset_period`` steps) or
        None.
    average: divide the sum by the group size, as DDP's own allreduce does.
    timeout: how long the hook's communicator waits for a peer (a ``datetime.timedelta`` or
        seconds) before its call fails; None: ``CCL_TIMEOUT`` (300 s unless set). Pass the
        process group's timeout, so that a lost peer fails the hook when it would fail the
        group (the communicator is ccl's own, not the group's).
    """

    def __init__(
        self,
        process_group=None,
        compression: Union["ccl.Compression", str] = "int8",
        feedback: str | None = "residual",
        beta: float = 0.0,
        reset_period: int = 0,
        average: bool = True,
        timeout=None,
    ):
        import torch.distributed as dist

        self.process_group = process_group if process_group is not None else dist.group.WORLD
        self.compression = ccl.Compression(codec=compression) if isinstance(compression, str) else compression
        self.feedback_kind = feedback
        self.beta = beta
        self.reset_period = reset_period
        self.average = average
        if timeout is not None and not isinstance(timeout, (int, float)):
            timeout = timeout.total_seconds()
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self.timeout_ms = None if timeout is None else max(1, round(timeout * 1000))
        self.rank = dist.get_rank(self.process_group)
        self.size = dist.get_world_size(self.process_group)
        self.comm = self._join(dist)
        self._past_stats: "ccl.Stats | None" = None  # the communicators shrink() replaced
        self._feedback: dict[int, ccl.Feedback] = {}
        self._worker = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ccl-ddp-hook")

    def _join(self, dist) -> "ccl.Comm":
        box = [bytes(ccl.get_unique_id()) if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=dist.get_global_rank(self.process_group, 0), group=self.process_group)
        return ccl.Comm(self.size, ccl.UniqueId(box[0]), self.rank, ccl.Config(timeout_ms=self.timeout_ms))

    def feedback_for(self, bucket_index: int) -> "ccl.Feedback | None":
        """The bucket's error-feedback handle (made on its first use)."""
        if self.feedback_kind is None:
            return None
        fb = self._feedback.get(bucket_index)
        if fb is None:
            fb = ccl.Feedback(kind=self.feedback_kind, beta=self.beta, reset_period=self.reset_period)
            self._feedback[bucket_index] = fb
        return fb

    def stats(self):
        """The hook communicator's counters (raw and wire bytes of its allreduces...), with
        those of the communicators it shrank from."""
        now = self.comm.stats()
        return now if self._past_stats is None else self._past_stats + now

    def shrink(self, ranks_to_exclude, process_group=None, abort: bool = True) -> None:
        """Goes on without ``ranks_to_exclude`` (ranks of the group the state serves), as
        ``torch.distributed.shrink_group`` does for a process group: only the other ranks
        call it, each with the same list. The hook's communicator is shrunk with
        ``Comm.shrink`` (no message over the old one, which a lost rank may have broken);
        ``abort`` revokes it first, so a hook call stuck on the lost rank fails at once. Every
        bucket keeps its error feedback (what a survivor's compression lost still reaches its
        next steps) and :meth:`stats` keeps counting from where it was. ``process_group``: the
        group the state serves from now on (shrink_group's result); None keeps the old one."""
        import torch.distributed as dist

        if abort:
            self.comm.revoke()
        self._worker.shutdown(wait=True)  # hook calls in flight end first
        old = self.comm
        new = old.shrink(list(ranks_to_exclude), abort=abort)
        past = old.stats()
        self._past_stats = past if self._past_stats is None else self._past_stats + past
        old.destroy()
        self.comm = new
        if process_group is not None:
            self.process_group = process_group
        self.rank, self.size = new.rank, new.size
        if process_group is not None and dist.get_world_size(process_group) != new.size:
            raise RuntimeError("ccl: the shrunk group has %d ranks, the hook's communicator %d"
                               % (dist.get_world_size(process_group), new.size))
        self._worker = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ccl-ddp-hook")

    def close(self) -> None:
        """Waits for hook calls in flight, then frees the communicator and feedback state."""
        self._worker.shutdown(wait=True)
        for fb in self._feedback.values():
            fb.close()
        self._feedback.clear()
        self.comm.destroy()

    def __getstate__(self):
        raise TypeError("ccl.torch.hooks.CompressionState holds a communicator and cannot be pickled")


def compressed_allreduce_hook(state: CompressionState, bucket):
    """All-reduces ``bucket.buffer()`` with ``state``'s codec and the bucket's feedback,
    averaged over the group, and returns a Future of the result (DDP's hook contract)."""
    import torch

    buffer = bucket.buffer()
    feedback = state.feedback_for(bucket.index())
    future: torch.futures.Future = torch.futures.Future()

    def run() -> None:
        try:
            state.comm.allreduce(
                buffer, in_place=True, op="avg" if state.average else "sum", compression=state.compression,
                feedback=feedback)
            future.set_result(buffer)
        except BaseException as error:  # noqa: BLE001 - the error travels to DDP through the Future
            future.set_exception(error)

    state._worker.submit(run)
    # DDP reads a Future completed by set_exception as a result value ("Unable to cast ... to
    # Tensor"), losing the error; a callback that raises marks the chained Future failed, so
    # backward() raises ccl's error itself.
    return future.then(lambda done: done.value())
