# SPDX-License-Identifier: BSD-3-Clause
"""The 4-bit float codecs (mxfp4, nvfp4) against an independent reference: ml_dtypes'
float4_e2m1fn, float8_e4m3fn and float8_e8m0fnu conversions, applied with the OCP MX and
NVFP4 recipes in NumPy. A compressed broadcast from rank 0 carries one encode/decode round
trip to rank 1, whose result must equal the reference bit for bit: ties, zeros of both
signs, fp32 subnormals, blocks of every magnitude; non-finite blocks arrive as NaN or exact."""
import numpy as np
import pytest

import ccl

ml_dtypes = pytest.importorskip("ml_dtypes")
E2M1 = ml_dtypes.float4_e2m1fn
E4M3 = ml_dtypes.float8_e4m3fn
E8M0 = ml_dtypes.float8_e8m0fnu
f32 = np.float32

# Every E2M1 tie (midpoints between neighbours), the codes themselves, and points between.
TIES = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
CODES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def _e2m1(v):
    """Round-to-nearest-even to E2M1 through ml_dtypes, saturating as OCP MX and NVFP4 do."""
    return np.clip(v, -6, 6).astype(E2M1).astype(f32)


def _blocks(block, seed):
    """Blocks that exercise the grid: each a scale times ties, codes, points between and
    random values, at magnitudes from fp32 subnormals to 2^100, plus zeros of both signs."""
    rng = np.random.default_rng(seed)
    out = []
    grid = np.array(TIES + CODES + [0.3, 0.6, 1.1, 2.2, 4.4, 5.9], f32)
    for e in (-140, -126, -120, -60, -8, -1, 0, 1, 7, 30, 100):
        x = np.concatenate([grid, -grid, rng.standard_normal(block).astype(f32)])[:block]
        rng.shuffle(x)
        out.append((x * f32(2.0) ** e).astype(f32))
    out.append(np.zeros(block, f32))
    z = np.zeros(block, f32)
    z[::2] = -0.0
    out.append(z)
    return np.concatenate(out)


def _mxfp4_reference(x):
    y = np.empty_like(x)
    for off in range(0, len(x), 32):
        b = x[off:off + 32]
        amax = float(np.abs(b).max())
        # X = 2^(floor(log2 amax) - 2), at least 2^-127 (OCP MX, emax of e2m1 = 2).
        e = (np.frexp(amax)[1] - 1 - 2) if amax > 0 else -127
        e = max(e, -127)
        X = np.array(2.0 ** e, np.float64).astype(E8M0)
        assert float(X) == 2.0 ** e  # a power of two e8m0 holds exactly
        Xf = f32(float(X))
        # The encoder multiplies by 2^-e, exact like a division by X (a power of two).
        y[off:off + 32] = _e2m1((b.astype(np.float64) / float(Xf)).astype(f32)) * Xf
    return y


def _nvfp4_reference(x):
    finite = np.abs(x[np.isfinite(x)])
    amax = f32(finite.max()) if finite.size else f32(0)
    t = max(f32(amax / f32(2688.0)), f32(2.0 ** -117))
    y = np.empty_like(x)
    for off in range(0, len(x), 16):
        b = x[off:off + 16]
        a = f32(f32(np.abs(b).max()) / f32(6.0)) / t
        s = f32(float(np.array(a, f32).astype(E4M3))) * t  # e4m3 rounded to nearest even
        inv = f32(1.0) / s if s > 0 else f32(0.0)
        y[off:off + 16] = _e2m1((b * inv).astype(f32)) * s
    return y


REFERENCES = {"mxfp4": _mxfp4_reference, "nvfp4": _nvfp4_reference}


def _broadcast_round_trip(comm, codec, x):
    buf = x.copy() if comm.rank == 0 else np.empty_like(x)
    return comm.broadcast(buf, root=0, compression=ccl.Compression(codec))


def _bit_exact(comm, codec):
    x = _blocks(32 if codec == "mxfp4" else 16, seed=5)
    x = np.tile(x, 1 + 65536 // x.nbytes)  # above CCL_CODEC_MIN_BYTES, so it travels compressed
    y = _broadcast_round_trip(comm, codec, x)
    if comm.rank == 0:  # the sender: 4 bits an element and a scale per block on the wire
        s = comm.stats()["broadcast"]
        assert s.compressed_calls == 1 and s.wire_bytes * 6 < s.raw_bytes, s
        return None
    want = REFERENCES[codec](x)
    diff = np.nonzero(y.view(np.uint32) != want.view(np.uint32))[0]
    assert diff.size == 0, "%s: %d elements differ, first x=%r got %r want %r" % (
        codec, diff.size, x[diff[0]], y[diff[0]], want[diff[0]])
    return None


@pytest.mark.parametrize("codec", ["mxfp4", "nvfp4"])
def test_round_trip_equals_the_ml_dtypes_reference(ranks2, codec):
    ranks2.run(_bit_exact, codec, own_comm=True)


def _non_finite(comm, codec):
    x = np.tile(np.linspace(-3, 3, 64, dtype=f32), 512)
    x[5], x[100], x[200] = np.nan, np.inf, -np.inf
    y = _broadcast_round_trip(comm, codec, x)
    if comm.rank == 0:
        return None
    block = 32 if codec == "mxfp4" else 16
    for i in (5, 100, 200):
        b = slice(i // block * block, i // block * block + block)
        # A fixed-length stream marks the block NaN; a stream with raw blocks sends it exactly.
        assert np.all(np.isnan(y[b])) or np.array_equal(y[b], x[b], equal_nan=True), (codec, i, y[b])
    others = np.ones(len(x), bool)
    for i in (5, 100, 200):
        others[i // block * block:i // block * block + block] = False
    # The other blocks are what the codec makes of them, the tensor scale ignoring the
    # infinities (nvfp4): within the documented bound of the finite values.
    comp = ccl.Compression(codec)
    m = float(np.abs(x[others]).max())
    err = np.abs(y[others].astype(np.float64) - x[others])
    bound = np.array([comp.error_bound(float(abs(v)), m, 1) for v in x[others]])
    assert np.all(err <= bound), codec
    return None


@pytest.mark.parametrize("codec", ["mxfp4", "nvfp4"])
def test_non_finite_blocks_propagate(ranks2, codec):
    ranks2.run(_non_finite, codec, own_comm=True)
