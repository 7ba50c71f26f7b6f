"""Miniature ROMS history files for the paper-scale rehearsal of coastalbench (``icml25.core.rehearsal``).

The real files (``manifest.csv``) are one ROMS history file per day, ``ocean_his_YYYYMMDD.nc``: NETCDF4, the
598 x 898 rho grid with 12 s-levels, 48 half-hourly records, every field of :data:`~.roms.FIELDS` with its ROMS
dimensions, attributes and land masking, the grid variables (h, f, pm, pn, masks, lon/lat) and the s-coordinate
scalars. The miniatures keep all of that — written by the same :class:`~.roms.HisWriter` the offline simulator
uses — on a small grid (:data:`GRID`) for the days of the rehearsal's months (``config/rehearsal/coastalbench.yaml``:
``remote.first_month`` .. ``remote.last_month``, so every month the paper DAG downloads is complete). The values are
smooth synthetic fields of plausible magnitude (a tide, daily cycles, slow drifts, small noise), not ROMS physics:
the rehearsal proves the paper DAG's code, not the paper's numbers. Uncompressed, as the real files are (about
0.5 MB a day). Deterministic: a fixed seed per day, no clock
in the files (netCDF-C does not record HDF5 object times).
"""
from __future__ import annotations

import calendar
from collections.abc import Mapping
from pathlib import Path

import numpy as np

#: rho grid (eta_rho, xi_rho) and s-levels of the miniatures (real: 598 x 898 x 12)
GRID = (8, 12, 3)
#: months written (must cover config/rehearsal/coastalbench.yaml's remote.first_month .. last_month)
MONTHS = ("2008-01", "2008-02", "2008-03")
RECORDS_PER_DAY = 48  #: half-hourly, as the real files
M2_S = 12.42 * 3600.0  #: period of the M2 tide (s)


def month_days(month: str) -> list[str]:
    """``YYYYMMDD`` of every day of ``YYYY-MM``."""
    y, m = map(int, month.split("-"))
    return [f"{y:04d}{m:02d}{d:02d}" for d in range(1, calendar.monthrange(y, m)[1] + 1)]


def _grid() -> dict:
    from .simulator import grid_dict, make_grid

    ny, nx, n = GRID
    return grid_dict(make_grid(ny, nx, 1000.0), n, vtransform=2, vstretching=4, theta_s=5.0, theta_b=0.4, hc=5.0,
                     tcline=5.0)


def _records(day_index: int, shapes: Mapping[str, tuple[int, ...]]) -> list[tuple[float, dict[str, np.ndarray]]]:
    """One day of records: (seconds since 2008-01-01, {field: float32 array in file layout})."""
    rng = np.random.default_rng(1000 + day_index)
    ramps = {name: np.linspace(0.0, 1.0, int(np.prod(shape))).reshape(shape) for name, shape in shapes.items()}
    out = []
    for k in range(RECORDS_PER_DAY):
        t = (day_index * RECORDS_PER_DAY + k) * 1800.0
        tide, daily = np.sin(2 * np.pi * t / M2_S), np.sin(2 * np.pi * (t % 86400.0) / 86400.0)
        r = ramps
        base = {"zeta": 0.4 * tide + 0.05 * r["zeta"], "ubar": 0.2 * tide * r["ubar"],
                "vbar": 0.1 * tide * (1 - r["vbar"]), "u": 0.3 * tide * r["u"], "v": 0.2 * tide * (1 - r["v"]),
                "w": 1e-4 * tide * r["w"], "temp": 8.0 + 6.0 * r["temp"] + 0.002 * day_index,
                "salt": 30.0 + 4.0 * r["salt"] - 0.001 * day_index, "AKs": 1e-4 + 1e-3 * r["AKs"],
                "Pair": 1013.0 + 5.0 * daily + r["Pair"], "Tair": 5.0 + 4.0 * daily + 2.0 * r["Tair"],
                "Qair": 70.0 + 10.0 * r["Qair"], "rain": 1e-5 * r["rain"],
                "swrad": 300.0 * max(daily, 0.0) + 10.0 * r["swrad"], "lwrad": -60.0 + 10.0 * r["lwrad"],
                "Uwind": 5.0 * daily + r["Uwind"], "Vwind": 3.0 - 2.0 * r["Vwind"]}
        rec = {name: (b + rng.normal(0.0, 0.01, b.shape) * (np.abs(b).mean() + 1e-6)).astype(np.float32)
               for name, b in base.items() if name in shapes}
        out.append((t, rec))
    return out


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """Write one miniature history file per day of :data:`MONTHS` at ``root / entry.mirror_path``; return the
    manifest row names written."""
    from icml25.core.io import atomic_path

    from .roms import FIELDS, HisWriter, field_dims, grid_sizes

    grid = _grid()
    ny, nx, n = GRID
    sizes = grid_sizes(ny, nx, n)
    shapes = {v: tuple(sizes[d] for d in field_dims(v)[1:]) for v in FIELDS}
    written = []
    days = [d for m in MONTHS for d in month_days(m)]
    for i, day in enumerate(days):
        name = f"ocean_his_{day}.nc"
        if name not in manifest:
            raise KeyError(f"coastalbench rehearsal: {name} is not a row of manifest.csv")
        # always rewritten (same bytes when nothing changed): a file kept from an older version of this script
        # would otherwise be served, and pinned, in place of the current miniature
        with atomic_path(Path(root) / manifest[name].mirror_path) as tmp:
            with HisWriter(tmp, grid, tuple(FIELDS), zlib_level=0, title="icml25 coastalbench rehearsal") as w:
                for t, rec in _records(i, shapes):
                    w.append(t, rec)
        written.append(name)
    return written
