# SPDX-License-Identifier: BSD-3-Clause
"""ccl from PyTorch: a ``torch.distributed`` backend for CPU tensors and a DDP hook.

The backend is registered as ``"cclz"`` (Intel's oneCCL bindings already register
``"ccl"``)::

    import torch.distributed as dist
    import ccl.torch
    dist.init_process_group("cclz", pg_options=ccl.torch.Options(compression="int8"))

``init_process_group("cclz")`` finds it without the import too: the package declares it
under the ``torch.distributed.backends`` entry point. Every collective of the c10d API runs
on one ccl communicator per process group, in call order on a worker thread of its own;
the unique id travels through the group's store. Compression is chosen per group
(:class:`Options`) or, without options, by the ``CCL_*`` environment as for any ccl program.
CUDA tensors are refused: on GPUs, use the ``nccl`` backend with ccl's NCCL face preloaded.
"""
from __future__ import annotations

import ctypes
import dataclasses
import datetime
from typing import Sequence, Union

import ccl

NAME = "cclz"

__all__ = ["NAME", "Options", "register", "stats", "hooks"]


@dataclasses.dataclass
class Options:
    """What a process group asks of ccl (``pg_options=`` of ``init_process_group`` or
    ``new_group``).

    compression: the group's codec, a :class:`ccl.Compression` or a codec name
        ("int8", "int4", "fp8_e4m3", "topk", ...). None: ``CCL_CODEC`` and ``CCL_CODEC_*``.
    compress: the collectives the codec applies to, as ``CCL_COMPRESS`` takes them and
        ``ccl.OpKind`` names them ("allreduce", "reducescatter", "allgather", "broadcast",
        "alltoall", "send", "recv", or "all"; a list or a comma-separated string). None:
        ``CCL_COMPRESS`` (default allreduce, reducescatter: the gradient reductions).
        Naming them needs ``compression``.
    name: the communicator's name in ccl's log lines.
    """

    compression: Union["ccl.Compression", str, None] = None
    compress: Union[Sequence[str], str, None] = None
    name: str = ""

    def _compression_bytes(self) -> bytes | None:
        c = self.compression
        if c is None:
            return None
        if isinstance(c, str):
            c = ccl.Compression(codec=c)
        if not isinstance(c, ccl.Compression):
            raise TypeError(f"Options.compression: a ccl.Compression or a codec name, not {type(c).__name__}")
        return ctypes.string_at(ctypes.addressof(c.struct), ctypes.sizeof(c.struct))

    def _compress_list(self) -> str:
        if self.compress is None:
            return ""
        if self.compression is None:
            raise ValueError("Options.compress names collectives to compress but no compression is given")
        items = self.compress.split(",") if isinstance(self.compress, str) else list(self.compress)
        text = ",".join(str(i).strip() for i in items if str(i).strip())
        # The library's parser (that of CCL_COMPRESS): one grammar, one spelling of the names.
        mask = ctypes.c_uint()
        if ccl._lib.lib.cclCompressListParse(text.encode(), ctypes.byref(mask)) != 0:
            raise ValueError("Options.compress: " + (ccl._lib.lib.cclGetLastError(None) or b"").decode())
        return text


def _create(dist_opts, backend_options):
    from . import _build

    opts = backend_options if backend_options is not None else Options()
    if not isinstance(opts, Options):
        raise TypeError(f"the {NAME} backend takes ccl.torch.Options as pg_options, not {type(opts).__name__}")
    timeout = dist_opts.timeout
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    return _build.load().create(
        dist_opts.store,
        dist_opts.group_rank,
        dist_opts.group_size,
        timeout,
        opts._compression_bytes(),
        opts._compress_list(),
        opts.name or str(dist_opts.group_id),
    )


def register() -> None:
    """Registers the ``cclz`` backend with torch.distributed for the ``cpu`` device
    (idempotent; importing ccl.torch does it)."""
    import torch.distributed as dist

    if NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(NAME, _create, extended_api=True, devices=["cpu"])


def backend_of(group=None):
    """The ccl backend object of ``group`` (default: the world group)."""
    import torch
    import torch.distributed as dist

    pg = group if group is not None else dist.group.WORLD
    if pg is None:
        raise RuntimeError("ccl.torch: torch.distributed is not initialised")
    from . import _build

    backend = pg._get_backend(torch.device("cpu"))
    if not isinstance(backend, _build.load().Backend):
        raise ValueError(f"ccl.torch: the group's CPU backend is {type(backend).__name__}, not {NAME!r}")
    return backend


def stats(group=None) -> dict:
    """ccl's counters for the group's communicator, by collective: calls,
    compressed_calls, raw_bytes, wire_bytes, codec_seconds, auto_chosen and auto_compressed
    (calls whose algorithm, and under CCL_CODEC=auto codec, the cost model chose, and of
    those the compressed ones). Keyed by ccl.OpKind's names ("reducescatter", ...)."""
    return backend_of(group).stats()


register()

from . import hooks  # noqa: E402  (needs register's module state only)
