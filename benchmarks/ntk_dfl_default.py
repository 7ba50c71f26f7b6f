"""Run the ntk_dfl grid (arms × seeds) in memory via ``experiment.run`` and print metrics and verdicts.

    PYTHONPATH=src python benchmarks/ntk_dfl_default.py --scale default            # the claim arms, seeds 0-2
    PYTHONPATH=src python benchmarks/ntk_dfl_default.py --scale smoke
    PYTHONPATH=src python benchmarks/ntk_dfl_default.py --seeds 100 101 --full     # tuning seeds, all arms

The settings are the study config (``config/studies/ntk_dfl.yaml`` at the scale), as the pipeline
(``snakemake --config 'studies=[ntk_dfl]'``) runs it job by job. Runs are spread over ``--jobs`` worker processes
(one torch thread each). Prints per arm the mean ± sd over seeds
of the final aggregated / mean-client accuracy, rounds to the claim-1 target, bytes per round and t*, then the
five verdicts, the wall time and the peak RSS (largest process).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
import time
from collections import Counter

import numpy as np

from pathlib import Path

from icml25.core.config import build, deep_merge, load_yaml, merge_scale, to_dict
from icml25.studies.ntk_dfl import evaluate as ev
from icml25.studies.ntk_dfl import experiment
from icml25.studies.ntk_dfl.config import ARMS, CLAIM_ARMS, Config

YAML = Path(__file__).resolve().parents[1] / "config" / "studies" / "ntk_dfl.yaml"


def _run(job: tuple) -> dict:
    settings, arm, seed = job
    return experiment.run(settings, arm, seed)


def _check(job: tuple) -> dict:
    settings, seed = job
    return experiment.run_checks(settings, seed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="default", choices=["smoke", "default"])
    ap.add_argument("--seeds", type=int, nargs="+", help="seeds (default: the scale's evaluation seeds)")
    ap.add_argument("--full", action="store_true", help="run the default_full arms (ablations too)")
    ap.add_argument("--arms", nargs="+", help="explicit arm list (overrides --full)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--set", default="{}", help="JSON dict merged into the settings (e.g. tuning on seeds 100+)")
    ap.add_argument("--json", help="write all results to this JSON file")
    args = ap.parse_args(argv)

    settings = to_dict(build(Config, deep_merge(merge_scale(load_yaml(YAML), args.scale), json.loads(args.set))))
    seeds = args.seeds or list(settings["seeds"])
    arms = args.arms or (list(ARMS) if args.full else settings["arms"])
    t0 = time.perf_counter()
    jobs = [(settings, a, s) for a in arms for s in seeds]
    # longest first: the NTK arms dominate
    jobs.sort(key=lambda j: not j[1].startswith("ntk"))
    ctx = mp.get_context("fork")
    with ctx.Pool(args.jobs) as pool:
        outs = pool.map(_run, jobs, chunksize=1)
        checks = pool.map(_check, [(settings, s) for s in seeds])
    wall = time.perf_counter() - t0
    results = {a: sorted([o for o in outs if o["arm"] == a], key=lambda o: seeds.index(o["seed"])) for a in arms}

    ref = results.get("dfedavg")
    print(f"ntk_dfl {args.scale}: arms={arms} seeds={seeds} rounds={settings['rounds']} K={settings['n_clients']}")
    print(f"{'arm':16s} {'agg_acc':>15s} {'client_acc':>15s} {'r_target':>14s} {'MB/round':>9s} {'t*':>18s} "
          f"{'s/run':>6s}")
    for a, rs in results.items():
        agg = np.array([r["final"]["agg_acc"] for r in rs])
        cli = np.array([r["final"]["mean_client_acc"] for r in rs])
        if ref is not None:
            r_t = [ev.rounds_to_target(r["curves"]["agg_acc"], ev.C1_TARGET_FRAC *
                                       f["final"]["agg_acc"]) for r, f in zip(rs, ref)]
        else:
            r_t = []
        mb = np.mean([np.mean(r["curves"]["bytes_sent"]) for r in rs]) / 1e6
        ts = Counter(t for r in rs for row in (r["t_star"] or []) for t in row)
        tstr = ",".join(f"{t}:{n}" for t, n in sorted(ts.items())) or "-"
        sec = np.mean([r["seconds"] for r in rs])
        print(f"{a:16s} {agg.mean():7.3f}±{agg.std(ddof=1) if agg.size > 1 else 0:.3f} "
              f"{cli.mean():7.3f}±{cli.std(ddof=1) if cli.size > 1 else 0:.3f} {str(r_t):>14s} {mb:9.2f} "
              f"{tstr:>18s} {sec:6.1f}")
    if all(a in results for a in ("ntk_dfl", "dfedavg", "dpsgd")):
        records = {a: {r["seed"]: r for r in results[a]} for a in CLAIM_ARMS}
        print("\nverdicts:")
        for c in ev.evaluate_claims(records, checks, settings["bootstrap_resamples"], settings["data"]["source"]):
            print(f"  {c.id:20s} {c.kind:6s} {c.verdict:15s} {json.dumps(c.key_numbers, default=float)}")
    self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"\nwall {wall:.1f} s with {args.jobs} workers; peak RSS: driver {self_rss:.0f} MiB, "
          f"largest worker {child_rss:.0f} MiB")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"settings": settings, "results": {a: [{k: v for k, v in r.items() if k != "weights"}
                                                             for r in rs] for a, rs in results.items()},
                       "checks": checks, "wall_s": wall}, fh, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
