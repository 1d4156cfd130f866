# SPDX-License-Identifier: BSD-3-Clause
"""Turning user arrays into (pointer, count, dtype) for the C calls, with the checks that keep
a bad argument a Python exception instead of a wild write.

Accepted: NumPy arrays, PyTorch CPU tensors, objects with DLPack (``__dlpack__``) on the CPU,
and objects with the buffer protocol or ``__array_interface__``. torch is never imported here:
an object can only be a torch tensor if the caller already imported torch.
"""
from __future__ import annotations

import sys
from typing import Any, Optional, Sequence

import numpy as np

from ._types import NUMPY_DTYPES, TORCH_DTYPES, DataType

_GPU_HINT = ("ccl's Python bindings move host memory only. For GPU tensors use torch.distributed's "
             "'nccl' backend on top of ccl's NCCL face (LD_PRELOAD=libccl_nccl.so), which is ccl's GPU path")

# DLPack device types (dlpack.h DLDeviceType).
_DL_CPU = 1
_DL_NAMES = {2: "CUDA", 3: "CUDA host", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI", 10: "ROCm",
             11: "ROCm host", 13: "CUDA managed", 14: "oneAPI"}


class Buffer:
    """A contiguous host buffer: where it is, how many elements of which type, and the object
    that owns the memory (kept referenced while the buffer is in use)."""

    __slots__ = ("obj", "ptr", "count", "dtype", "is_torch", "shape", "writable")

    def __init__(self, obj: Any, ptr: int, count: int, dtype: DataType, is_torch: bool, shape: tuple,
                 writable: bool):
        self.obj, self.ptr, self.count, self.dtype = obj, ptr, count, dtype
        self.is_torch, self.shape, self.writable = is_torch, shape, writable

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize


def _torch_tensor_class():
    torch = sys.modules.get("torch")
    return getattr(torch, "Tensor", None) if torch is not None else None


def is_torch_tensor(x: Any) -> bool:
    cls = _torch_tensor_class()
    return cls is not None and isinstance(x, cls)


def _supported(names) -> str:
    return ", ".join(sorted(names))


def _from_torch(x: Any, what: str) -> Buffer:
    import torch  # already imported by the caller, or x could not be a tensor

    if x.device.type != "cpu":
        raise ValueError("%s is a tensor on %s. %s." % (what, x.device, _GPU_HINT))
    if x.layout != torch.strided:
        raise ValueError("%s has layout %s; ccl takes dense (strided) tensors: use .to_dense()" % (what, x.layout))
    if not x.is_contiguous():
        raise ValueError("%s is not contiguous; pass %s.contiguous() (ccl reads and writes the tensor's "
                         "memory directly, so it does not copy for you)" % (what, what))
    dtype = TORCH_DTYPES.get(str(x.dtype))
    if dtype is None:
        raise TypeError("%s has dtype %s, which ccl does not carry; supported: %s" %
                        (what, x.dtype, _supported(TORCH_DTYPES)))
    if x.is_conj() or x.is_neg():
        raise ValueError("%s has a lazy conjugate/negative bit; call .resolve_conj().resolve_neg()" % what)
    return Buffer(x, x.data_ptr(), x.numel(), dtype, True, tuple(x.shape), True)


