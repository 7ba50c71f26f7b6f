"""Fast O(n 2**n) Möbius transform vs the naive dense (2**n x 2**n) matrix form (O(4**n) per game), for the AND-OR
interactions of the coalition_attribution study. Prints a table: n, median seconds of each (one game), speed-up and
max abs difference of I_and and I_or (gamma = 0 on a N(0, 1) game).

    PYTHONPATH=src python benchmarks/coalition_attribution_transforms.py [--n 8 10 12] [--repeats 5]
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="*", default=[8, 10, 12])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)

    from icml25.studies.coalition_attribution.method import interactions_from_gamma
    from icml25.studies.coalition_attribution.transforms import mobius_matrix_dense

    print(f"{'n':>3s} {'fast [s]':>10s} {'dense [s]':>10s} {'speed-up':>9s} {'max |diff|':>11s}")
    for n in args.n:
        v = np.random.default_rng(n).normal(size=2 ** n)
        g = np.zeros_like(v)
        m = mobius_matrix_dense(n)  # built once, not timed

        def dense():
            return m @ (0.5 * v + g), -(m @ (0.5 * v - g)[::-1])

        fast_t = _median_time(lambda: interactions_from_gamma(v, g), args.repeats)
        dense_t = _median_time(dense, args.repeats)
        fa, fo = interactions_from_gamma(v, g)
        da, do = dense()
        diff = max(np.abs(fa - da).max(), np.abs(fo - do).max())
        print(f"{n:3d} {fast_t:10.2e} {dense_t:10.2e} {dense_t / fast_t:9.1f} {diff:11.1e}", flush=True)
        del m
    return 0


if __name__ == "__main__":
    sys.exit(main())
