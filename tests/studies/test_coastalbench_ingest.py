"""coastalbench ingestion outputs pinned (issue 37 item 4): the statistics and the shard bytes of a generated ROMS
file are those of the implementation before the shard-pass rewrite, and equal a brute-force NumPy reference.

The field values are multiples of 1/128 below 64 in magnitude, so every float64 sum the statistics take is exact
whatever the order of summation (vector width, chunking): the pinned values do not depend on the CPU. The shards
are z-scored with those statistics in float32 and rounded to float16 (IEEE, deterministic), so their bytes are
pinned by a sha256 and checked against NumPy over the whole array. The file is stored three ways: tiled chunks
with padding (one variable big-endian) read at their byte offsets, netCDF's default chunking, and zlib (netCDF-C).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import netCDF4
import numpy as np
import pytest

from icml25.studies.coastalbench import kernels
from icml25.studies.coastalbench.records import RomsRecords
from icml25.studies.coastalbench.roms import HisWriter, field_dims, grid_sizes, open_roms
from icml25.studies.coastalbench.simulator import grid_dict, make_grid
from icml25.studies.coastalbench.stats import normalisation_stats, write_shard

VARS = ("zeta", "u", "v", "temp", "salt", "w", "AKs", "Pair", "swrad")
NY, NX, N, RECORDS = 26, 38, 4, 5
STORAGE = {"temp": {"chunksizes": (1, 3, 7, 9)}, "u": {"chunksizes": (2, 2, 5, 6)},
           "v": {"chunksizes": (1, 4, 10, 38), "endian": "big"}, "w": {"chunksizes": (1, 2, 26, 38)},
           "AKs": {"chunksizes": (1, 5, 13, 17)}, "salt": {"chunksizes": (3, 4, 26, 38)},
           "zeta": {"chunksizes": (1, 9, 11)}, "Pair": {"chunksizes": (1, 9, 38)}}  # Pair: runs would cross tiles
BACKENDS = ["numpy"] + (["numba"] if kernels.numba is not None else [])

# Computed by the implementation at main a89dfe6 (before the issue-37 shard pass), numba and NumPy alike.
# Statistics per chunk_time (Chan's merge rounds differently per chunking; every sum is exact).
PINNED_STATS_SHA256 = {1: "df828d09ea07eb550477e3fda1829eee5490562a2701f2fd58b31e452bf06cd6",
                       2: "27642571350255cbdf9ae3df73389d846457954f35f8d8f0ca5aac252d556ff1",
                       RECORDS: "a79c69e9fcd0a132441e62b6cccb6e5b403e3983f78ef1990a9dda99d6a05fb5"}
PINNED_SHARD_SHA256 = "3bfc80926374618cbd1a4d71bb0556b8d82c050a5002cf9d35ca3ce7dd753db5"


def _write(path: Path, storage: dict[str, dict] | None, zlib: bool = False) -> Path:
    """RECORDS records of VARS on a small coast grid: values k/128, |value| < 64, plus a per-record offset."""
    grid = grid_dict(make_grid(NY, NX), N, vtransform=2, vstretching=4, theta_s=5.0, theta_b=0.4, hc=5.0,
                     tcline=5.0)
    sizes = grid_sizes(NY, NX, N)
    rng = np.random.default_rng(37)
    plain = path.with_suffix(".plain.nc") if storage else path
    with HisWriter(plain, grid, VARS, zlib_level=1 if zlib else 0) as w:
        for t in range(RECORDS):
            rec = {v: (rng.integers(-6000, 6000, [sizes[d] for d in field_dims(v)[1:]]) / 128
                       + 0.25 * t - 3 * VARS.index(v)).astype(np.float32) for v in VARS}
            w.append(1800.0 * t, rec)
    if not storage:
        return path
    with netCDF4.Dataset(plain) as a, netCDF4.Dataset(path, "w", format="NETCDF4") as b:
        a.set_auto_maskandscale(False)
        b.setncatts({k: a.getncattr(k) for k in a.ncattrs()})
        for d, dim in a.dimensions.items():
            b.createDimension(d, None if dim.isunlimited() else len(dim))
        for name, var in a.variables.items():
            attrs = {k: var.getncattr(k) for k in var.ncattrs()}
            kw = dict(storage.get(name, {}))
            dtype = var.dtype.newbyteorder(">" if kw.get("endian") == "big" else "=")
            out = b.createVariable(name, dtype, var.dimensions, fill_value=attrs.pop("_FillValue", None), **kw)
            out.set_auto_maskandscale(False)
            out.setncatts(attrs)
            out[...] = var[...]
    plain.unlink()
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("pinned")
    return {"tiled": _write(d / "ocean_his_tiled.nc", STORAGE), "default": _write(d / "ocean_his_default.nc", None),
            "zlib": _write(d / "ocean_his_zlib.nc", None, zlib=True)}


def _stats_digest(stats) -> str:
    h = hashlib.sha256()
    for v in VARS:
        for k in ("count", "mean", "std", "min", "max"):
            h.update(np.ascontiguousarray(stats[v][k], dtype=np.float64).tobytes())
    return h.hexdigest()


def _reference(path: Path):
    """Brute force over the whole array: NumPy on the destaggered float64 fields (NaN = not counted), and the
    shard as float16((x - float32(mean)) / float32(std)) in float32 with 0 where x is NaN."""
    ds = open_roms([path])
    stats, chans = {}, []
    for v in VARS:
        x = ds[v].values.astype(np.float64)
        axes = (0, 2, 3) if x.ndim == 4 else (0, 1, 2)
        stats[v] = {"count": np.atleast_1d(np.sum(~np.isnan(x), axis=axes)),
                    "mean": np.atleast_1d(np.nanmean(x, axis=axes)), "std": np.atleast_1d(np.nanstd(x, axis=axes)),
                    "min": np.atleast_1d(np.nanmin(x, axis=axes)), "max": np.atleast_1d(np.nanmax(x, axis=axes))}
        x32 = ds[v].values.astype(np.float32)
        x32 = x32 if x32.ndim == 4 else x32[:, None]
        chans.append((x32, stats[v]))
    return stats, chans


def _reference_shard(chans, stats) -> np.ndarray:
    parts = []
    for (x32, _), v in zip(chans, VARS):
        mean = np.asarray(stats[v]["mean"], np.float32)[None, :, None, None]
        std = np.asarray(stats[v]["std"], np.float32)[None, :, None, None]
        z = (x32 - mean) / std
        parts.append(np.where(np.isnan(z), np.float32(0), z).astype(np.float16))
    return np.concatenate(parts, axis=1)


@pytest.mark.parametrize("mmap_io", [True, False])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("storage", ["tiled", "default", "zlib"])
def test_stats_and_shard_bytes_pinned_and_equal_brute_force(files, tmp_path, storage, backend, mmap_io,
                                                            monkeypatch):
    """Every read path (mapped, preadv at chunk offsets, netCDF-C) and kernel backend gives the pinned bytes."""
    monkeypatch.setattr(kernels, "BACKEND", backend)
    path = files[storage]
    ref_stats, chans = _reference(path)
    with RomsRecords([path], VARS, mmap_io=mmap_io) as src:
        mapped = {v for v in VARS if src.read_record(v, 1)[2] is not None}
    # every direct variable is mapped (tiles anywhere in the file) but the big-endian one; zlib: netCDF-C
    assert mapped == {"default": set(VARS), "tiled": set(VARS) - {"v"}, "zlib": set()}[storage] if mmap_io else \
        not mapped
    for chunk_time in (1, 2, RECORDS):
        with RomsRecords([path], VARS, chunk_time=chunk_time, mmap_io=mmap_io) as src:
            assert all(src.direct(v) for v in VARS) == (storage != "zlib")
            stats = normalisation_stats(src, VARS)
        assert _stats_digest(stats) == PINNED_STATS_SHA256[chunk_time], chunk_time
        for v in VARS:
            for k in ("count", "min", "max"):
                np.testing.assert_array_equal(stats[v][k], ref_stats[v][k], err_msg=f"{v} {k}")
            # rounding of the shifted sums and of Chan's merge, relative to the spread (means can be ~0)
            scale = np.maximum(np.abs(ref_stats[v]["mean"]), ref_stats[v]["std"])
            assert np.max(np.abs(stats[v]["mean"] - ref_stats[v]["mean"]) / scale) <= 1e-13, v
            np.testing.assert_allclose(stats[v]["std"], ref_stats[v]["std"], rtol=1e-13, atol=0, err_msg=v)
    with RomsRecords([path], VARS, mmap_io=mmap_io) as src:
        shape = write_shard(tmp_path / "s.npy", src.select(0, RECORDS), VARS, stats)
    data = (tmp_path / "s.npy").read_bytes()
    assert shape == (RECORDS, 6 * N + 3, NY, NX)
    assert hashlib.sha256(data).hexdigest() == PINNED_SHARD_SHA256
    got = np.load(tmp_path / "s.npy")
    ref = _reference_shard(chans, stats)
    assert got.shape == ref.shape and np.array_equal(got.view(np.uint16), ref.view(np.uint16))
    assert (got[:, :, ~np.isfinite(chans[3][0][0, 0])] == 0).all() and np.abs(got).max() > 1


def test_traced_stats_count_mapped_records(files):
    """tracemalloc does not see mapped records: the traced peak adds the mapped bytes alive at once (at least one
    record of w, the largest of one variable here)."""
    from icml25.studies.coastalbench.stats import traced_normalisation_stats

    variables = ["u", "w", "temp", "zeta"]
    with RomsRecords([files["default"]], variables, chunk_time=RECORDS) as src:
        stats, peak, chunk = traced_normalisation_stats(src, variables)
        w_record = (N + 1) * NY * NX * 4  # one record of w (s_w levels), the largest variable
        # one record of one variable mapped at a time (plus the page-granularity start of the mapping)
        assert w_record <= src.mapped_peak_bytes <= w_record + 65536, src.mapped_peak_bytes
        assert src._io.mapped == 0  # every mapping released
    assert chunk == RECORDS * N * NY * NX * 4 and peak >= src.mapped_peak_bytes, (peak, chunk)
    with RomsRecords([files["default"]], variables, chunk_time=RECORDS, mmap_io=False) as src:
        ref = normalisation_stats(src, variables)
    for v in variables:
        for k in ("count", "mean", "std", "min", "max"):
            np.testing.assert_array_equal(stats[v][k], ref[v][k])


def test_npy_stream_writer_background_writes_and_errors(tmp_path, monkeypatch):
    """Double-buffered writes in a background thread give np.save's bytes whatever the block sizes; a failed
    write surfaces in the caller's thread and the file is closed."""
    from icml25.studies.coastalbench import shardfile

    rng = np.random.default_rng(1)
    small, big = rng.normal(size=(3, 50, 71)).astype(np.float16), rng.normal(size=(3, 1000, 701)).astype(np.float16)
    for background in (True, False):
        for direct in (True, False):
            for x, step in ((small, 1), (big, 4093), (big, 701 * 1000), (big, 3 * 701 * 1000)):
                np.save(tmp_path / "r.npy", x)
                with shardfile.NpyStreamWriter(tmp_path / "s.npy", x.shape, np.float16, buffer_bytes=1 << 16,
                                               direct=direct, background=background) as w:
                    flat = x.ravel()
                    for a in range(0, flat.size, step):
                        n = min(step, flat.size - a)
                        w.reserve(n)[:] = flat[a : a + n]
                        w.commit(n)
                assert (tmp_path / "s.npy").read_bytes() == (tmp_path / "r.npy").read_bytes(), (background, step)
    calls, real_write = [], os.write

    def failing_write(fd, data):
        calls.append(len(data))
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(shardfile, "_SPARE", [])  # fresh 16 KiB buffers: several writes before close
    monkeypatch.setattr(os, "write", failing_write)
    w = shardfile.NpyStreamWriter(tmp_path / "f.npy", (64, 4096), np.float16, buffer_bytes=1 << 14)
    with pytest.raises(OSError, match="No space left"):
        with w:
            for _ in range(64):
                w.reserve(4096)[:] = 1
                w.commit(4096)
    assert w.fd == -1 and len(calls) >= 2


