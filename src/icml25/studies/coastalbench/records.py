"""The direct ROMS record reader: the fast path of the statistics and shard passes (spec "Ingestion" steps 4-5).

:class:`RomsRecords` reads one record of one variable at a time into one reused float32 buffer and hands it to the
kernels of :mod:`.kernels` with a table of where each valid rho cell's value lies in it. Two ways to read:

* **direct** (uncompressed float32 HDF5/netCDF-4 variables, as the benchmark writes; needs ``h5py``): the byte
  offset of every storage chunk is looked up once per file with ``h5py``, and a record is read with ``os.preadv``
  straight into the buffer, chunk by chunk in file order, so the buffer holds the record *in its storage tiles*
  (:class:`SourceLayout`); the kernels' tables are built for that layout, so nothing is rearranged. Big-endian
  data is byte-swapped in place.
* **mapped** (the same direct case in native byte order, :meth:`RomsRecords.read_record`): the file span of the
  record's tiles is ``mmap``-ed read-only, the tiles' pages are populated in one call each run
  (``MADV_POPULATE_READ``), and the kernels read the page cache in place, finding each tile at its own offset (the
  tiles of a record need not be adjacent or in order, nor 4-byte aligned). This saves the copy into the buffer
  (about half of a warm pass's memory traffic) and the buffer's fresh pages. The mapping lives as long as the
  returned array (one record of one variable at a time).
* **netCDF-C** (anything else: compressed, packed, netCDF-3, chunks never written): ``nc_get_vara_float`` of the
  library ``netCDF4`` loaded, into the same buffer in plain C order, unpacked (scale/offset) once.

Both give the same float32 values as ``netCDF4`` (tests compare every record on tiled, padded, multi-record,
big-endian, contiguous and compressed variables).
"""
from __future__ import annotations

import mmap
import os
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from . import kernels
from .roms import FIELDS, HGRID_DIMS, RomsFormatError, validate_files

# ------------------------------------------------------------------------------------------- rho-point tables


class RhoTable:
    """Where the rho-point values of one kind of field come from, in flat C-order indices (see :mod:`.kernels`).

    ``cells``: flat rho indices (eta_rho * xi_rho) of the valid cells, int32 (n_valid,); ``ia``/``ib``: flat
    indices into the source level; ``wa``/``wb``: float32 weights, or None for a plain gather (``ia == cells``);
    ``invalid``: flat rho indices of land and of cells without a water neighbour (NaN in ``open_roms``, 0 in
    shards); ``vertical``: the source has N + 1 levels (s_w) averaged pairwise to N.
    """

    def __init__(self, cells, ia, ib=None, wa=None, wb=None, *, invalid, vertical: bool = False) -> None:
        self.cells, self.ia, self.ib, self.wa, self.wb = cells, ia, ib, wa, wb
        self.invalid, self.vertical = invalid, vertical

    @property
    def count(self) -> int:
        return int(self.cells.size)


