"""Streaming wet-cell statistics and z-scored training shards (spec "Ingestion" steps 4-5).

Statistics are per channel (variable x level): each ``ocean_time`` chunk is computed alone and summarised as
(n, mean, M2, min, max) over wet cells; chunks are merged with Chan et al.'s parallel update, so the result does
not depend on the chunking and never needs a second pass. Two sources give the same numbers: a lazy
``open_roms`` dataset (synchronous dask, one chunk in memory, NaN skipped) and the direct reader
:class:`~.records.RomsRecords` (one record of one variable in memory, the grid masks say which cells count, one
compiled sweep per record; the fast path). Shards are appended front to back and renamed into place.
"""
from __future__ import annotations

import hashlib
import json
import tracemalloc
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

Moments = dict[str, np.ndarray]


def chunk_moments(x: np.ndarray) -> Moments:
    """(n, mean, M2, min, max) over the non-NaN values of each row of ``x`` (rows, values); float64 results."""
    rows = x.shape[0]
    out = {k: np.zeros(rows) for k in ("count", "mean", "m2")}
    out["min"], out["max"] = np.full(rows, np.inf), np.full(rows, -np.inf)
    for r in range(rows):
        v = x[r]
        v = v[~np.isnan(v)]  # a fresh copy: modified in place below
        if v.size == 0:
            continue
        out["min"][r], out["max"][r] = v.min(), v.max()
        mean = v.sum(dtype=np.float64) / v.size  # float64 (pairwise) accumulation
        v -= v.dtype.type(mean)  # deviations in the input precision ...
        np.square(v, out=v)
        out["count"][r], out["mean"][r], out["m2"][r] = v.size, mean, v.sum(dtype=np.float64)  # ... summed in f64
    return out


def merge_moments(a: Moments, b: Moments) -> Moments:
    """Chan et al. (1979) parallel merge of two (n, mean, M2, min, max) summaries (elementwise over channels)."""
    n = a["count"] + b["count"]
    with np.errstate(invalid="ignore", divide="ignore"):
        delta = b["mean"] - a["mean"]
        frac = np.where(n > 0, b["count"] / np.where(n > 0, n, 1), 0.0)
        mean = a["mean"] + delta * frac
        m2 = a["m2"] + b["m2"] + delta**2 * a["count"] * frac
    return {"count": n, "mean": mean, "m2": m2, "min": np.minimum(a["min"], b["min"]),
            "max": np.maximum(a["max"], b["max"])}


def finalize(m: Moments) -> dict[str, np.ndarray]:
    """Moments -> {count, mean, std (ddof 0), min, max}; channels without data get NaN."""
    with np.errstate(invalid="ignore", divide="ignore"):
        std = np.sqrt(np.where(m["count"] > 0, m["m2"] / np.where(m["count"] > 0, m["count"], 1), np.nan))
    empty = m["count"] == 0
    return {"count": m["count"].astype(np.int64), "mean": np.where(empty, np.nan, m["mean"]), "std": std,
            "min": np.where(empty, np.nan, m["min"]), "max": np.where(empty, np.nan, m["max"])}


def _merge_rows(parts: list[Moments]) -> Moments:
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _time_blocks(arr) -> list[tuple[int, int]]:
    bounds = np.cumsum((0,) + tuple(arr.chunks[0]))
    return list(zip(bounds[:-1], bounds[1:]))


def variable_moments(arr, *, per_level: bool = True) -> Moments:
    """Streaming moments of one dask array (ocean_time, [level], y, x), one ocean_time chunk at a time."""
    import dask

    total: Moments | None = None
    for a, b in _time_blocks(arr):
        with dask.config.set(scheduler="synchronous"):
            x = np.asarray(arr[a:b].compute())
        if x.ndim == 4 and per_level:
            part = _merge_rows([chunk_moments(x[:, k].reshape(1, -1)) for k in range(x.shape[1])])
        else:
            part = chunk_moments(x.reshape(1, -1))
        del x
        total = part if total is None else merge_moments(total, part)
    assert total is not None
    return total


def _is_records(ds) -> bool:
    from .records import RomsRecords

    return isinstance(ds, RomsRecords)


def _check_values(src, name: str, t: int, tab, sums: tuple[np.ndarray, ...], lo: np.ndarray, hi: np.ndarray,
                  fill: float) -> None:
    """NaN, inf or _FillValue among a record's valid values (lo/hi: int32 order keys, see kernels.moments)."""
    from . import kernels

    if tab.count == 0:
        return
    lo, hi = kernels.keys_to_float(lo), kernels.keys_to_float(hi)
    if not (all(np.isfinite(x).all() for x in sums) and np.isfinite(lo).all() and np.isfinite(hi).all()) or \
            (lo == fill).any() or (hi == fill).any():
        from .roms import RomsFormatError

        raise RomsFormatError(f"{src.where(t)}: variable {name!r} holds NaN, inf or _FillValue at a water point "
                              f"(mask says water; min {lo.min()}, max {hi.max()})")


