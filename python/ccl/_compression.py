# SPDX-License-Identifier: BSD-3-Clause
"""Compression parameters (cclCompression_t) and error-feedback state (cclFeedback_t)."""
from __future__ import annotations

import ctypes
import dataclasses
import threading
from typing import Optional, Union

from ._errors import check
from ._lib import COMPRESSION_MAGIC, HEADER_VERSION_CODE, CompressionStruct, lib
from ._types import Codec, FeedbackKind, check_c_int


def codec_from_name(name: str) -> Codec:
    """The Codec called `name` (case-insensitive, as cclCodecName prints it: "int8", "topk"...)."""
    out = ctypes.c_int()
    if not isinstance(name, str) or lib.cclCodecFromName(name.encode(), ctypes.byref(out)) != 0:
        raise ValueError("unknown codec %r; ccl's codecs are: %s" % (name, ", ".join(codec_names())))
    return Codec(out.value)


def codec_name(codec: Union[Codec, int]) -> str:
    """cclCodecName: the codec's name ("invalid" for a value out of range)."""
    return lib.cclCodecName(int(codec)).decode()


def codec_names() -> list:
    """The names of every codec ccl has, in cclCodec_t order."""
    return [codec_name(c) for c in Codec]


def _to_codec(codec: Union[Codec, str, int]) -> Codec:
    if isinstance(codec, Codec):
        return codec
    if isinstance(codec, str):
        return codec_from_name(codec)
    if isinstance(codec, int) and not isinstance(codec, bool):
        try:
            return Codec(codec)
        except ValueError:
            pass
    raise ValueError("codec must be a ccl.Codec or a codec name (%s); got %r" % (", ".join(codec_names()), codec))


