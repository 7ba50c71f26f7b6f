"""ROMS history files: conventions, writer, validation and the lazy reader ``open_roms`` (spec "Method: ROMS
conventions [V]" and "Ingestion" steps 1-3).

The reader never loads data: it validates headers, grids and time axes with ``netCDF4`` (small reads), opens the
files with ``xr.open_mfdataset`` (dask, one task per ``ocean_time`` chunk), destaggers u/v to rho points with
``mask_u``/``mask_v`` weights, averages w/AKs from s_w to s_rho, sets land to NaN and attaches a lazy ``z_rho``.
Destaggering and masking are one fused NumPy kernel per chunk, so a chunk costs about three chunk-sized buffers.
"""
from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from .scoord import s_levels, stretching, z_of_s

FILL = np.float32(1e37)
CHUNK_CACHE_BYTES = 0  # HDF5 chunk cache per variable used by open_roms (chunks are read once, see open_roms)
REF_DATE = "2008-01-01 00:00:00"
FORCINGS = ("Pair", "Tair", "Qair", "rain", "swrad", "lwrad", "Uwind", "Vwind")
STATE3D = ("u", "v", "w", "temp", "salt", "AKs")
GRID_DIMS = ("eta_rho", "xi_rho", "eta_u", "xi_u", "eta_v", "xi_v", "eta_psi", "xi_psi")

#: name -> (horizontal grid, vertical grid or None, long_name, units)
FIELDS: dict[str, tuple[str, str | None, str, str]] = {
    "zeta": ("rho", None, "free-surface", "meter"),
    "ubar": ("u", None, "vertically integrated u-momentum component", "meter second-1"),
    "vbar": ("v", None, "vertically integrated v-momentum component", "meter second-1"),
    "u": ("u", "s_rho", "u-momentum component", "meter second-1"),
    "v": ("v", "s_rho", "v-momentum component", "meter second-1"),
    "w": ("rho", "s_w", "vertical momentum component", "meter second-1"),
    "temp": ("rho", "s_rho", "potential temperature", "Celsius"),
    "salt": ("rho", "s_rho", "salinity", "nondimensional"),
    "AKs": ("rho", "s_w", "salinity vertical diffusion coefficient", "meter2 second-1"),
    "Pair": ("rho", None, "surface air pressure", "millibar"),
    "Tair": ("rho", None, "surface air temperature", "Celsius"),
    "Qair": ("rho", None, "surface air relative humidity", "percentage"),
    "rain": ("rho", None, "rain fall rate", "kilogram meter-2 second-1"),
    "swrad": ("rho", None, "solar shortwave radiation flux", "watt meter-2"),
    "lwrad": ("rho", None, "net longwave radiation flux", "watt meter-2"),
    "Uwind": ("rho", None, "surface u-wind component", "meter second-1"),
    "Vwind": ("rho", None, "surface v-wind component", "meter second-1"),
}
#: CF standard names (ROMS varinfo.yaml where it has one). zeta and h form the CF pair from which cf_xarray derives
#: the standard name of the decoded depth ("altitude"), so decode_vertical_coords needs exactly these two.
STANDARD_NAMES = {
    "zeta": "sea_surface_height_above_geoid", "ubar": "barotropic_sea_water_x_velocity_at_u_location",
    "vbar": "barotropic_sea_water_y_velocity_at_v_location", "u": "sea_water_x_velocity_at_u_location",
    "v": "sea_water_y_velocity_at_v_location", "w": "upward_sea_water_velocity",
    "temp": "sea_water_potential_temperature", "salt": "sea_water_salinity",
    "AKs": "ocean_vertical_salt_diffusivity", "Pair": "surface_air_pressure", "Tair": "air_temperature",
    "Qair": "relative_humidity", "rain": "rainfall_flux", "swrad": "surface_net_downward_shortwave_flux",
    "lwrad": "surface_net_downward_longwave_flux", "Uwind": "x_wind", "Vwind": "y_wind",
    "h": "sea_floor_depth_below_geoid", "f": "coriolis_parameter", "ocean_time": "time",
}
HGRID_DIMS = {"rho": ("eta_rho", "xi_rho"), "u": ("eta_u", "xi_u"), "v": ("eta_v", "xi_v"),
              "psi": ("eta_psi", "xi_psi")}