def rho_point_table(kind: Literal["rho", "u", "v", "w"], masks: Mapping[str, np.ndarray]) -> RhoTable:
    """The :class:`RhoTable` of a rho ("rho"), u, v or s_w ("w") field, from ``mask_rho``/``mask_u``/``mask_v``.

    u/v follow :func:`.roms._destagger_kernel`: interior rho point i averages the water u points i-1 and i
    (weights 1/2), a point with one water neighbour (coast or domain edge) copies it (weights 1 and 0), a point
    with none is invalid; land rho points are invalid. w/AKs average levels k and k+1 (weights 1/2) on wet rho
    points.
    """
    wet = np.asarray(masks["mask_rho"]) > 0
    ny, nx = wet.shape
    i32 = np.int32
    if kind in ("rho", "w"):
        cells = np.flatnonzero(wet).astype(i32)
        invalid = np.flatnonzero(~wet).astype(i32)
        if kind == "rho":
            return RhoTable(cells, cells, invalid=invalid)
        half = np.full(cells.size, 0.5, np.float32)
        return RhoTable(cells, cells, cells, half, half.copy(), invalid=invalid, vertical=True)
    if kind not in ("u", "v"):
        raise ValueError(f"rho_point_table: kind must be rho, u, v or w, got {kind!r}")
    m = np.asarray(masks[f"mask_{kind}"]) > 0
    lo_ok = np.zeros((ny, nx), bool)
    hi_ok = np.zeros((ny, nx), bool)
    if kind == "u":  # u[j, i-1] and u[j, i] bracket rho[j, i]; the u array is (ny, nx - 1)
        lo_ok[:, 1:], hi_ok[:, :-1] = m, m
    else:  # v[j-1, i] and v[j, i] bracket rho[j, i]; the v array is (ny - 1, nx)
        lo_ok[1:, :], hi_ok[:-1, :] = m, m
    valid = wet & (lo_ok | hi_ok)
    cells = np.flatnonzero(valid)
    lo, hi = lo_ok.ravel()[cells], hi_ok.ravel()[cells]
    if kind == "u":  # flat u index of u[j, i] is j * (nx - 1) + i = cell - j
        hi_idx = cells - cells // nx
        lo_idx = hi_idx - 1
    else:  # flat v index of v[j, i] is the rho cell's; v[j-1, i] is nx before
        hi_idx = cells
        lo_idx = cells - nx
    both = lo & hi
    ia = np.where(lo, lo_idx, hi_idx).astype(i32)
    ib = np.where(hi, hi_idx, ia).astype(i32)
    wa = np.where(both, 0.5, 1.0).astype(np.float32)
    wb = np.where(both, 0.5, 0.0).astype(np.float32)
    return RhoTable(cells.astype(i32), ia, ib, wa, wb, invalid=np.flatnonzero(~valid).astype(i32))


# ------------------------------------------------------------------------------------------------ source layout


