"""Per-level kernels of the direct ROMS ingestion path (statistics and shards), over the valid rho cells only.

For valid cell ``c`` (flat rho index ``cells[c]``) a field's rho-point value is ``wa[c] * xa[ia[c]] + wb[c] *
xb[ib[c]]`` in float32 arithmetic, where ``xa``/``xb`` are flattened source levels and ``ia``/``ib`` index them
(see :func:`.roms.rho_point_table`); without weights (``wa is None``) it is the plain gather ``xa[ia[c]]`` (rho
fields). This covers destaggering u/v (weights 1/2, or 1 and 0 next to land) and averaging w/AKs from s_w to s_rho
(weights 1/2 on two levels), and gives bit for bit the float32 values of the dask kernels of :mod:`.roms`
(multiplying by 1/2 commutes with rounding). Land and cells without a water neighbour are never read, so there is
no per-value NaN test.

Two implementations of one contract: compiled loops (numba; one sweep per level computes the value, the shifted
sum, the sum of squares, min and max together) when numba is importable, else NumPy ufuncs writing into
preallocated ``out=`` buffers (``ICML25_NO_NUMBA=1`` forces NumPy). Both accumulate in float64.
"""
from __future__ import annotations

import os

import numpy as np

try:  # pragma: no cover - depends on the environment
    if os.environ.get("ICML25_NO_NUMBA"):
        raise ImportError("ICML25_NO_NUMBA is set")
    import numba
except ImportError:  # pragma: no cover
    numba = None

BACKEND = "numba" if numba is not None else "numpy"
_EMPTY_I = np.zeros(1, np.int32)
_EMPTY_F = np.zeros(1, np.float32)


# ------------------------------------------------------------------------------------------------------- numba

if numba is not None:

    @numba.njit(cache=True, nogil=True)
    def _nb_value(xa, ia, xb, ib, wa, wb, pair, c):  # pragma: no cover - compiled
        if pair:
            return wa[c] * xa[ia[c]] + wb[c] * xb[ib[c]]
        return xa[ia[c]]

    @numba.njit(cache=True, nogil=True)
    def _nb_moments(xa, ia, xb, ib, wa, wb, pair, shift):  # pragma: no cover - compiled
        n = ia.size
        s1a = s1b = s2a = s2b = 0.0
        mn = np.float32(np.inf)
        mx = np.float32(-np.inf)
        half = n - n % 2
        for c in range(0, half, 2):  # two accumulator chains, so the float64 adds do not wait on each other
            v0 = _nb_value(xa, ia, xb, ib, wa, wb, pair, c)
            v1 = _nb_value(xa, ia, xb, ib, wa, wb, pair, c + 1)
            d0 = np.float64(v0) - shift
            d1 = np.float64(v1) - shift
            s1a += d0
            s1b += d1
            s2a += d0 * d0
            s2b += d1 * d1
            mn = min(mn, v0, v1)
            mx = max(mx, v0, v1)
        for c in range(half, n):
            v0 = _nb_value(xa, ia, xb, ib, wa, wb, pair, c)
            d0 = np.float64(v0) - shift
            s1a += d0
            s2a += d0 * d0
            mn = min(mn, v0)
            mx = max(mx, v0)
        return s1a + s1b, s2a + s2b, np.float64(mn), np.float64(mx)

    @numba.njit(cache=True, nogil=True, inline="always")
    def _nb_half_bits(z, tmp, tmp_bits):  # pragma: no cover - compiled
        # IEEE float32 -> float16 bits, round to nearest even (NumPy's cast), with integer operations.
        tmp[0] = z
        u = np.int64(tmp_bits[0])
        a = u & 0x7FFFFFFF
        sign = (u >> 16) & 0x8000
        if a >= 0x47800000:  # |z| >= 65520 rounds to inf; NaN stays a (quiet) NaN
            o = 0x7E00 if a > 0x7F800000 else 0x7C00
        elif a < 0x38800000:  # below the smallest normal float16 (2^-14): subnormal or zero
            o = np.int64(np.rint(np.float64(abs(z)) * 16777216.0))  # exact product; rint rounds half to even
        else:  # rebias the exponent, round the 13 dropped mantissa bits half to even
            o = (a - 939524096 + 0xFFF + ((a >> 13) & 1)) >> 13
        return np.uint16(o | sign)

    @numba.njit(cache=True, nogil=True)
    def _nb_zscore16(xa, ia, xb, ib, wa, wb, pair, cells, invalid, mean, std, out):  # pragma: no cover
        tmp = np.empty(1, np.float32)
        tmp_bits = tmp.view(np.uint32)
        mn = np.float32(np.inf)
        mx = np.float32(-np.inf)
        for c in range(ia.size):
            v = _nb_value(xa, ia, xb, ib, wa, wb, pair, c)
            mn = min(mn, v)
            mx = max(mx, v)
            out[cells[c]] = _nb_half_bits((v - mean) / std, tmp, tmp_bits)
        for j in range(invalid.size):
            out[invalid[j]] = 0
        return np.float64(mn), np.float64(mx)

    @numba.njit(cache=True, nogil=True)
    def _nb_to_float16(x, out):  # pragma: no cover - compiled
        tmp = np.empty(1, np.float32)
        tmp_bits = tmp.view(np.uint32)
        for p in range(x.size):
            out[p] = _nb_half_bits(x[p], tmp, tmp_bits)