SCALARS = ("Vtransform", "Vstretching", "theta_s", "theta_b", "Tcline", "hc")


class RomsFormatError(ValueError):
    """A ROMS file is malformed or inconsistent with the others; the message names the file and variable."""


def field_dims(name: str) -> tuple[str, ...]:
    """Dimensions of a field in a ROMS history file, e.g. u -> (ocean_time, s_rho, eta_u, xi_u)."""
    hgrid, vgrid, _, _ = FIELDS[name]
    return ("ocean_time",) + ((vgrid,) if vgrid else ()) + HGRID_DIMS[hgrid]


# ----------------------------------------------------------------------------------------------------- writer


def grid_sizes(ny: int, nx: int, n: int) -> dict[str, int]:
    """ROMS dimension sizes for an eta_rho x xi_rho grid with N levels."""
    return {"s_rho": n, "s_w": n + 1, "eta_rho": ny, "xi_rho": nx, "eta_u": ny, "xi_u": nx - 1,
            "eta_v": ny - 1, "xi_v": nx, "eta_psi": ny - 1, "xi_psi": nx - 1}


def staggered_masks(mask_rho: np.ndarray) -> dict[str, np.ndarray]:
    """mask_u/v/psi from mask_rho as ROMS defines them (water only where all neighbours are water)."""
    m = mask_rho.astype(np.float64)
    return {"mask_rho": m, "mask_u": m[:, :-1] * m[:, 1:], "mask_v": m[:-1, :] * m[1:, :],
            "mask_psi": m[:-1, :-1] * m[:-1, 1:] * m[1:, :-1] * m[1:, 1:]}


def check_scoord(vtransform: int, vstretching: int, hc: float, h: np.ndarray, mask: np.ndarray | None = None,
                 what: str = "s-coordinate") -> None:
    """What the s-coordinate maths can honour: Vtransform 1 or 2, a supported Vstretching, and for Vtransform 1
    ``hc <= min(h)`` over water (deeper hc gives non-monotone level depths, hence NaN velocities downstream).
    ``ValueError`` naming the parameter."""
    from .scoord import stretching

    if vtransform not in (1, 2):
        raise ValueError(f"{what}: Vtransform={vtransform} is not supported (1 or 2)")
    stretching(np.array([-0.5]), 1.0, 0.5, vstretching)  # raises naming an unsupported Vstretching
    water = h[mask > 0] if mask is not None and (mask > 0).any() else h
    if vtransform == 1 and hc > float(np.min(water)):
        raise ValueError(f"{what}: Vtransform 1 needs hc <= min(h) over water; hc={hc} m but the shallowest "
                         f"water is {float(np.min(water)):.3g} m (lower hc or use Vtransform 2)")