def _numpy_view(x: Any, what: str) -> np.ndarray:
    """A NumPy view of x's memory (never a copy: a copy of an output would be written and lost)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack_device__") and hasattr(x, "__dlpack__"):
        dev = x.__dlpack_device__()
        dev_type = int(dev[0])
        if dev_type != _DL_CPU:
            raise ValueError("%s lives on a %s device (DLPack device %s). %s." %
                             (what, _DL_NAMES.get(dev_type, "non-CPU"), tuple(dev), _GPU_HINT))
        try:
            return np.from_dlpack(x)
        except (TypeError, BufferError, RuntimeError) as e:
            raise TypeError("%s: NumPy cannot view it through DLPack (%s)" % (what, e)) from None
    try:
        view = memoryview(x)
    except TypeError:
        view = None
    if view is not None:
        try:
            return np.asarray(view)
        except (TypeError, ValueError) as e:
            raise TypeError("%s: its buffer format %r has no NumPy dtype (%s)" % (what, view.format, e)) from None
    if hasattr(x, "__array_interface__"):
        return np.asarray(x)
    raise TypeError("%s must be a NumPy array, a PyTorch CPU tensor, or an object with DLPack or the buffer "
                    "protocol; got %s" % (what, type(x).__name__))


def as_buffer(x: Any, what: str, *, writable: bool) -> Buffer:
    """Checks x and describes its memory. `what` names the argument in messages; `writable`:
    ccl will write into it."""
    if x is None:
        raise TypeError("%s is None; an array or tensor is required" % what)
    if is_torch_tensor(x):
        return _from_torch(x, what)
    arr = _numpy_view(x, what)
    dtype = NUMPY_DTYPES.get(arr.dtype.name)
    if dtype is None:
        raise TypeError("%s has dtype %s, which ccl does not carry; supported: %s" %
                        (what, arr.dtype, _supported(NUMPY_DTYPES)))
    if not arr.dtype.isnative:
        raise TypeError("%s has non-native byte order (%s); convert it with .astype(%r)" %
                        (what, arr.dtype.str, arr.dtype.newbyteorder("=").str))
    if not arr.flags.c_contiguous:
        raise ValueError("%s is not C-contiguous; pass numpy.ascontiguousarray(%s) (ccl reads and writes the "
                         "array's memory directly, so it does not copy for you)" % (what, what))
    if writable and not arr.flags.writeable:
        raise ValueError("%s is read-only, but ccl writes the result into it" % what)
    return Buffer(x if arr is x else (x, arr), arr.ctypes.data, arr.size, dtype, False, arr.shape,
                  arr.flags.writeable)


def empty(like: Buffer, shape: Sequence[int]) -> Any:
    """A new uninitialised array of like's type (torch tensor or NumPy array) and dtype."""
    if like.is_torch:
        import torch

        t = like.obj
        return torch.empty(tuple(shape), dtype=t.dtype, device=t.device)
    base = like.obj[1] if isinstance(like.obj, tuple) else like.obj
    return np.empty(tuple(shape), dtype=base.dtype)


def block_view(buf: Buffer, index: int, block: int) -> Any:
    """Elements [index*block, (index+1)*block) of buf's object, as a view of the same kind."""
    obj = buf.obj[1] if isinstance(buf.obj, tuple) else buf.obj
    flat = obj.reshape(-1) if not buf.is_torch else obj.view(-1)
    return flat[index * block:(index + 1) * block]


def check_same_dtype(a: Buffer, b: Buffer, a_name: str, b_name: str) -> None:
    if a.dtype != b.dtype:
        raise TypeError("%s has dtype %s but %s has dtype %s; ccl does not convert between types" %
                        (b_name, b.dtype.name.lower(), a_name, a.dtype.name.lower()))


def check_count(buf: Buffer, expected: int, what: str, why: str) -> None:
    if buf.count != expected:
        raise ValueError("%s has %d elements, but %s" % (what, buf.count, why % expected))


def check_overlap(send: Optional[Buffer], recv: Optional[Buffer], in_place_send_at: Optional[int]) -> None:
    """Refuses a send and a receive buffer that share memory unless the send buffer starts at
    `in_place_send_at` (the collective's in-place layout; None: it has none). A partial overlap
    would be read after being overwritten, silently."""
    if send is None or recv is None or send.nbytes == 0 or recv.nbytes == 0:
        return
    if send.ptr < recv.ptr + recv.nbytes and recv.ptr < send.ptr + send.nbytes:
        if in_place_send_at is not None and send.ptr == in_place_send_at:
            return
        raise ValueError("the input and output buffers overlap, but not in the collective's in-place layout "
                         "(see the method's documentation)")