# ------------------------------------------------------------------------------------------------------- numpy


class _Buffers:
    """Compact float32/float64 work buffers of the NumPy implementation, grown on demand and reused."""

    def __init__(self) -> None:
        self.f32a = self.f32b = self.f64 = np.empty(0)

    def get(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.f32a.size < n:
            self.f32a, self.f32b, self.f64 = np.empty(n, np.float32), np.empty(n, np.float32), np.empty(n)
        return self.f32a[:n], self.f32b[:n], self.f64[:n]


_BUF = _Buffers()


def _np_values(xa, ia, xb, ib, wa, wb) -> np.ndarray:
    a, b, _ = _BUF.get(ia.size)
    np.take(xa, ia, out=a, mode="clip")  # mode="clip": no bounds-check buffering (indices are in range)
    if wa is not None:
        np.multiply(a, wa, out=a)
        np.take(xb, ib, out=b, mode="clip")
        np.multiply(b, wb, out=b)
        np.add(a, b, out=a)
    return a


# ----------------------------------------------------------------------------------------------------- contract


def to_float16(x: np.ndarray, out: np.ndarray, *, backend: str | None = None) -> None:
    """out[:] = x as float16 (round to nearest even); x: contiguous float32 (n,), out: float16 (n,).

    NumPy's float32 -> float16 cast is a scalar loop here (about 6-9 ns per value, more than the rest of a shard
    together); the compiled loop does the same rounding with integer operations (0.4-2 ns per value).
    """
    if (backend or BACKEND) == "numba":
        _nb_to_float16(x, out.view(np.uint16))
    else:
        with np.errstate(over="ignore"):  # |x| >= 65520 becomes inf, as in the compiled loop
            np.copyto(out, x, casting="same_kind")



def moments(xa, ia, xb=None, ib=None, wa=None, wb=None, *, shift: float = 0.0, backend: str | None = None
            ) -> tuple[float, float, float, float]:
    """(sum(v - shift), sum((v - shift)^2), min v, max v) over the valid cells, float64 accumulation.

    xa, xb: flattened float32 source levels; ia, ib: int32 indices (n_valid,); wa, wb: float32 weights or None.
    A NaN among the values makes the sums NaN (the caller reports it).
    """
    if (backend or BACKEND) == "numba":
        pair = wa is not None
        return _nb_moments(xa, ia, xb if pair else xa, ib if pair else _EMPTY_I, wa if pair else _EMPTY_F,
                           wb if pair else _EMPTY_F, pair, float(shift))
    if ia.size == 0:
        return 0.0, 0.0, np.inf, -np.inf
    v = _np_values(xa, ia, xb, ib, wa, wb)
    d = _BUF.get(ia.size)[2]
    np.subtract(v, np.float64(shift), out=d)
    # einsum, not np.dot: BLAS threads spin on a shared machine (np.dot measured 37 ns per value here, einsum 1.1)
    return float(d.sum()), float(np.einsum("i,i->", d, d)), float(v.min()), float(v.max())


def zscore(xa, ia, xb, ib, wa, wb, cells, invalid, mean: np.float32, std: np.float32, out: np.ndarray, *,
           backend: str | None = None) -> tuple[float, float]:
    """out[cells] = (v - mean) / std, out[invalid] = 0, as float16; returns (min, max) of v.

    The z-score is computed in float32 like ``x -= mean; x /= std`` and rounded to float16 like NumPy's cast, so
    the result is bit for bit that of the dataset path. out: the flattened float16 rho level (eta_rho * xi_rho,).
    """
    mean, std = np.float32(mean), np.float32(std)
    if (backend or BACKEND) == "numba":
        pair = wa is not None
        return _nb_zscore16(xa, ia, xb if pair else xa, ib if pair else _EMPTY_I, wa if pair else _EMPTY_F,
                            wb if pair else _EMPTY_F, pair, cells, invalid, mean, std, out.view(np.uint16))
    out[invalid] = 0.0
    if ia.size == 0:
        return np.inf, -np.inf
    v = _np_values(xa, ia, xb, ib, wa, wb)
    mn, mx = float(v.min()), float(v.max())
    np.subtract(v, mean, out=v)
    np.divide(v, std, out=v)
    out[cells] = v  # float32 -> float16 (round to nearest even)
    return mn, mx
