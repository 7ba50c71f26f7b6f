"""CoastalBench-preview layout: one ``.zarr`` per day of stacked float16 channels (spec "Preview reader [R]").

Channel order: u, v, w, temp, salt, AKs (N levels each, index 0 at the bottom for ``bottom_up``), then zeta,
Pair, Qair, Tair, rain, swrad, lwrad, Uwind, Vwind, mask: 6N + 10 channels (82 for N = 12). All fields are on rho
points (w and AKs already on N levels). Layouts: ``T_C_H_W`` (default), ``C_T_H_W`` or ``TC_H_W``; the layout is
validated by the mask channel, which must be binary and constant in time. The array name inside the store and
the level order are open questions of the spec, so both are arguments.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import numpy as np

LEVEL_VARS = ("u", "v", "w", "temp", "salt", "AKs")
SURFACE_VARS = ("zeta", "Pair", "Qair", "Tair", "rain", "swrad", "lwrad", "Uwind", "Vwind")
LAYOUTS = ("T_C_H_W", "C_T_H_W", "TC_H_W")
ARRAY = "data"


def channel_names(n: int) -> list[str]:
    """Preview channel names, bottom-up level order: u@0..u@N-1, ..., zeta, Pair, ..., mask."""
    return [f"{v}@{k}" for v in LEVEL_VARS for k in range(n)] + list(SURFACE_VARS) + ["mask"]


def _day(path: Path) -> dt.datetime:
    stem = path.name.split(".")[0]
    digits = "".join(ch for ch in stem if ch.isdigit())[-8:]
    try:
        return dt.datetime.strptime(digits, "%Y%m%d")
    except ValueError as err:
        raise ValueError(f"{path}: preview file name must contain the date as YYYYMMDD") from err


def _as_tchw(arr, layout: str, path: Path):
    """Reshape a dask array in ``layout`` to (T, C, H, W); errors name the file and layout."""
    if layout not in LAYOUTS:
        raise ValueError(f"{path}: layout must be one of {LAYOUTS}, got {layout!r}")
    if layout == "TC_H_W":
        if arr.ndim != 3:
            raise ValueError(f"{path}: layout {layout} expects 3 dimensions, the array has {arr.ndim}")
        return None  # resolved by the caller, which knows C
    if arr.ndim != 4:
        raise ValueError(f"{path}: layout {layout} expects 4 dimensions, the array has {arr.ndim}")
    return arr if layout == "T_C_H_W" else arr.transpose(1, 0, 2, 3)


def open_preview(paths: str | Path | Sequence[str | Path], *, layout: str = "T_C_H_W",
                 level_order: str = "bottom_up", n_levels: int | None = None, array: str = ARRAY,
                 grid=None):
    """Open preview ``.zarr`` days lazily as a Dataset with the names and dimensions of :func:`open_roms`.

    Fields are float32 views of the float16 data on (ocean_time, [s_rho], eta_rho, xi_rho), land NaN; coordinates
    ocean_time (date of the file name + T equal steps per day), s_rho, mask_rho. ``grid`` (an ``open_roms``
    dataset or raw ROMS grid) adds h, lon_rho, lat_rho and a lazy z_rho. ``n_levels`` defaults to (C - 10)/6
    for ``T_C_H_W``/``C_T_H_W``; ``TC_H_W`` needs it (or 12, the real data). Raises ValueError naming the file
    when the layout does not fit: wrong rank, a channel count that is not 6N + 10, or a mask channel that is not
    binary and constant in time.
    """
    import dask.array as da
    import xarray as xr
    import zarr

    from .roms import zlevels
    from .scoord import s_levels

    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = [Path(p) for p in paths]
    days, times, n_ref = [], [], None
    for path in paths:
        if not path.exists():
            raise ValueError(f"{path}: preview store not found")
        node = zarr.open(str(path), mode="r")
        z = node[array] if isinstance(node, zarr.Group) else node
        arr = da.from_zarr(z)
        tchw = _as_tchw(arr, layout, path)
        if tchw is None:
            n = n_levels or 12
            c = 6 * n + 10
            if arr.shape[0] % c:
                raise ValueError(f"{path}: layout TC_H_W: first axis {arr.shape[0]} is not a multiple of "
                                 f"6N+10={c}")
            tchw = arr.reshape((arr.shape[0] // c, c) + arr.shape[1:])
        c = tchw.shape[1]
        if (c - 10) % 6 or c < 16:
            raise ValueError(f"{path}: layout {layout} gives {c} channels, not 6N+10: wrong layout?")
        n = (c - 10) // 6
        if n_levels is not None and n != n_levels:
            raise ValueError(f"{path}: {c} channels mean N={n} levels, expected {n_levels}")
        if n_ref is not None and n != n_ref:
            raise ValueError(f"{path}: N={n} differs from the first file's N={n_ref}")
        n_ref = n
        mask = np.asarray(tchw[:, -1].compute(), dtype=np.float32)
        if not np.isin(mask, (0.0, 1.0)).all() or not (mask == mask[:1]).all():
            raise ValueError(f"{path}: the mask channel (last) is not binary and constant in time: wrong layout "
                             f"{layout!r}?")
        days.append(tchw)
        t = tchw.shape[0]
        start = _day(path)
        times.append(np.array([np.datetime64(start + dt.timedelta(seconds=k * 86400 / t), "ns")
                               for k in range(t)]))
    data = da.concatenate(days, axis=0) if len(days) > 1 else days[0]
    data = data.rechunk({0: 1})
    mask_rho = mask[0].astype(np.float64)
    land = da.from_array(mask_rho == 0)
    dims_rho = ("eta_rho", "xi_rho")
    out = {}
    i = 0
    n = n_ref
    for v in LEVEL_VARS:
        x = data[:, i : i + n].astype(np.float32)
        if level_order == "top_down":
            x = x[:, ::-1]
        elif level_order != "bottom_up":
            raise ValueError(f"level_order must be 'bottom_up' or 'top_down', got {level_order!r}")
        out[v] = (("ocean_time", "s_rho") + dims_rho, da.where(land, np.float32(np.nan), x))
        i += n
    for v in SURFACE_VARS:
        out[v] = (("ocean_time",) + dims_rho, da.where(land, np.float32(np.nan), data[:, i].astype(np.float32)))
        i += 1
    coords = {"ocean_time": np.concatenate(times), "s_rho": s_levels(n, "rho"), "mask_rho": (dims_rho, mask_rho)}
    ds = xr.Dataset(out, coords=coords, attrs={"N": n, "layout": layout, "level_order": level_order})
    if grid is not None:
        extra = {c: (dims_rho, np.asarray(grid[c].values)) for c in ("h", "lon_rho", "lat_rho") if c in grid.variables}
        ds = ds.assign_coords(extra)
        for k in ("Vtransform", "Vstretching", "theta_s", "theta_b", "hc", "Tcline"):
            if k in grid.attrs:
                ds.attrs[k] = grid.attrs[k]
            elif k in grid.variables:
                ds.attrs[k] = grid[k].values.item()
        if "h" in ds.coords:
            zsrc = xr.Dataset({"h": ds["h"], "zeta": ds["zeta"]}, coords={"s_rho": ds["s_rho"]}, attrs=ds.attrs)
            ds = ds.assign_coords(z_rho=zlevels(zsrc, "rho").astype(np.float32).where(ds["mask_rho"] == 1))
    return ds


def _rho_average(x: np.ndarray, m: np.ndarray, axis: int) -> np.ndarray:
    """Mask-weighted average of a staggered field to rho points (independent of the reader's kernel)."""
    x = np.where(m > 0, x, 0.0)
    lo = np.concatenate([np.zeros_like(np.take(x, [0], axis)), x], axis=axis)  # left/lower neighbour
    hi = np.concatenate([x, np.zeros_like(np.take(x, [0], axis))], axis=axis)  # right/upper neighbour
    mw = np.broadcast_to(m > 0, x.shape).astype(float)
    wl = np.concatenate([np.zeros_like(np.take(mw, [0], axis)), mw], axis=axis)
    wh = np.concatenate([mw, np.zeros_like(np.take(mw, [0], axis))], axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (lo + hi) / (wl + wh)


def write_preview_records(path: str | Path, records, grid: dict, *, layout: str = "T_C_H_W",
                          level_order: str = "bottom_up") -> Path:
    """Write a preview zarr straight from simulator records in ROMS file layout (u on u points, w on s_w, ...).

    This path shares no code with ``open_roms``, so "preview reader == open_roms" is a real identity check.
    """
    import zarr

    from .roms import staggered_masks

    masks = staggered_masks(np.asarray(grid["mask_rho"]))
    mask = masks["mask_rho"]
    n = int(grid["N"])
    t, (hh, ww) = len(records), mask.shape
    c = 6 * n + 10
    shape = {"T_C_H_W": (t, c, hh, ww), "C_T_H_W": (c, t, hh, ww), "TC_H_W": (t * c, hh, ww)}[layout]
    chunks = {"T_C_H_W": (1, c, hh, ww), "C_T_H_W": (c, 1, hh, ww), "TC_H_W": (c, hh, ww)}[layout]
    root = zarr.open_group(str(path), mode="w")
    arr = root.create_array(ARRAY, shape=shape, chunks=chunks, dtype="float16", fill_value=0)
    root.attrs.update({"layout": layout, "level_order": level_order, "channels": channel_names(n)})
    for k, (_, rec) in enumerate(records):
        fields = {"u": _rho_average(np.asarray(rec["u"], float), masks["mask_u"], axis=2),
                  "v": _rho_average(np.asarray(rec["v"], float), masks["mask_v"], axis=1),
                  "w": 0.5 * (rec["w"][:-1] + rec["w"][1:]), "AKs": 0.5 * (rec["AKs"][:-1] + rec["AKs"][1:]),
                  "temp": rec["temp"], "salt": rec["salt"]}
        out = np.zeros((c, hh, ww), np.float32)
        i = 0
        for v in LEVEL_VARS:
            x = np.asarray(fields[v], np.float32)
            out[i : i + n] = x[::-1] if level_order == "top_down" else x
            i += n
        for v in SURFACE_VARS:
            out[i] = rec[v]
            i += 1
        out[:-1] = np.where(mask > 0, np.nan_to_num(out[:-1]), 0.0)
        out[-1] = mask
        rec16 = out.astype(np.float16)
        if layout == "T_C_H_W":
            arr[k] = rec16
        elif layout == "C_T_H_W":
            arr[:, k] = rec16
        else:
            arr[k * c : (k + 1) * c] = rec16
    return Path(path)
