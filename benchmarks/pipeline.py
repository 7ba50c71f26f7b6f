"""Benchmark the pipeline: run the smoke and default scales in a scratch copy of the project and print, from
Snakemake's benchmark files, wall time and peak RSS per rule, plus the fixed per-job overhead (a no-op stage job:
interpreter start, imports, MLflow store and run) and its share of the pipeline's wall time; per study, the jobs'
CPU time split into work (inside the stage functions) and start-up (interpreter, imports, tracking), both from the
`icml25-job-cpu:` line each job logs; and where the machine's CPU went over the run (the jobs, the rest of the
pipeline's process tree: Snakemake, its scheduler, the MLflow server, shells; idle).

Job CPU comes from the job itself (``os.times`` at its end, children included), not from Snakemake's benchmark
``cpu_time``: Snakemake samples the process tree every few seconds (every 30 s after the first minute), so it
misses the CPU of a job's last interval and under-counts jobs of 20 s - 1 min by up to half.

    python benchmarks/pipeline.py                       # smoke + default, all implemented studies
    python benchmarks/pipeline.py --scales smoke --studies cat_iv --cores 2
    python benchmarks/pipeline.py --read results/default   # per-study work vs start-up of a finished run
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import resource
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


def machine_cpu() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine since boot, all cores (``/proc/stat``; busy = user, nice,
    system, irq, softirq, steal; idle = idle + iowait)."""
    with open("/proc/stat") as fh:
        v = [int(x) for x in fh.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(v[0:3]) + sum(v[5:8])) / hz, (v[3] + v[4]) / hz


def run_pipeline(work: Path, scale: str, studies: list[str] | None, cores: int) -> dict[str, float]:
    """Run the pipeline; return its wall (s), the CPU-s of its process tree (Snakemake and every process it
    waited for: jobs, shells, the scheduler's solver, the MLflow server it supervises) and the machine's busy
    and idle CPU-s over the run."""
    cfg = [f"scale={scale}"] + ([f"studies=[{','.join(studies)}]"] if studies else [])
    ru0, (busy0, idle0) = resource.getrusage(resource.RUSAGE_CHILDREN), machine_cpu()
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(cores), "--config", *cfg], cwd=work,
                         capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode:
        sys.exit(f"pipeline failed at scale {scale}:\n{out.stderr[-4000:]}")
    ru1, (busy1, idle1) = resource.getrusage(resource.RUSAGE_CHILDREN), machine_cpu()
    tree = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    return {"wall": wall, "tree_cpu": tree, "machine_busy": busy1 - busy0, "machine_idle": idle1 - idle0}


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
        work, total = job_cpu(tsv.parent.parent / "logs" / f"{tsv.stem}.log")
        rows.append({"study": study, "rule": rule, "s": float(rec["s"]),
                     "max_rss_mb": float(rss) if rss not in ("-", "NA", "") else float("nan"),
                     "cpu_s": total if total == total else _number(rec.get("cpu_time")),
                     "work_cpu_s": work})
    return rows


def _number(text: str | None) -> float:
    try:
        return float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def job_cpu(log: Path) -> tuple[float, float]:
    """(work, total) CPU seconds of a stage job from the ``icml25-job-cpu:`` line it prints last
    (``icml25.core.cli``): work inside the stage function; total = the job process's CPU from interpreter start to
    its end, reaped children included (NaN in logs written before the line carried it). (NaN, NaN) when the log
    has no such line (jobs that are not stage jobs, such as the summary)."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return float("nan"), float("nan")
    from icml25.core.cli import JOB_CPU_MARK

    found = re.findall(rf"{re.escape(JOB_CPU_MARK)} startup=([0-9.]+) work=([0-9.]+)(?: total=([0-9.]+))?", text)
    if not found:
        return float("nan"), float("nan")
    _, work, total = found[-1]
    return float(work), float(total) if total else float("nan")


def study_table(rows: list[dict]) -> list[dict]:
    """Per study: jobs, job CPU seconds, CPU seconds of useful work (inside the stage functions) and start-up (the
    rest: interpreter, imports, tracking set-up and teardown), and start-up's share of the job CPU."""
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


def print_table(scale: str, run: dict[str, float], rows: list[dict], overhead: float, direct: float,
                cores: int) -> None:
    wall = run["wall"]
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
    print_machine(run, rows, cores)
    print_studies(scale, rows)


def print_machine(run: dict[str, float], rows: list[dict], cores: int) -> None:
    """Where the cores' time went over the run: the stage jobs (their own CPU), the rest of the pipeline's process
    tree (Snakemake and its scheduler, shells, non-stage jobs), other processes (the MLflow server runs in its own
    session and is not reaped by Snakemake; on an idle machine nothing else), idle."""
    jobs = sum(r["cpu_s"] for r in rows if r["work_cpu_s"] == r["work_cpu_s"] and r["cpu_s"] == r["cpu_s"])
    slots = cores * run["wall"]
    rest = run["tree_cpu"] - jobs
    other = run["machine_busy"] - run["tree_cpu"]
    print(f"\ncores' time over the wall: {slots:.0f} CPU-s ({cores} x {run['wall']:.0f} s); stage jobs {jobs:.0f} "
          f"({100 * jobs / slots:.0f}%), rest of the pipeline's process tree (Snakemake, its "
          f"scheduler, shells) {rest:.0f} ({100 * rest / slots:.0f}%), other processes (the MLflow server, which "
          f"runs in its own session; anything else on the machine) {other:.0f} "
          f"({100 * other / slots:.0f}%), machine idle {run['machine_idle']:.0f} "
          f"({100 * run['machine_idle'] / slots:.0f}%)")


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
        run = run_pipeline(work, scale, args.studies, args.cores)
        overhead = noop_overhead(work, slug, args.repeats, via_server=True)
        direct = noop_overhead(work, slug, args.repeats, via_server=False)
        print_table(scale, run, read_benchmarks(work / "results" / scale), overhead, direct, args.cores)


if __name__ == "__main__":
    main()
