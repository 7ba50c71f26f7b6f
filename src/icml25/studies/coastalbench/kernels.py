"""Kernels of the direct ROMS ingestion path (statistics and shards): one sweep per record of a variable.

A record of a variable is read into one flat float32 buffer in its *source layout* (:class:`.roms.SourceLayout`:
the file's storage tiles, or plain C order), and a :class:`SourceTable` says where each valid rho cell's value
comes from in that buffer: ``copy`` cells take one source value (rho fields; u/v next to land or at a domain
edge), ``pair`` cells average two, ``(a + b) * 0.5`` in float32 (u/v between two water points; w/AKs between
levels k and k + 1). This is bit for bit what the dask kernels of :mod:`.roms` compute (``(a + b) / 2`` and
``x / 1``). Land and cells without a water neighbour are never read (no per-value NaN test); in shards they are
0. Both groups are also stored as *runs* (consecutive cells whose sources are consecutive too), so the compiled
loops stream through contiguous memory and vectorise.

Two implementations of one contract: compiled loops (numba) when numba is importable, else NumPy gathers into
preallocated ``out=`` buffers (``ICML25_NO_NUMBA=1`` forces NumPy). Both accumulate the sums in float64; min and
max are taken on the float32 values (the compiled loop compares order-preserving integer keys of the bits, which
vectorises; a NaN bit pattern lands beyond +-inf).
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
NO_TILES = 2**62  #: tile size of a table whose offsets are plain buffer offsets
_I32_MAX, _I32_MIN = np.int32(2**31 - 1), np.int32(-(2**31))


# --------------------------------------------------------------------------------------------------- the table


class SourceTable:
    """Where the rho-point values of one kind of field lie in a record buffer of one source layout.

    Runs (int64; flat rho index ``dst``, buffer offsets relative to the level's base): ``copy_runs`` (n, 3) =
    (dst, src, length), ``pair_runs`` (n, 4) = (dst, a, b, length), ``zero_runs`` (n, 2) = (dst, length) for
    the rho cells that are 0 in shards. ``base_a``/``base_b`` (levels,): buffer offset of level k of the
    first/second operand (the second is level k + 1 for w/AKs). The per-cell arrays ``copy_dst``/``copy_src``,
    ``pair_dst``/``pair_a``/``pair_b`` and ``invalid`` (used by the NumPy kernels) are expanded on first use.

    ``tile_size``: values per storage tile of the layout; no run crosses a tile, so a kernel can find each tile
    wherever the record lies (``tiles[slot]``: offset of tile ``slot`` in the buffer, e.g. a mapped file). Without
    tiles (``NO_TILES``) offsets are plain buffer offsets.
    """

    def __init__(self, copy_runs, pair_runs, zero_runs, base_a, base_b, tile_size: int = NO_TILES) -> None:
        self.copy_runs, self.pair_runs, self.zero_runs = copy_runs, pair_runs, zero_runs
        self.base_a, self.base_b = base_a, base_b
        self.tile_size = int(tile_size)
        self.identity = np.zeros(1, np.int64)  # tiles where the buffer holds them (one huge "tile")
        self.count = int(copy_runs[:, -1].sum() + pair_runs[:, -1].sum())  # valid cells per level
        self._cells: tuple[np.ndarray, ...] | None = None

    @property
    def levels(self) -> int:
        return int(self.base_a.size)

    def _expand(self) -> tuple[np.ndarray, ...]:
        if self._cells is None:
            self._cells = (*_expand(self.copy_runs), *_expand(self.pair_runs), *_expand(self.zero_runs))
        return self._cells

    copy_dst = property(lambda self: self._expand()[0])
    copy_src = property(lambda self: self._expand()[1])
    pair_dst = property(lambda self: self._expand()[2])
    pair_a = property(lambda self: self._expand()[3])
    pair_b = property(lambda self: self._expand()[4])
    invalid = property(lambda self: self._expand()[5])


def _expand(runs: np.ndarray) -> list[np.ndarray]:
    """Per-cell arrays (one per start column) of runs (start..., length)."""
    lengths = runs[:, -1]
    within = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return [np.repeat(runs[:, j], lengths) + within for j in range(runs.shape[1] - 1)]


def _runs(dst: np.ndarray, *srcs: np.ndarray, tile_size: int = NO_TILES) -> np.ndarray:
    """(start dst, start srcs..., length) of maximal runs where dst and every src step by +1 together, none
    starting a new tile (src offset a multiple of ``tile_size``) inside."""
    if dst.size == 0:
        return np.zeros((0, 2 + len(srcs)), np.int64)
    brk = np.diff(dst) != 1
    for s in srcs:
        brk |= (np.diff(s) != 1) | (s[1:] % tile_size == 0)
    starts = np.concatenate([[0], np.flatnonzero(brk) + 1])
    lengths = np.diff(np.concatenate([starts, [dst.size]]))
    return np.stack([dst[starts], *(s[starts] for s in srcs), lengths], axis=1).astype(np.int64)


def _np_build(cells, ia, ib, pair, rows, cols, nx, invalid, ts):
    def off(flat):
        j, i = np.divmod(flat, nx)
        return rows[j] + cols[i]

    oa, ob = off(ia), off(ib)
    return (_runs(cells[~pair], oa[~pair], tile_size=ts), _runs(cells[pair], oa[pair], ob[pair], tile_size=ts),
            _runs(invalid))


def source_table(cells, ia, ib, wa, wb, invalid, *, vertical: bool, rows, cols, bases,
                 tile_size: int | None = None, backend: str | None = None) -> SourceTable:
    """Build a :class:`SourceTable` from a rho-point table (strictly increasing flat rho ``cells``, flat source
    indices ``ia``/``ib``, float32 weights ``wa``/``wb`` or None, sorted ``invalid``; see
    :func:`.records.rho_point_table`) and a source layout: source point (j, i) of level k lies at
    ``bases[k] + rows[j] + cols[i]`` (int64 arrays; see :class:`.records.SourceLayout`).

    Weights 1/2 and 1/2 make a pair; 1 and 0 (or no weights) a copy of the first source. ``tile_size``: values
    per storage tile when a level's offsets ``rows[j] + cols[i]`` count ``tile_size`` per tile (runs then stop at
    tile starts, see :class:`SourceTable`); every level base must be a whole number of tiles plus an offset inside
    the tile that keeps the level's values in it.
    """
    cells = np.asarray(cells, np.int64)
    ia = np.asarray(ia, np.int64)
    if wa is None:
        pair = np.zeros(cells.size, bool)
        ib = ia
    else:
        wa, wb = np.asarray(wa, np.float32), np.asarray(wb, np.float32)
        pair = (wa == 0.5) & (wb == 0.5)
        if not (pair | ((wa == 1.0) & (wb == 0.0))).all():
            raise ValueError("source_table: weights must be (1/2, 1/2) or (1, 0)")
        ib = np.asarray(ib, np.int64)
    invalid = np.asarray(invalid, np.int64)
    for what, x in (("cells", cells), ("invalid", invalid)):
        if x.size > 1 and (np.diff(x) <= 0).any():
            raise ValueError(f"source_table: {what} must be strictly increasing")
    rows, cols = np.asarray(rows, np.int64), np.asarray(cols, np.int64)
    ts = NO_TILES if tile_size is None else int(tile_size)
    build = _nb_build if (backend or BACKEND) == "numba" else _np_build
    copy_runs, pair_runs, zero_runs = build(cells, ia, ib, pair, rows, cols, cols.size, invalid, ts)
    bases = np.asarray(bases, np.int64)
    base_a = bases[:-1].copy() if vertical else bases.copy()
    base_b = bases[1:].copy() if vertical else bases.copy()
    return SourceTable(copy_runs, pair_runs, zero_runs, base_a, base_b, ts)


def _at(tab: SourceTable, tiles: np.ndarray | None, offsets):
    """Buffer positions of table offsets (slot layout) for a record whose tiles lie at ``tiles`` (None: in slot
    order)."""
    if tiles is None:
        return offsets
    slot = np.asarray(offsets, np.int64) // tab.tile_size
    return tiles[slot] + (offsets - slot * tab.tile_size)


def first_values(buf: np.ndarray, tab: SourceTable, tiles: np.ndarray | None = None) -> np.ndarray:
    """float64 (levels,): each level's value at its first valid cell (0 if it has none); the statistics shift."""
    out = np.zeros(tab.levels)
    c, p = tab.copy_runs, tab.pair_runs
    for k in range(tab.levels):
        if len(c) and (not len(p) or c[0, 0] < p[0, 0]):
            out[k] = buf[_at(tab, tiles, tab.base_a[k] + c[0, 1])]
        elif len(p):
            out[k] = (buf[_at(tab, tiles, tab.base_a[k] + p[0, 1])]
                      + buf[_at(tab, tiles, tab.base_b[k] + p[0, 2])]) * np.float32(0.5)
    return out