class HisWriter:
    """Write one ROMS history file record by record (NETCDF4, zlib), so memory stays one record.

    ``grid`` holds h, f, pm, pn, mask_rho (others are derived), lon_rho/lat_rho (optional) and the s-coordinate
    scalars Vtransform, Vstretching, theta_s, theta_b, Tcline, hc and N; optionally ``angle`` (radians between
    the XI axis and east, default 0), ``spherical`` (default 1: lon/lat grid) and ``rho0`` (kg m-3, default
    1025), which ROMS writes and xroms needs (``east``/``north`` rotate by ``angle``). Variables carry the CF
    ``standard_name`` of :data:`STANDARD_NAMES`. Use as a context manager; ``append``
    takes the record time (s since :data:`REF_DATE`) and a mapping of field name -> array in file layout
    (e.g. u: (N, eta_u, xi_u)), float32 or convertible.
    """

    def __init__(self, path: str | Path, grid: Mapping, fields: Sequence[str], *, zlib_level: int = 1,
                 land_value: Literal["fill", "zero"] = "fill", qair_units: str = "percentage",
                 title: str = "icml25 coastalbench mini-ROMS") -> None:
        import netCDF4

        self.path = Path(path)
        self.fields = tuple(fields)
        unknown = [f for f in self.fields if f not in FIELDS]
        if unknown:
            raise ValueError(f"HisWriter: unknown field(s) {unknown}")
        h = np.asarray(grid["h"], dtype=np.float64)
        ny, nx = h.shape
        n = int(grid["N"])
        self.masks = staggered_masks(np.asarray(grid["mask_rho"]))
        self.land_value = land_value
        self.sizes = grid_sizes(ny, nx, n)
        vt = int(grid["Vtransform"])
        check_scoord(vt, int(grid["Vstretching"]), float(grid["hc"]), h, np.asarray(grid["mask_rho"]),
                     what=f"HisWriter({self.path.name})")  # before the file exists: nothing half-written
        if land_value not in ("fill", "zero"):
            raise ValueError(f"HisWriter: land_value must be 'fill' or 'zero', got {land_value!r}")
        kw = {"zlib": zlib_level > 0, "complevel": max(zlib_level, 1)} if zlib_level > 0 else {}
        self.nc = nc = netCDF4.Dataset(self.path, "w", format="NETCDF4")
        nc.type = "ROMS/TOMS history file"
        nc.title = title
        nc.Conventions = "CF-1.4, SGRID-0.3"
        nc.createDimension("ocean_time", None)
        for dim, size in self.sizes.items():
            nc.createDimension(dim, size)
        for name in SCALARS:
            var = nc.createVariable(name, "i4" if name.startswith("V") else "f8")
            var.long_name = {"Vtransform": "vertical terrain-following transformation equation",
                             "Vstretching": "vertical terrain-following stretching function",
                             "theta_s": "S-coordinate surface control parameter",
                             "theta_b": "S-coordinate bottom control parameter",
                             "Tcline": "S-coordinate surface/bottom layer width",
                             "hc": "S-coordinate parameter, critical depth"}[name]
            if name in ("Tcline", "hc"):
                var.units = "meter"
            var.assignValue(grid[name])
        var = nc.createVariable("spherical", "i4")
        var.long_name = "grid type logical switch"
        var.flag_values = np.array([0, 1], np.int32)
        var.flag_meanings = "Cartesian spherical"
        var.assignValue(int(grid.get("spherical", 1)))
        var = nc.createVariable("rho0", "f8")
        var.long_name = "mean density used in Boussinesq approximation"
        var.units = "kilogram meter-3"
        var.assignValue(float(grid.get("rho0", 1025.0)))
        std_name = f"ocean_s_coordinate_g{vt}"
        for sdim, cname, grid_kind in (("s_rho", "Cs_r", "rho"), ("s_w", "Cs_w", "w")):
            s = s_levels(n, grid_kind)
            var = nc.createVariable(sdim, "f8", (sdim,))
            var.long_name = f"S-coordinate at {'RHO' if grid_kind == 'rho' else 'W'}-points"
            var.valid_min, var.valid_max = -1.0, 0.0
            var.positive = "up"
            var.standard_name = std_name
            var.formula_terms = f"s: {sdim} C: {cname} eta: zeta depth: h depth_c: hc"
            var.field = f"{sdim}, scalar"
            var[:] = s
            cvar = nc.createVariable(cname, "f8", (sdim,))
            cvar.long_name = f"S-coordinate stretching curves at {'RHO' if grid_kind == 'rho' else 'W'}-points"
            cvar.valid_min, cvar.valid_max = -1.0, 0.0
            cvar[:] = stretching(s, grid["theta_s"], grid["theta_b"], int(grid["Vstretching"]))
        self._grid_var("h", ("eta_rho", "xi_rho"), h, "bathymetry at RHO-points", "meter", "lon_rho lat_rho")
        self._grid_var("f", ("eta_rho", "xi_rho"), grid["f"], "Coriolis parameter at RHO-points", "second-1",
                       "lon_rho lat_rho")
        self._grid_var("angle", ("eta_rho", "xi_rho"), grid.get("angle", np.zeros_like(h)),
                       "angle between XI-axis and EAST", "radians", "lon_rho lat_rho")
        self._grid_var("pm", ("eta_rho", "xi_rho"), grid["pm"], "curvilinear coordinate metric in XI",
                       "meter-1", "lon_rho lat_rho")
        self._grid_var("pn", ("eta_rho", "xi_rho"), grid["pn"], "curvilinear coordinate metric in ETA",
                       "meter-1", "lon_rho lat_rho")
        lon, lat = np.asarray(grid["lon_rho"], float), np.asarray(grid["lat_rho"], float)
        lonlat = {"rho": (lon, lat), "u": (0.5 * (lon[:, :-1] + lon[:, 1:]), 0.5 * (lat[:, :-1] + lat[:, 1:])),
                  "v": (0.5 * (lon[:-1] + lon[1:]), 0.5 * (lat[:-1] + lat[1:]))}
        lonlat["psi"] = (0.5 * (lonlat["u"][0][:-1] + lonlat["u"][0][1:]),
                         0.5 * (lonlat["u"][1][:-1] + lonlat["u"][1][1:]))
        for g, (lo, la) in lonlat.items():
            self._grid_var(f"lon_{g}", HGRID_DIMS[g], lo, f"longitude of {g.upper()}-points", "degree_east",
                           None).standard_name = "longitude"
            self._grid_var(f"lat_{g}", HGRID_DIMS[g], la, f"latitude of {g.upper()}-points", "degree_north",
                           None).standard_name = "latitude"
        for g in ("rho", "u", "v", "psi"):
            var = self._grid_var(f"mask_{g}", HGRID_DIMS[g], self.masks[f"mask_{g}"],
                                 f"mask on {g.upper()}-points", None, f"lon_{g} lat_{g}")
            var.flag_values = np.array([0.0, 1.0])
            var.flag_meanings = "land water"
        t = nc.createVariable("ocean_time", "f8", ("ocean_time",))
        t.long_name = "time since initialization"
        t.units = f"seconds since {REF_DATE}"
        t.calendar = "proleptic_gregorian"
        t.standard_name = "time"
        t.field = "time, scalar, series"
        self.vars = {}
        for name in self.fields:
            hgrid, vgrid, long_name, units = FIELDS[name]
            if name == "Qair" and qair_units != "percentage":
                long_name, units = "surface air specific humidity", qair_units
            var = nc.createVariable(name, "f4", field_dims(name), fill_value=FILL, **kw)
            var.long_name = long_name
            var.units = units
            var.standard_name = ("specific_humidity" if name == "Qair" and qair_units != "percentage"
                                 else STANDARD_NAMES[name])
            var.time = "ocean_time"
            lon_lat = f"lon_{hgrid} lat_{hgrid}"
            var.coordinates = f"{lon_lat} {vgrid} ocean_time" if vgrid else f"{lon_lat} ocean_time"
            var.field = f"{name}, scalar, series"
            var.grid = "grid"
            var.location = "face" if hgrid == "rho" else ("edge1" if hgrid == "u" else "edge2")
            self.vars[name] = var
        self.n_records = 0

    def _grid_var(self, name, dims, values, long_name, units, coordinates):
        var = self.nc.createVariable(name, "f8", dims)
        var.long_name = long_name
        if name in STANDARD_NAMES:
            var.standard_name = STANDARD_NAMES[name]
        if units:
            var.units = units
        if coordinates:
            var.coordinates = coordinates
        var[:] = np.asarray(values, dtype=np.float64)
        return var

    def append(self, time_s: float, record: Mapping[str, np.ndarray]) -> None:
        """Write one record; every field of the writer must be present, in file layout (no ocean_time axis)."""
        k = self.n_records
        missing = [f for f in self.fields if f not in record]
        if missing:
            raise ValueError(f"{self.path}: record {k} misses field(s) {missing}")
        self.nc["ocean_time"][k] = time_s
        for name in self.fields:
            hgrid = FIELDS[name][0]
            data = np.array(record[name], dtype=np.float32)
            expected = tuple(self.sizes[d] for d in field_dims(name)[1:])
            if data.shape != expected:
                raise ValueError(f"{self.path}: field {name} has shape {data.shape}, expected {expected}")
            land = self.masks[f"mask_{hgrid}"] == 0
            data[..., land] = FILL if self.land_value == "fill" else 0.0
            self.vars[name][k] = data
        self.n_records += 1

    def close(self) -> None:
        self.nc.close()

    def __enter__(self) -> HisWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ------------------------------------------------------------------------------------------------- validation