def _records_moments(src, variables: Sequence[str], *, per_level: bool = True, progress: bool = False
                     ) -> dict[str, Moments]:
    """Moments of ``variables`` over a :class:`~.records.RomsRecords`: one pass over the records in file order,
    one read and one compiled sweep per record and variable (all levels).

    Within a chunk of ``src.chunk_time`` records, each level's values are summed as (v - K) and (v - K)^2 in
    float64 with a shift K taken from the chunk's first record (a data value, so the sum of squares does not
    cancel), giving the chunk's exact (n, mean, M2); chunks are merged with Chan's update like the dask path.
    Counts come from the grid masks, not from NaN tests. A NaN, inf or _FillValue at a water point is an error
    naming the file and record.
    """
    from tqdm import tqdm

    from . import kernels

    fills = {v: src.fill_value(v) for v in variables}
    total: dict[str, Moments | None] = dict.fromkeys(variables)
    with tqdm(total=len(src), desc="stats", disable=not progress) as bar:
        for a, b in src.chunks():
            acc = {}
            for v in variables:
                nlev = src.levels(v)
                acc[v] = [np.zeros(nlev), np.zeros(nlev), np.full(nlev, kernels._I32_MAX, np.int32),
                          np.full(nlev, kernels._I32_MIN, np.int32), None, 0]
            for t in range(a, b):
                for v in variables:
                    s1, s2, lo, hi, shift, _ = acc[v]
                    if src.mapped(v, t):
                        buf, lay, tiles = src.read_record(v, t)
                    else:  # compressed/packed/netCDF-3/big-endian: into the reader's buffer
                        buf, lay = src.read_raw(v, t)
                        tiles = None
                    tab = src.source_table(v, lay)
                    if shift is None:
                        shift = acc[v][4] = kernels.first_values(buf, tab, tiles)
                    kernels.moments(buf, tab, shift, s1, s2, lo, hi, tiles=tiles)
                    del buf  # a mapped record is unmapped here, before the next one is mapped
                    _check_values(src, v, t, tab, (s1, s2), lo, hi, fills[v])
                    acc[v][5] = tab.count
                bar.update(1)
            for v in variables:
                s1, s2, lo, hi, shift, count = acc[v]
                n = np.full(s1.size, float(count * (b - a)))
                empty = n == 0
                with np.errstate(invalid="ignore", divide="ignore"):
                    mean = np.where(empty, 0.0, shift + s1 / np.where(empty, 1, n))
                    m2 = np.where(empty, 0.0, np.maximum(s2 - s1 * s1 / np.where(empty, 1, n), 0.0))
                part = {"count": n, "mean": mean, "m2": m2,
                        "min": np.where(empty, np.inf, kernels.keys_to_float(lo)),
                        "max": np.where(empty, -np.inf, kernels.keys_to_float(hi))}
                total[v] = part if total[v] is None else merge_moments(total[v], part)
    src.release()  # one record buffer at a time (the memory bound counts chunks of one variable)
    out = {}
    for v in variables:
        m = total[v]
        if m is None:
            raise ValueError(f"normalisation_stats: no records to read for {v!r}")
        if not per_level and m["count"].size > 1:
            rows = [{k: x[i : i + 1] for k, x in m.items()} for i in range(m["count"].size)]
            m = rows[0]
            for r in rows[1:]:
                m = merge_moments(m, r)
        out[v] = m
    return out


def records_moments(src, name: str, *, per_level: bool = True) -> Moments:
    """Moments of one field over a :class:`~.records.RomsRecords` (see :func:`_records_moments`)."""
    return _records_moments(src, [name], per_level=per_level)[name]


