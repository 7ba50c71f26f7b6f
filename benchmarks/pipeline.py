"""Benchmark the pipeline: run the smoke and default scales in a scratch copy of the project and print, from
Snakemake's benchmark files, wall time and peak RSS per rule, plus the fixed per-job overhead (a no-op stage job:
interpreter start, imports, MLflow store and run) and its share of the pipeline's wall time; per study, the jobs' CPU time split into work (inside the stage
functions, from the `icml25-job-cpu:` line each job logs) and start-up (interpreter, imports, tracking).

    python benchmarks/pipeline.py                       # smoke + default, all implemented studies
    python benchmarks/pipeline.py --scales smoke --studies cat_iv --cores 2
    python benchmarks/pipeline.py --read results/default   # per-study work vs start-up of a finished run
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
    """One row per job under ``results/<scale>``: study, rule (wildcards stripped), seconds, max_rss (MB), the job's
    CPU seconds (Snakemake's ``cpu_time``) and, from the job's log, the CPU seconds inside the stage function
    (``work``; NaN for jobs that are not stage jobs, such as the summary)."""
    rows = []
    for tsv in sorted(results.glob("**/benchmarks/*.tsv")):
        with open(tsv) as fh:
            rec = next(csv.DictReader(fh, delimiter="\t"))
        study = tsv.parent.parent.name if tsv.parent.parent != results else "summary"
        rule = re.sub(r"_(chunk\d+|s\d+)$", "", tsv.stem)
        rule = re.sub(r"^(train|evaluate)_.*", r"\1", rule)
        rss = rec.get("max_rss", "-")
        rows.append({"study": study, "rule": rule, "s": float(rec["s"]),
                     "max_rss_mb": float(rss) if rss not in ("-", "NA", "") else float("nan"),
                     "cpu_s": _number(rec.get("cpu_time")),
                     "work_cpu_s": job_work_cpu(tsv.parent.parent / "logs" / f"{tsv.stem}.log")})
    return rows


def _number(text: str | None) -> float:
    try:
        return float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def job_work_cpu(log: Path) -> float:
    """CPU seconds the job spent inside its stage function, from the ``icml25-job-cpu:`` line every stage job
    prints (``icml25.core.cli``); NaN when the log has none."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return float("nan")
    from icml25.core.cli import JOB_CPU_MARK

    found = re.findall(rf"{re.escape(JOB_CPU_MARK)} startup=([0-9.]+) work=([0-9.]+)", text)
    return float(found[-1][1]) if found else float("nan")


def study_table(rows: list[dict]) -> list[dict]:
    """Per study: jobs, job CPU seconds, CPU seconds of useful work (inside the stage functions) and start-up (the
    rest: interpreter, imports, tracking, Snakemake's shell), and start-up's share of the job CPU."""
    out = []
    by_study: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        if r["study"] != "summary":
            by_study[r["study"]].append(r)
    for study, rs in sorted(by_study.items()):
        staged = [r for r in rs if r["work_cpu_s"] == r["work_cpu_s"] and r["cpu_s"] == r["cpu_s"]]
        cpu = sum(r["cpu_s"] for r in staged)
        work = sum(min(r["work_cpu_s"], r["cpu_s"]) for r in staged)
        out.append({"study": study, "jobs": len(rs), "cpu_s": cpu, "work_s": work, "startup_s": cpu - work,
                    "share": (cpu - work) / cpu if cpu else float("nan"),
                    "wall_s": sum(r["s"] for r in rs), "max_rss_mb": max(r["max_rss_mb"] for r in rs)})
    return out


def noop_overhead(work: Path, slug: str, repeats: int, via_server: bool) -> float:
    """Median wall time of a no-op stage job: interpreter, imports, one tracked MLflow run. ``via_server``: as
    pipeline jobs log (REST to the local server the Snakefile starts); else straight into the SQLite store, as
    a stage run by hand does."""
    import os

    from icml25.core import workflow

    store = f"sqlite:///{(work / 'results' / 'mlflow.db').resolve()}"
    started = workflow.start_local_server(work / "results", store) if via_server else None
    # after the server start: it exports the bearer token (MLFLOW_TRACKING_TOKEN) the jobs need
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "ICML25_INVOCATION")}
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
    print_studies(scale, rows)


def print_studies(scale: str, rows: list[dict]) -> None:
    studies = study_table(rows)
    print(f"\n## scale {scale}: per study, job CPU split into work (inside the stage functions) and start-up\n")
    print("| study | jobs | job CPU s | work CPU s | start-up CPU s | start-up share | job wall s | peak RSS MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in studies:
        print(f"| {r['study']} | {r['jobs']} | {r['cpu_s']:.1f} | {r['work_s']:.1f} | {r['startup_s']:.1f} "
              f"| {100 * r['share']:.0f}% | {r['wall_s']:.1f} | {r['max_rss_mb']:.0f} |")
    cpu = sum(r["cpu_s"] for r in studies)
    start = sum(r["startup_s"] for r in studies)
    print(f"| **all** | {sum(r['jobs'] for r in studies)} | {cpu:.1f} | {cpu - start:.1f} | {start:.1f} "
          f"| {100 * start / cpu if cpu else float('nan'):.0f}% | | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scales", nargs="+", default=["smoke", "default"], choices=["smoke", "default"])
    parser.add_argument("--studies", nargs="*", default=None, help="slugs (default: all implemented)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5, help="no-op jobs timed for the overhead")
    parser.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "out", help="scratch directory")
    parser.add_argument("--read", type=Path, default=None, metavar="RESULTS/SCALE",
                        help="only print the per-study table of an existing run (e.g. results/default); runs nothing")
    args = parser.parse_args()
    if args.read:
        rows = read_benchmarks(args.read)
        print_studies(args.read.name, rows)
        return
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
