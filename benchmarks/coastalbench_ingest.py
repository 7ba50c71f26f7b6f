"""Benchmark: coastalbench ingestion (``normalisation_stats`` + shard writing) against a raw sequential read.

Writes ROMS history files of growing total size (default 0.5, 2 and 8 GB) on the real CoastalBench grid
(eta_rho x xi_rho = 598 x 898, N = 12, float32, uncompressed like the real ~8.5 GB/day files) under a temporary
directory that is deleted afterwards, then measures in fresh processes (so peak RSS is per size):

* raw read: every field variable, record by record, with plain ``netCDF4`` (no decoding), twice: with
  netCDF's default chunk cache (the reference of the issue that set the goals) and with the chunk cache off (about
  2x faster on these files: the stricter reference, used for the goals here);
* bytes: the files read front to back into one reused buffer (the speed of the disk or page cache itself);
* ingestion (``--engine records``, default): ``RomsRecords`` (storage chunks mapped read-only where they lie,
  compiled kernels reading the page cache in place) -> ``normalisation_stats`` -> one shard per file (``O_DIRECT``
  writes where allowed, handed to one background thread so the disk overlaps the next record); ``--engine
  dataset`` runs the lazy ``open_roms`` path instead. After the timing, the first and last record of every file
  are read again and compared with ``netCDF4`` (the "equal netCDF4" line).

Each pass runs in a fresh process (so peak RSS is per size) and reports wall and CPU (user + sys) seconds: on a
shared machine wall time includes waiting for a core, CPU time does not. Warm cache: the files were just written,
so they are in the page cache. ``--cold`` also drops the page cache (``sync; echo 3 > /proc/sys/vm/drop_caches``,
root only) before every timed pass and says whether that worked. The hot loops are single-threaded (numba
kernels without ``parallel``; no BLAS call; reads in the same thread; the shard writes' thread only waits for the
disk); the header line prints the
cores available, thread variables and load average. ``--repeat N`` measures each size N times and adds a table
of medians (timings on a shared machine are noisy: compare ratios measured in one run).

Throughput is reported as a ratio to the raw read of the same bytes (goal: stats / raw >= 0.5, stats + shards /
raw >= 0.35), and peak RSS should stay flat across sizes (goal <= 1.2x from the smallest to the largest, under
2 GB). Not a test; run with ``nice``. Example: ``nice python benchmarks/coastalbench_ingest.py --sizes 0.5 2 8``.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

VARS = ("zeta", "u", "v", "temp", "salt", "w", "AKs", "Pair", "Tair", "Qair", "rain", "swrad", "lwrad", "Uwind",
        "Vwind")


def _maxrss_mb() -> float:
    """Peak resident memory of this process image (VmHWM; ru_maxrss would include the parent before exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def record_bytes(ny: int, nx: int, n: int) -> int:
    """Bytes of one history record of VARS (float32)."""
    from icml25.studies.coastalbench.roms import field_dims, grid_sizes

    sizes = grid_sizes(ny, nx, n)
    return sum(int(np.prod([sizes[d] for d in field_dims(v)[1:]])) * 4 for v in VARS)


def make_files(directory: Path, total_gb: float, ny: int, nx: int, n: int, per_file: int) -> list[Path]:
    """ROMS history files (uncompressed) holding about ``total_gb`` GB of field data, smooth synthetic values."""
    from icml25.studies.coastalbench.roms import HisWriter, field_dims, grid_sizes
    from icml25.studies.coastalbench.simulator import grid_dict, make_grid

    grid = grid_dict(make_grid(ny, nx), n, vtransform=2, vstretching=4, theta_s=5.0, theta_b=0.4, hc=5.0,
                     tcline=5.0)
    records = max(1, round(total_gb * 1e9 / record_bytes(ny, nx, n)))
    sizes = grid_sizes(ny, nx, n)
    rng = np.random.default_rng(0)
    base = {v: (rng.normal(size=[sizes[d] for d in field_dims(v)[1:]]).astype(np.float32)) for v in VARS}
    paths, k = [], 0
    while k < records:
        path = directory / f"ocean_his_{20080101 + len(paths):08d}.nc"
        with HisWriter(path, grid, VARS, zlib_level=0) as w:
            for _ in range(min(per_file, records - k)):
                w.append(1800.0 * k, {v: base[v] + np.float32(0.01 * k) for v in VARS})
                k += 1
        paths.append(path)
    return paths


def drop_caches() -> bool:
    """Drop the page cache (root only); True if it worked."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def _clock() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter(), r.ru_utime + r.ru_stime


def _since(t0: tuple[float, float]) -> tuple[float, float]:
    t1 = _clock()
    return t1[0] - t0[0], t1[1] - t0[1]


def worker_raw(paths: list[str], cache: str, cold: bool) -> dict:
    import netCDF4

    if cache == "off":
        netCDF4.set_chunk_cache(0)
    dropped = drop_caches() if cold else False
    t0, nbytes = _clock(), 0
    for p in paths:
        with netCDF4.Dataset(p) as nc:
            nc.set_auto_maskandscale(False)
            for v in VARS:
                var = nc[v]
                for k in range(var.shape[0]):
                    nbytes += var[k].nbytes
    wall, cpu = _since(t0)
    return {"seconds": wall, "cpu": cpu, "bytes": nbytes, "maxrss_mb": _maxrss_mb(), "dropped": dropped}


def worker_bytes(paths: list[str], cold: bool) -> dict:
    """The files' bytes read front to back into one reused 64 MiB buffer: the speed of the disk (or page cache)."""
    dropped = drop_caches() if cold else False
    buf = np.empty(64 << 20, np.uint8)
    buf[::4096] = 0  # touch the buffer before timing
    t0, nbytes = _clock(), 0
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            while n := os.readv(fd, [buf]):
                nbytes += n
        finally:
            os.close(fd)
    wall, cpu = _since(t0)
    return {"seconds": wall, "cpu": cpu, "bytes": nbytes, "maxrss_mb": _maxrss_mb(), "dropped": dropped}


def verify(paths: list[str]) -> bool:
    """Every variable of the first and last record of every file, read by RomsRecords, equals netCDF4's values."""
    import netCDF4

    from icml25.studies.coastalbench.records import RomsRecords

    src = RomsRecords(paths, VARS)
    t = 0
    for p, n in zip(paths, src.records_per_file):
        with netCDF4.Dataset(p) as nc:
            nc.set_auto_maskandscale(False)
            for k in sorted({0, n - 1}):
                for v in VARS:
                    got = src.read(v, t + k)
                    if not np.array_equal(got, np.asarray(nc[v][k], np.float32).reshape(got.shape)):
                        return False
        t += n
    src.close()
    return True


def worker_ingest(paths: list[str], out_dir: str, engine: str, cold: bool) -> dict:
    from icml25.studies.coastalbench import kernels
    from icml25.studies.coastalbench.records import RomsRecords
    from icml25.studies.coastalbench.roms import open_roms
    from icml25.studies.coastalbench.stats import normalisation_stats, write_shard

    if engine == "records":  # compile (or load the cached) kernels outside the timing, on a tiny grid
        kernels.warm_up()
    import h5py  # noqa: F401  (library imports outside the timing, as netCDF4's in the raw read)
    import netCDF4  # noqa: F401

    from icml25.studies.coastalbench import shardfile  # noqa: F401  (its imports: concurrent.futures)
    dropped = drop_caches() if cold else False
    t0 = _clock()
    src = RomsRecords(paths, VARS) if engine == "records" else open_roms(paths, {"ocean_time": 1}, variables=VARS)
    stats = normalisation_stats(src, VARS)
    stats_wall, stats_cpu = _since(t0)
    if cold:
        drop_caches()
    t1 = _clock()
    if engine == "records":
        bounds = np.cumsum([0, *src.records_per_file])
        days = [src.select(bounds[i], bounds[i + 1]) for i in range(len(paths))]
    else:
        bounds = np.cumsum([0, *src.attrs["records_per_file"]])
        days = [src.isel(ocean_time=slice(bounds[i], bounds[i + 1])) for i in range(len(paths))]
    for p, day in zip(paths, days):
        write_shard(Path(out_dir) / f"{Path(p).stem}.npy", day, VARS, stats)
    shards_wall, shards_cpu = _since(t1)
    rss = _maxrss_mb()
    direct = engine == "records" and all(src.direct(v) for v in VARS)
    return {"stats_s": stats_wall, "stats_cpu": stats_cpu, "shards_s": shards_wall, "shards_cpu": shards_cpu,
            "maxrss_mb": rss, "dropped": dropped, "backend": kernels.BACKEND if engine == "records" else "dask",
            "direct": direct, "verified": verify(paths) if engine == "records" else None}


def print_table(rows: list[dict]) -> None:
    print("| data (GB) | cache | raw s (GB/s) | raw(def) s | bytes s | stats s | shards s | stats / raw | "
          "stats+shards / raw | stats / raw(def) | stats+shards / raw(def) | stats / bytes | stats+shards / bytes | "
          "stats / raw (cpu) | stats+shards / raw (cpu) | peak RSS (MB) |")
    print("|" + "---|" * 16)
    for r in rows:
        cache = r["cache"] + ("" if r["dropped"] in (None, True) else " (drop refused: warm)")
        print(f"| {r['size_gb']:.2f} | {cache} | {r['raw_s']:.2f} ({r['size_gb'] / r['raw_s']:.2f}) | "
              f"{r['raw_default_s']:.2f} | {r['bytes_s']:.2f} | {r['stats_s']:.2f} | {r['shards_s']:.2f} | "
              f"{r['ratio_stats']:.2f} | {r['ratio_total']:.2f} | {r['ratio_stats_default']:.2f} | "
              f"{r['ratio_total_default']:.2f} | {r['ratio_stats_bytes']:.2f} | {r['ratio_total_bytes']:.2f} | "
              f"{r['ratio_stats_cpu']:.2f} | {r['ratio_total_cpu']:.2f} | {r['peak_rss_mb']:.0f} |")


def median_rows(rows: list[dict]) -> list[dict]:
    """One row per (size, cache): the median of every number over the repeats."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["size_gb"], r["cache"]), []).append(r)
    out = []
    for group in groups.values():
        med = dict(group[0])
        for k, v in group[0].items():
            if isinstance(v, float):
                med[k] = float(np.median([g[k] for g in group]))
        out.append(med)
    return out


def _run_worker(kind: str, payload: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", kind, json.dumps(payload)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=float, nargs="+", default=[0.5, 2.0, 8.0], help="total sizes (GB)")
    p.add_argument("--grid", type=int, nargs=2, default=[598, 898], metavar=("ETA", "XI"), help="rho grid")
    p.add_argument("--levels", type=int, default=12, help="N (s_rho levels)")
    p.add_argument("--per-file", type=int, default=4, help="records per history file")
    p.add_argument("--tmp", default=None, help="parent of the temporary directory (default: system tmp)")
    p.add_argument("--engine", choices=("records", "dataset"), default="records",
                   help="ingestion path: direct RomsRecords (default) or the lazy open_roms dataset")
    p.add_argument("--cold", action="store_true", help="also time every pass after dropping the page cache")
    p.add_argument("--repeat", type=int, default=1, help="measure each size this many times (median table too)")
    p.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        kind, payload = args.worker[0], json.loads(args.worker[1])
        res = (worker_raw(payload["paths"], payload["cache"], payload["cold"]) if kind == "raw" else
               worker_bytes(payload["paths"], payload["cold"]) if kind == "bytes" else
               worker_ingest(payload["paths"], payload["out"], payload["engine"], payload["cold"]))
        print(json.dumps(res))
        return 0
    ny, nx = args.grid
    rows = []
    root = Path(tempfile.mkdtemp(prefix="coastalbench_bench_", dir=args.tmp))
    threads = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    print(f"cores available: {len(os.sched_getaffinity(0))}; hot loops single-threaded (numba kernels without "
          f"parallel, no BLAS; reads in the same thread, O_DIRECT shard writes in one waiting thread); env "
          f"{threads}; engine {args.engine}; load "
          f"{os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    try:
        for size in args.sizes:
            d = root / f"{size:g}GB"
            d.mkdir()
            t0 = time.perf_counter()
            paths = [str(x) for x in make_files(d, size, ny, nx, args.levels, args.per_file)]
            gen_s = time.perf_counter() - t0
            for cold in [c for _ in range(args.repeat) for c in ((False, True) if args.cold else (False,))]:
                raw_default = _run_worker("raw", {"paths": paths, "cache": "default", "cold": cold})
                raw = _run_worker("raw", {"paths": paths, "cache": "off", "cold": cold})
                disk = _run_worker("bytes", {"paths": paths, "cold": cold})
                shards = d / "shards"
                shutil.rmtree(shards, ignore_errors=True)
                shards.mkdir()
                ing = _run_worker("ingest", {"paths": paths, "out": str(shards), "engine": args.engine,
                                             "cold": cold})
                shutil.rmtree(shards)
                gb = raw["bytes"] / 1e9
                rows.append({"size_gb": gb, "files": len(paths), "gen_s": gen_s, "cache": "cold" if cold else "warm",
                             "dropped": bool(raw["dropped"] and ing["dropped"]) if cold else None,
                             "raw_default_s": raw_default["seconds"], "raw_default_cpu": raw_default["cpu"],
                             "raw_s": raw["seconds"], "raw_cpu": raw["cpu"], "raw_gbps": gb / raw["seconds"],
                             "bytes_s": disk["seconds"], "file_gb": disk["bytes"] / 1e9,
                             "ratio_stats_bytes": disk["seconds"] / ing["stats_s"],
                             "ratio_total_bytes": disk["seconds"] / (ing["stats_s"] + ing["shards_s"]),
                             "direct": ing["direct"], "verified": ing["verified"],
                             **{k: ing[k] for k in ("stats_s", "stats_cpu", "shards_s", "shards_cpu", "backend")},
                             "ratio_stats": raw["seconds"] / ing["stats_s"],
                             "ratio_total": raw["seconds"] / (ing["stats_s"] + ing["shards_s"]),
                             "ratio_stats_default": raw_default["seconds"] / ing["stats_s"],
                             "ratio_total_default": raw_default["seconds"] / (ing["stats_s"] + ing["shards_s"]),
                             "ratio_stats_cpu": raw["cpu"] / ing["stats_cpu"],
                             "ratio_total_cpu": raw["cpu"] / (ing["stats_cpu"] + ing["shards_cpu"]),
                             "peak_rss_mb": ing["maxrss_mb"], "raw_rss_mb": raw["maxrss_mb"]})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            shutil.rmtree(d)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("Ratios: reference read seconds / ingestion seconds for the same data (1 = as fast as reading). raw = "
          "netCDF4 record by record with the chunk cache off; raw(def) = with netCDF's default chunk cache; bytes = "
          "the files read front to back into one reused buffer; cpu = user + sys seconds.\n")
    print_table(rows)
    if args.repeat > 1:
        print("\nMedian over the repeats:\n")
        print_table(median_rows(rows))
    warm = [r for r in rows if r["cache"] == "warm"]
    if warm:
        print(f"\npeak RSS largest/smallest (warm): {warm[-1]['peak_rss_mb'] / warm[0]['peak_rss_mb']:.2f}; "
              f"kernels: {rows[0]['backend']}; hot loops single-threaded; every variable read directly: "
              f"{all(r['direct'] for r in rows)}; first/last records equal netCDF4: {all(r['verified'] for r in rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