REQUIRED_GRID = ("h", "mask_rho", "mask_u", "mask_v", "Vtransform", "hc", "theta_s", "theta_b", "ocean_time")


def validate_files(paths: Sequence[str | Path], variables: Sequence[str]) -> dict:
    """Check ROMS files before anything is read lazily or written.

    Raises :class:`RomsFormatError` naming the file and the variable/dimension for: a missing file, a missing
    variable, wrong dimension names or inconsistent staggered sizes, a grid (sizes, h, masks) that differs from the
    first file, or a time axis that is not strictly increasing within and across files. Returns
    ``{"sizes", "records", "times", "grid", "scalars", "fills"}`` (dimension sizes, records per file, all
    ocean_time values in seconds, grid arrays and s-coordinate scalars and decoded _FillValue of ``variables``,
    from the first file).
    """
    import netCDF4

    if not paths:
        raise RomsFormatError("open_roms: no files given")
    ref_sizes: dict[str, int] | None = None
    ref_grid: dict[str, np.ndarray] = {}
    records, times, last = [], [], None
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise RomsFormatError(f"{path}: file not found")
        try:
            nc = netCDF4.Dataset(path, "r")
        except OSError as err:
            raise RomsFormatError(f"{path}: not a readable netCDF file ({err})") from err
        with nc:
            for name in (*REQUIRED_GRID, *variables):
                if name not in nc.variables:
                    raise RomsFormatError(f"{path}: missing variable {name!r}")
            for name in variables:
                if name not in FIELDS:
                    raise RomsFormatError(f"{path}: {name!r} is not a ROMS field this reader knows "
                                          f"({sorted(FIELDS)})")
                got, want = nc.variables[name].dimensions, field_dims(name)
                if tuple(got) != want:
                    raise RomsFormatError(f"{path}: variable {name!r} has dimensions {tuple(got)}, "
                                          f"expected {want}")
            sizes = {d: len(nc.dimensions[d]) for d in nc.dimensions}
            for d in ("ocean_time", "s_rho", "s_w", "eta_rho", "xi_rho", "eta_u", "xi_u", "eta_v", "xi_v"):
                if d not in sizes:
                    raise RomsFormatError(f"{path}: missing dimension {d!r} (has {sorted(sizes)})")
            want = grid_sizes(sizes["eta_rho"], sizes["xi_rho"], sizes["s_rho"])
            for d in ("s_w", "eta_u", "xi_u", "eta_v", "xi_v"):
                if sizes[d] != want[d]:
                    raise RomsFormatError(f"{path}: dimension {d!r} has size {sizes[d]}, expected {want[d]} "
                                          f"for eta_rho={sizes['eta_rho']}, xi_rho={sizes['xi_rho']}, "
                                          f"s_rho={sizes['s_rho']}")
            static = {k: v for k, v in sizes.items() if k != "ocean_time"}
            grid = {name: np.asarray(nc.variables[name][:]) for name in ("h", "mask_rho", "mask_u", "mask_v")}
            if ref_sizes is None:  # grid metadata of the first file (read here so open_roms computes nothing)
                extra = {n: np.asarray(nc.variables[n][:]) for n in ("lon_rho", "lat_rho", "Cs_r", "s_rho")
                         if n in nc.variables}
                scalars = {n: nc.variables[n][...].item() for n in SCALARS if n in nc.variables}
                fills = {n: decoded_fill(nc.variables[n]) for n in variables}
            if ref_sizes is None:
                ref_sizes, ref_grid = static, grid
            else:
                for d, size in ref_sizes.items():
                    if static.get(d) != size:
                        raise RomsFormatError(f"{path}: grid differs from {paths[0]}: dimension {d!r} is "
                                              f"{static.get(d)}, expected {size}")
                for name, ref in ref_grid.items():
                    if grid[name].shape != ref.shape or not np.array_equal(grid[name], ref):
                        raise RomsFormatError(f"{path}: grid differs from {paths[0]}: variable {name!r}")
            t = np.asarray(nc.variables["ocean_time"][:], dtype=np.float64)
            if t.size == 0:
                raise RomsFormatError(f"{path}: variable 'ocean_time' is empty")
            steps = np.diff(np.concatenate([[last], t]) if last is not None else t)
            if (steps <= 0).any():
                bad = int(np.argmax(steps <= 0)) + (0 if last is not None else 1)
                raise RomsFormatError(f"{path}: 'ocean_time' is not strictly increasing at record {bad} "
                                      f"(across files in the order given)")
            last = t[-1]
            records.append(int(t.size))
            times.append(t)
    return {"sizes": ref_sizes, "records": records, "times": np.concatenate(times), "grid": {**ref_grid, **extra},
            "scalars": scalars, "fills": fills}


