"""Run the morphing_flow grid of one scale in memory (every dataset x arm x seed through ``experiment.run``, the
config from ``config/studies/morphing_flow.yaml``), print the metrics, the claim verdicts, the wall time and the
peak RSS. The pipeline (``snakemake --config studies=[morphing_flow]``) gives the same numbers.

    python benchmarks/morphing_flow_default.py                      # default scale, its evaluation seeds
    python benchmarks/morphing_flow_default.py --scale smoke
    python benchmarks/morphing_flow_default.py --seeds 100 101 102  # tuning seeds (never the evaluation seeds)
    python benchmarks/morphing_flow_default.py --json /tmp/mof.json
"""
from __future__ import annotations

import argparse
import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # before numpy / torch load BLAS
    os.environ.setdefault(_var, "1")

import json  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="default", choices=["smoke", "default"], help="config scale")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="override the seeds")
    parser.add_argument("--arms", nargs="+", default=None, help="restrict to these arms")
    parser.add_argument("--datasets", nargs="+", default=None, help="restrict to these datasets")
    parser.add_argument("--set", nargs="+", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a config key (JSON value), e.g. train.windows_per_epoch=2048")
    parser.add_argument("--json", default=None, help="write metrics and verdicts to this JSON file")
    args = parser.parse_args(argv)

    import torch

    from icml25.core.config import build, load_yaml, merge_scale
    from icml25.studies.morphing_flow import evaluate as E
    from icml25.studies.morphing_flow.config import Config
    from icml25.studies.morphing_flow.experiment import run

    over: dict = {}
    if args.seeds is not None:
        over["seeds"] = list(args.seeds)
    for item in args.set:
        key, value = item.split("=", 1)
        *parents, leaf = key.split(".")
        node = over
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = json.loads(value)
    yaml = Path(__file__).resolve().parents[1] / "config" / "studies" / "morphing_flow.yaml"
    cfg = build(Config, merge_scale(load_yaml(yaml), args.scale, over), "morphing_flow")
    torch.set_num_threads(cfg.train.threads)
    arms = [a for a in cfg.arms if not args.arms or a in args.arms]
    datasets = [d for d in cfg.datasets if not args.datasets or d in args.datasets]

    t0, c0 = time.perf_counter(), time.process_time()
    records = []
    for ds in datasets:
        for arm in arms:
            for seed in cfg.seeds:
                out = run(cfg, arm, seed, ds)
                records.append(out)
                m = out["metrics"]
                print(f"{ds:6s} {arm:17s} seed {seed:3d} {out['seconds']:6.1f}s (cpu {out['cpu_seconds']:5.1f}s)  "
                      f"mse {m['test_mse']:.4f}  mae {m['test_mae']:.4f}  kurt_in {m['kurtosis_in']:7.3f}  "
                      f"epochs {m['epochs_run']} (best {m['best_epoch']})  val {m['val_mse']:.4f}", flush=True)
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print("\ntest MSE, mean ± sd over seeds", list(cfg.seeds))
    for ds in datasets:
        for arm in arms:
            rs = [r for r in records if r["dataset"] == ds and r["arm"] == arm]
            v = np.array([r["metrics"]["test_mse"] for r in rs])
            k = np.array([r["metrics"]["kurtosis_in"] for r in rs])
            print(f"  {ds:6s} {arm:17s} mse {v.mean():.4f} ± {v.std(ddof=1) if len(v) > 1 else 0:.4f}   "
                  f"kurtosis_in {k.mean():7.3f}")
    claims = E.build_claims(records, cfg.eval.n_boot, cfg.eval.boot_seed, cfg.eval.segment_hours)
    print("\nverdicts (test outcome; claims with < 3 seeds are inconclusive by the evidence rule)")
    for c in claims:
        print(f"  {c.id:22s} {c.verdict:15s} {c.key_numbers} {c.note}")
    print(f"\nscale {args.scale}: {len(records)} runs, wall {total:.1f} s, process CPU {cpu:.1f} s, "
          f"peak RSS {rss_mb:.0f} MB")
    if args.json:
        doc = {"scale": args.scale, "seconds": total, "cpu_seconds": cpu, "peak_rss_mb": rss_mb,
               "claims": [{"id": c.id, "verdict": c.verdict, "statistic": c.statistic} for c in claims],
               "metrics": {f"{r['dataset']}/{r['arm']}/seed{r['seed']}": r["metrics"] for r in records},
               "curves": {f"{r['dataset']}/{r['arm']}/seed{r['seed']}": r["curves"] for r in records}}
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