def keys_to_float(keys: np.ndarray) -> np.ndarray:
    """Order-preserving int32 keys of float32 bit patterns back to float64 values (the map is an involution)."""
    k = np.asarray(keys, np.int32)
    return (k ^ ((k >> 31) & np.int32(0x7FFFFFFF))).view(np.float32).astype(np.float64)


# ------------------------------------------------------------------------------------------------------- numba

if numba is not None:
    from llvmlite import binding as _llvm
    from llvmlite import ir as _ir
    from numba.core import types as _types
    from numba.extending import intrinsic as _intrinsic

    #: F16C lets LLVM round float32 -> float16 in hardware (vcvtps2ph, round to nearest even like NumPy)
    _HW_HALF = "f16c" in _llvm.get_host_cpu_features().flatten()

    @_intrinsic
    def _hw_half_bits(typingctx, x):  # pragma: no cover - compiled
        if x != _types.float32:
            return None

        def codegen(context, builder, sig, args):
            return builder.bitcast(builder.fptrunc(args[0], _ir.HalfType()), _ir.IntType(16))

        return _types.uint16(_types.float32), codegen

    @_intrinsic
    def _f32_bits(typingctx, x):  # pragma: no cover - compiled
        if x != _types.float32:
            return None

        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], _ir.IntType(32))

        return _types.int32(_types.float32), codegen

    @numba.njit(cache=True, nogil=True, inline="always")
    def _sw_half_bits(z):  # pragma: no cover - compiled
        # IEEE float32 -> float16 bits, round to nearest even (NumPy's cast), with integer operations.
        u = np.int64(_f32_bits(z)) & 0xFFFFFFFF
        a = u & 0x7FFFFFFF
        sign = (u >> 16) & 0x8000
        if a >= 0x47800000:  # |z| >= 65520 rounds to inf; NaN stays a (quiet) NaN
            o = 0x7E00 if a > 0x7F800000 else 0x7C00
        elif a < 0x38800000:  # below the smallest normal float16 (2^-14): subnormal or zero
            o = np.int64(np.rint(np.float64(abs(z)) * 16777216.0))  # exact product; rint rounds half to even
        else:  # rebias the exponent, round the 13 dropped mantissa bits half to even
            o = (a - 939524096 + 0xFFF + ((a >> 13) & 1)) >> 13
        return np.uint16(o | sign)

    _half_bits = _hw_half_bits if _HW_HALF else _sw_half_bits

    @numba.njit(cache=True, nogil=True, inline="always")
    def _key(x):  # pragma: no cover - compiled
        # order-preserving int32 key of a float32 bit pattern (two's complement trick)
        return x ^ ((x >> 31) & np.int32(0x7FFFFFFF))

    # fastmath "reassoc" only on the float64 sums (lets them vectorise); the values themselves are plain float32
    @numba.njit(cache=True, nogil=True, inline="always")
    def _pos(p, tiles, ts):  # pragma: no cover - compiled
        # buffer position of slot-layout offset p (its tile found in tiles)
        slot = p // ts
        return tiles[slot] + (p - slot * ts)

    @numba.njit(cache=True, nogil=True, fastmath={"reassoc"})
    def _nb_moments(buf, tiles, ts, base_a, base_b, copy_runs, pair_runs, shift, s1, s2, kmin, kmax
                    ):  # pragma: no cover - compiled
        half = np.float32(0.5)
        for k in range(base_a.size):
            a0, b0, sh = base_a[k], base_b[k], shift[k]
            t1 = 0.0
            t2 = 0.0
            lo = kmin[k]
            hi = kmax[k]
            for r in range(copy_runs.shape[0]):
                p = _pos(a0 + copy_runs[r, 1], tiles, ts)
                x = buf[p : p + copy_runs[r, 2]]
                xi = x.view(np.int32)
                for c in range(x.size):
                    d = np.float64(x[c]) - sh
                    t1 += d
                    t2 += d * d
                    q = _key(xi[c])
                    lo = min(lo, q)
                    hi = max(hi, q)
            for r in range(pair_runs.shape[0]):
                n = pair_runs[r, 3]
                p = _pos(a0 + pair_runs[r, 1], tiles, ts)
                q = _pos(b0 + pair_runs[r, 2], tiles, ts)
                x = buf[p : p + n]
                y = buf[q : q + n]
                for c in range(n):
                    v = (x[c] + y[c]) * half
                    d = np.float64(v) - sh
                    t1 += d
                    t2 += d * d
                    q = _key(np.int32(_f32_bits(v)))
                    lo = min(lo, q)
                    hi = max(hi, q)
            s1[k] += t1
            s2[k] += t2
            kmin[k] = lo
            kmax[k] = hi

    @numba.njit(cache=True, nogil=True)
    def _nb_zscore(buf, tiles, ts, base_a, base_b, copy_runs, pair_runs, zero_runs, mean, std, out, kmin, kmax
                   ):  # pragma: no cover - compiled
        half = np.float32(0.5)
        for k in range(base_a.size):
            a0, b0, m, s = base_a[k], base_b[k], mean[k], std[k]
            lo = kmin[k]
            hi = kmax[k]
            o = out[k]
            for r in range(copy_runs.shape[0]):
                n = copy_runs[r, 2]
                p = _pos(a0 + copy_runs[r, 1], tiles, ts)
                x = buf[p : p + n]
                xi = x.view(np.int32)
                w = o[copy_runs[r, 0] : copy_runs[r, 0] + n]
                for c in range(n):
                    w[c] = _half_bits((x[c] - m) / s)
                    q = _key(xi[c])
                    lo = min(lo, q)
                    hi = max(hi, q)
            for r in range(pair_runs.shape[0]):
                n = pair_runs[r, 3]
                p = _pos(a0 + pair_runs[r, 1], tiles, ts)
                q = _pos(b0 + pair_runs[r, 2], tiles, ts)
                x = buf[p : p + n]
                y = buf[q : q + n]
                w = o[pair_runs[r, 0] : pair_runs[r, 0] + n]
                for c in range(n):
                    v = (x[c] + y[c]) * half
                    w[c] = _half_bits((v - m) / s)
                    q = _key(_f32_bits(v))
                    lo = min(lo, q)
                    hi = max(hi, q)
            for r in range(zero_runs.shape[0]):
                o[zero_runs[r, 0] : zero_runs[r, 0] + zero_runs[r, 1]] = 0
            kmin[k] = lo
            kmax[k] = hi

    @numba.njit(cache=True, nogil=True)
    def _nb_to_float16(x, out):  # pragma: no cover - compiled
        for p in range(x.size):
            out[p] = _half_bits(x[p])

    @numba.njit(cache=True, nogil=True)
    def _nb_to_float16_soft(x, out):  # pragma: no cover - compiled
        for p in range(x.size):
            out[p] = _sw_half_bits(x[p])

    @numba.njit(cache=True, nogil=True)
    def _nb_build(cells, ia, ib, pair, rows, cols, nx, invalid, ts):  # pragma: no cover - compiled
        # the runs of _np_build in one pass (a copy run continues the previous copy cell, a pair run the previous
        # pair cell, whatever lies between them; never into a new tile)
        n = cells.size
        cr = np.empty((n, 3), np.int64)
        pr = np.empty((n, 4), np.int64)
        zr = np.empty((invalid.size, 2), np.int64)
        nc = 0
        npr = 0
        nz = 0
        for c in range(n):
            d = cells[c]
            oa = rows[ia[c] // nx] + cols[ia[c] % nx]
            if pair[c]:
                ob = rows[ib[c] // nx] + cols[ib[c] % nx]
                if npr and pr[npr - 1, 0] + pr[npr - 1, 3] == d and pr[npr - 1, 1] + pr[npr - 1, 3] == oa \
                        and pr[npr - 1, 2] + pr[npr - 1, 3] == ob and oa % ts != 0 and ob % ts != 0:
                    pr[npr - 1, 3] += 1
                else:
                    pr[npr, 0], pr[npr, 1], pr[npr, 2], pr[npr, 3] = d, oa, ob, 1
                    npr += 1
            elif nc and cr[nc - 1, 0] + cr[nc - 1, 2] == d and cr[nc - 1, 1] + cr[nc - 1, 2] == oa and oa % ts != 0:
                cr[nc - 1, 2] += 1
            else:
                cr[nc, 0], cr[nc, 1], cr[nc, 2] = d, oa, 1
                nc += 1
        for c in range(invalid.size):
            if nz and zr[nz - 1, 0] + zr[nz - 1, 1] == invalid[c]:
                zr[nz - 1, 1] += 1
            else:
                zr[nz, 0], zr[nz, 1] = invalid[c], 1
                nz += 1
        return cr[:nc].copy(), pr[:npr].copy(), zr[:nz].copy()


# ------------------------------------------------------------------------------------------------------- numpy


class _Buffers:
    """Compact float32/float64 work buffers of the NumPy implementation, grown on demand and reused."""

    def __init__(self) -> None:
        self.f32 = self.f32b = self.f64 = np.empty(0)

    def get(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.f32.size < n:
            self.f32, self.f32b, self.f64 = np.empty(n, np.float32), np.empty(n, np.float32), np.empty(n)
        return self.f32[:n], self.f32b[:n], self.f64[:n]


_BUF = _Buffers()


def _np_values(buf: np.ndarray, tab: SourceTable, k: int, tiles: np.ndarray | None = None) -> np.ndarray:
    """The level's valid values, copy cells then pair cells, in a reused float32 buffer."""
    nc, n = int(tab.copy_runs[:, -1].sum()), tab.count
    v, w, _ = _BUF.get(n)
    if tiles is None:
        np.take(buf[tab.base_a[k] :], tab.copy_src, out=v[:nc], mode="clip")  # clip: no bounds-check buffering
    else:
        np.take(buf, _at(tab, tiles, tab.base_a[k] + tab.copy_src), out=v[:nc])
    if n > nc:
        if tiles is None:
            np.take(buf[tab.base_a[k] :], tab.pair_a, out=v[nc:], mode="clip")
            np.take(buf[tab.base_b[k] :], tab.pair_b, out=w[nc:], mode="clip")
        else:
            np.take(buf, _at(tab, tiles, tab.base_a[k] + tab.pair_a), out=v[nc:])
            np.take(buf, _at(tab, tiles, tab.base_b[k] + tab.pair_b), out=w[nc:])
        np.add(v[nc:], w[nc:], out=v[nc:])
        np.multiply(v[nc:], np.float32(0.5), out=v[nc:])
    return v


# ----------------------------------------------------------------------------------------------------- contract


def to_float16(x: np.ndarray, out: np.ndarray, *, backend: str | None = None) -> None:
    """out[:] = x as float16 (round to nearest even); x: contiguous float32 (n,), out: float16 (n,).

    NumPy's float32 -> float16 cast is a scalar loop here (about 9 ns per value, more than the rest of a shard
    together); the compiled loop rounds in hardware (F16C) or with integer operations, the same way.
    """
    backend = backend or BACKEND
    if backend == "numba":
        _nb_to_float16(x, out.view(np.uint16))
    elif backend == "numba-soft":  # the integer rounding used on CPUs without F16C (tested everywhere)
        _nb_to_float16_soft(x, out.view(np.uint16))
    else:
        with np.errstate(over="ignore"):  # |x| >= 65520 becomes inf, as in the compiled loop
            np.copyto(out, x, casting="same_kind")


def moments(buf: np.ndarray, tab: SourceTable, shift: np.ndarray, s1: np.ndarray, s2: np.ndarray,
            lo: np.ndarray, hi: np.ndarray, *, tiles: np.ndarray | None = None, backend: str | None = None) -> None:
    """Accumulate one record: s1[k] += sum(v - shift[k]), s2[k] += sum((v - shift[k])^2) over level k's valid
    values v (float64 sums); lo/hi (int32 order keys, start at +-2^31 - 1) take the min/max of v (see
    :func:`keys_to_float`). A NaN among the values makes the sums NaN (the caller reports it).

    buf: the record buffer (float32, 1-D); shift, s1, s2: float64 (levels,); lo, hi: int32 (levels,); tiles:
    int64 (tiles,) buffer offset of each storage tile of the table's layout (None: the tiles in slot order).
    """
    if (backend or BACKEND) == "numba":
        if tiles is None:
            _nb_moments(buf, tab.identity, NO_TILES, tab.base_a, tab.base_b, tab.copy_runs, tab.pair_runs, shift,
                        s1, s2, lo, hi)
        else:
            _nb_moments(buf, tiles, tab.tile_size, tab.base_a, tab.base_b, tab.copy_runs, tab.pair_runs, shift,
                        s1, s2, lo, hi)
        return
    if tab.count == 0:
        return
    for k in range(tab.levels):
        v = _np_values(buf, tab, k, tiles)
        d = _BUF.get(tab.count)[2]
        np.subtract(v, shift[k], out=d)
        # einsum, not np.dot: BLAS threads spin on a shared machine
        s1[k] += d.sum()
        s2[k] += np.einsum("i,i->", d, d)
        keys = v.view(np.int32) ^ ((v.view(np.int32) >> 31) & np.int32(0x7FFFFFFF))
        lo[k], hi[k] = min(lo[k], keys.min()), max(hi[k], keys.max())


def zscore(buf: np.ndarray, tab: SourceTable, mean: np.ndarray, std: np.ndarray, out: np.ndarray,
           lo: np.ndarray, hi: np.ndarray, *, tiles: np.ndarray | None = None, backend: str | None = None) -> None:
    """out[k, cell] = (v - mean[k]) / std[k] as float16 for valid cells, 0 elsewhere; lo/hi as in
    :func:`moments` (min/max keys of v, for the caller's checks).

    The z-score is computed in float32 like ``x -= mean; x /= std`` and rounded to float16 like NumPy's cast, so
    the result is bit for bit that of the dataset path. out: float16 (levels, eta_rho * xi_rho); mean, std:
    float32 (levels,); tiles as in :func:`moments`.
    """
    mean, std = np.asarray(mean, np.float32), np.asarray(std, np.float32)
    if (backend or BACKEND) == "numba":
        t, ts = (tab.identity, NO_TILES) if tiles is None else (tiles, tab.tile_size)
        _nb_zscore(buf, t, ts, tab.base_a, tab.base_b, tab.copy_runs, tab.pair_runs, tab.zero_runs, mean, std,
                   out.view(np.uint16), lo, hi)
        return
    nc = int(tab.copy_runs[:, -1].sum())
    for k in range(tab.levels):
        o = out[k]
        o[tab.invalid] = 0.0
        if tab.count == 0:
            continue
        v = _np_values(buf, tab, k, tiles)
        keys = v.view(np.int32) ^ ((v.view(np.int32) >> 31) & np.int32(0x7FFFFFFF))
        lo[k], hi[k] = min(lo[k], keys.min()), max(hi[k], keys.max())
        np.subtract(v, mean[k], out=v)
        np.divide(v, std[k], out=v)
        with np.errstate(over="ignore"):
            o[tab.copy_dst] = v[:nc]  # float32 -> float16 (round to nearest even)
            o[tab.pair_dst] = v[nc:]


def warm_up(*, backend: str | None = None) -> None:
    """Compile (or load from numba's on-disk cache) the kernels on a tiny table, e.g. before timing them."""
    if (backend or BACKEND) != "numba":
        return
    flat = np.arange(4, dtype=np.int64)
    tab = source_table(flat[:2], flat[:2], flat[1:3], np.array([1.0, 0.5], np.float32),
                       np.array([0.0, 0.5], np.float32), flat[2:], vertical=True, rows=np.zeros(1, np.int64),
                       cols=flat, bases=np.array([0, 4]))
    s1, s2 = np.zeros(1), np.zeros(1)
    lo, hi = np.full(1, _I32_MAX, np.int32), np.full(1, _I32_MIN, np.int32)
    # record buffers, and read-only arrays over mapped records (at any byte offset: HDF5 chunks need not be
    # 4-byte aligned), with the tiles in slot order or anywhere
    mapped = np.frombuffer(np.ones(9, np.float32).tobytes(), np.float32, count=8, offset=1)
    for buf in (np.ones(8, np.float32), mapped):
        for tiles in (None, np.zeros(1, np.int64)):
            moments(buf, tab, first_values(buf, tab, tiles), s1, s2, lo, hi, tiles=tiles)
            zscore(buf, tab, np.zeros(1, np.float32), np.ones(1, np.float32), np.zeros((1, 4), np.float16), lo,
                   hi, tiles=tiles)
    buf = np.ones(8, np.float32)
    to_float16(buf, np.zeros(8, np.float16))
