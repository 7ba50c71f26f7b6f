"""Step-halving sweep of the Langevin sampler (issue 33): the bias of the unadjusted step, on tuning seeds only.

    PYTHONPATH=src python benchmarks/kernel_adaptation_step.py --seeds 100 101 102 --lrs 5e-3 2.5e-3 1.25e-3 6.25e-4

For each (task, seed) pair at default sizes (D=11, P=20, P*=500, N=50) and chi = N, runs the ensemble at every step
with the same integrated time (``--time``, n_steps = time/lr), the same noise seed and 8 chains, and prints per step
|eps_L(lr) - eps_L(smallest lr)| / eps_L(smallest lr) and the CPU seconds, plus lr x curvature_estimate. The rule
(fixed before the sweep): the default step is the largest whose step-halving change is <= the sampler gate's
tolerance ``adequacy.sampler_step_rel_tol`` (1 %) on every pair. Tuning seeds only (100-106); never the
evaluation seeds of config/studies/kernel_adaptation.yaml. Results: tuning/kernel_adaptation.jsonl.
"""
from __future__ import annotations

import argparse
import json
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[100, 101, 102])
    ap.add_argument("--lrs", type=float, nargs="+", default=[5e-3, 2.5e-3, 1.25e-3, 6.25e-4])
    ap.add_argument("--time", type=float, default=50.0, help="integrated time lr x n_steps")
    args = ap.parse_args(argv)

    from icml25.studies.kernel_adaptation.data import make_task
    from icml25.studies.kernel_adaptation.langevin import curvature_estimate, langevin_sample
    from icml25.studies.kernel_adaptation.method import discrepancy

    lrs = sorted(args.lrs, reverse=True)
    rows = []
    for task in ("ising", "teacher"):
        for seed in args.seeds:
            d = make_task(task, 11, 20, 500, seed)
            eps, cpu = [], []
            for lr in lrs:
                t0 = time.process_time()
                r = langevin_sample(d["X"], d["y"], d["X_test"], 50, 50.0, lr=lr, n_steps=int(round(args.time / lr)),
                                    n_chains=8, seed=1000 * seed + 7, max_step_curvature=None)
                cpu.append(time.process_time() - t0)
                eps.append(discrepancy(d["y_test"], r["f_test"]))
            lam = curvature_estimate(d["X"])
            row = {"task": task, "seed": seed, "curvature_estimate": lam,
                   "per_lr": [{"lr": lr, "lr_x_curvature": lr * lam, "eps_L": e, "rel_to_smallest": abs(e - eps[-1])
                               / eps[-1], "rel_halving": (abs(e - eps[k + 1]) / eps[k + 1] if k + 1 < len(lrs)
                                                          else None), "cpu_s": c}
                              for k, (lr, e, c) in enumerate(zip(lrs, eps, cpu))]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    worst = {lr: max(r["per_lr"][k]["rel_halving"] or 0.0 for r in rows) for k, lr in enumerate(lrs[:-1])}
    print(json.dumps({"max_rel_halving_over_pairs": worst}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