@dataclass(frozen=True)
class SourceLayout:
    """How one record of a field (``levels`` x ``ny`` x ``nx`` source values) lies in a read buffer.

    The record is cut into tiles of ``tile`` = (tk, tj, ti) values, each stored in C order, the tiles in C order
    over (levels, eta, xi); edge tiles are padded to full size (as HDF5 stores chunks). Plain C order is the
    single tile (1, ny, nx) per level. Offsets are in float32 elements.
    """

    levels: int
    ny: int
    nx: int
    tile: tuple[int, int, int]

    @classmethod
    def natural(cls, levels: int, ny: int, nx: int) -> SourceLayout:
        return cls(levels, ny, nx, (1, ny, nx))

    @property
    def tiles(self) -> tuple[int, int, int]:
        """Number of tiles along (levels, eta, xi)."""
        tk, tj, ti = self.tile
        return -(-self.levels // tk), -(-self.ny // tj), -(-self.nx // ti)

    @property
    def tile_size(self) -> int:
        return int(np.prod(self.tile))

    @property
    def size(self) -> int:
        """Buffer elements of one record (padding included)."""
        return int(np.prod(self.tiles)) * self.tile_size

    def level_base(self, k: int) -> int:
        """Offset of level k's first value; a level's value (j, i) is at ``level_base(k) + offsets(j * nx + i)``."""
        tk, tj, ti = self.tile
        _, gj, gi = self.tiles
        kc, kk = divmod(int(k), tk)
        return kc * gj * gi * self.tile_size + kk * tj * ti

    def row_col_offsets(self) -> tuple[np.ndarray, np.ndarray]:
        """int64 (ny,), (nx,): point (j, i) of a level lies at ``level_base(k) + rows[j] + cols[i]``."""
        _, tj, ti = self.tile
        _, _, gi = self.tiles
        j, i = np.arange(self.ny, dtype=np.int64), np.arange(self.nx, dtype=np.int64)
        return (j // tj) * gi * self.tile_size + (j % tj) * ti, (i // ti) * self.tile_size + i % ti

    def offsets(self, flat: np.ndarray) -> np.ndarray:
        """Offsets (within a level, int64) of flat C-order horizontal indices j * nx + i."""
        rows, cols = self.row_col_offsets()
        j, i = np.divmod(np.asarray(flat, np.int64), self.nx)
        return rows[j] + cols[i]

    def to_natural(self, buf: np.ndarray) -> np.ndarray:
        """The record as (levels, ny * nx) in C order (a view for the natural layout, else a copy)."""
        tk, tj, ti = self.tile
        gk, gj, gi = self.tiles
        x = buf[: self.size].reshape(gk, gj, gi, tk, tj, ti).transpose(0, 3, 1, 4, 2, 5)
        x = x.reshape(gk * tk, gj * tj, gi * ti)[: self.levels, : self.ny, : self.nx]
        return x.reshape(self.levels, -1) if x.flags.c_contiguous else np.ascontiguousarray(x).reshape(self.levels, -1)


@dataclass
class _Plan:
    """How to read one variable of one file: ``reads[k]`` lists (file offset, buffer tile slots) of record k, each
    slot ``tile_bytes`` long and the slots file-contiguous (one ``preadv`` each); None: through netCDF-C."""

    layout: SourceLayout
    reads: list[list[tuple[int, list[int]]]] | None = None
    tile_bytes: int = 0
    swap: bool = False

    def tile_offsets(self, k: int) -> np.ndarray:
        """int64 (tiles,): file byte offset of each tile of the layout (slot order) in record k."""
        sub = self.layout.tile_size * 4
        per = self.tile_bytes // sub  # layout tiles per stored slot (a contiguous record is one slot of levels)
        out = np.empty(int(np.prod(self.layout.tiles)), np.int64)
        for offset, slots in self.reads[k]:
            for i, slot in enumerate(slots):
                first = offset + i * self.tile_bytes
                out[slot * per : (slot + 1) * per] = first + sub * np.arange(per)
        return out


def _chunk_offsets(dset) -> dict[tuple[int, ...], tuple[int, int]]:
    """{chunk logical offset: (byte offset, stored size)} of every allocated chunk of an h5py dataset."""
    out: dict[tuple[int, ...], tuple[int, int]] = {}
    try:
        dset.id.chunk_iter(lambda s: out.__setitem__(tuple(s.chunk_offset), (s.byte_offset, s.size)))
    except (AttributeError, NotImplementedError):  # HDF5 < 1.12.3: one call per chunk
        for i in range(dset.id.get_num_chunks()):
            s = dset.id.get_chunk_info(i)
            out[tuple(s.chunk_offset)] = (s.byte_offset, s.size)
    return out


def hdf5_plans(path: str, names: Sequence[str], layouts: Mapping[str, SourceLayout], records: int
               ) -> dict[str, _Plan]:
    """Direct-read plans of the variables of ``path`` that allow one (see the module docstring); {} for a file
    h5py cannot open (netCDF-3, no h5py). ``layouts``: each variable's natural layout (shape check)."""
    try:
        import h5py
    except ImportError:  # pragma: no cover - without h5py every read goes through netCDF-C
        return {}
    try:
        fh = h5py.File(path, "r")
    except OSError:
        return {}
    plans = {}
    with fh:
        for name in names:
            nat = layouts[name]
            try:
                d = fh[name]
                dcpl = d.id.get_create_plist()
                ok = (d.dtype.kind == "f" and d.dtype.itemsize == 4 and dcpl.get_nfilters() == 0
                      and dcpl.get_external_count() == 0 and d.shape[0] >= records
                      and tuple(d.shape[1:]) == ((nat.levels,) if d.ndim == 4 else ()) + (nat.ny, nat.nx)
                      and not any(a in d.attrs for a in ("scale_factor", "add_offset")))
                if not ok:
                    continue
                swap = not d.dtype.isnative
                if dcpl.get_layout() == h5py.h5d.CONTIGUOUS:
                    offset = d.id.get_offset()
                    if offset is None:
                        continue
                    rec = nat.size * 4
                    plans[name] = _Plan(nat, [[(offset + k * rec, [0])] for k in range(records)], rec, swap)
                elif dcpl.get_layout() == h5py.h5d.CHUNKED:
                    plans[name] = _chunked_plan(d, nat, records, swap)
            except (KeyError, OSError, ValueError, TypeError):  # anything unusual: netCDF-C reads it
                continue
    return {k: v for k, v in plans.items() if v is not None}


def _chunked_plan(d, nat: SourceLayout, records: int, swap: bool) -> _Plan | None:
    chunks = d.chunks
    ct = chunks[0]
    tile = (chunks[1] if d.ndim == 4 else 1, chunks[-2], chunks[-1])
    layout = SourceLayout(nat.levels, nat.ny, nat.nx, tile)
    tile_bytes = layout.tile_size * 4
    table = _chunk_offsets(d)
    if any(size != ct * tile_bytes for _, size in table.values()):
        return None
    gk, gj, gi = layout.tiles
    reads = []
    for k in range(records):
        t0, within = divmod(k, ct)
        slots = []
        for slot, (kc, jc, ic) in enumerate(np.ndindex(gk, gj, gi)):
            key = (t0 * ct,) + ((kc * tile[0],) if d.ndim == 4 else ()) + (jc * tile[1], ic * tile[2])
            if key not in table:  # never written: netCDF-C supplies the fill value
                return None
            slots.append((table[key][0] + within * tile_bytes, slot))
        slots.sort()
        runs: list[tuple[int, list[int]]] = []
        for off, slot in slots:
            if runs and runs[-1][0] + len(runs[-1][1]) * tile_bytes == off:
                runs[-1][1].append(slot)
            else:
                runs.append((off, [slot]))
        reads.append(runs)
    return _Plan(layout, reads, tile_bytes, swap)


def _nc_get_vara_float():
    """``nc_get_vara_float`` of the netCDF-C library that ``netCDF4`` loaded (ctypes), or None if not found.

    netCDF4-python always allocates a new array per read; on this VM first-touching fresh pages costs several
    times the copy itself (page faults), so the reader fills its preallocated buffer through the C call. Only the
    very library netCDF4 uses will do (ncids are per library), so it is looked up in /proc/self/maps.
    """
    import ctypes

    import netCDF4  # noqa: F401  (loads libnetcdf)

    try:
        with open("/proc/self/maps") as fh:
            libs = sorted({line.split()[-1] for line in fh if "libnetcdf" in line and ".so" in line})
    except OSError:
        return None
    for lib in libs:
        try:
            fn = ctypes.CDLL(lib).nc_get_vara_float
        except (OSError, AttributeError):
            continue
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        fn.restype = ctypes.c_int
        return fn
    return None


# ------------------------------------------------------------------------------------------------------ reader

_MADV_POPULATE_READ = 22  #: Linux >= 5.14 (not exported by Python's mmap module)


class _Shared:
    """State shared by a reader and its selections: open file, plans, tables, the record buffer."""

    def __init__(self) -> None:
        self.fd, self.fd_index = -1, -1
        self.nc, self.nc_index = None, -1
        self.plans: dict[int, dict[str, _Plan]] = {}
        self.tables: dict[tuple, kernels.SourceTable] = {}
        self.buffer = np.empty(0, np.float32)
        self.largest = 0
        self.mapped = 0  # bytes of records mapped now (alive while an array over them is)
        self.mapped_peak = 0

    def mapped_add(self, nbytes: int) -> None:
        self.mapped += nbytes
        self.mapped_peak = max(self.mapped_peak, self.mapped)

    def mapped_sub(self, nbytes: int) -> None:
        self.mapped -= nbytes

    def close(self) -> None:
        if self.nc is not None:
            self.nc.close()
        if self.fd >= 0:
            os.close(self.fd)
        self.nc, self.nc_index, self.fd, self.fd_index = None, -1, -1, -1

    def __del__(self) -> None:  # pragma: no cover - best effort, when the reader and its selections are gone
        try:
            self.close()
        except Exception:
            pass


class RomsRecords:
    """Direct reader of ROMS history records: one record of one variable at a time, no dask or xarray.

    The fast path of the statistics and shard passes (:func:`.stats.normalisation_stats` and
    :func:`.stats.write_shard` accept it in place of an ``open_roms`` dataset and give the same numbers). Files are
    validated like :func:`.roms.open_roms`; records are read with ``preadv`` at the storage chunks' offsets or
    through netCDF-C (see the module docstring) into one reused buffer; land is never looked at, since the kernels
    read only the valid cells of :func:`rho_point_table`. ``chunk_time`` records form one statistics chunk (the
    Chan merge unit). ``direct_io=False`` reads everything through netCDF-C; ``mmap_io=False`` reads direct
    records with ``preadv`` even where they could be mapped.
    """

    def __init__(self, paths: str | Path | Sequence[str | Path], variables: Sequence[str] | None = None, *,
                 chunk_time: int = 1, direct_io: bool = True, mmap_io: bool = True,
                 _parent: RomsRecords | None = None, _rows: np.ndarray | None = None) -> None:
        if _parent is not None:
            self.__dict__.update(_parent.__dict__)
            self.rows = _rows  # files, plans and the record buffer are shared: read one selection at a time
            return
        import netCDF4

        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        self.paths = [str(p) for p in paths]
        if variables is None:
            if not Path(self.paths[0]).is_file():
                raise RomsFormatError(f"{self.paths[0]}: file not found")
            with netCDF4.Dataset(self.paths[0]) as nc:
                variables = [v for v in FIELDS if v in nc.variables and v not in ("ubar", "vbar")]
        self.variables = list(variables)
        if int(chunk_time) < 1:
            raise ValueError(f"RomsRecords: chunk_time must be >= 1, got {chunk_time}")
        self.chunk_time = int(chunk_time)
        self.direct_io = bool(direct_io)
        self.mmap_io = bool(mmap_io) and hasattr(mmap, "MAP_POPULATE")
        info = validate_files(self.paths, self.variables)
        self.sizes = info["sizes"]
        self.grid = info["grid"]
        self.times = info["times"]
        self.fills = info["fills"]
        self.file_records = [int(n) for n in info["records"]]
        files = np.repeat(np.arange(len(self.paths)), info["records"])
        recs = np.concatenate([np.arange(n) for n in info["records"]])
        self.rows = np.stack([files, recs], axis=1)  # (records, 2): file index, record in file
        self._all_rows = self.rows
        masks = {"mask_rho": self.grid["mask_rho"], "mask_u": self.grid["mask_u"], "mask_v": self.grid["mask_v"]}
        self.tables = {k: rho_point_table(k, masks) for k in ("rho", "u", "v", "w")}
        self._get = _nc_get_vara_float()
        self._io = _Shared()

    # -- shape and selection
    def __len__(self) -> int:
        return int(self.rows.shape[0])

    @property
    def shape_rho(self) -> tuple[int, int]:
        return int(self.sizes["eta_rho"]), int(self.sizes["xi_rho"])

    @property
    def records_per_file(self) -> list[int]:
        return [int(n) for n in np.bincount(self.rows[:, 0], minlength=len(self.paths))]

    def levels(self, name: str) -> int:
        """Levels of ``name`` at rho points: N for 3-D fields (w/AKs averaged to s_rho), 1 for 2-D fields."""
        return int(self.sizes["s_rho"]) if FIELDS[name][1] else 1

    def natural_layout(self, name: str) -> SourceLayout:
        """The C-order layout of one record of ``name`` in the file (source levels, source grid)."""
        hgrid, vgrid = FIELDS[name][:2]
        ny, nx = (int(self.sizes[d]) for d in HGRID_DIMS[hgrid])
        return SourceLayout.natural(int(self.sizes[vgrid]) if vgrid else 1, ny, nx)

    def kind(self, name: str) -> str:
        """The rho-point table kind of ``name``: rho, u, v or w (s_w fields)."""
        hgrid, vgrid = FIELDS[name][:2]
        return "w" if vgrid == "s_w" else hgrid

    def table(self, name: str) -> RhoTable:
        return self.tables[self.kind(name)]

    def source_table(self, name: str, layout: SourceLayout) -> kernels.SourceTable:
        """The :class:`.kernels.SourceTable` of ``name`` for records read in ``layout`` (cached)."""
        key = (self.kind(name), layout)
        tab = self._io.tables.get(key)
        if tab is None:
            r = self.tables[key[0]]
            rows, cols = layout.row_col_offsets()
            tab = self._io.tables[key] = kernels.source_table(
                r.cells, r.ia, r.ib, r.wa, r.wb, r.invalid, vertical=r.vertical, rows=rows, cols=cols,
                bases=[layout.level_base(k) for k in range(layout.levels)], tile_size=layout.tile_size)
        return tab

    def select(self, start: int, stop: int) -> RomsRecords:
        """The records start..stop-1 (e.g. one day), sharing grids, tables, the open file and the record buffer
        (so read one selection at a time: a read overwrites the previous one)."""
        return RomsRecords(self.paths, _parent=self, _rows=self.rows[start:stop])

    def chunks(self) -> list[tuple[int, int]]:
        """(start, stop) record ranges of ``chunk_time`` records."""
        n = len(self)
        return [(a, min(a + self.chunk_time, n)) for a in range(0, n, self.chunk_time)]

    def where(self, t: int) -> str:
        """'<file> record <k>' of record t (for error messages)."""
        f, k = self.rows[t]
        return f"{self.paths[f]} record {k}"

    def direct(self, name: str, f: int = 0) -> bool:
        """Whether ``name`` of file ``f`` is read directly at its chunks' offsets (else through netCDF-C)."""
        return name in self._plans(f)

    # -- reading
    def _plans(self, f: int) -> dict[str, _Plan]:
        plans = self._io.plans.get(f)
        if plans is None:
            layouts = {v: self.natural_layout(v) for v in self.variables}
            plans = hdf5_plans(self.paths[f], self.variables, layouts, self.file_records[f]) if self.direct_io else {}
            self._io.plans[f] = plans
            # the largest record of any variable: one buffer from the start (fresh pages are slow to touch)
            self._io.largest = max(self._io.largest, *(plans[v].layout.size if v in plans else layouts[v].size
                                                       for v in self.variables))
        return plans

    def _fd(self, f: int) -> int:
        io = self._io
        if io.fd_index != f:
            if io.fd >= 0:
                os.close(io.fd)
                io.fd, io.fd_index = -1, -1
            io.fd = os.open(self.paths[f], os.O_RDONLY)
            io.fd_index = f
        return io.fd

    def _dataset(self, f: int):
        import netCDF4

        io = self._io
        if io.nc_index != f:
            if io.nc is not None:
                io.nc.close()
                io.nc, io.nc_index = None, -1
            nc = netCDF4.Dataset(self.paths[f], "r")
            nc.set_auto_maskandscale(False)
            if nc.data_model.startswith("NETCDF4"):
                for v in self.variables:
                    nc.variables[v].set_var_chunk_cache(size=0)  # each chunk is read once
            io.nc, io.nc_index = nc, f
        return io.nc

    def _buffer(self, n: int) -> np.ndarray:
        if self._io.buffer.size < n:  # one buffer for every variable: fresh pages are touched once
            self._io.buffer = np.empty(max(n, self._io.largest), np.float32)
        return self._io.buffer[:n]

    def mapped(self, name: str, t: int) -> bool:
        """Whether :meth:`read_record` maps record t of ``name`` (else it reads it with :meth:`read_raw`)."""
        if not self.mmap_io:
            return False
        plan = self._plans(int(self.rows[t, 0])).get(name)
        return plan is not None and not plan.swap

    def read_record(self, name: str, t: int) -> tuple[np.ndarray, SourceLayout, np.ndarray | None]:
        """Record t of ``name`` for the kernels: (float32 values, layout, tiles). Mapped where it can be (then
        ``tiles`` (int64) gives each layout tile's offset in the read-only array, which unmaps when dropped), else
        :meth:`read_raw`'s buffer with the tiles in slot order (``tiles`` None)."""
        f, k = (int(x) for x in self.rows[t])
        plan = self._plans(f).get(name)
        if plan is not None and self.mmap_io and not plan.swap:
            buf, tiles = self._map(name, t, f, plan, k)
            return buf, plan.layout, tiles
        buf, lay = self.read_raw(name, t)
        return buf, lay, None

    def read_raw(self, name: str, t: int) -> tuple[np.ndarray, SourceLayout]:
        """Record t of ``name`` as float32 in the reader's buffer (overwritten by the next read) and its layout."""
        f, k = (int(x) for x in self.rows[t])
        plan = self._plans(f).get(name)
        if plan is None:
            lay = self.natural_layout(name)
            buf = self._buffer(lay.size)
            self._read_netcdf(name, t, f, k, buf)
            return buf, lay
        buf = self._buffer(plan.layout.size)
        raw = buf.view(np.uint8)
        fd = self._fd(f)
        tb = plan.tile_bytes
        for offset, slots in plan.reads[k]:
            views = [raw[s * tb : (s + 1) * tb] for s in slots]
            try:
                got = os.preadv(fd, views, offset)
            except OSError as err:
                raise RomsFormatError(f"{self.where(t)}: reading {name!r} failed ({err})") from err
            if got != len(slots) * tb:
                raise RomsFormatError(f"{self.where(t)}: reading {name!r} failed (file ends early: {got} of "
                                      f"{len(slots) * tb} bytes at offset {offset})")
        if plan.swap:
            buf.view(np.uint32).byteswap(inplace=True)
        return buf, plan.layout

    def _map(self, name: str, t: int, f: int, plan: _Plan, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Record k of ``plan`` in file f mapped read-only: (float32 array over the span of its tiles, offset of
        each layout tile in it). Only the tiles' pages are populated (and resident)."""
        fd = self._fd(f)
        offs = plan.tile_offsets(k)
        tile = plan.layout.tile_size * 4
        start, end = int(offs.min()), int(offs.max()) + tile
        size = os.fstat(fd).st_size  # mapping past the end would fault (SIGBUS) on access, not fail here
        if end > size:
            raise RomsFormatError(f"{self.where(t)}: reading {name!r} failed (file ends early: {size} bytes, a "
                                  f"chunk ends at {end})")
        base = start - start % mmap.ALLOCATIONGRANULARITY
        shift = (start - base) % 4  # every tile at the same byte offset modulo 4 (else read it)
        if ((offs - base) % 4 != shift).any():
            buf, _ = self.read_raw(name, t)
            return buf, np.arange(offs.size, dtype=np.int64) * plan.layout.tile_size
        try:
            mm = mmap.mmap(fd, end - base, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ, offset=base)
        except OSError as err:
            raise RomsFormatError(f"{self.where(t)}: reading {name!r} failed ({err})") from err
        page = mmap.PAGESIZE
        for offset, slots in plan.reads[k]:  # each file-contiguous run of tiles: page tables in one call
            a = (offset - base) // page * page
            try:
                mm.madvise(_MADV_POPULATE_READ, a, offset - base + len(slots) * plan.tile_bytes - a)
            except (OSError, ValueError):  # kernel < 5.14: the pages fault in as the kernels read them
                break
        nbytes = offs.size * tile
        self._io.mapped_add(nbytes)  # counted as held data until the last array over it is gone
        weakref.finalize(mm, self._io.mapped_sub, nbytes)
        arr = np.frombuffer(mm, np.float32, count=(len(mm) - shift) // 4, offset=shift)
        return arr, (offs - base - shift) // 4

    @property
    def mapped_peak_bytes(self) -> int:
        """The most bytes of mapped records alive at once since :meth:`reset_mapped_peak` (tracemalloc does not
        see mappings; :func:`.stats.traced_normalisation_stats` adds this to its traced peak)."""
        return int(self._io.mapped_peak)

    def reset_mapped_peak(self) -> None:
        self._io.mapped_peak = self._io.mapped

    def _read_netcdf(self, name: str, t: int, f: int, k: int, buf: np.ndarray) -> None:
        import ctypes

        nc = self._dataset(f)
        var = nc.variables[name]
        shape = tuple(var.shape[1:])
        x = buf.reshape(shape)
        if self._get is not None:  # into the preallocated buffer, converted to float32 by netCDF-C
            start = (ctypes.c_size_t * var.ndim)(k, *([0] * (var.ndim - 1)))
            count = (ctypes.c_size_t * var.ndim)(1, *shape)
            status = self._get(nc._grpid, var._varid, start, count, x.ctypes.data)
            if status != 0:
                raise RomsFormatError(f"{self.where(t)}: reading {name!r} failed (netCDF error {status}: "
                                      f"nc_get_vara_float)")
        else:
            x[...] = np.asarray(var[k], dtype=np.float32)
        scale, offset = getattr(var, "scale_factor", None), getattr(var, "add_offset", None)
        if scale is not None:  # packed data: decoded once, in place
            x *= np.float32(scale)
        if offset is not None:
            x += np.float32(offset)

    def read(self, name: str, t: int) -> np.ndarray:
        """Record t of ``name`` decoded to float32 as (source levels, flat source points) in C order.

        Source levels: 1 (2-D), N (s_rho) or N + 1 (s_w); points: those of the field's own grid (u, v or rho).
        A view of the reader's buffer (or of the read-only mapped file) when the record is stored in plain C
        order, else a copy.
        """
        buf, lay = self.read_raw(name, t)
        return lay.to_natural(buf)

    def datetimes(self) -> np.ndarray:
        """ocean_time of the selected records as datetime64[ns], decoded with the first file's units/calendar."""
        import netCDF4

        with netCDF4.Dataset(self.paths[0]) as nc:
            t = nc.variables["ocean_time"]
            units, calendar = t.units, getattr(t, "calendar", "standard")
        values = self.times[self._global_rows()]
        dates = netCDF4.num2date(values, units, calendar, only_use_cftime_datetimes=False,
                                 only_use_python_datetimes=True)
        return np.array(dates, dtype="datetime64[ns]")

    def _global_rows(self) -> np.ndarray:
        offsets = np.cumsum([0, *np.bincount(self._all_rows[:, 0], minlength=len(self.paths))])[:-1]
        return offsets[self.rows[:, 0]] + self.rows[:, 1]

    def release(self) -> None:
        """Free the record buffer (the next read allocates again)."""
        self._io.buffer = np.empty(0, np.float32)

    def fill_value(self, name: str) -> float:
        """The decoded _FillValue of ``name`` in the first file (netCDF's default fill when the attribute is
        absent)."""
        return self.fills[name]

    def close(self) -> None:
        """Close the open file (the next read reopens it); shared with the reader's selections."""
        self._io.close()

    def __enter__(self) -> RomsRecords:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
