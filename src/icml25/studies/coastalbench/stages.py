"""Stage functions of the coastalbench study (spec "Stages"): file I/O and tracking around the pure modules.

Offline scales: download (mini-ROMS simulation) -> preprocess (open_roms, statistics, shards, ingestion checks)
-> train (one job per arm, looping over seeds) -> evaluate (claims) -> report (figures).
Paper scale: download and preprocess per month (SLURM array), stats_reduce, shard per month, train, evaluate.
"""
from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import logging
import resource
import time
from pathlib import Path

import numpy as np

from icml25.core.io import atomic_path, read_json, save_npz, write_json, write_text

from . import remote
from .records import RomsRecords
from .roms import FIELDS, HisWriter, RomsFormatError, open_roms, validate_files

log = logging.getLogger("icml25.coastalbench")
HERE = Path(__file__).resolve().parent
SHARD_VARS = ("zeta", "u", "v", "temp", "salt", "w", "AKs", "Pair", "Tair", "Qair", "rain", "swrad", "lwrad",
              "Uwind", "Vwind")
WRITE_FIELDS = tuple(FIELDS)  # every ROMS field (ubar/vbar included) goes into the history files


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def sim_days(cfg) -> list[str]:
    """YYYYMMDD of every simulated day."""
    import datetime as dt

    start = dt.date.fromisoformat(cfg.sim.start_date)
    return [(start + dt.timedelta(days=k)).strftime("%Y%m%d") for k in range(cfg.sim.days)]


# --------------------------------------------------------------------------------------------------- download


def download(stage, run) -> None:
    """Offline: simulate and write ROMS history files (+ preview zarr, manifest.csv). Paper: fetch one month."""
    cfg = stage.config
    if cfg.data == "remote":
        return _download_month(stage, run)
    from .preview import write_preview_records
    from .simulator import make_sim_grid, simulate

    outputs = list(stage.outputs)
    manifest_out, preview_dir = outputs[0], outputs[1]
    his = {Path(p).name: Path(p) for p in outputs[2:]}
    grid = make_sim_grid(cfg.sim)
    info: dict = {}
    written, n_bytes, prev = [], 0, 0
    t_start = time.perf_counter()
    with _atomic_dir(preview_dir) as tmp_preview:
        for day, records in simulate(cfg.sim, info=info):
            name = f"ocean_his_{day}.nc"
            if name not in his:
                raise SystemExit(f"coastalbench download: simulated day {day} not among the --out files")
            with atomic_path(his[name]) as tmp:
                with HisWriter(tmp, grid, WRITE_FIELDS, zlib_level=cfg.sim.zlib_level,
                               land_value=cfg.sim.land_value, qair_units=cfg.sim.qair_units) as w:
                    for t, rec in records:
                        w.append(t, rec)
            if cfg.sim.write_preview and prev < cfg.ingest.identity_days:
                write_preview_records(tmp_preview / f"{day}.zarr", records, grid, layout=cfg.ingest.layout,
                                      level_order=cfg.ingest.level_order)
                prev += 1
            written.append(his[name])
            n_bytes += his[name].stat().st_size
    missing = sorted(set(his) - {p.name for p in written})
    if missing:
        raise SystemExit(f"coastalbench download: --out files not simulated: {missing}")
    _write_manifest(manifest_out, written)
    run.log_metrics({"download/bytes": n_bytes, "download/files": len(written),
                     "download/sim_volume_residual_max": info.get("volume_residual_max", float("nan")),
                     "download/seconds": time.perf_counter() - t_start})