def normalisation_stats(ds, variables: Sequence[str], *, per_level: bool = True,
                        progress: bool = False) -> dict[str, dict[str, np.ndarray]]:
    """Wet-cell statistics of ``variables``: {var: {count, mean, std, min, max}}.

    ``ds`` is a lazy dataset (e.g. ``open_roms``; NaN is skipped, one ``ocean_time`` chunk at a time) or a
    :class:`~.records.RomsRecords` (the fast path over the same files: the grid masks say which cells count, see
    :func:`records_moments`). Arrays have one entry per level (3-D fields with ``per_level``) or one entry; std
    has ddof 0. Memory: one ``ocean_time`` chunk (dataset) or one record (RomsRecords) of one variable plus small
    per-level buffers.
    """
    from tqdm import tqdm

    direct = _is_records(ds)
    known = ds.variables if direct else list(ds.data_vars)
    missing = [v for v in variables if v not in known]
    if missing:
        raise KeyError(f"normalisation_stats: variable(s) {missing} not in the dataset ({sorted(known)})")
    if direct:
        return {v: finalize(m) for v, m in _records_moments(ds, variables, per_level=per_level,
                                                           progress=progress).items()}
    return {v: finalize(variable_moments(ds[v].data, per_level=per_level))
            for v in tqdm(variables, desc="stats", disable=not progress)}


def largest_chunk_bytes(ds, variables: Sequence[str]) -> int:
    """Bytes of the largest single chunk among ``variables`` (the unit of the claim-1 memory bound)."""
    if _is_records(ds):
        ny, nx = ds.shape_rho
        return int(min(ds.chunk_time, max(len(ds), 1)) * max(ds.levels(v) for v in variables) * ny * nx * 4)
    best = 0
    for v in variables:
        arr = ds[v].data
        biggest = max(arr.chunks[0]) * int(np.prod([max(c) for c in arr.chunks[1:]])) * arr.dtype.itemsize
        best = max(best, biggest)
    return int(best)


def _first_record(ds):
    """The first ``ocean_time`` record of ``ds`` (a RomsRecords selection or a lazy dataset slice)."""
    if _is_records(ds):
        return ds.select(0, 1)
    return ds.isel(ocean_time=slice(0, 1))


def traced_normalisation_stats(ds, variables: Sequence[str], **kw) -> tuple[dict, int, int]:
    """:func:`normalisation_stats` under ``tracemalloc``: (stats, peak traced bytes, largest chunk bytes).

    The bound of claim 1 is about the data the statistics hold at once, so one-time costs of the code are kept
    out of the trace: the statistics of the first record are computed once, untraced, before tracing starts.
    That first call imports the kernels and loads (or JIT-compiles) the numba functions, which alone traces
    ~27 MB of Python objects (about 90 smoke chunks of 0.3 MB) in a fresh process; the record buffers it
    allocates are freed again (``release``), so the traced pass allocates its own. Records a
    :class:`~.records.RomsRecords` maps instead of reading are invisible to tracemalloc: the most mapped bytes
    alive at once are added to the traced peak (an upper bound of the two together).
    """
    kw_warm = {k: v for k, v in kw.items() if k != "progress"}
    normalisation_stats(_first_record(ds), variables, **kw_warm)
    direct = _is_records(ds)
    was = tracemalloc.is_tracing()
    if not was:
        tracemalloc.start()
    tracemalloc.reset_peak()
    if direct:
        ds.reset_mapped_peak()
    base = tracemalloc.get_traced_memory()[0]
    stats = normalisation_stats(ds, variables, **kw)
    peak = tracemalloc.get_traced_memory()[1] - base + (ds.mapped_peak_bytes if direct else 0)
    if not was:
        tracemalloc.stop()
    return stats, int(peak), largest_chunk_bytes(ds, variables)


# ------------------------------------------------------------------------------------------------------ shards


def channel_list(ds, variables: Sequence[str]) -> list[dict]:
    """Shard channels in order: one per level of 3-D fields (``var@k``, k = 0 at the bottom), one per 2-D field."""
    chans = []
    for v in variables:
        if _is_records(ds) and ds.levels(v) > 1:
            chans += [{"name": f"{v}@{k}", "var": v, "level": k} for k in range(ds.levels(v))]
        elif not _is_records(ds) and "s_rho" in ds[v].dims:
            chans += [{"name": f"{v}@{k}", "var": v, "level": k} for k in range(ds.sizes["s_rho"])]
        else:
            chans.append({"name": v, "var": v, "level": None})
    return chans


