"""Benchmark: coastalbench ingestion (``normalisation_stats`` + shard writing) against a raw sequential read.

Writes ROMS history files of growing total size (default 0.5, 2 and 8 GB) on the real CoastalBench grid
(eta_rho x xi_rho = 598 x 898, N = 12, float32, uncompressed like the real ~8.5 GB/day files) under a temporary
directory that is deleted afterwards, then measures in fresh processes (so peak RSS is per size):

* raw read: every field variable, record by record, with plain ``netCDF4`` (no decoding);
* ingestion: ``open_roms`` (lazy, ocean_time chunks of 1) -> ``normalisation_stats`` -> one shard per file.

Throughput is reported as a ratio to the raw read of the same bytes (goal >= 0.5), and peak RSS should stay
flat across sizes (goal <= 1.2x from the smallest to the largest, well under 2 GB). Not a test; run with
``nice``. Example: ``nice python benchmarks/coastalbench_ingest.py --sizes 0.5 2 8``.
"""
from __future__ import annotations

import argparse
import json
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


def worker_raw(paths: list[str]) -> dict:
    import netCDF4

    t0, nbytes = time.perf_counter(), 0
    for p in paths:
        with netCDF4.Dataset(p) as nc:
            nc.set_auto_maskandscale(False)
            for v in VARS:
                var = nc[v]
                for k in range(var.shape[0]):
                    nbytes += var[k].nbytes
    return {"seconds": time.perf_counter() - t0, "bytes": nbytes, "maxrss_mb": _maxrss_mb()}


def worker_ingest(paths: list[str], out_dir: str) -> dict:
    from icml25.studies.coastalbench.roms import open_roms
    from icml25.studies.coastalbench.stats import normalisation_stats, write_shard

    t0 = time.perf_counter()
    ds = open_roms(paths, {"ocean_time": 1}, variables=VARS)
    stats = normalisation_stats(ds, VARS)
    t1 = time.perf_counter()
    bounds = np.cumsum([0, *ds.attrs["records_per_file"]])
    for i, p in enumerate(paths):
        write_shard(Path(out_dir) / f"{Path(p).stem}.npy", ds.isel(ocean_time=slice(bounds[i], bounds[i + 1])),
                    VARS, stats)
    t2 = time.perf_counter()
    return {"stats_s": t1 - t0, "shards_s": t2 - t1, "maxrss_mb": _maxrss_mb()}


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
    p.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        kind, payload = args.worker[0], json.loads(args.worker[1])
        res = worker_raw(payload["paths"]) if kind == "raw" else worker_ingest(payload["paths"], payload["out"])
        print(json.dumps(res))
        return 0
    ny, nx = args.grid
    rows = []
    root = Path(tempfile.mkdtemp(prefix="coastalbench_bench_", dir=args.tmp))
    try:
        for size in args.sizes:
            d = root / f"{size:g}GB"
            d.mkdir()
            t0 = time.perf_counter()
            paths = [str(x) for x in make_files(d, size, ny, nx, args.levels, args.per_file)]
            gen_s = time.perf_counter() - t0
            raw = _run_worker("raw", {"paths": paths})
            shards = d / "shards"
            shards.mkdir()
            ing = _run_worker("ingest", {"paths": paths, "out": str(shards)})
            gb = raw["bytes"] / 1e9
            rows.append({"size_gb": gb, "files": len(paths), "gen_s": gen_s, "raw_s": raw["seconds"],
                         "raw_gbps": gb / raw["seconds"], "stats_s": ing["stats_s"], "shards_s": ing["shards_s"],
                         "ratio_stats": raw["seconds"] / ing["stats_s"],
                         "ratio_total": raw["seconds"] / (ing["stats_s"] + ing["shards_s"]),
                         "peak_rss_mb": ing["maxrss_mb"], "raw_rss_mb": raw["maxrss_mb"]})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            shutil.rmtree(d)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("| data (GB) | files | raw read (s, GB/s) | stats (s) | shards (s) | stats / raw | stats+shards / raw "
          "| peak RSS (MB) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['size_gb']:.2f} | {r['files']} | {r['raw_s']:.1f} ({r['raw_gbps']:.2f}) | {r['stats_s']:.1f} | "
              f"{r['shards_s']:.1f} | {r['ratio_stats']:.2f} | {r['ratio_total']:.2f} | {r['peak_rss_mb']:.0f} |")
    if len(rows) > 1:
        print(f"\npeak RSS largest/smallest: {rows[-1]['peak_rss_mb'] / rows[0]['peak_rss_mb']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
