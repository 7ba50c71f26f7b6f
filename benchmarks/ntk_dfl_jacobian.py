"""Benchmark ``empirical_ntk`` (torch.func vmap(jacrev), chunked) against a per-sample, per-output autograd loop.

    PYTHONPATH=src python benchmarks/ntk_dfl_jacobian.py                    # default model 32-32-10, N = 400
    PYTHONPATH=src python benchmarks/ntk_dfl_jacobian.py --n 200 --hidden 100 --in-dim 784

Each variant runs in a fresh process (so the peak RSS is its own); prints samples/s of the Jacobian, the time of
H = J̃J̃ᵀ/C, peak RSS, and checks that both Jacobians agree. One torch thread.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
import time


def _job(args: tuple) -> dict:
    variant, n, in_dim, hidden, chunk, reps = args
    import torch
    torch.set_num_threads(1)
    from icml25.studies.ntk_dfl.method import empirical_ntk
    from icml25.studies.ntk_dfl.model import mlp
    torch.manual_seed(0)
    model = mlp(in_dim, hidden, 10)
    x = torch.randn(n, in_dim)
    params = list(model.parameters())
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    best, J = float("inf"), None
    for _ in range(reps):
        t0 = time.perf_counter()
        if variant == "vmap_jacrev":
            J, _ = empirical_ntk(model, x, chunk)
        else:
            rows = []
            for i in range(n):
                out = model(x[i:i + 1])[0]
                rows.append(torch.stack([torch.cat([g.reshape(-1) for g in torch.autograd.grad(
                    out[c], params, retain_graph=True)]) for c in range(out.shape[0])]))
            J = torch.stack(rows)
        best = min(best, time.perf_counter() - t0)
    Jt = J.reshape(n, -1)
    t0 = time.perf_counter()
    _ = Jt @ Jt.T / J.shape[1]
    t_h = time.perf_counter() - t0
    return {"variant": variant, "seconds": best, "samples_per_s": n / best, "gram_s": t_h,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "rss_before_mib": rss0 / 1024, "J_checksum": float(J.double().abs().sum())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=400, help="samples (default 400 = a default-scale neighbourhood)")
    ap.add_argument("--in-dim", type=int, default=32)
    ap.add_argument("--hidden", type=int, nargs="+", default=[32])
    ap.add_argument("--chunk", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    ctx = mp.get_context("spawn")
    rows = []
    for variant in ("vmap_jacrev", "autograd_loop"):
        with ctx.Pool(1) as pool:
            rows.append(pool.apply(_job, ((variant, args.n, args.in_dim, args.hidden, args.chunk, args.reps),)))
    print(f"N={args.n} in={args.in_dim} hidden={args.hidden} chunk={args.chunk} (1 thread, best of {args.reps})")
    print(f"{'variant':14s} {'J s':>8s} {'samples/s':>10s} {'H s':>7s} {'peak RSS MiB':>13s}")
    for r in rows:
        print(f"{r['variant']:14s} {r['seconds']:8.3f} {r['samples_per_s']:10.0f} {r['gram_s']:7.3f} "
              f"{r['peak_rss_mib']:13.0f}")
    agree = abs(rows[0]["J_checksum"] - rows[1]["J_checksum"]) <= 1e-4 * rows[1]["J_checksum"]
    print(f"speed-up {rows[1]['seconds'] / rows[0]['seconds']:.1f}x; Jacobians agree: {agree}")
    print(json.dumps(rows))
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