def decoded_fill(var) -> float:
    """The decoded _FillValue of a ``netCDF4`` variable (netCDF's default fill when the attribute is absent)."""
    import netCDF4

    fill = np.float32(getattr(var, "_FillValue", netCDF4.default_fillvals.get(var.dtype.str[1:], np.nan)))
    if getattr(var, "scale_factor", None) is not None:
        fill = fill * np.float32(var.scale_factor)
    if getattr(var, "add_offset", None) is not None:
        fill = fill + np.float32(var.add_offset)
    return float(fill)


# ----------------------------------------------------------------------------------------------------- reader


def _destagger_kernel(x: np.ndarray, m: np.ndarray, mask_rho: np.ndarray, axis: int) -> np.ndarray:
    """Average a u (axis=-1) or v (axis=-2) chunk to rho points with mask weights; land -> NaN.

    Interior rho point i gets (m[i-1] x[i-1] + m[i] x[i]) / (m[i-1] + m[i]); edge points copy their single
    neighbour [R]; a point with no water neighbour is NaN. x: (..., eta_u, xi_u) or (..., eta_v, xi_v).
    """
    axis = axis % x.ndim
    water = np.broadcast_to(m > 0, x.shape)
    shape = list(x.shape)
    shape[axis] += 1
    out = np.zeros(shape, dtype=np.float32)  # the only chunk-sized allocation: land u/v never read (where=)
    n = x.shape[axis]
    lo = [slice(None)] * x.ndim
    hi = [slice(None)] * x.ndim
    lo[axis], hi[axis] = slice(0, n), slice(1, n + 1)
    np.add(out[tuple(lo)], x, out=out[tuple(lo)], where=water)
    np.add(out[tuple(hi)], x, out=out[tuple(hi)], where=water)
    water = m > 0
    w2 = np.zeros(mask_rho.shape, dtype=np.float32)
    if axis == x.ndim - 1:
        w2[:, :-1] += water
        w2[:, 1:] += water
    else:
        w2[:-1, :] += water
        w2[1:, :] += water
    with np.errstate(invalid="ignore", divide="ignore"):
        out /= np.where(w2 > 0, w2, np.nan).astype(np.float32)
    out[..., mask_rho == 0] = np.nan
    return out


