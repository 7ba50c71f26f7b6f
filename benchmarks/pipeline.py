"""Benchmark the pipeline: run the smoke and default scales in a scratch copy of the project and print, from
Snakemake's benchmark files, wall time and peak RSS per rule, plus the fixed per-job overhead (a no-op stage job:
interpreter start, imports, MLflow store and run) and its share of the pipeline's wall time.

    python benchmarks/pipeline.py                       # smoke + default, all implemented studies
    python benchmarks/pipeline.py --scales smoke --studies cat_iv --cores 2
"""
from __future__ import annotations

import argparse
import csv
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def copy_project(dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    shutil.copy2(ROOT / "Snakefile", dst / "Snakefile")
    for name in ("config", "workflow", "envs", "src"):
        shutil.copytree(ROOT / name, dst / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))


def run_pipeline(work: Path, scale: str, studies: list[str] | None, cores: int) -> float:
    cfg = [f"scale={scale}"] + ([f"studies=[{','.join(studies)}]"] if studies else [])
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(cores), "--config", *cfg], cwd=work,
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"pipeline failed at scale {scale}:\n{out.stderr[-4000:]}")
    return time.perf_counter() - t0


def read_benchmarks(results: Path) -> list[dict]:
    """One row per job under ``results/<scale>``: study, rule (wildcards stripped), seconds, max_rss (MB)."""
    rows = []
    for tsv in sorted(results.glob("**/benchmarks/*.tsv")):
        with open(tsv) as fh:
            rec = next(csv.DictReader(fh, delimiter="\t"))
        study = tsv.parent.parent.name if tsv.parent.parent != results else "summary"
        rule = re.sub(r"_(chunk\d+|s\d+)$", "", tsv.stem)
        rule = re.sub(r"^(train|evaluate)_.*", r"\1", rule)
        rss = rec.get("max_rss", "-")
        rows.append({"study": study, "rule": rule, "s": float(rec["s"]),
                     "max_rss_mb": float(rss) if rss not in ("-", "NA", "") else float("nan")})
    return rows


def noop_overhead(work: Path, slug: str, repeats: int, via_server: bool) -> float:
    """Median wall time of a no-op stage job: interpreter, imports, one tracked MLflow run. ``via_server``: as
    pipeline jobs log (REST to the local server the Snakefile starts); else straight into the SQLite store, as
    a stage run by hand does."""
    import os

    from icml25.core import workflow

    store = f"sqlite:///{(work / 'results' / 'mlflow.db').resolve()}"
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "ICML25_INVOCATION")}
    started = workflow.start_local_server(work / "results", store) if via_server else None
    env["MLFLOW_TRACKING_URI"] = started[0] if started else store
    times = []
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", f"icml25.studies.{slug}", "noop", "--scale", "smoke",
                            "--config", str(work / "config" / "studies" / f"{slug}.yaml"), "--results",
                            str(work / "results")], cwd=work, check=True, capture_output=True, env=env)
            times.append(time.perf_counter() - t0)
    finally:
        if started:
            workflow.stop_local_server(started[1])
    return statistics.median(times)


def print_table(scale: str, wall: float, rows: list[dict], overhead: float, direct: float, cores: int) -> None:
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["study"], r["rule"])].append(r)
    print(f"\n## scale {scale}: pipeline wall {wall:.1f} s, {len(rows)} jobs\n")
    print("| study | rule | jobs | total s | max s | peak RSS MB |")
    print("|---|---|---:|---:|---:|---:|")
    for (study, rule), rs in sorted(groups.items()):
        print(f"| {study} | {rule} | {len(rs)} | {sum(r['s'] for r in rs):.1f} | {max(r['s'] for r in rs):.1f} "
              f"| {max(r['max_rss_mb'] for r in rs):.0f} |")
    total = overhead * len(rows)
    print(f"\nper-job overhead (median no-op job, logging as pipeline jobs do): {overhead:.2f} s "
          f"(straight into SQLite, as a hand-run stage: {direct:.2f} s)")
    print(f"overhead x {len(rows)} jobs = {total:.1f} s = {100 * total / wall:.0f}% of the pipeline wall if the jobs "
          f"ran one after another; {100 * total / (cores * wall):.0f}% of the {cores} cores' time over the wall")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", nargs="+", default=["smoke", "default"], choices=["smoke", "default"])
    parser.add_argument("--studies", nargs="*", default=None, help="slugs (default: all implemented)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5, help="no-op jobs timed for the overhead")
    parser.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "out", help="scratch directory")
    args = parser.parse_args()
    from icml25.studies import STUDIES

    slug = (args.studies or list(STUDIES))[0]
    for scale in args.scales:
        work = args.work / scale
        copy_project(work)
        wall = run_pipeline(work, scale, args.studies, args.cores)
        overhead = noop_overhead(work, slug, args.repeats, via_server=True)
        direct = noop_overhead(work, slug, args.repeats, via_server=False)
        print_table(scale, wall, read_benchmarks(work / "results" / scale), overhead, direct, args.cores)


if __name__ == "__main__":
    main()
