# SPDX-License-Identifier: BSD-3-Clause
"""Unique ids, communicators and their collectives."""
from __future__ import annotations

import ctypes
import dataclasses
import operator
import threading
from typing import Any, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _group
from ._buffers import Buffer, as_buffer, block_view, check_count, check_overlap, check_same_dtype, empty
from ._compression import Compression, CompressionLike, Feedback, to_compression
from ._errors import CclError, CclInvalidUsage, Result, check, error_for
from ._lib import (CONFIG_MAGIC, CONFIG_UNDEF_INT, HEADER_VERSION_CODE, STATS_MAGIC, UNCOMPRESSED_REASON_NAMES,
                   UNIQUE_ID_BYTES, ConfigStruct, StatsStruct, UniqueIdStruct, lib)
from ._stream import current_stream
from ._types import OpKind, OpLike, check_c_int, to_op

SPLIT_NOCOLOR = -1
"""Pass as `color` to :meth:`Comm.split` to take no part in the new communicators."""
_SHRINK_ABORT = 0x01  # CCL_SHRINK_ABORT
_SHRINK_ALIVE = 0x100  # CCL_SHRINK_ALIVE


class UniqueId:
    """The 128-byte id (cclUniqueId) that every rank of a new communicator must pass.

    Make one with :func:`get_unique_id` on one rank and send ``bytes(uid)`` to the others,
    which rebuild it with ``UniqueId(data)``. It holds the creator's address and a secret;
    treat it as a credential.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Union[bytes, bytearray, memoryview]):
        data = bytes(data)
        if len(data) != UNIQUE_ID_BYTES:
            raise ValueError("a ccl unique id has %d bytes, got %d" % (UNIQUE_ID_BYTES, len(data)))
        self._data = data

    def __bytes__(self) -> bytes:
        return self._data

    def to_bytes(self) -> bytes:
        return self._data

    @classmethod
    def from_bytes(cls, data: Union[bytes, bytearray, memoryview]) -> "UniqueId":
        return cls(data)

    def hex(self) -> str:
        return self._data.hex()

    @classmethod
    def fromhex(cls, text: str) -> "UniqueId":
        return cls(bytes.fromhex(text))

    def _struct(self) -> UniqueIdStruct:
        s = UniqueIdStruct()
        ctypes.memmove(ctypes.addressof(s), self._data, UNIQUE_ID_BYTES)
        return s

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UniqueId) and other._data == self._data

    def __hash__(self) -> int:
        return hash(self._data)

    def __reduce__(self):
        return (UniqueId, (self._data,))

    def __repr__(self) -> str:
        return "ccl.UniqueId(<%d bytes>)" % UNIQUE_ID_BYTES


def get_unique_id() -> UniqueId:
    """cclGetUniqueId: a new id. This process serves the rendezvous until every rank has
    joined (or CCL_TIMEOUT passes), so call it on a process that takes part or stays alive."""
    s = UniqueIdStruct()
    check(lib.cclGetUniqueId(ctypes.byref(s)), "cclGetUniqueId")
    return UniqueId(ctypes.string_at(ctypes.addressof(s), UNIQUE_ID_BYTES))


@dataclasses.dataclass
class Config:
    """Communicator configuration (cclConfig_t). None leaves a field to the CCL_* environment
    variable or the built-in default.

    Args:
        name: a name used in ccl's log lines (commName).
        timeout_ms: deadline of every blocking wait, in milliseconds (default CCL_TIMEOUT).
        blocking: True (default): calls block until done.
        compression: the communicator's default codec (else CCL_CODEC decides).
        host_id: this rank's host identity (hostId): ranks with equal ones form a node (see
            :attr:`Comm.node`). Printable text of 1 to 255 characters; None: CCL_HOST_ID, else
            a hash of the host name and boot id. Lets ranks of one machine form several nodes.
        intra_compression: the codec of the steps inside a node of hierarchical algorithms
            (intraCompression; else CCL_CODEC_INTRA decides, default none).
    """

    name: Optional[str] = None
    timeout_ms: Optional[int] = None
    blocking: Optional[bool] = None
    compression: CompressionLike = None
    host_id: Optional[str] = None
    intra_compression: CompressionLike = None

    def _struct(self) -> Tuple[ConfigStruct, list]:
        """The C struct, and the Python objects its pointers point into (keep them alive)."""
        s = ConfigStruct()
        s.size = ctypes.sizeof(ConfigStruct)
        s.magic = CONFIG_MAGIC
        s.version = HEADER_VERSION_CODE
        s.blocking = CONFIG_UNDEF_INT if self.blocking is None else int(bool(self.blocking))
        s.timeoutMs = CONFIG_UNDEF_INT if self.timeout_ms is None else check_c_int(int(self.timeout_ms), "timeout_ms")
        keep: list = []
        if self.name is not None:
            name = str(self.name).encode()
            keep.append(name)
            s.commName = name
        comp = to_compression(self.compression)
        if comp is not None:
            keep.append(comp)
            s.compression = ctypes.pointer(comp.struct)
        if self.host_id is not None:
            if not isinstance(self.host_id, str):
                raise TypeError("host_id must be a str or None; got %s" % type(self.host_id).__name__)
            host_id = self.host_id.encode()
            if b"\0" in host_id:
                # C would see only the text before it; the library refuses control characters.
                raise ValueError("host_id holds a NUL character")
            keep.append(host_id)
            s.hostId = host_id
        intra = to_compression(self.intra_compression)
        if intra is not None:
            keep.append(intra)
            s.intraCompression = ctypes.pointer(intra.struct)
        return s, keep


def _config_struct(config: Union[Config, Mapping[str, Any], None]):
    if config is None:
        return None, []
    if isinstance(config, Mapping):
        config = Config(**config)
    if not isinstance(config, Config):
        raise TypeError("config must be a ccl.Config, a dict of its fields or None; got %s" % type(config).__name__)
    return config._struct()


@dataclasses.dataclass(frozen=True)
class OpStats:
    """Counters of one kind of operation (cclOpStats_t)."""

    calls: int = 0
    compressed_calls: int = 0
    raw_bytes: int = 0   # bytes sent, counted uncompressed
    wire_bytes: int = 0  # bytes actually sent
    codec_seconds: float = 0.0
    auto_chosen: int = 0      # calls whose algorithm (under CCL_CODEC=auto also codec) the cost model chose
    auto_compressed: int = 0  # of which it chose to compress

    @property
    def compression_ratio(self) -> float:
        """raw_bytes / wire_bytes (1.0 when nothing was sent)."""
        return self.raw_bytes / self.wire_bytes if self.wire_bytes else 1.0

    def __add__(self, o: "OpStats") -> "OpStats":
        return OpStats(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(o))))


class Stats(Mapping[str, OpStats]):
    """cclCommGetStats: counters per operation since the communicator was created, keyed by
    ccl.OpKind's names (cclOpKindName: "allreduce", "broadcast", "reduce", "allgather",
    "reducescatter", "alltoall", "gather", "scatter", "send", "recv"); :attr:`total` sums them."""

    def __init__(self, per_op: Mapping[str, OpStats], uncompressed: Optional[Mapping[str, int]] = None,
                 across_raw_bytes: int = 0, across_wire_bytes: int = 0):
        self._per_op = dict(per_op)
        #: Calls the default codec left uncompressed, by reason (cclUncompressedReasonName:
        #: "not_listed", "small", "dtype", ...); reasons with no call are left out.
        self.uncompressed = dict(uncompressed or {})
        #: Of the bytes sent (raw and on the wire), those sent to ranks of other nodes.
        self.across_raw_bytes = across_raw_bytes
        self.across_wire_bytes = across_wire_bytes

    def __getitem__(self, key: str) -> OpStats:
        return self._per_op[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._per_op)

    def __len__(self) -> int:
        return len(self._per_op)

    def __getattr__(self, key: str) -> OpStats:
        try:
            return self.__dict__["_per_op"][key]
        except KeyError:
            raise AttributeError(key) from None

    @property
    def total(self) -> OpStats:
        out = OpStats()
        for s in self._per_op.values():
            out = out + s
        return out

    def __add__(self, other: "Stats") -> "Stats":
        """The counters of two communicators together (e.g. one and the one it shrank to)."""
        keys = list(self._per_op) + [k for k in other._per_op if k not in self._per_op]
        reasons = dict(self.uncompressed)
        for k, v in other.uncompressed.items():
            reasons[k] = reasons.get(k, 0) + v
        return Stats({k: self._per_op.get(k, OpStats()) + other._per_op.get(k, OpStats()) for k in keys}, reasons,
                     self.across_raw_bytes + other.across_raw_bytes, self.across_wire_bytes + other.across_wire_bytes)

    def as_dict(self) -> dict:
        return {k: dataclasses.asdict(v) for k, v in self._per_op.items()}

    def __repr__(self) -> str:
        used = {k: v for k, v in self._per_op.items() if v.calls}
        return "ccl.Stats(%r)" % used


def _ex_args(compression: CompressionLike, feedback: Optional[Feedback]):
    """(use the *Ex call, compression pointer, feedback handle, objects to keep alive)."""
    comp = to_compression(compression)
    if feedback is not None and not isinstance(feedback, Feedback):
        raise TypeError("feedback must be a ccl.Feedback or None; got %s" % type(feedback).__name__)
    if comp is None and feedback is None:
        return False, None, None, ()
    # The call keeps the feedback's C state, not the Feedback: a close() while the call is queued
    # (in a group, on a host stream) or running in another thread then frees it only afterwards.
    state = feedback._live() if feedback is not None else None
    return (True, ctypes.byref(comp.struct) if comp is not None else None,
            state.handle if state is not None else None, (comp, state))


def _per_rank_shape(buf: Buffer, nranks: int) -> tuple:
    """The shape of one rank's block of buf: its first dimension split by nranks when it
    divides, else flat."""
    if len(buf.shape) >= 1 and buf.shape[0] % nranks == 0:
        return (buf.shape[0] // nranks,) + tuple(buf.shape[1:])
    return (buf.count // nranks,)


class Comm:
    """A ccl communicator over host memory: one rank of `nranks`.

    Every rank calls ``Comm(nranks, uid, rank)`` with the same `uid` (from
    :func:`get_unique_id` on one of them); the constructor returns once all have joined.

    Collectives take NumPy arrays, PyTorch CPU tensors, or anything with DLPack or the buffer
    protocol, contiguous, of a dtype ccl carries (int8, uint8, int32, uint32, int64, uint64,
    float16, float32, float64, and through torch or ml_dtypes bfloat16, float8_e4m3fn,
    float8_e5m2). Arrays are used flat: shapes only decide the shape of outputs ccl allocates.
    Outputs (`out=`) must have the input's dtype. Each call blocks until done (or, inside
    :func:`ccl.group`, until the group ends) and releases the GIL meanwhile.

    Use it as a context manager, or call :meth:`destroy`, to free it.
    """

    def __init__(self, nranks: int, uid: Union[UniqueId, bytes], rank: int,
                 config: Union[Config, Mapping[str, Any], None] = None):
        if not isinstance(uid, UniqueId):
            uid = UniqueId(uid)
        for name, v in (("nranks", nranks), ("rank", rank)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError("%s must be an int, got %r" % (name, v))
        check_c_int(nranks, "nranks")
        if not 0 <= rank < nranks:
            raise ValueError("rank %d is outside [0, nranks=%d)" % (rank, nranks))
        handle = ctypes.c_void_p()
        cfg, keep = _config_struct(config)
        if cfg is None:
            code = lib.cclCommInitRank(ctypes.byref(handle), nranks, uid._struct(), rank)
        else:
            code = lib.cclCommInitRankConfig(ctypes.byref(handle), nranks, uid._struct(), rank, ctypes.byref(cfg))
        del keep
        check(code, "cclCommInitRankConfig" if cfg is not None else "cclCommInitRank")
        self._adopt(_non_null(handle.value, "cclCommInitRank"))

    @classmethod
    def _from_handle(cls, handle: int) -> "Comm":
        self = cls.__new__(cls)
        self._adopt(handle)
        return self

    def _adopt(self, handle: int) -> None:
        self._handle: Optional[int] = handle
        self._cv = threading.Condition()
        self._inflight = 0
        self._closing = False
        n, r = ctypes.c_int(), ctypes.c_int()
        check(lib.cclCommCount(handle, ctypes.byref(n)), "cclCommCount")
        check(lib.cclCommUserRank(handle, ctypes.byref(r)), "cclCommUserRank")
        self._size, self._rank = n.value, r.value
        # Fixed at init: read once.
        node, nnodes, local, local_size = ctypes.c_int(), ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        check(lib.cclCommTopology(handle, ctypes.byref(node), ctypes.byref(nnodes), ctypes.byref(local),
                                  ctypes.byref(local_size)), "cclCommTopology")
        self._node, self._nnodes = node.value, nnodes.value
        self._local_rank, self._local_size = local.value, local_size.value

    @classmethod
    def init_all(cls, nranks: int) -> List["Comm"]:
        """cclCommInitAll: all `nranks` ranks of a new communicator in this process (drive each
        from its own thread, or together inside one :func:`ccl.group`)."""
        if not isinstance(nranks, int) or nranks < 1:
            raise ValueError("nranks must be a positive int, got %r" % (nranks,))
        handles = (ctypes.c_void_p * nranks)()
        check(lib.cclCommInitAll(handles, nranks, None), "cclCommInitAll")
        return [cls._from_handle(_non_null(h, "cclCommInitAll")) for h in handles]

    # ---- state ----

    @property
    def rank(self) -> int:
        """This process's rank in the communicator."""
        return self._rank

    @property
    def size(self) -> int:
        """The number of ranks."""
        return self._size

    @property
    def node(self) -> int:
        """This rank's node (cclCommTopology): ranks with equal host identities form a node,
        numbered 0..nnodes-1 in the order of each node's lowest rank."""
        return self._node

    @property
    def nnodes(self) -> int:
        """The number of nodes (distinct host identities) among the ranks."""
        return self._nnodes

    @property
    def local_rank(self) -> int:
        """This rank's index among its node's ranks, in rank order."""
        return self._local_rank

    @property
    def local_size(self) -> int:
        """The number of ranks of this rank's node (nodes may differ in size)."""
        return self._local_size

    @property
    def closed(self) -> bool:
        """True after destroy() or abort()."""
        return self._handle is None

    def __repr__(self) -> str:
        return "ccl.Comm(rank=%d, size=%d%s)" % (self._rank, self._size, ", closed" if self.closed else "")

    def _enter(self, fn: str, while_closing: bool = False) -> int:
        """The handle, counted as in use until _leave(), so that destroy() waits for the call.
        `while_closing`: also while destroy() waits for calls (revoke(), which ends them)."""
        with self._cv:
            if self._handle is None or (self._closing and not while_closing):
                raise CclInvalidUsage(Result.INVALID_USAGE, fn, "the communicator was destroyed or aborted")
            self._inflight += 1
            return self._handle

    def _leave(self) -> None:
        with self._cv:
            self._inflight -= 1
            if not self._inflight:
                self._cv.notify_all()

    def _call(self, fn: str, *args: Any, keep: tuple = ()) -> None:
        """Calls lib.<fn>(*args) with the communicator's handle in place of _COMM, and raises
        the matching CclError on failure. Refuses a destroyed communicator."""
        stream = current_stream() if any(a is _STREAM for a in args) else None
        h = self._enter(fn)
        try:
            code = getattr(lib, fn)(*[h if a is _COMM else (stream.handle if stream else None) if a is _STREAM else a
                                      for a in args])
        finally:
            self._leave()
        # Inside a group the call only queued work: what it points to, and this communicator,
        # must outlive the group; on a host stream, until the stream has run it.
        if _group.depth():
            _group.keep_alive(self, *keep, stream=stream if code == 0 else None)
        elif stream is not None and code == 0:
            stream._keep_alive(*keep)
        if code != 0:
            raise error_for(code, fn)

    # ---- lifecycle ----

    def split(self, color: int, key: Optional[int] = None,
              config: Union[Config, Mapping[str, Any], None] = None) -> Optional["Comm"]:
        """cclCommSplit (collective): ranks passing the same `color` form a new communicator,
        ordered by `key` (default: this rank) then by rank. `color` None or SPLIT_NOCOLOR
        returns None. `config` None inherits this communicator's configuration. Every rank
        keeps its host identity, so the new communicator's nodes are this one's restricted to
        its ranks (a config's host_id must be None or the same)."""
        color = SPLIT_NOCOLOR if color is None else color
        if not isinstance(color, int) or (color < 0 and color != SPLIT_NOCOLOR):
            raise ValueError("color must be an int >= 0, None or ccl.SPLIT_NOCOLOR; got %r" % (color,))
        check_c_int(color, "color")
        key = check_c_int(self._rank if key is None else operator.index(key), "key")
        out = ctypes.c_void_p()
        cfg, keep = _config_struct(config)
        self._call("cclCommSplit", _COMM, color, key, ctypes.byref(out), ctypes.byref(cfg) if cfg else None)
        del keep
        return Comm._from_handle(out.value) if out.value else None

    def shrink(self, exclude: Optional[Sequence[int]] = None, *, abort: bool = False,
               config: Union[Config, Mapping[str, Any], None] = None) -> "Comm":
        """cclCommShrink: the ranks of this communicator outside `exclude` form a new one,
        numbered in their order here (NCCL's ncclCommShrink). Only they call it, each with the
        same list; the excluded ranks may be gone, since no message travels over this
        communicator. `exclude` None: the ranks that go on are those whose process is alive
        (CCL_SHRINK_ALIVE). `abort`: revoke this communicator first (CCL_SHRINK_ABORT), so
        that calls still running on it fail. Carried over: the configuration (`config` None),
        the host identities and the implicit error-feedback state; Feedback handles are the
        caller's and need nothing. Ranks that disagree on the list raise CclInvalidUsage."""
        flags = _SHRINK_ABORT if abort else 0
        if exclude is None:
            ranks, count, flags = None, 0, flags | _SHRINK_ALIVE
        else:
            listed = list(exclude)
            if not all(isinstance(r, int) and not isinstance(r, bool) for r in listed):
                raise TypeError("exclude must hold ranks (ints); got %r" % (exclude,))
            for r in listed:
                check_c_int(r, "exclude rank")
            ranks, count = (ctypes.c_int * len(listed))(*listed), len(listed)
        out = ctypes.c_void_p()
        cfg, keep = _config_struct(config)
        self._call("cclCommShrink", _COMM, ranks, count, ctypes.byref(out), ctypes.byref(cfg) if cfg else None, flags)
        del keep
        return Comm._from_handle(out.value)

    def finalize(self) -> None:
        """cclCommFinalize: completes outstanding work; afterwards only destroy() is valid."""
        self._call("cclCommFinalize", _COMM)

    def destroy(self) -> None:
        """cclCommDestroy: frees the communicator (not collective). Waits for calls other
        threads are making on it to return; use abort() to interrupt them instead.
        Calling it again does nothing."""
        with self._cv:
            if self._handle is None or self._closing:
                return
            self._closing = True
            while self._inflight and self._handle is not None:
                self._cv.wait()
            # Taken before the C call: an abort() from another thread meanwhile then finds no
            # handle, since cclCommAbort during cclCommDestroy of the same communicator would
            # free it twice. None: an abort() freed it while this waited.
            h, self._handle = self._handle, None
            if h is None:
                self._closing = False
                return
        code = lib.cclCommDestroy(h)
        err = error_for(code, "cclCommDestroy") if code != 0 else None
        with self._cv:
            if err is not None:
                self._handle = h  # still ours: destroy() or abort() may be tried again
            self._closing = False
        if err is not None:
            raise err

    def revoke(self) -> None:
        """cclCommRevoke: fails every operation of the communicator, from any thread, on this
        rank and its peers (ranks stuck in different calls all come out), without freeing it.
        Later calls raise; once every rank has revoked it, split() and destroy() remain."""
        try:
            # Counted as a call: destroy() from another thread must not free the communicator
            # while cclCommRevoke still reads it. Allowed while destroy() waits for calls, which
            # it makes return.
            h = self._enter("cclCommRevoke", while_closing=True)
        except CclInvalidUsage:
            return  # destroyed or aborted: nothing left to revoke
        try:
            code = lib.cclCommRevoke(h, 0)
        finally:
            self._leave()
        if code != 0:
            raise error_for(code, "cclCommRevoke")

    def abort(self) -> None:
        """cclCommAbort: stops every operation of the communicator, from any thread, and frees
        it. Calls blocked in other threads raise promptly; peers see CclRemoteError. A destroy()
        waiting for such calls then returns; one already inside cclCommDestroy (waiting for
        operations queued on a host stream) owns the communicator, and abort() does nothing."""
        with self._cv:
            h, self._handle = self._handle, None
            self._cv.notify_all()  # a destroy() waiting for calls has nothing left to free
        if h is not None:
            check(lib.cclCommAbort(h), "cclCommAbort")

    def __enter__(self) -> "Comm":
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()

    def __del__(self):
        h = getattr(self, "_handle", None)
        if h is not None:
            try:
                lib.cclCommDestroy(h)
            except Exception:  # interpreter shutdown: ctypes may already be gone
                pass

    def async_error(self) -> Result:
        """cclCommGetAsyncError: SUCCESS, IN_PROGRESS or the failure the communicator saw."""
        out = ctypes.c_int()
        self._call("cclCommGetAsyncError", _COMM, ctypes.byref(out))
        return Result(out.value)

    # ---- compression and counters ----

    def set_compression(self, compression: CompressionLike) -> None:
        """cclCommSetCompression: the default codec of this communicator's calls (None: none).
        Not collective, but every rank must set the same codec before the calls that use it."""
        comp = to_compression(compression)
        self._call("cclCommSetCompression", _COMM, ctypes.byref(comp.struct) if comp is not None else None)

    def stats(self) -> Stats:
        """cclCommGetStats: calls, compressed calls, raw and wire bytes and codec time per kind
        of operation."""
        s = StatsStruct()
        s.size = ctypes.sizeof(StatsStruct)
        s.magic = STATS_MAGIC
        s.version = HEADER_VERSION_CODE
        self._call("cclCommGetStats", _COMM, ctypes.byref(s))
        return Stats({k.name.lower(): OpStats(o.calls, o.compressedCalls, o.rawBytes, o.wireBytes, o.codecSeconds,
                                              s.autoChosen[k], s.autoCompressed[k])
                      for k, o in zip(OpKind, s.op)},
                     {name: n for name, n in zip(UNCOMPRESSED_REASON_NAMES, s.uncompressed) if n},
                     s.acrossRawBytes, s.acrossWireBytes)

    # ---- collectives ----

    def _root(self, root: int) -> int:
        if not isinstance(root, int) or isinstance(root, bool) or not 0 <= root < self._size:
            raise ValueError("root %r is outside [0, %d)" % (root, self._size))
        return root

    def _peer(self, peer: int) -> int:
        if not isinstance(peer, int) or isinstance(peer, bool) or not 0 <= peer < self._size:
            raise ValueError("peer %r is outside [0, %d)" % (peer, self._size))
        return peer

    def _output(self, out: Any, like: Buffer, shape: tuple, count: int, why: str) -> Tuple[Any, Buffer]:
        """out, or a new array of like's kind and dtype with `shape`; checked to hold `count`."""
        if out is None:
            out = empty(like, shape)
        r = as_buffer(out, "out", writable=True)
        check_same_dtype(like, r, "x", "out")
        check_count(r, count, "out", why)
        return out, r

    def allreduce(self, x: Any, out: Any = None, *, op: OpLike = "sum", in_place: bool = False,
                  compression: CompressionLike = None, feedback: Optional[Feedback] = None) -> Any:
        """out = op over ranks of x, on every rank. Returns out (new array like x if None).

        In place: ``in_place=True`` or ``out=x``. With `compression` (a :class:`Compression`
        or codec name) or `feedback`, cclAllReduceEx carries it; compression applies to
        float32/bfloat16/float16 with op sum or avg."""
        op = to_op(op)
        if in_place:
            if out is not None and out is not x:
                raise ValueError("in_place=True writes into x; do not pass another out")
            out = x
        s = as_buffer(x, "x", writable=out is x)
        out, r = self._output(out, s, s.shape, s.count, "x has %d")
        check_overlap(s, r, r.ptr)
        ex, cp, fb, keep = _ex_args(compression, feedback)
        args = (s.ptr, r.ptr, s.count, int(s.dtype), int(op), _COMM, _STREAM)
        if ex:
            self._call("cclAllReduceEx", *args, cp, fb, keep=(s, r) + keep)
        else:
            self._call("cclAllReduce", *args, keep=(s, r))
        return out

    def broadcast(self, x: Any, root: int = 0, *, out: Any = None, compression: CompressionLike = None) -> Any:
        """Every rank's out = root's x. By default out is x itself (in place), as in
        torch.distributed.broadcast. On other ranks x may be None when out is given (it is
        only read on root). Returns out."""
        root = self._root(root)
        is_root = self._rank == root
        if is_root and x is None:
            raise TypeError("x is None on the root rank, which sends it")
        if out is None:
            if x is None:
                raise TypeError("pass x or out: the array that receives root's data")
            out = x
        s = as_buffer(x, "x", writable=out is x) if x is not None else None
        r = as_buffer(out, "out", writable=True)
        if s is not None:
            check_same_dtype(s, r, "x", "out")
            if is_root:
                check_count(r, s.count, "out", "root's x has %d")
            check_overlap(s, r, r.ptr)
        ex, cp, _, keep = _ex_args(compression, None)
        args = (s.ptr if s is not None and is_root else None, r.ptr, r.count, int(r.dtype), root, _COMM, _STREAM)
        if ex:
            self._call("cclBroadcastEx", *args, cp, keep=(s, r) + keep)
        else:
            self._call("cclBroadcast", *args, keep=(s, r))
        return out

    def reduce(self, x: Any, root: int = 0, *, out: Any = None, op: OpLike = "sum",
               in_place: bool = False) -> Any:
        """root's out = op over ranks of x. Returns out on root (a new array if None; x itself
        with ``in_place=True``) and None on the other ranks."""
        root = self._root(root)
        op = to_op(op)
        is_root = self._rank == root
        if in_place:
            if out is not None and out is not x:
                raise ValueError("in_place=True writes into x; do not pass another out")
            out = x
        s = as_buffer(x, "x", writable=is_root and out is x)
        r = None
        if is_root:
            out, r = self._output(out, s, s.shape, s.count, "x has %d")
            check_overlap(s, r, r.ptr)
        self._call("cclReduce", s.ptr, r.ptr if r else None, s.count, int(s.dtype), int(op), root, _COMM, _STREAM,
                   keep=(s, r))
        return out if is_root else None

    def allgather(self, x: Any, out: Any = None, *, in_place: bool = False, compression: CompressionLike = None,
                  feedback: Optional[Feedback] = None) -> Any:
        """out = the concatenation of every rank's x, in rank order. A new out has shape
        (size, *x.shape). In place (``in_place=True``): x is the whole output (size blocks) and
        this rank's block is what it sends. Returns out."""
        n = self._size
        if in_place:
            if out is not None and out is not x:
                raise ValueError("in_place=True: x is the whole output; do not pass another out")
            r = as_buffer(x, "x", writable=True)
            if r.count % n:
                raise ValueError("in place, x holds every rank's block: its %d elements must divide by %d ranks"
                                 % (r.count, n))
            count, out, s = r.count // n, x, None
            send_ptr = r.ptr + self._rank * (r.count // n) * r.dtype.itemsize
        else:
            s = as_buffer(x, "x", writable=False)
            count = s.count
            out, r = self._output(out, s, (n,) + tuple(s.shape), n * count, "it must hold size * x.size = %d")
            send_ptr = s.ptr
            check_overlap(s, r, r.ptr + self._rank * s.nbytes)
        ex, cp, fb, keep = _ex_args(compression, feedback)
        args = (send_ptr, r.ptr, count, int(r.dtype), _COMM, _STREAM)
        if ex:
            self._call("cclAllGatherEx", *args, cp, fb, keep=(s, r) + keep)
        else:
            self._call("cclAllGather", *args, keep=(s, r))
        return out

    def reduce_scatter(self, x: Any, out: Any = None, *, op: OpLike = "sum", in_place: bool = False,
                       compression: CompressionLike = None, feedback: Optional[Feedback] = None) -> Any:
        """x holds size equal blocks; this rank's out = op over ranks of block `rank`. A new
        out has x's shape with the first dimension divided by size (flat if it does not
        divide). In place (``in_place=True``): the result is written into this rank's block of
        x, and that block (a view of x) is returned. Returns out."""
        n = self._size
        op = to_op(op)
        s = as_buffer(x, "x", writable=in_place)
        if s.count % n:
            raise ValueError("x has %d elements, which do not split into %d equal blocks" % (s.count, n))
        count = s.count // n
        if in_place:
            if out is not None:
                raise ValueError("in_place=True writes into x's block; do not pass out")
            out, r, recv_ptr = block_view(s, self._rank, count), None, s.ptr + self._rank * count * s.dtype.itemsize
        else:
            out, r = self._output(out, s, _per_rank_shape(s, n), count, "it must hold x.size / size = %d")
            recv_ptr = r.ptr
            check_overlap(s, r, r.ptr - self._rank * r.nbytes)
        ex, cp, fb, keep = _ex_args(compression, feedback)
        args = (s.ptr, recv_ptr, count, int(s.dtype), int(op), _COMM, _STREAM)
        if ex:
            self._call("cclReduceScatterEx", *args, cp, fb, keep=(s, r, out) + keep)
        else:
            self._call("cclReduceScatter", *args, keep=(s, r, out))
        return out

    def alltoall(self, x: Any, out: Any = None, *, compression: CompressionLike = None) -> Any:
        """Block j of this rank's x lands as block `rank` of rank j's out (x holds size equal
        blocks). out=x works in place. A new out has x's shape. Returns out."""
        n = self._size
        s = as_buffer(x, "x", writable=out is x)
        if s.count % n:
            raise ValueError("x has %d elements, which do not split into %d equal blocks" % (s.count, n))
        out, r = self._output(out, s, s.shape, s.count, "it must hold x.size = %d")
        check_overlap(s, r, r.ptr)
        ex, cp, _, keep = _ex_args(compression, None)
        args = (s.ptr, r.ptr, s.count // n, int(s.dtype), _COMM, _STREAM)
        if ex:
            self._call("cclAlltoAllEx", *args, cp, keep=(s, r) + keep)
        else:
            self._call("cclAlltoAll", *args, keep=(s, r))
        return out

    def gather(self, x: Any, root: int = 0, *, out: Any = None) -> Any:
        """root's out = every rank's x, in rank order (a new out has shape (size, *x.shape)).
        Returns out on root, None elsewhere."""
        root = self._root(root)
        is_root = self._rank == root
        s = as_buffer(x, "x", writable=False)
        r = None
        if is_root:
            out, r = self._output(out, s, (self._size,) + tuple(s.shape), self._size * s.count,
                                  "it must hold size * x.size = %d")
            check_overlap(s, r, r.ptr + self._rank * s.nbytes)
        self._call("cclGather", s.ptr, r.ptr if r else None, s.count, int(s.dtype), root, _COMM, _STREAM,
                   keep=(s, r))
        return out if is_root else None

    def scatter(self, x: Any, root: int = 0, *, out: Any = None) -> Any:
        """Rank r's out = block r of root's x (x holds size equal blocks; it is read on root
        only, and may be None elsewhere if out is given). A new out has x's shape with the first
        dimension divided by size. Returns out."""
        root = self._root(root)
        n = self._size
        is_root = self._rank == root
        if x is None and (is_root or out is None):
            raise TypeError("x is None: root must pass the data, and the other ranks x or out "
                            "(to know the size and dtype of their block)")
        s = as_buffer(x, "x", writable=False) if x is not None else None
        if s is not None and s.count % n:
            raise ValueError("x has %d elements, which do not split into %d equal blocks" % (s.count, n))
        if s is not None:
            out, r = self._output(out, s, _per_rank_shape(s, n), s.count // n, "it must hold x.size / size = %d")
            check_overlap(s, r, r.ptr - self._rank * r.nbytes)
        else:
            r = as_buffer(out, "out", writable=True)
        self._call("cclScatter", s.ptr if s is not None and is_root else None, r.ptr, r.count, int(r.dtype), root,
                   _COMM, _STREAM, keep=(s, r))
        return out

    def send(self, x: Any, peer: int, *, compression: CompressionLike = None,
             feedback: Optional[Feedback] = None) -> None:
        """Sends x to rank `peer`, matched in call order with peer's recv. Sends and receives
        that wait on each other must be inside one :func:`ccl.group`. With compression, the
        receiver must pass the same codec."""
        s = as_buffer(x, "x", writable=False)
        ex, cp, fb, keep = _ex_args(compression, feedback)
        args = (s.ptr, s.count, int(s.dtype), self._peer(peer), _COMM, _STREAM)
        if ex:
            self._call("cclSendEx", *args, cp, fb, keep=(s,) + keep)
        else:
            self._call("cclSend", *args, keep=(s,))

    def recv(self, out: Any, peer: int, *, compression: CompressionLike = None) -> Any:
        """Receives from rank `peer` into out (its size and dtype must match the send).
        Returns out."""
        r = as_buffer(out, "out", writable=True)
        ex, cp, _, keep = _ex_args(compression, None)
        args = (r.ptr, r.count, int(r.dtype), self._peer(peer), _COMM, _STREAM)
        if ex:
            self._call("cclRecvEx", *args, cp, keep=(r,) + keep)
        else:
            self._call("cclRecv", *args, keep=(r,))
        return out


def _non_null(handle: Optional[int], fn: str) -> int:
    if not handle:
        raise CclError(Result.INTERNAL_ERROR, fn, "returned success but no communicator")
    return handle


class _CommSlot:
    """Marks where the communicator handle goes in a C call's arguments."""

    def __repr__(self) -> str:
        return "<comm>"


_COMM = _CommSlot()


class _StreamSlot:
    """Marks where the stream goes in a C call's arguments: the thread's current host stream
    (ccl.HostStream, ``with stream:``), or NULL."""

    def __repr__(self) -> str:
        return "<stream>"


_STREAM = _StreamSlot()
