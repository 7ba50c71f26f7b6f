"""Fast Walsh–Hadamard transform (O(d log d)) against the dense rotation matmul, d = 64 ... 4096.

    PYTHONPATH=src python benchmarks/roste_hadamard.py [--rows 256] [--repeat 5]

Both compute ``x R`` with ``R = H diag(r) / sqrt(d)`` on ``rows`` vectors (float32, one thread); prints the time
of each, the speed-up and the max absolute difference (must be at float tolerance).
"""
from __future__ import annotations

import argparse
import time

import torch

from icml25.studies.roste.method import fwht, hadamard_signs, random_hadamard


def best(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print("| d | dense matmul (ms) | FWHT (ms) | speed-up | max abs diff |")
    print("|---|---|---|---|---|")
    d = 64
    while d <= 4096:
        x = torch.randn(args.rows, d)
        r = random_hadamard(d, 0, torch.float32)
        s = hadamard_signs(d, 0).to(torch.float32)
        t_dense = best(lambda: x @ r, args.repeat)
        def fast() -> torch.Tensor:  # the FWHT path of method.rotate (used above method.DENSE_MAX)
            return fwht(x * s) / d ** 0.5

        t_fast = best(fast, args.repeat)
        diff = float((x @ r - fast()).abs().max())
        assert diff < 1e-4 * max(1.0, float(x.abs().max())), f"d={d}: FWHT and dense disagree by {diff}"
        print(f"| {d} | {t_dense * 1e3:.3f} | {t_fast * 1e3:.3f} | {t_dense / t_fast:.2f} | {diff:.1e} |")
        d *= 2


if __name__ == "__main__":
    main()
