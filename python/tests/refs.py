# SPDX-License-Identifier: BSD-3-Clause
"""Inputs every rank can rebuild for every other rank, and NumPy references of the reductions.

Values are small integers, so every sum, product, maximum and minimum over up to 4 ranks is
exact in every type ccl carries (fp8 e5m2 included), and a result must equal the reference
bit for bit; only averages of float types round, and get a tolerance.
"""
from __future__ import annotations

import numpy as np

NP_DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64"]
OPS = ["sum", "prod", "max", "min", "avg"]


def data(dtype, rank: int, count, seed: int = 0) -> np.ndarray:
    """Rank `rank`'s input: values in [-2, 2] ([0, 2] for unsigned types)."""
    rng = np.random.default_rng(seed * 1009 + rank)
    dt = np.dtype(dtype)
    lo = 0 if dt.kind == "u" else -2
    shape = count if isinstance(count, tuple) else (count,)
    return rng.integers(lo, 3, size=shape).astype(dt)


def inputs(dtype, nranks: int, count, seed: int = 0) -> list:
    return [data(dtype, r, count, seed) for r in range(nranks)]


def reduce_ref(op: str, arrays: list) -> np.ndarray:
    """op over the arrays, in float64, with ccl's integer average (truncated toward zero)."""
    a = np.stack([x.astype(np.float64) for x in arrays])
    dt = arrays[0].dtype
    if op == "sum":
        r = a.sum(0)
    elif op == "prod":
        r = a.prod(0)
    elif op == "max":
        r = a.max(0)
    elif op == "min":
        r = a.min(0)
    elif op == "avg":
        r = a.sum(0) / len(arrays)
        if dt.kind in "iu":
            r = np.trunc(r)
    else:
        raise ValueError(op)
    return r.astype(dt)


def check(got, want: np.ndarray, what: str = "", op: str = "sum") -> None:
    got = np.asarray(got)
    assert got.dtype == want.dtype, "%s: dtype %s, expected %s" % (what, got.dtype, want.dtype)
    assert got.shape == want.shape, "%s: shape %s, expected %s" % (what, got.shape, want.shape)
    if op == "avg" and want.dtype.kind == "f":
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2e-3, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)
