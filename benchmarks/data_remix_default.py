"""Run the data_remix grid (arms × seeds, every dataset of the scale) in memory and print metrics and verdicts.

    python benchmarks/data_remix_default.py                        # default scale, seeds 0 1 2, 2 workers
    python benchmarks/data_remix_default.py --scale smoke
    python benchmarks/data_remix_default.py --seeds 100 101 102    # tuning seeds (never the evaluation seeds)

Each arm × seed runs :func:`icml25.studies.data_remix.experiment.run` in a worker process with one torch thread,
with the config of ``config/studies/data_remix.yaml`` (the pipeline, ``snakemake --config 'studies=[data_remix]'``,
computes the same numbers and writes ``claims.json``).
Prints per arm and dataset the seed mean ± sd of final test accuracies (fused, audio head, visual head) and of the
linear probes of both encoders, then the verdicts of claims 1, 3, 4 and check 2, the wall time and the peak RSS
(largest single process, parent or worker).
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from icml25.core.config import build, load_yaml, merge_scale  # noqa: E402
from icml25.studies.data_remix.config import Config  # noqa: E402
from icml25.studies.data_remix.evaluate import verdicts_from_runs  # noqa: E402

YAML = Path(__file__).resolve().parents[1] / "config" / "studies" / "data_remix.yaml"
SCALES = ("smoke", "default")


def get_settings(scale: str) -> dict:
    """The plain dict of the validated config of ``scale`` (the pipeline's config)."""
    return build(Config, merge_scale(load_yaml(YAML), scale), "data_remix").model_dump(mode="json")

METRICS = ("fused_acc", "head_a_acc", "head_v_acc", "probe_a", "probe_v")


def _job(args):
    from icml25.studies.data_remix.experiment import run

    settings, arm, seed = args
    out = run(settings, arm, seed)
    for res in out["datasets"].values():  # arrays are not needed by the parent beyond the verdicts
        res["assign"] = None if res["assign"] is None else int(res["assign"].sum())
    return out


def verdict_word(reproduced: bool, not_reproduced: bool) -> str:
    return "reproduced" if reproduced and not not_reproduced else "not reproduced" if not_reproduced \
        else "inconclusive"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="default", choices=SCALES)
    parser.add_argument("--seeds", type=int, nargs="+", help="seeds (default: the scale's evaluation seeds)")
    parser.add_argument("--arms", nargs="+", help="arms (default: the scale's arms)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (one torch thread each)")
    parser.add_argument("--json", type=Path, help="also write the final metrics and verdicts here")
    args = parser.parse_args(argv)
    settings = get_settings(args.scale)
    seeds = args.seeds or settings["seeds"]
    arms = args.arms or settings["arms"]
    t0 = time.perf_counter()
    jobs = [(settings, arm, seed) for arm in arms for seed in seeds]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        runs = list(pool.map(_job, jobs))
    wall = time.perf_counter() - t0

    print(f"scale={args.scale} seeds={seeds} arms={arms} runs={len(runs)}")
    print(f"{'arm':<14}{'dataset':<8}" + "".join(f"{m:>16}" for m in METRICS) + f"{'run_s':>8}")
    for arm in arms:
        rs = [r for r in runs if r["arm"] == arm]
        for ds in rs[0]["datasets"]:
            vals = {m: np.array([r["datasets"][ds]["final"][m] for r in rs]) * 100 for m in METRICS}
            cells = "".join(f"{v.mean():>9.2f} ± {v.std(ddof=1) if v.size > 1 else 0:4.2f}" for v in vals.values())
            print(f"{arm:<14}{ds:<8}{cells}{np.mean([r['time_s'] for r in rs]):>8.1f}")
    for arm in ("remix", "remix_code_lr"):
        for r in (r for r in runs if r["arm"] == arm):
            for ds, res in r["datasets"].items():
                f = res["final"]
                if not np.isnan(f["route_a_given_acorrupt"]):
                    print(f"routing {arm} {ds} seed {r['seed']}: a-corrupt→D_a {f['route_a_given_acorrupt']:.3f}, "
                          f"v-corrupt→D_v {f['route_v_given_vcorrupt']:.3f}, |D_a| at last pass {res['assign']}")
    out = {}
    if {"remix", "joint"} <= set(arms):
        present = [a for a in ("remix", "remix_code_lr") if a in arms]
        v = verdicts_from_runs(runs, check_arms=present, warmup=int(settings["train"]["warmup"]),
                               n_resamples=int(settings["bootstrap_resamples"]))
        for name, res in v.items():
            if name.startswith("check"):
                holds, stat = res
                word = "holds" if holds else "FAILS"
            else:
                rep, notrep, stat = res
                word = verdict_word(rep, notrep)
            print(f"{name:<18} {word:<15} {json.dumps(stat, default=float)}")
            out[name] = {"verdict": word, "statistic": stat}
    rss_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rss_kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"wall {wall:.1f} s with {args.workers} workers; peak RSS parent {rss_self:.0f} MiB, "
          f"largest worker {rss_kids:.0f} MiB")
    if args.json:
        finals = [{"arm": r["arm"], "seed": r["seed"], "time_s": r["time_s"],
                   **{ds: res["final"] for ds, res in r["datasets"].items()}} for r in runs]
        args.json.write_text(json.dumps({"wall_s": wall, "verdicts": out, "runs": finals}, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
