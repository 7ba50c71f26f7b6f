"""Trials per second of the adaptive_adversary simulation: the vectorised path (``train.simulate``: the trials of
a cell as numpy arrays of counts) against the per-trial reference (``train.simulate_reference``: materialised
samples, one Python call chain per trial), on one cell per sample size m.

    PYTHONPATH=src python benchmarks/adaptive_adversary_trials.py                  # m = 1e2, 1e3, 1e4, 1e5
    PYTHONPATH=src python benchmarks/adaptive_adversary_trials.py --m 100 100000 --arms adaptive --trials 10000

Rates are trials per CPU second of this process (``time.process_time``, single-threaded numpy), the best of
``--repeat`` runs; the reference runs ``--ref-trials`` trials, capped at ``--ref-seconds`` CPU seconds per row
(its rate is per trial, so fewer trials measure it as well). Each row also runs the robust learner's closed-form
check on the vectorised trials (|z| against ½[F(B)² − F(B)F(0) + F(0)] for ``adaptive``) so a fast but wrong path
shows. Finally the paper-scale train cost per job (one adversary × seed over the paper grid) is extrapolated from
the measured vectorised rate.
"""
from __future__ import annotations

import argparse
import math
import sys
import time


def _rate(fn, n_trials: int, repeat: int) -> tuple[float, object]:
    best, out = math.inf, None
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return n_trials / best if best > 0 else math.inf, out


def _reference_rate(arm: str, c: float, eta: float, m: int, trials: int, max_seconds: float) -> tuple[float, int]:
    """Per-trial reference: run trials one by one until ``trials`` or ``max_seconds`` of CPU."""
    from icml25.studies.adaptive_adversary.method import budget
    from icml25.studies.adaptive_adversary.train import simulate_trial

    b = budget(eta, m)
    t0, n = time.process_time(), 0
    while n < trials and (n < 3 or time.process_time() - t0 < max_seconds):
        simulate_trial(arm, c, eta, m, b, 0, n, eta / c)
        n += 1
    return n / (time.process_time() - t0), n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--m", type=int, nargs="+", default=[100, 1000, 10_000, 100_000], help="sample sizes")
    parser.add_argument("--arms", nargs="+", default=["adaptive", "obl_decoy"], help="adversaries")
    parser.add_argument("--c", type=float, default=0.1, help="code mass c")
    parser.add_argument("--eta-over-c", type=float, default=1.5, help="budget eta as a multiple of c")
    parser.add_argument("--trials", type=int, default=10_000, help="vectorised trials per cell (paper: 10^4)")
    parser.add_argument("--ref-trials", type=int, default=2000, help="reference trials per row (at most)")
    parser.add_argument("--ref-seconds", type=float, default=3.0, help="CPU seconds per reference row (at most)")
    parser.add_argument("--repeat", type=int, default=3, help="vectorised runs per row (best taken)")
    args = parser.parse_args(argv)

    from icml25.studies.adaptive_adversary.method import budget, robust_failure_rate
    from icml25.studies.adaptive_adversary.train import simulate

    c, eta = args.c, round(args.eta_over_c * args.c, 12)
    print(f"c = {c}, eta = {eta} ({args.eta_over_c:g}c); vectorised: {args.trials} trials per cell, best of "
          f"{args.repeat}; rates in trials per CPU second")
    print(f"| arm | m | vectorised trials/s | reference trials/s (n) | speed-up | robust fail (closed form, |z|) |")
    print("|---|---:|---:|---:|---:|---|")
    vec_rates = []
    for arm in args.arms:
        for m in args.m:
            settings = {"c": [c], "eta_over_c": [args.eta_over_c], "eta_max": 0.99, "m": [m],
                        "trials": args.trials}
            vec, df = _rate(lambda: simulate(settings, arm, 0), args.trials, args.repeat)
            vec_rates.append(vec)
            ref, n_ref = _reference_rate(arm, c, eta, m, args.ref_trials, args.ref_seconds)
            fail = float(df["robust_fail"].mean())
            check = f"{fail:.4f}"
            if arm == "adaptive":
                p = robust_failure_rate(m, c, budget(eta, m))
                se = math.sqrt(p * (1 - p) / len(df))
                check += f" ({p:.4f}, {abs(fail - p) / se if se > 0 else 0.0:.2f})"
            print(f"| {arm} | {m:,} | {vec:,.0f} | {ref:,.0f} ({n_ref}) | {vec / ref:,.0f}x | {check} |")
    # paper grid: c in {0.05, 0.1, 0.2}, eta/c on a 0.05 grid to 3 with eta <= 0.3, 6 sample sizes, 10^4 trials
    cells = sum(1 for cc in (0.05, 0.1, 0.2) for k in range(61) if round(0.05 * k * cc, 12) <= 0.3) * 6
    trials = cells * 10_000
    slowest = min(vec_rates)
    print(f"paper scale, one train job (one adversary x seed): {cells} cells x 10^4 = {trials:,} trials; at the "
          f"slowest measured vectorised rate {slowest:,.0f} trials/s: {trials / slowest / 60:.1f} CPU-minutes of "
          f"simulation (plus the parquet write and the per-cell summaries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
