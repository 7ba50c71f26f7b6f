"""Langevin sampler throughput: all chains as one tensor against a Python loop over chains.

    PYTHONPATH=src python benchmarks/kernel_adaptation_sampler.py --chains 8 --steps 3000

Prints chain-steps per second for both (default-scale sizes: D=11, P=20, P*=500, N=50, chi=N; one torch thread).
"""
from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chains", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)

    from icml25.studies.kernel_adaptation.data import make_task
    from icml25.studies.kernel_adaptation.langevin import langevin_sample

    d = make_task("ising", 11, 20, 500, seed=100)
    kw = dict(N=50, chi=50.0, n_steps=args.steps, device=args.device)
    t0 = time.perf_counter()
    langevin_sample(d["X"], d["y"], d["X_test"], n_chains=args.chains, seed=0, **kw)
    vec = time.perf_counter() - t0
    t0 = time.perf_counter()
    for k in range(args.chains):
        langevin_sample(d["X"], d["y"], d["X_test"], n_chains=1, seed=k, **kw)
    loop = time.perf_counter() - t0
    total = args.chains * args.steps
    print(f"{'mode':>12s} {'seconds':>8s} {'chain-steps/s':>14s}")
    print(f"{'vectorised':>12s} {vec:8.2f} {total / vec:14.0f}")
    print(f"{'chain loop':>12s} {loop:8.2f} {total / loop:14.0f}")
    print(f"speed-up {loop / vec:.1f}x ({args.chains} chains x {args.steps} steps, device {args.device})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
