"""Run the fedecado grid of one scale in memory (every arm × seed through ``experiment.run``, the study config of
``config/studies/fedecado.yaml``), print the metrics and the three verdicts, the wall time and the peak RSS. The
pipeline (``snakemake --config 'studies=[fedecado]'``) computes the same numbers job by job.

    python benchmarks/fedecado_default.py                       # default scale, its evaluation seeds
    python benchmarks/fedecado_default.py --scale smoke
    python benchmarks/fedecado_default.py --seeds 100 101 102   # tuning seeds (never the evaluation seeds)
    python benchmarks/fedecado_default.py --json /tmp/fedecado.json

``--seeds`` replaces the seeds of both parts (quadratic claims 1–2 and MNIST claim 3).
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

import numpy as np  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="default", choices=["smoke", "default"], help="settings scale")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="override the seeds of both parts")
    parser.add_argument("--arms", nargs="+", default=None, help="restrict to these arms")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--json", default=None, help="write metrics and verdicts to this JSON file")
    args = parser.parse_args(argv)

    import torch

    from pathlib import Path

    from icml25.core.config import build, load_yaml, merge_scale, to_dict
    from icml25.studies.fedecado import evaluate as E
    from icml25.studies.fedecado.config import IMAGE_ARMS, QUAD_ARMS, Config
    from icml25.studies.fedecado.experiment import run

    torch.set_num_threads(args.threads)
    yaml = Path(__file__).resolve().parents[1] / "config" / "studies" / "fedecado.yaml"
    st = to_dict(build(Config, merge_scale(load_yaml(yaml), args.scale)))
    if args.seeds is not None:
        st["seeds"] = st["image"]["seeds"] = list(args.seeds)
    st["quad"]["seeds"] = st["seeds"]
    st["image"]["arms"] = [a for a in st["arms"] if a in IMAGE_ARMS]
    grid = [(a, s) for a in QUAD_ARMS if a in st["arms"] for s in st["quad"]["seeds"]]
    grid += [(a, s) for a in st["image"]["arms"] for s in st["image"]["seeds"]]
    if args.arms:
        grid = [(a, s) for a, s in grid if a in args.arms]

    t0 = time.perf_counter()
    res: dict[tuple[str, int], dict] = {}
    for arm, seed in grid:
        out = run(st, arm, seed)
        res[(arm, seed)] = out
        shown = {k: (f"{v:.3g}" if isinstance(v, float) else v) for k, v in out["metrics"].items()}
        print(f"{arm:16s} seed {seed:3d}  {out['seconds']:6.2f}s  {shown}", flush=True)
    total = time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def col(arm: str, key: str, seeds: list[int]) -> np.ndarray:
        return np.array([res[(arm, s)]["metrics"][key] for s in seeds])

    verdicts: dict[str, dict] = {}
    qs, ims = st["quad"]["seeds"], st["image"]["seeds"]
    if all((a, s) in res for a in QUAD_ARMS for s in qs):
        holds, stat = E.check_objective_inconsistency(
            col("quad_fedavg", "iter_vs_closed_form", qs), col("quad_fednova", "iter_vs_closed_form", qs),
            col("quad_fedavg", "bias_rel", qs), col("quad_fedavg", "bias_ratio_half_eta", qs),
            col("quad_fednova", "bias_ratio_half_eta", qs))
        verdicts["c1_objective_inconsistency"] = {"holds": holds, **stat}
        rep, nrep, stat = E.verdict_fedecado_reaches_optimum(
            col("quad_fedecado", "rel_err_full", qs), col("quad_fedecado", "rel_err_partial", qs),
            col("quad_fedecado", "kcl_max", qs))
        verdicts["c2_fedecado_reaches_optimum"] = {"reproduced": rep, "not_reproduced": nrep, **stat}
    if all((a, s) in res for a in ("fedecado", "fedavg") for s in ims):
        others = {a: col(a, "test_acc", ims) for a in st["image"]["arms"]
                  if a not in ("fedecado", "fedavg") and all((a, s) in res for s in ims)}
        rep, nrep, stat = E.verdict_accuracy(col("fedecado", "test_acc", ims), col("fedavg", "test_acc", ims), others)
        verdicts["c3_accuracy"] = {"reproduced": rep, "not_reproduced": nrep, **stat}

    print("\nfinal test accuracy (%), mean ± sd over seeds", ims)
    for arm in st["image"]["arms"]:
        if all((arm, s) in res for s in ims):
            acc = 100 * col(arm, "test_acc", ims)
            print(f"  {arm:16s} {acc.mean():6.2f} ± {acc.std(ddof=1) if len(acc) > 1 else 0:5.2f}   "
                  f"per seed {np.round(acc, 2).tolist()}")
    print("\nverdicts")
    for name, v in verdicts.items():
        if "holds" in v and "reproduced" not in v:
            word = "holds" if v["holds"] else "FAILS"
        else:
            word = "reproduced" if v["reproduced"] else ("not reproduced" if v["not_reproduced"] else "inconclusive")
        brief = {k: v[k] for k in v if k in ("max_iter_diff", "min_bias_fedavg", "ratio_fedavg_range",
                                               "ratio_fednova_range", "max_rel_err_full", "max_rel_err_partial",
                                               "max_kcl", "mean_diff_pt", "diff_pt", "n_positive")}
        print(f"  {name:30s} {word:15s} {brief}")
        if name == "c3_accuracy":
            for other, o in v["vs_others"].items():
                print(f"      vs {other:16s} mean diff {o['mean_diff_pt']:+.2f} pt  on par: {o['on_par']}")
    print(f"\nscale {args.scale}: {len(grid)} runs, wall {total:.1f} s, peak RSS {rss_mb:.0f} MB")
    if args.json:
        doc = {"scale": args.scale, "seconds": total, "peak_rss_mb": rss_mb, "verdicts": verdicts,
               "metrics": {f"{a}/seed{s}": r["metrics"] for (a, s), r in res.items()}}
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