def _vertical_kernel(x: np.ndarray, mask_rho: np.ndarray) -> np.ndarray:
    """s_w -> s_rho as (x_k + x_{k+1})/2 [R]; land -> NaN. x: (T, N+1, eta, xi) -> (T, N, eta, xi)."""
    out = x[:, :-1].astype(np.float32, copy=True)
    out += x[:, 1:]
    out *= np.float32(0.5)
    out[..., mask_rho == 0] = np.nan
    return out


def _mask_kernel(x: np.ndarray, mask_rho: np.ndarray) -> np.ndarray:
    out = np.array(x, dtype=np.float32, copy=True)
    out[..., mask_rho == 0] = np.nan
    return out


def _scalar(ds, name: str):
    """An s-coordinate scalar from a variable (raw ROMS file) or an attribute (open_roms output)."""
    if name in ds.variables:
        return ds[name].values.item()
    if name in ds.attrs:
        return ds.attrs[name]
    raise KeyError(f"{name!r}: neither a variable nor an attribute of the dataset")


def zlevels(ds, grid: Literal["rho", "w"] = "rho"):
    """Depths (m, negative down) of rho or w levels from h, zeta and the s-coordinate metadata of ``ds``.

    Returns a DataArray (ocean_time, s_rho|s_w, eta_rho, xi_rho), or without ocean_time if ``ds`` has no zeta
    (missing zeta is taken as 0; NaN zeta on land too). Lazy when zeta is dask-backed.
    """
    import xarray as xr

    if grid not in ("rho", "w"):
        raise ValueError(f"zlevels: grid must be 'rho' or 'w', got {grid!r}")
    sdim, cname = ("s_rho", "Cs_r") if grid == "rho" else ("s_w", "Cs_w")
    n = int(ds.sizes["s_rho"]) if "s_rho" in ds.sizes else int(_scalar(ds, "N"))
    s = ds[sdim].values if sdim in ds.variables else s_levels(n, grid)
    c = (ds[cname].values if cname in ds.variables else
         stretching(s, float(_scalar(ds, "theta_s")), float(_scalar(ds, "theta_b")),
                    int(_scalar(ds, "Vstretching")) if ("Vstretching" in ds.variables or "Vstretching" in ds.attrs)
                    else 4))
    h = ds["h"].reset_coords(drop=True).astype(np.float64)
    zeta = ds["zeta"].reset_coords(drop=True).fillna(0.0) if "zeta" in ds.variables else xr.zeros_like(h)
    s_da = xr.DataArray(np.asarray(s, float), dims=[sdim])
    c_da = xr.DataArray(np.asarray(c, float), dims=[sdim])
    z = z_of_s(s_da, c_da, h, zeta, float(_scalar(ds, "hc")), int(_scalar(ds, "Vtransform")))
    order = [d for d in ("ocean_time", sdim, "eta_rho", "xi_rho") if d in z.dims]
    z = z.transpose(*order)
    z.attrs = {"long_name": f"depth of {grid.upper()}-points", "units": "meter", "positive": "up"}
    return z.rename(f"z_{grid}")