@contextlib.contextmanager
def _atomic_dir(path: Path):
    """A temporary sibling directory renamed to ``path`` on success, removed on failure."""
    import shutil
    import tempfile

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        tmp.rename(path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_manifest(path: Path, files) -> None:
    from icml25.core.download import sha256_file

    with atomic_path(path) as tmp, open(tmp, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["name", "sha256", "size"])
        for p in files:
            w.writerow([Path(p).name, sha256_file(p), Path(p).stat().st_size])


def _download_month(stage, run) -> None:
    """Paper: fetch the manifest's files of one month (``--set month=YYYY-MM``), verified and pinned."""
    month = stage.extra.get("month")
    if not month:
        raise SystemExit("coastalbench download (paper): needs --set month=YYYY-MM")
    out = stage.output(0)
    if len(stage.outputs) > 1:  # the preview directory of the offline layout (previews are not fetched per month)
        stage.output(1).mkdir(parents=True, exist_ok=True)
    files = remote.fetch_month(HERE / "manifest.csv", month, out.parent, mirror=stage.mirror,
                               trust_unpinned=stage.trust_unpinned, variables=SHARD_VARS)
    _write_manifest(out, files)
    run.log_metrics({"download/bytes": sum(Path(f).stat().st_size for f in files), "download/files": len(files)})


# ------------------------------------------------------------------------------------------------- preprocess


def check_recorded_hashes(listing: Path, paths) -> None:
    """Re-check every history file against the sha256 recorded at download in ``raw/manifest.csv``: a file
    changed since (a scaled ``pm``, flipped bytes) fails here naming the file, before anything is read."""
    from icml25.core.download import IntegrityError, sha256_file

    with open(listing, newline="") as fh:
        recorded = {row["name"]: row["sha256"] for row in csv.DictReader(fh)}
    for path in map(Path, paths):
        expected = recorded.get(path.name)
        if not expected:
            raise IntegrityError(f"{path}: no sha256 recorded for it at download in {listing}")
        actual = sha256_file(path)
        if actual != expected:
            raise IntegrityError(f"{path}: sha256 {actual} differs from {expected} recorded at download in "
                                 f"{listing}: the file changed since it was downloaded")


def unreadable_variable(path: Path, variables) -> str | None:
    """The first of ``variables`` whose data cannot be read from ``path`` (corrupt compressed chunks), or None."""
    import netCDF4

    try:
        with netCDF4.Dataset(path) as ds:
            for name in variables:
                try:
                    ds.variables[name][...]
                except (RuntimeError, OSError, ValueError, KeyError):
                    return name
    except OSError:
        return None
    return None


def _name_unreadable(paths, err: BaseException) -> RomsFormatError:
    """A read error of the lazy dataset (e.g. a bare ``NetCDF: HDF error``) turned into one naming the file and
    the variable that cannot be read."""
    for path in paths:
        var = unreadable_variable(Path(path), SHARD_VARS)
        if var:
            return RomsFormatError(f"{path}: variable {var!r} cannot be read ({type(err).__name__}: "
                                   f"{str(err)[:300]})")
    return RomsFormatError(f"{', '.join(map(str, paths))}: reading failed ({type(err).__name__}: {str(err)[:300]})")


def _write_shards(shard_out: dict, days: list[str], paths: list[Path], src, stats, bounds) -> None:
    """One shard per day; a day whose file cannot be read fails naming the file and the variable, and no shard
    of this job is left behind (run by hand too, where Snakemake would not clean up)."""
    from .stats import write_shard

    try:
        for i, day in enumerate(days):
            try:
                write_shard(shard_out[day], src.select(bounds[i], bounds[i + 1]), SHARD_VARS, stats)
            except RomsFormatError:
                raise
            except (RuntimeError, OSError, ValueError) as err:
                raise _name_unreadable([paths[i]], err) from err
    except BaseException:
        for shard in shard_out.values():
            Path(shard).unlink(missing_ok=True)
        raise


def split_days(cfg, days: list[str]) -> tuple[list[str], list[str], list[str]]:
    """Consecutive train / validation / test days (offline: day counts; paper: month counts)."""
    days = sorted(days)
    if cfg.data == "remote":
        months = sorted({d[:6] for d in days})
        test_m = set(months[len(months) - cfg.remote.test_months:])
        val_m = set(months[len(months) - cfg.remote.test_months - cfg.remote.val_months:]) - test_m
        return ([d for d in days if d[:6] not in test_m | val_m], [d for d in days if d[:6] in val_m],
                [d for d in days if d[:6] in test_m])
    s = cfg.split
    return days[: s.train_days], days[s.train_days : s.train_days + s.val_days], days[s.train_days + s.val_days :]


def _day(path: Path) -> str:
    from .roms import day_of_file

    return day_of_file(path)


def preprocess(stage, run) -> None:
    """Offline: validate, open lazily, train-period statistics (traced), one shard per day, ingestion checks.

    Paper: per-month partial moments (``--set month=YYYY-MM``) for ``stats_reduce``.
    Inputs: raw/manifest.csv, raw/preview, raw/ocean_his_*.nc. Outputs: channels.json, stats.json, grid.npz,
    ingest_checks.json, then shards/YYYYMMDD.npy in day order. Nothing is written if any file is malformed.
    """
    cfg = stage.config
    if cfg.data == "remote":
        return _partial_month(stage, run)
    from .stats import channel_list, stats_digest, traced_normalisation_stats, write_shard

    t_start = time.perf_counter()
    preview_dir = stage.input(1)
    paths = sorted(Path(p) for p in stage.inputs[2:])
    out_channels, out_stats, out_grid, out_checks = stage.outputs[:4]
    shard_out = {Path(p).stem: Path(p) for p in stage.outputs[4:]}
    days = [_day(p) for p in paths]
    if sorted(shard_out) != days:
        raise SystemExit(f"coastalbench preprocess: shards {sorted(shard_out)} do not match days {days}")
    validate_files(paths, SHARD_VARS)  # every malformed input fails here, before anything is written
    check_recorded_hashes(stage.input(0), paths)  # and every file changed since its download
    train, _, _ = split_days(cfg, days)
    chunks = {"ocean_time": cfg.ingest.chunk_time}
    # Statistics and shards read the files directly (RomsRecords: one read per record, compiled kernels); the
    # lazy open_roms dataset serves the identity checks, which also compare the two paths.
    src_train = RomsRecords(paths[: len(train)], SHARD_VARS, chunk_time=cfg.ingest.chunk_time)
    try:
        stats, peak, chunk_bytes = traced_normalisation_stats(src_train, SHARD_VARS, progress=True)
    except RomsFormatError:
        raise
    except (RuntimeError, OSError) as err:
        raise _name_unreadable(paths[: len(train)], err) from err
    finally:
        src_train.close()
    ingest_mem = {"peak_traced_bytes": peak, "chunk_bytes": chunk_bytes, "ratio": peak / chunk_bytes}
    ds = open_roms(paths, chunks, variables=SHARD_VARS)
    checks = ingestion_checks(cfg, paths, preview_dir, ds)
    checks["memory"] = {**ingest_mem, "bound_chunks": cfg.ingest.mem_bound_chunks,
                        "ok": bool(peak <= cfg.ingest.mem_bound_chunks * chunk_bytes)}
    checks["ok"] = all_ok(checks)
    digest = stats_digest(stats)
    bounds = np.cumsum([0, *ds.attrs["records_per_file"]])
    times = (ds["ocean_time"].values - np.datetime64("2008-01-01T00:00:00")) / np.timedelta64(1, "s")
    with RomsRecords(paths, SHARD_VARS) as src:
        _write_shards(shard_out, days, paths, src, stats, bounds)
    index = [{"day": day, "path": str(shard_out[day]), "times": times[bounds[i] : bounds[i + 1]].tolist()}
             for i, day in enumerate(days)]
    chans = channel_list(ds, SHARD_VARS)
    for c in chans:
        s = stats[c["var"]]
        k = c["level"] or 0
        c.update(mean=float(s["mean"][k]), std=float(s["std"][k]))
    write_json(out_stats, {"digest": digest, "train_days": train, "variables": {v: {k: np.asarray(a).tolist()
                           for k, a in s.items()} for v, s in stats.items()}})
    write_json(out_channels, {"channels": chans, "stats_digest": digest, "n_levels": int(ds.sizes["s_rho"]),
                              "layout": "T_C_H_W", "dtype": "float16", "land": 0.0, "days": index,
                              "record_seconds": float(np.diff(times[:2])[0]) if len(times) > 1 else 3600.0})
    save_npz(out_grid, h=ds["h"].values, mask_rho=ds["mask_rho"].values, dx=np.float64(1.0 / float(
        validate_pm(paths[0]))))
    write_json(out_checks, checks)
    run.log_metrics({"preprocess/peak_mem_mb": peak / 2**20, "preprocess/peak_rss_mb": _rss_mb(),
                     "preprocess/seconds": time.perf_counter() - t_start,
                     "preprocess/chunk_mb": chunk_bytes / 2**20})


def validate_pm(path: Path) -> float:
    """Mean pm (1/dx, m-1) of a ROMS file."""
    import netCDF4

    with netCDF4.Dataset(path) as nc:
        return float(np.mean(nc["pm"][:])) if "pm" in nc.variables else 1e-3


def all_ok(checks: dict) -> bool:
    """True when no identity check fails (``ok`` None: not applicable, e.g. no preview on the paper path)."""
    return bool(all(checks[k]["ok"] is not False for k in ("zlevels", "destagger", "stats", "preview", "memory")))


def ingestion_checks(cfg, paths: list[Path], preview_dir: Path | None, ds) -> dict:
    """Claim-1 identities on the study's own files (zlevels, destaggering, two-pass NumPy, preview)."""
    import xarray as xr

    from .preview import open_preview
    from .roms import _destagger_kernel, zlevels
    from .stats import normalisation_stats

    out: dict = {}
    # zlevels: bottom, surface and column thickness, for both Vtransforms, on the first file's h and zeta.
    raw = xr.open_dataset(paths[0], engine="netcdf4")
    try:
        zl = {}
        for vt in (1, 2):
            src = raw[["h", "zeta", "s_w", "Cs_w", "s_rho", "Cs_r", "hc", "theta_s", "theta_b"]].copy()
            src["Vtransform"] = xr.DataArray(vt)
            zw = zlevels(src.fillna(0.0), "w").values
            h = raw["h"].values
            zeta = np.nan_to_num(raw["zeta"].values)
            zeta = np.where(np.abs(zeta) > 1e30, 0.0, zeta)
            zl[f"vtransform{vt}"] = {
                "bottom_err": float(np.max(np.abs(zw[:, 0] + h) / h)),
                "surface_err": float(np.max(np.abs(zw[:, -1] - zeta) / h)),
                "thickness_err": float(np.max(np.abs(np.diff(zw, axis=1).sum(1) - (h + zeta)) / h))}
        zl["ok"] = bool(all(v[k] <= 1e-9 for v in zl.values() for k in v))
        out["zlevels"] = zl
        # Destaggering of fields linear in xi (u) and eta (v) on the real masks: exact at interior rho points.
        mask = raw["mask_rho"].values
        mu, mv = raw["mask_u"].values, raw["mask_v"].values
        ny, nx = mask.shape
        u = (0.3 + 0.01 * (np.arange(nx - 1) + 0.5))[None, None, :] * np.ones((1, 2, ny, 1))
        v = (-0.2 + 0.02 * (np.arange(ny - 1) + 0.5))[None, None, :, None] * np.ones((1, 2, 1, nx))
        ur = _destagger_kernel(u.astype(np.float32), mu, mask, -1)
        vr = _destagger_kernel(v.astype(np.float32), mv, mask, -2)
        iu = np.zeros_like(mask, bool)
        iu[:, 1:-1] = (mu[:, :-1] > 0) & (mu[:, 1:] > 0)
        iv = np.zeros_like(mask, bool)
        iv[1:-1] = (mv[:-1] > 0) & (mv[1:] > 0)
        eu = np.abs(ur[0, :, iu] - (0.3 + 0.01 * np.nonzero(iu)[1])[:, None]).max() if iu.any() else 0.0
        ev = np.abs(vr[0, :, iv] - (-0.2 + 0.02 * np.nonzero(iv)[0])[:, None]).max() if iv.any() else 0.0
        out["destagger"] = {"u_err": float(eu), "v_err": float(ev), "ok": bool(max(eu, ev) <= 1e-6)}
    finally:
        raw.close()
    # Statistics: chunk invariance and two-pass NumPy on the first identity_days files.
    sub = paths[: cfg.ingest.identity_days]
    variables = ["u", "temp", "zeta", "w"]
    results = {}
    for c in cfg.ingest.identity_chunks:  # both ingestion paths: the lazy dataset and the direct reader
        results[("dataset", c)] = normalisation_stats(open_roms(sub, {"ocean_time": c}, variables=variables),
                                                      variables)
        with RomsRecords(sub, variables, chunk_time=c) as src:
            results[("records", c)] = normalisation_stats(src, variables)
    full = open_roms(sub, {"ocean_time": 1}, variables=variables)
    rel, inv = 0.0, 0.0
    first = results[("records", cfg.ingest.identity_chunks[0])]
    for v in variables:
        x = full[v].values.astype(np.float64)
        axes = (0, 2, 3) if x.ndim == 4 else (0, 1, 2)
        mean, std = np.nanmean(x, axis=axes), np.nanstd(x, axis=axes)
        mean, std = np.atleast_1d(mean), np.atleast_1d(std)
        for res in results.values():
            rel = max(rel, float(np.max(np.abs(res[v]["mean"] - mean) / np.maximum(np.abs(mean), std))),
                      float(np.max(np.abs(res[v]["std"] - std) / std)))
            inv = max(inv, float(np.max(np.abs(res[v]["mean"] - first[v]["mean"]) / std)),
                      float(np.max(np.abs(res[v]["std"] - first[v]["std"]) / std)))
    out["stats"] = {"two_pass_rel_err": rel, "chunk_invariance_rel": inv, "chunks": list(cfg.ingest.identity_chunks),
                    "paths": ["dataset", "records"],
                    "ok": bool(rel <= 1e-6 and inv <= 1e-6)}
    # Preview reader vs open_roms on the same days (float16 rounding: one float16 ulp).
    previews = [] if preview_dir is None else sorted(Path(preview_dir).glob("*.zarr"))
    if preview_dir is None:  # paper path: previews are not fetched per month, the identity is not applicable
        out["preview"] = {"days": 0, "ok": None, "note": "not applicable: no preview on this path"}
    elif previews:
        pv = open_preview(previews, layout=cfg.ingest.layout, level_order=cfg.ingest.level_order)
        worst = 0.0
        t_idx = np.isin(ds["ocean_time"].values, pv["ocean_time"].values)
        ref = ds.isel(ocean_time=np.flatnonzero(t_idx))
        for v in ("u", "v", "w", "temp", "salt", "AKs", "zeta", "Pair", "Uwind"):
            a, b = pv[v].values.astype(np.float64), ref[v].values.astype(np.float64)
            tol = 2.0**-10 * np.abs(b) + 2.0**-24
            ok = np.isnan(a) == np.isnan(b)
            err = np.where(np.isnan(b), 0.0, np.abs(a - b) / tol)
            worst = max(worst, float(np.nanmax(err)) if ok.all() else float("inf"))
        out["preview"] = {"days": len(previews), "max_err_in_f16_ulps": worst, "ok": bool(worst <= 1.0)}
    else:
        out["preview"] = {"days": 0, "ok": False, "note": "no preview written"}
    return out


def _partial_month(stage, run) -> None:
    """Paper: Chan moments of one month (not finalised), for stats_reduce."""
    from .stats import records_moments

    t_start = time.perf_counter()
    listing = stage.input(0)
    files = [listing.parent / row["name"] for row in csv.DictReader(open(listing))]
    check_recorded_hashes(listing, files)
    with RomsRecords(sorted(files), SHARD_VARS, chunk_time=stage.config.ingest.chunk_time) as src:
        moments = {v: {k: a.tolist() for k, a in records_moments(src, v).items()} for v in SHARD_VARS}
        n_levels = int(src.sizes["s_rho"])
    write_json(stage.output(0), {"month": stage.extra.get("month"), "days": [_day(f) for f in sorted(files)],
                                 "n_levels": n_levels, "moments": moments})
    run.log_metrics({"preprocess/seconds": time.perf_counter() - t_start, "preprocess/peak_rss_mb": _rss_mb()})


def stats_reduce(stage, run) -> None:
    """Paper: merge the training months' partial moments (Chan) into stats.json and channels.json."""
    from .stats import finalize, merge_moments, stats_digest

    from .stats import traced_normalisation_stats

    listing = stage.input(0)
    parts = [read_json(p) for p in stage.inputs[1:]]
    all_days = sorted(d for p in parts for d in p["days"])
    train, _, _ = split_days(stage.config, all_days)
    train_months = {d[:6] for d in train}
    stats = {}
    for v in SHARD_VARS:
        total = None
        for p in parts:
            if not set(d[:6] for d in p["days"]) & train_months:
                continue
            m = {k: np.asarray(a, float) for k, a in p["moments"][v].items()}
            total = m if total is None else merge_moments(total, m)
        if total is None:
            raise SystemExit("coastalbench stats_reduce: no training month among the inputs")
        stats[v] = finalize(total)
    n = parts[0]["n_levels"]
    chans = []
    for v in SHARD_VARS:
        levels = range(n) if FIELDS[v][1] else [None]
        for k in levels:
            chans.append({"name": v if k is None else f"{v}@{k}", "var": v, "level": k,
                          "mean": float(stats[v]["mean"][k or 0]), "std": float(stats[v]["std"][k or 0])})
    digest = stats_digest(stats)
    write_json(stage.output(0), {"digest": digest, "train_days": train, "variables": {
        v: {k: np.asarray(a).tolist() for k, a in s.items()} for v, s in stats.items()}})
    files = sorted(listing.parent / row["name"] for row in csv.DictReader(open(listing)))
    ds = open_roms(files[: stage.config.ingest.identity_days], {"ocean_time": stage.config.ingest.chunk_time},
                   variables=SHARD_VARS)
    t = ds["ocean_time"].values
    record_s = float((t[1] - t[0]) / np.timedelta64(1, "s")) if len(t) > 1 else 1800.0
    write_json(stage.output(1), {"channels": chans, "stats_digest": digest, "n_levels": n, "layout": "T_C_H_W",
                                 "dtype": "float16", "land": 0.0, "days": [], "record_seconds": record_s})
    save_npz(stage.output(2), h=ds["h"].values, mask_rho=ds["mask_rho"].values,
             dx=np.float64(1.0 / validate_pm(files[0])))
    # Claim-1 checks on the first month's first days (no preview on this path).
    _, peak, chunk_bytes = traced_normalisation_stats(ds, ["u"])
    checks = ingestion_checks(stage.config, files[: stage.config.ingest.identity_days], None, ds)
    checks["memory"] = {"peak_traced_bytes": peak, "chunk_bytes": chunk_bytes, "ratio": peak / chunk_bytes,
                        "bound_chunks": stage.config.ingest.mem_bound_chunks,
                        "ok": bool(peak <= stage.config.ingest.mem_bound_chunks * chunk_bytes)}
    checks["ok"] = all_ok(checks)
    write_json(stage.output(3), checks)


def shard(stage, run) -> None:
    """Paper: write one month's z-scored shards with the reduced statistics; outputs the month's index json."""
    from .stats import write_shard

    listing, stats_path = stage.input(0), stage.input(1)
    files = sorted(listing.parent / row["name"] for row in csv.DictReader(open(listing)))
    doc = read_json(stats_path)
    stats = {v: {k: np.asarray(a, float) for k, a in s.items()} for v, s in doc["variables"].items()}
    out = stage.output(0)
    index = []
    for f in files:
        day = _day(f)
        path = out.parent / f"{day}.npy"
        with RomsRecords([f], SHARD_VARS) as src:
            write_shard(path, src, SHARD_VARS, stats)
            t = (src.datetimes() - np.datetime64("2008-01-01T00:00:00")) / np.timedelta64(1, "s")
        index.append({"day": day, "path": str(path), "times": t.tolist()})
    write_json(out, {"days": index, "stats_digest": doc["digest"]})


# ------------------------------------------------------------------------------------------------------ train


def _load_index(stage, start: int = 2) -> tuple[dict, dict, list[dict]]:
    channels = read_json(stage.input(0))
    grid = dict(np.load(stage.input(1), allow_pickle=False))
    days = list(channels["days"])
    for p in stage.inputs[start:]:
        if Path(p).suffix == ".json":
            days += read_json(p)["days"]
    days = sorted({d["day"]: d for d in days}.values(), key=lambda d: d["day"])
    if not days:
        raise SystemExit("coastalbench: no shards listed in the inputs")
    return channels, grid, days


def _series(cfg, channels, grid, days):
    from .emulator import load_series

    if not days:
        return None
    names = [c["name"] for c in channels["channels"]]
    return load_series([d["path"] for d in days], names, [d["times"] for d in days], grid["mask_rho"],
                       grid["h"], channels["n_levels"], coarsen=cfg.model.coarsen)


def _device(cfg) -> str:
    import torch

    if cfg.train.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return cfg.train.device


def check_seeds(requested, configured) -> list[int]:
    """The seeds a train job runs: ``--seeds`` if given (each must be one of the config's seeds), else all of
    the config's seeds. Raises SystemExit naming the unknown seeds."""
    seeds = list(requested) or list(configured)
    unknown = sorted(set(seeds) - set(configured))
    if unknown:
        raise SystemExit(f"coastalbench train: seeds {unknown} are not in the config's seeds {list(configured)}")
    return seeds


def _train_key(key: str) -> str:
    """``train/loss`` stays; ``val/rmse_norm`` becomes ``train/val_rmse_norm`` (every train-stage key under
    ``train/``, the convention shared by all studies)."""
    return key if key.startswith("train/") else "train/" + key.replace("/", "_")


def train(stage, run) -> None:
    """Train one arm for the job's seeds; inputs channels.json, grid.npz [, shard index jsons]; output a json
    listing ``{arm}_s{seed}.pt`` state_dicts (written beside it)."""
    import torch

    from .emulator import train_one

    cfg = stage.config
    arm = stage.arm
    if arm not in ("vit", "vit_no_boundary"):
        raise SystemExit(f"coastalbench train: arm {arm!r} is not trained (vit, vit_no_boundary)")
    torch.set_num_threads(cfg.train.threads)
    channels, grid, days = _load_index(stage)
    train_d, val_d, _ = split_days(cfg, [d["day"] for d in days])
    by_day = {d["day"]: d for d in days}
    tr = _series(cfg, channels, grid, [by_day[d] for d in train_d])
    va = _series(cfg, channels, grid, [by_day[d] for d in val_d])
    record_s = float(channels["record_seconds"])
    device = _device(cfg)
    out = stage.output(0)
    seeds = check_seeds(stage.seeds, cfg.seeds)
    models = []
    n_params = 0
    for seed in seeds:
        t0 = time.perf_counter()
        # one run per seed (nested under the job's run when the job has several): train/loss and
        # train/val_rmse_norm per epoch (train_one's val/rmse_norm), the model file with the config
        with run.seed_run(seed) as srun:
            model = train_one(tr, va, cfg.model, cfg.train, seed=seed, no_boundary=arm == "vit_no_boundary",
                              record_s=record_s, device=device,
                              log=lambda k, v, s, r=srun: r.log_metric(_train_key(k), v, s))
            srun.log_metric("train/seconds", time.perf_counter() - t0)
            path = out.parent / f"{arm}_s{seed}.pt"
            with atomic_path(path) as tmp:
                torch.save(model.state_dict(), tmp)
            srun.log_model(path, cfg)
        models.append({"seed": seed, "path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
        n_params = int(sum(p.numel() for p in model.parameters()))
    write_json(out, {"arm": arm, "models": models, "stats_digest": channels["stats_digest"], "n_params": n_params})


# --------------------------------------------------------------------------------------------------- evaluate


def evaluate(stage, run) -> None:
    """Metrics on the test days for every arm and seed, and the claims. Inputs: channels.json, grid.npz,
    ingest_checks.json, model jsons [, shard index jsons]; outputs claims.json, eval.json, example.npz."""
    import torch

    from . import evaluation

    cfg = stage.config
    torch.set_num_threads(cfg.train.threads)
    checks = read_json(stage.input(2))
    docs = [read_json(p) for p in stage.inputs[3:] if Path(p).suffix == ".json"]  # shards (.npy) are skipped
    model_docs = [d for d in docs if "models" in d]
    index_days = [day for d in docs if "models" not in d for day in d["days"]]
    channels = read_json(stage.input(0))
    grid = dict(np.load(stage.input(1), allow_pickle=False))
    days = list(channels["days"]) + index_days
    days = sorted({d["day"]: d for d in days}.values(), key=lambda d: d["day"])
    train_d, _, test_d = split_days(cfg, [d["day"] for d in days])
    by_day = {d["day"]: d for d in days}
    tr = _series(cfg, channels, grid, [by_day[d] for d in train_d])
    te = _series(cfg, channels, grid, [by_day[d] for d in test_d])
    if tr is None or te is None:
        raise SystemExit(f"coastalbench evaluate: need train and test days, got {len(train_d)} and {len(test_d)}")
    metrics, example = evaluation.evaluate_all(cfg, tr, te, model_docs, channels, grid, device=_device(cfg))
    claims = evaluation.make_claims(cfg, metrics, checks)
    from icml25.core.claims import log_verdicts, write_claims
    from icml25.core.config import config_hash

    from . import PAPER

    seeds = sorted({m["seed"] for d in model_docs for m in d["models"]})
    claims_doc = write_claims(stage.output(0), study="coastalbench", scale=stage.scale,
                              data_source=stage.data_source, claims=claims, config_hash=config_hash(cfg),
                              paper=PAPER, seeds=seeds)
    log_verdicts(run, claims_doc)
    write_json(stage.output(1), {**metrics, "ingest_checks": checks})
    save_npz(stage.output(2), **example)
    _log_eval(run, metrics, model_docs)
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))


def _log_eval(run, metrics: dict, model_docs: list[dict]) -> None:
    """One nested run per arm (tag arm): ``eval/rmse_claim`` and ``eval/rmse/<channel>`` with step = lead (h),
    means over seeds; under a trained arm's run, one nested run per seed (tag seed) with that seed's values.
    Seeds are listed in the order evaluation.evaluate_all read them (the model docs' order)."""
    seeds = {d["arm"]: [m["seed"] for m in d["models"]] for d in model_docs}
    for arm, by_lead in metrics["rmse_claim"].items():
        arm_seeds = seeds.get(arm, [])
        with run.child(arm=arm) as arun:
            for lead, vals in by_lead.items():
                step = int(round(float(lead)))
                arun.log_metric("eval/rmse_claim", float(np.mean(vals)), step)
                full = metrics.get("rmse_claim_full", {}).get(arm, {}).get(lead)
                if full is not None:  # the whole wet domain, forced band included (reported, decides nothing)
                    arun.log_metric("eval/rmse_claim_full_domain", float(np.mean(full)), step)
                per_channel = np.mean(np.asarray(metrics["rmse"][arm][lead]), axis=0)
                arun.log_metrics({f"eval/rmse/{c.replace('@', '_l')}": float(v)
                                  for c, v in zip(metrics["channels"], per_channel)}, step)
            if len(arm_seeds) == len(next(iter(by_lead.values()), [])):
                for i, seed in enumerate(arm_seeds):
                    with arun.child(seed=seed) as srun:
                        for lead, vals in by_lead.items():
                            srun.log_metric("eval/rmse_claim", float(vals[i]), int(round(float(lead))))


def report(stage, run) -> None:
    """Figures (RMSE vs lead per variable; one prediction vs truth map) and report.md."""
    from . import evaluation

    metrics = read_json(stage.input(0))
    claims = read_json(stage.input(1))
    example = dict(np.load(stage.input(2), allow_pickle=False))
    fig_rmse, fig_map, md = stage.outputs[:3]
    evaluation.plot_rmse_vs_lead(metrics, fig_rmse)
    evaluation.plot_map(example, fig_map)
    write_text(md, evaluation.report_markdown(metrics, claims, [fig_rmse.name, fig_map.name]))
    for p in (fig_rmse, fig_map, md):
        run.log_artifact(p)
