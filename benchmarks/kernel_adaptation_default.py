"""Run the kernel_adaptation grid (every arm × task × seed) in memory and print metrics, verdicts, time and RSS.

    PYTHONPATH=src python benchmarks/kernel_adaptation_default.py --scale default
    PYTHONPATH=src python benchmarks/kernel_adaptation_default.py --scale smoke --json /tmp/ka.json

Tune only on seeds that are not evaluation seeds (e.g. ``--seeds 100 101``).
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import numpy as np


def _fmt(x: float | None) -> str:
    return "   n/a " if x is None else f"{x:+.4f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="default", choices=("smoke", "default", "paper"))
    ap.add_argument("--seeds", type=int, nargs="*", help="override the scale's seeds")
    ap.add_argument("--tasks", nargs="*", help="override the scale's tasks")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    ap.add_argument("--json", help="write per-pair summaries and verdicts to this file")
    args = ap.parse_args(argv)

    import torch

    from icml25.core.claims import verdict
    from icml25.studies.kernel_adaptation import evaluate as E
    from icml25.studies.kernel_adaptation import experiment as X
    from pathlib import Path

    from icml25.core.config import build, load_yaml, merge_scale, to_dict
    from icml25.studies.kernel_adaptation.config import Config

    def get(scale: str) -> dict:
        yaml_path = Path(__file__).resolve().parents[1] / "config" / "studies" / "kernel_adaptation.yaml"
        return X.settings_from_config(to_dict(build(Config, merge_scale(load_yaml(yaml_path), scale))))

    torch.set_num_threads(args.threads)
    settings = get(args.scale)
    if args.seeds:
        settings["seeds"] = args.seeds
    if args.tasks:
        settings["tasks"] = args.tasks
    t0 = time.perf_counter()
    summaries, arm_time = [], {a: 0.0 for a in X.ARMS}
    for task in settings["tasks"]:
        for seed in settings["seeds"]:
            res: dict = {}
            for arm in ("adaptive_tree", "langevin", "nngp", "rescaling", "rescaling_langevin"):
                res[arm] = X.run(settings, arm, task, seed, upstream=res)
                arm_time[arm] += res[arm]["runtime_s"]
            s = E.pair_summary(res, settings["chi_exponents"], settings["g_w"])
            s.update(task=task, seed=seed)
            summaries.append(s)
            print(f"[{time.perf_counter() - t0:6.1f}s] {task} s{seed}: d_N={s['d_N']:+.4f} "
                  f"rho_L={s['rho_L']:.2f} r_L(N)={s['r_L_N']:.2f} rho_AD={s['rho_AD']:.2f} "
                  f"r_AD(N)={s['r_AD_N']:.2f}", flush=True)
    elapsed = time.perf_counter() - t0
    ev = E.evaluate_pairs(summaries, n_resamples=settings["bootstrap_resamples"])

    chis = summaries[0]["chi"]
    print(f"\nscale={args.scale} tasks={settings['tasks']} seeds={settings['seeds']} chi grid={np.round(chis, 3)}")
    print("test discrepancy eps (mean over pairs) per chi:")
    for arm in X.ARMS:
        row = np.mean([s["eps_test"][arm] for s in summaries], axis=0)
        print(f"  {arm:>20s} " + " ".join(f"{v:.4f}" for v in row))
    print("spike ratio r_label (mean over pairs) per chi:")
    for arm in ("adaptive_tree", "langevin"):
        row = np.mean([s["r_label"][arm] for s in summaries], axis=0)
        print(f"  {arm:>20s} " + " ".join(f"{v:.3f}" for v in row))
    print("\nper pair:  task seed  d_N  d_N34  rho_L r_L(N) rho_AD r_AD(N) rescale_err resc_L_rel min_eig "
          "prior_diag prior_off")
    for s in summaries:
        print(f"  {s['task']:>8s} {s['seed']:3d} {s['d_N']:+.4f} {_fmt(s['d_N34'])} {s['rho_L']:.2f} "
              f"{s['r_L_N']:.3f} {s['rho_AD']:.2f} {s['r_AD_N']:.3f} {s['rescale_err_max']:.2e} "
              f"{s['rescale_langevin_rel_max']:.4f} {s['min_eig_min']:.4f} {s['prior_diag_rel_dev']:.4f} "
              f"{s['prior_offdiag_rel']:.4f}")
    print("\nverdicts:")
    for key in ("claim1", "claim2", "claim3b"):
        c = ev[key]
        print(f"  {key}: {verdict(c['reproduced'], c['not_reproduced'])}  {c['statistic']}")
    for key in ("check3a", "check4"):
        c = ev[key]
        print(f"  {key}: {'holds' if c['holds'] else 'FAILS'}  {c['statistic']}")
    print(f"  diagnostics: {ev['diagnostics']}")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\ntime {elapsed:.1f} s (arms: " + ", ".join(f"{a} {t:.1f} s" for a, t in arm_time.items())
          + f"); peak RSS {peak_mib:.0f} MiB; torch threads {args.threads}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"settings": settings, "summaries": summaries, "evaluation": ev, "time_s": elapsed,
                       "peak_rss_mib": peak_mib}, fh, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