def stats_digest(stats: Mapping[str, Mapping[str, np.ndarray]]) -> str:
    """sha256 of the canonical json of the statistics (recorded in stats.json and channels.json)."""
    blob = json.dumps({v: {k: np.asarray(a, float).round(12).tolist() for k, a in sorted(s.items())}
                       for v, s in sorted(stats.items())}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def write_shard(path: str | Path, ds, variables: Sequence[str], stats: Mapping[str, Mapping[str, np.ndarray]],
                *, dtype=np.float16) -> tuple[int, ...]:
    """Write ``ds`` (one day) as a z-scored (T, C, H, W) ``.npy`` (land = 0), atomically.

    ``ds`` is a dataset of one day or a :class:`~.records.RomsRecords` of that day's records (``select``; the fast
    path: one read per record and variable, z-scored and rounded to float16 by the compiled kernel straight into
    the staging buffer of a :class:`~.shardfile.NpyStreamWriter`, which writes it with ``O_DIRECT`` where the
    file system allows). On a dataset, one ``ocean_time`` chunk of every variable is assembled at a time and
    appended with plain sequential writes. Either way resident memory stays one record or time block whatever
    the shard size. Channels follow :func:`channel_list`. A zero std is replaced by 1 (constant channel).
    Returns the shape.
    """
    if _is_records(ds):
        return _write_shard_records(path, ds, variables, stats, dtype=dtype)
    import dask

    from icml25.core.io import atomic_path

    chans = channel_list(ds, variables)
    t, hh, ww = ds.sizes["ocean_time"], ds.sizes["eta_rho"], ds.sizes["xi_rho"]
    shape = (t, len(chans), hh, ww)
    norm = []
    for v in variables:
        s = stats[v]
        nlev = ds[v].shape[1] if ds[v].ndim == 4 else 1
        mean = np.asarray(s["mean"], np.float32).ravel()
        std = np.asarray(s["std"], np.float32).ravel()
        std = np.where((std > 0) & np.isfinite(std), std, np.float32(1.0))
        if mean.size != nlev:
            mean, std = np.full(nlev, mean[0], np.float32), np.full(nlev, std[0], np.float32)
        norm.append((v, nlev, mean[None, :, None, None], std[None, :, None, None]))
    blocks = _time_blocks(ds[variables[0]].data)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                                   "fortran_order": False, "shape": shape})
        for a, b in blocks:
            block = np.empty((b - a, len(chans), hh, ww), dtype=dtype)
            c0 = 0
            for v, nlev, mean, std in norm:
                with dask.config.set(scheduler="synchronous"):
                    x = np.asarray(ds[v].data[a:b].compute(), dtype=np.float32)
                if x.ndim == 3:
                    x = x[:, None]
                x -= mean
                x /= std
                np.nan_to_num(x, copy=False, nan=0.0)
                block[:, c0 : c0 + nlev] = x
                c0 += nlev
                del x
            block.tofile(fh)
            del block
    return shape


def _shard_norm(stats: Mapping[str, Mapping[str, np.ndarray]], v: str, nlev: int) -> tuple[np.ndarray, np.ndarray]:
    """float32 (mean, std) per level as the dataset path uses them (std <= 0 or NaN -> 1, NaN mean -> 0)."""
    s = stats[v]
    mean = np.asarray(s["mean"], np.float32).ravel()
    std = np.asarray(s["std"], np.float32).ravel()
    std = np.where((std > 0) & np.isfinite(std), std, np.float32(1.0))
    mean = np.where(np.isfinite(mean), mean, np.float32(0.0))
    if mean.size != nlev:
        mean, std = np.full(nlev, mean[0], np.float32), np.full(nlev, std[0], np.float32)
    return mean, std


def _write_shard_records(path, src, variables, stats, *, dtype=np.float16) -> tuple[int, ...]:
    from icml25.core.io import atomic_path

    from . import kernels
    from .shardfile import NpyStreamWriter

    chans = channel_list(src, variables)
    ny, nx = src.shape_rho
    shape = (len(src), len(chans), ny, nx)
    norm = [(v, src.levels(v), *_shard_norm(stats, v, src.levels(v)), src.fill_value(v)) for v in variables]
    if np.dtype(dtype) != np.float16:
        raise ValueError(f"write_shard: the direct path writes float16 shards, got dtype {np.dtype(dtype)}")
    # T_C_H_W: a record's channels are contiguous in the file, so each variable's levels are written in turn
    with atomic_path(path) as tmp, NpyStreamWriter(tmp, shape, np.float16) as out:
        for t in range(len(src)):
            for v, nlev, mean, std, fill in norm:
                buf, lay, tiles = src.read_record(v, t)
                tab = src.source_table(v, lay)
                lo = np.full(nlev, kernels._I32_MAX, np.int32)
                hi = np.full(nlev, kernels._I32_MIN, np.int32)
                block = out.reserve(nlev * ny * nx).reshape(nlev, ny * nx)
                kernels.zscore(buf, tab, mean, std, block, lo, hi, tiles=tiles)  # straight into the staged float16
                del buf  # a mapped record is unmapped here, before the next one is mapped
                _check_values(src, v, t, tab, (), lo, hi, fill)
                out.commit(nlev * ny * nx)
    src.release()  # memory stays one record however many days are written
    src.close()
    return shape
