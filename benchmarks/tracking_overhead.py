"""Per-job MLflow logging overhead with and without the issue-40 records (dataset inputs, LoggedModels, source tags,
descriptions), logging as pipeline jobs do: over the stdlib REST client to a local ``mlflow server``.

Two figures per setting (``ICML25_MLFLOW_NATIVE=0``: the logging before issue 40; ``1``: with it):
* a no-op stage job, end to end (interpreter, imports, one run): the fixed per-job overhead of benchmarks/pipeline.py;
* the tracking calls of a train job and of an evaluate job, timed in-process (a train job: two data files as inputs,
  3 seed runs of 100 metric points, a 1 MB model logged; an evaluate job: the model as input, one arm run, a
  claims.json).

    python benchmarks/tracking_overhead.py --repeats 5
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _jobs(results: Path, i: int) -> tuple[float, float]:
    """Seconds spent in the tracking of one train job and one evaluate job (in-process)."""
    import numpy as np

    from icml25.core.tracking import stage_run

    d = results / "smoke" / "bench"
    (d / "processed").mkdir(parents=True, exist_ok=True)
    (d / "models" / "a").mkdir(parents=True, exist_ok=True)
    np.savez(d / "processed" / "data.npz", X=np.random.default_rng(i).normal(size=(2000, 20)))
    (d / "processed" / "t.csv").write_text("a,b\n" + "".join(f"{k},{k * 2}\n" for k in range(2000)))
    model = d / "models" / "a" / f"chunk{i}.bin"
    t0 = time.perf_counter()
    with stage_run("bench", "train", arm="a", scale="smoke", config={"lr": 0.1, "net": {"w": 8}},
                   results_dir=results, inputs=[d / "processed" / "data.npz", d / "processed" / "t.csv"],
                   seeds=[0, 1, 2]) as run:
        for seed in (0, 1, 2):
            with run.seed_run(seed) as srun:
                for step in range(100):
                    srun.log_metric("train/loss", 1.0 / (step + 1), step)
        model.write_bytes(os.urandom(2**20))
        run.log_model(model, {"lr": 0.1})
    train = time.perf_counter() - t0
    claims = d / "claims.json"
    claims.write_text(json.dumps({"study": "bench", "scale": "smoke", "data_source": "offline", "seeds": [0, 1, 2],
                                  "paper": {"title": "Bench", "ref": "-"}, "claims": []}))
    t0 = time.perf_counter()
    with stage_run("bench", "evaluate", scale="smoke", results_dir=results, inputs=[model], outputs=[claims]) as run:
        with run.child(arm="a") as arun:
            arun.log_metrics({"eval/acc": 0.5, "eval/loss": 0.7})
    return train, time.perf_counter() - t0


def _noop(work: Path, env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "icml25.studies.cat_iv", "noop", "--scale", "smoke", "--config",
                    str(ROOT / "config" / "studies" / "cat_iv.yaml"), "--results", str(work / "results")],
                   cwd=ROOT, check=True, capture_output=True, env=env)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from icml25.core import workflow

    work = Path(tempfile.mkdtemp(prefix="icml25-overhead-"))
    store = f"sqlite:///{work / 'results' / 'mlflow.db'}"
    (work / "results").mkdir()
    url, pgid = workflow.start_local_server(work / "results", store)
    os.environ["MLFLOW_TRACKING_URI"] = url
    os.environ.pop("ICML25_INVOCATION", None)
    try:
        noops: dict[str, list[float]] = {"0": [], "1": []}
        jobs: dict[str, list[tuple[float, float]]] = {"0": [], "1": []}
        for i in range(args.repeats + 1):  # the settings interleaved (a shared machine's load drifts); 0: warm-up
            for native in ("0", "1"):
                os.environ["ICML25_MLFLOW_NATIVE"] = native
                noop, job = _noop(work, {**os.environ}), _jobs(work / "results", 2 * i + int(native))
                if i:
                    noops[native].append(noop)
                    jobs[native].append(job)
        rows = [(native, statistics.median(noops[native]), statistics.median(t for t, _ in jobs[native]),
                 statistics.median(e for _, e in jobs[native])) for native in ("0", "1")]
    finally:
        workflow.stop_local_server(pgid)
        shutil.rmtree(work, ignore_errors=True)
    print("| ICML25_MLFLOW_NATIVE | no-op job, end to end (s) | train job's tracking (s) | evaluate job's tracking (s) |")
    print("|---|---:|---:|---:|")
    for native, noop, train, evaluate in rows:
        print(f"| {native} | {noop:.2f} | {train:.3f} | {evaluate:.3f} |")


if __name__ == "__main__":
    main()