@dataclasses.dataclass(frozen=True)
class Compression:
    """How a call or a communicator compresses: every field of cclCompression_t.

    A field left at 0 takes the codec's default. The library validates the values when a call
    uses them (a refused value raises :class:`ccl.CclInvalidArgument`).

    Args:
        codec: a :class:`ccl.Codec` or its name: "none", "fp8_e4m3", "fp8_e5m2", "mxfp8_e4m3",
            "int8", "int4", "int2", "topk", "randk", "threshold", "powersgd", "mxfp4", "nvfp4",
            "int2_midrise" (:func:`ccl.codec_names` lists the library's).
        block: quantizers: elements per scale, a multiple of 8 up to 65536 (blockSize).
        bits: int codecs: 0 or the codec's width; sparsifiers: value bits, 32 or 16.
        scale_bits: int codecs: 32 (fp32 scales) or 16 (fp16 scales) (scaleBits).
        keep_ratio: topk, randk: fraction of elements kept, in (0, 1] (keepRatio; default 0.01).
        threshold: threshold codec: keep |x| >= threshold.
        stochastic_rounding: quantizers: round stochastically (unbiased) instead of to nearest.
        seed: seed of stochastic rounding and randk.
        rank: powersgd: rank r of the approximation (default 4).
        rows, cols: powersgd: the matrix shape (rows * cols == count), or both 0 (near-square).
        warm_start: powersgd: start each call's Q from the last call's, kept in the call's
            :class:`ccl.Feedback` (of any kind: ``Feedback("none")`` keeps the warm start without
            error feedback); False starts every call from ``seed`` (warmStart -1).

    Example: ``ccl.Compression("int8", block=32)``.
    """

    codec: Union[Codec, str] = Codec.NONE
    block: int = 0
    bits: int = 0
    scale_bits: int = 0
    keep_ratio: float = 0.0
    threshold: float = 0.0
    stochastic_rounding: bool = False
    seed: int = 0
    rank: int = 0
    rows: int = 0
    cols: int = 0
    warm_start: bool = True

    def __post_init__(self):
        object.__setattr__(self, "codec", _to_codec(self.codec))
        for name in ("block", "bits", "scale_bits", "rank", "rows", "cols", "seed"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError("Compression.%s must be an int, got %r" % (name, v))
        # Ranges the C struct can hold; the meaning of each value is the library's to check.
        for name in ("block", "bits", "scale_bits", "rank"):
            if not -(2**31) <= getattr(self, name) < 2**31:
                raise ValueError("Compression.%s = %d does not fit a C int" % (name, getattr(self, name)))
        for name in ("rows", "cols", "seed"):
            if not 0 <= getattr(self, name) < 2**64:
                raise ValueError("Compression.%s must be in [0, 2**64), got %d" % (name, getattr(self, name)))
        # The C struct is built once: calls pass a pointer to it.
        s = CompressionStruct()
        s.size = ctypes.sizeof(CompressionStruct)
        s.magic = COMPRESSION_MAGIC
        s.version = HEADER_VERSION_CODE
        s.codec = int(self.codec)
        s.blockSize = self.block
        s.bits = self.bits
        s.scaleBits = self.scale_bits
        s.keepRatio = float(self.keep_ratio)
        s.threshold = float(self.threshold)
        s.stochasticRounding = 1 if self.stochastic_rounding else 0
        s.seed = self.seed
        s.rank = self.rank
        s.rows = self.rows
        s.cols = self.cols
        if not isinstance(self.warm_start, bool):
            raise TypeError("Compression.warm_start must be a bool, got %r" % (self.warm_start,))
        s.warmStart = 1 if self.warm_start else -1
        object.__setattr__(self, "_struct", s)

    @property
    def struct(self) -> CompressionStruct:
        """The cclCompression_t handed to the C calls."""
        return self._struct  # type: ignore[attr-defined]

    def error_bound(self, abs_value: float, abs_max: float, quantizations: int) -> float:
        """cclCodecErrorBound: the largest |y - x| that `quantizations` encode/decode round trips
        may cause to an element of magnitude `abs_value` in blocks whose magnitudes are at most
        `abs_max` (for reductions: sums over ranks of |input|). Allreduce over n ranks: n
        quantizations; reduce-scatter: n - 1; allgather, broadcast, all-to-all, send/recv: 1;
        each error-feedback stage adds two."""
        return codec_error_bound(self, abs_value, abs_max, quantizations)


def codec_error_bound(compression: Optional[Compression], abs_value: float, abs_max: float,
                      quantizations: int) -> float:
    """cclCodecErrorBound; see :meth:`Compression.error_bound`. None means no compression (0)."""
    out = ctypes.c_double()
    ptr = ctypes.byref(compression.struct) if compression is not None else None
    quantizations = check_c_int(int(quantizations), "quantizations")
    check(lib.cclCodecErrorBound(ptr, float(abs_value), float(abs_max), quantizations, ctypes.byref(out)),
          "cclCodecErrorBound")
    return out.value


CompressionLike = Union[Compression, str, Codec, None]


def to_compression(c: CompressionLike) -> Optional[Compression]:
    """A Compression from a Compression, a codec (name or Codec: its defaults) or None."""
    if c is None or isinstance(c, Compression):
        return c
    if isinstance(c, (str, Codec)):
        return Compression(c)
    raise TypeError("compression must be a ccl.Compression, a codec name or None; got %s" % type(c).__name__)


class _FeedbackState:
    """One cclFeedback_t, freed when the last reference to this object goes. Its Feedback holds
    one until close(); a call holds one while it runs, and a call queued in an open group or on
    a host stream until that has run (the group and the stream keep what their calls use), so
    closing a Feedback never frees state that a queued call will still read and write."""

    __slots__ = ("handle",)

    def __init__(self, handle: int):
        self.handle = handle

    def __del__(self):
        try:
            lib.cclFeedbackDestroy(self.handle)
        except Exception:  # interpreter shutdown: ctypes may already be gone
            pass


class Feedback:
    """Error-feedback state of one tensor (owns a cclFeedback_t).

    Pass the same Feedback to every call that sends the same tensor, e.g. one per gradient
    bucket: what compression lost in one call is added to the next call's input.

    Args:
        kind: "residual" (the plain error) or "loco" (a moving average of the error with weight
            `beta`, kept in 8 bits and cleared every `reset_period` calls; 0: never); "none"
            keeps no error, only powersgd's warm start (:class:`Compression`'s warm_start).
        beta: LoCo's weight, in [0, 1).
        reset_period: LoCo: calls between resets, >= 0.

    Free it with :meth:`close` (or use it as a context manager); it is also freed when
    garbage-collected. Calls that use it and are still queued (in an open :func:`ccl.group`, or
    on a :class:`ccl.HostStream` not yet synchronized) keep the state until they have run.
    """

    def __init__(self, kind: Union[str, FeedbackKind] = "residual", beta: float = 0.0, reset_period: int = 0):
        if isinstance(kind, str):
            names = {"residual": FeedbackKind.RESIDUAL, "ef": FeedbackKind.RESIDUAL, "loco": FeedbackKind.LOCO,
                     "none": FeedbackKind.NONE}
            if kind.lower() not in names:
                raise ValueError("unknown feedback kind %r: use 'residual', 'loco' or 'none'" % kind)
            kind = names[kind.lower()]
        self.kind = FeedbackKind(kind)
        self.beta = float(beta)
        self.reset_period = check_c_int(int(reset_period), "reset_period")
        self._lock = threading.Lock()
        handle = ctypes.c_void_p()
        check(lib.cclFeedbackCreate(ctypes.byref(handle), int(self.kind), self.beta, self.reset_period),
              "cclFeedbackCreate")
        self._state: Optional[_FeedbackState] = _FeedbackState(handle.value)

    def _live(self) -> _FeedbackState:
        """The state, for a call to hold while it uses it; ValueError once closed."""
        st = self._state
        if st is None:
            raise ValueError("this ccl.Feedback was closed")
        return st

    @property
    def handle(self) -> int:
        """The cclFeedback_t, for the C calls."""
        return self._live().handle

    @property
    def closed(self) -> bool:
        return self._state is None

    def close(self) -> None:
        """Frees the state (cclFeedbackDestroy) once no queued call uses it any more. Further use
        raises ValueError."""
        with self._lock:
            self._state = None

    def error_norm(self) -> float:
        """cclFeedbackErrorNorm: the norm of the error this state adds to its next call (what
        its last call lost; 0 before any call and for kind "none")."""
        out = ctypes.c_double()
        st = self._live()  # held across the call: a close() from another thread cannot free it
        check(lib.cclFeedbackErrorNorm(st.handle, ctypes.byref(out)), "cclFeedbackErrorNorm")
        return out.value

    def __enter__(self) -> "Feedback":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return "ccl.Feedback(kind=%r, beta=%r, reset_period=%r%s)" % (
            self.kind.name.lower(), self.beta, self.reset_period, ", closed" if self.closed else "")
