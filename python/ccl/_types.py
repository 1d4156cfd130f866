# SPDX-License-Identifier: BSD-3-Clause
"""ccl's enums and their mapping from NumPy and PyTorch dtypes and from operation names."""
from __future__ import annotations

import enum
from typing import Union

from ._lib import CODEC_NAMES, OP_KIND_NAMES


class DataType(enum.IntEnum):
    """cclDataType_t (the same values as ncclDataType_t)."""
    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9
    FLOAT8_E4M3 = 10
    FLOAT8_E5M2 = 11

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self]


_ITEMSIZE = {DataType.INT8: 1, DataType.UINT8: 1, DataType.INT32: 4, DataType.UINT32: 4, DataType.INT64: 8,
             DataType.UINT64: 8, DataType.FLOAT16: 2, DataType.FLOAT32: 4, DataType.FLOAT64: 8,
             DataType.BFLOAT16: 2, DataType.FLOAT8_E4M3: 1, DataType.FLOAT8_E5M2: 1}

# NumPy dtype names. bfloat16 and the fp8 types are not NumPy's own; the names are those of the
# ml_dtypes package, so its arrays work when it is installed.
NUMPY_DTYPES = {
    "int8": DataType.INT8, "uint8": DataType.UINT8, "int32": DataType.INT32, "uint32": DataType.UINT32,
    "int64": DataType.INT64, "uint64": DataType.UINT64, "float16": DataType.FLOAT16,
    "float32": DataType.FLOAT32, "float64": DataType.FLOAT64, "bfloat16": DataType.BFLOAT16,
    "float8_e4m3fn": DataType.FLOAT8_E4M3, "float8_e5m2": DataType.FLOAT8_E5M2,
}

# str(torch dtype). ccl's e4m3 is the OCP "fn" variant (finite, max 448), as torch's.
TORCH_DTYPES = {"torch." + k: v for k, v in NUMPY_DTYPES.items()}


class Op(enum.IntEnum):
    """cclRedOp_t: the reduction of allreduce, reduce and reduce_scatter."""
    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


OpLike = Union[Op, str, int]

C_INT_MIN, C_INT_MAX = -(2**31), 2**31 - 1


def check_c_int(value: int, what: str) -> int:
    """value, refused unless a C int holds it: ctypes passes an int argument or stores an int
    field modulo 2**32 without a word, so 2**32 + 1 would reach the library as 1."""
    if not C_INT_MIN <= value <= C_INT_MAX:
        raise ValueError("%s = %d does not fit a C int" % (what, value))
    return value


def to_op(op: OpLike) -> Op:
    """An Op from an Op, its name ("sum", "prod", "max", "min", "avg"; any case) or its value."""
    if isinstance(op, Op):
        return op
    if isinstance(op, str):
        try:
            return Op[op.upper()]
        except KeyError:
            pass
    elif isinstance(op, int) and not isinstance(op, bool):
        try:
            return Op(op)
        except ValueError:
            pass
    raise ValueError("unknown reduction op %r: use ccl.Op or one of %s" %
                     (op, ", ".join(repr(o.name.lower()) for o in Op)))


# cclCodec_t, from the library loaded: Codec.INT8 is "int8" (cclCodecName), and a codec the
# library adds is here with no edit.
Codec = enum.IntEnum("Codec", [(n.upper(), i) for i, n in enumerate(CODEC_NAMES)], module=__name__)
Codec.__doc__ = "cclCodec_t. Names as cclCodecName prints them: Codec.INT8 is \"int8\"."


class FeedbackKind(enum.IntEnum):
    """cclFeedbackKind_t."""
    NONE = 0
    RESIDUAL = 1
    LOCO = 2


# cclOpKind_t, from the library loaded: OpKind.REDUCESCATTER is "reducescatter" (cclOpKindName),
# the one spelling of it in CCL_COMPRESS, statistics and ccl.torch.
OpKind = enum.IntEnum("OpKind", [(n.upper(), i) for i, n in enumerate(OP_KIND_NAMES)], module=__name__)
OpKind.__doc__ = "cclOpKind_t: the kinds of operation counted by cclCommGetStats."