def test_runs_stop_at_tile_starts_both_builders():
    """Tiles of whole rows (1, tj, nx) are adjacent in the slot layout, so a run could continue into the next tile;
    mapped records find each tile elsewhere, so runs stop at tile starts (both builders, same runs)."""
    from icml25.studies.coastalbench.records import SourceLayout, rho_point_table

    mask = np.ones((10, 7))
    mask[4, 3] = 0
    masks = {"mask_rho": mask, "mask_u": mask[:, :-1] * mask[:, 1:], "mask_v": mask[:-1] * mask[1:]}
    for kind, shape in (("rho", (2, 10, 7)), ("v", (2, 9, 7)), ("w", (3, 10, 7))):
        r = rho_point_table(kind, masks)
        lay = SourceLayout(*shape, (1, 3, 7))
        rows, cols = lay.row_col_offsets()
        tabs = [kernels.source_table(r.cells, r.ia, r.ib, r.wa, r.wb, r.invalid, vertical=r.vertical, rows=rows,
                                     cols=cols, bases=[lay.level_base(k) for k in range(shape[0])],
                                     tile_size=lay.tile_size, backend=b) for b in BACKENDS]
        for f in ("copy_runs", "pair_runs"):
            assert all(np.array_equal(getattr(t, f), getattr(tabs[0], f)) for t in tabs), (kind, f)
        t = tabs[0]
        for runs, cols_ in ((t.copy_runs, (1,)), (t.pair_runs, (1, 2))):
            for c in cols_:
                first, last = runs[:, c] // lay.tile_size, (runs[:, c] + runs[:, -1] - 1) // lay.tile_size
                assert np.array_equal(first, last), (kind, c)
        # without tiles the same cells form longer runs across the tile rows
        plain = kernels.source_table(r.cells, r.ia, r.ib, r.wa, r.wb, r.invalid, vertical=r.vertical, rows=rows,
                                     cols=cols, bases=[lay.level_base(k) for k in range(shape[0])])
        assert len(plain.copy_runs) + len(plain.pair_runs) < len(t.copy_runs) + len(t.pair_runs), kind
        assert plain.count == t.count