def open_roms(paths: str | Path | Sequence[str | Path], chunks: Mapping[str, int] | None = None, *,
              variables: Sequence[str] | None = None):
    """Open ROMS history files lazily: dask-chunked over ocean_time, destaggered to rho points, land NaN.

    Returns an ``xr.Dataset`` whose fields are on (ocean_time, [s_rho], eta_rho, xi_rho) (float32; w and AKs are
    averaged to s_rho), with coordinates z_rho (lazy), h, mask_rho, lon_rho, lat_rho, s_rho, Cs_r and the
    s-coordinate scalars as attributes. ``variables`` defaults to every known field in the first file (ubar and
    vbar excepted). Nothing is computed here: validation reads headers, grids and times with ``netCDF4``.
    ``chunks`` may only chunk ocean_time (the kernels need whole horizontal slices).
    """
    import dask.array as da
    import netCDF4
    import xarray as xr

    chunks = dict(chunks or {"ocean_time": 1})
    bad = sorted(set(chunks) - {"ocean_time"})
    if bad:
        raise ValueError(f"open_roms: chunks may only name 'ocean_time', got {bad}")
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [str(p) for p in paths]
    if variables is None:
        if not Path(paths[0]).is_file():
            raise RomsFormatError(f"{paths[0]}: file not found")
        with netCDF4.Dataset(paths[0]) as nc:
            variables = [v for v in FIELDS if v in nc.variables and v not in ("ubar", "vbar")]
    variables = list(variables)
    info = validate_files(paths, variables)
    # HDF5 keeps a chunk cache per open variable (64 MiB by default) and xarray keeps files open, so resident
    # memory would grow with files x variables. Every chunk is read once here (ROMS writes one record per chunk;
    # choose chunk_time as a multiple of the file's chunking otherwise), so no cache is needed (global setting).
    netCDF4.set_chunk_cache(CHUNK_CACHE_BYTES)
    raw = xr.open_mfdataset(paths, engine="netcdf4", chunks={**chunks}, combine="nested",
                            concat_dim="ocean_time", data_vars="minimal", coords="minimal", compat="override",
                            join="override", combine_attrs="override", parallel=False)
    grid = info["grid"]
    mask_rho = grid["mask_rho"]
    masks = {g: grid[f"mask_{g}"] for g in ("u", "v")}
    dims_rho = ("eta_rho", "xi_rho")
    out = {}
    for name in variables:
        hgrid, vgrid, long_name, units = FIELDS[name]
        data = raw[name].data
        if data.chunks[-1] != (data.shape[-1],) or data.chunks[-2] != (data.shape[-2],):
            data = data.rechunk({data.ndim - 1: -1, data.ndim - 2: -1})
        if vgrid == "s_w":
            data = data.rechunk({1: -1})
        if hgrid in ("u", "v"):
            axis = -1 if hgrid == "u" else -2
            shape = list(data.shape)
            shape[axis] += 1
            new_chunks = list(data.chunks)
            new_chunks[axis] = (shape[axis],)
            arr = da.map_blocks(_destagger_kernel, data, m=masks[hgrid], mask_rho=mask_rho, axis=axis,
                                chunks=tuple(new_chunks), dtype=np.float32, meta=np.empty((0,) * data.ndim,
                                                                                          np.float32))
        elif vgrid == "s_w":
            new_chunks = (data.chunks[0], (data.shape[1] - 1,), *data.chunks[2:])
            arr = da.map_blocks(_vertical_kernel, data, mask_rho=mask_rho, chunks=new_chunks, dtype=np.float32,
                                meta=np.empty((0,) * 4, np.float32))
        else:
            arr = da.map_blocks(_mask_kernel, data, mask_rho=mask_rho, dtype=np.float32,
                                meta=np.empty((0,) * data.ndim, np.float32))
        dims = ("ocean_time",) + (("s_rho",) if vgrid else ()) + dims_rho
        out[name] = (dims, arr, {"long_name": long_name, "units": raw[name].attrs.get("units", units),
                                 "time": "ocean_time", "source_grid": hgrid,
                                 "source_vertical": vgrid or "none"})
    attrs = dict(info["scalars"])
    attrs.update({"N": int(info["sizes"]["s_rho"]), "records_per_file": list(info["records"]),
                  "files": [Path(p).name for p in paths]})
    coords = {"ocean_time": raw["ocean_time"].values,
              "s_rho": grid["s_rho"] if "s_rho" in grid else s_levels(attrs["N"], "rho"),
              "h": (dims_rho, grid["h"]), "mask_rho": (dims_rho, mask_rho)}
    for c in ("lon_rho", "lat_rho"):
        if c in grid:
            coords[c] = (dims_rho, grid[c])
    if "Cs_r" in grid:
        coords["Cs_r"] = (("s_rho",), grid["Cs_r"])
    ds = xr.Dataset(out, coords=coords, attrs=attrs)
    zsrc = xr.Dataset({"h": ds["h"], **({"zeta": ds["zeta"]} if "zeta" in ds else
                                         {"zeta": (("ocean_time",) + dims_rho,
                                                   da.map_blocks(_mask_kernel, raw["zeta"].data,
                                                                 mask_rho=mask_rho, dtype=np.float32))}
                                         if "zeta" in raw.variables else {})},
                      coords={"s_rho": ds["s_rho"]}, attrs=attrs)
    if "Cs_r" in ds.coords:
        zsrc["Cs_r"] = ds["Cs_r"]
    z = zlevels(zsrc, "rho").astype(np.float32)
    return ds.assign_coords(z_rho=z.where(ds["mask_rho"] == 1))


def day_of_file(path: str | Path) -> str:
    """YYYYMMDD from ``ocean_his_YYYYMMDD.nc`` (error naming the file otherwise)."""
    stem = Path(path).name.split(".")[0]
    tail = stem.rsplit("_", 1)[-1]
    try:
        dt.datetime.strptime(tail, "%Y%m%d")
    except ValueError as err:
        raise RomsFormatError(f"{path}: file name must end in _YYYYMMDD.nc") from err
    return tail
