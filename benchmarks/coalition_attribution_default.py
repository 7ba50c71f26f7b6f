"""Run the coalition_attribution grid (arms oracle, mlp, mlp_adam x seeds) in memory via ``experiment.run`` and
print Table 4 (ours beside the paper's), the identity errors, the verdicts of claims 1-3, wall time and peak RSS.

    PYTHONPATH=src python benchmarks/coalition_attribution_default.py --scale default
    PYTHONPATH=src python benchmarks/coalition_attribution_default.py --scale smoke --seeds 100
"""
from __future__ import annotations

import argparse
import resource
import sys
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="default", choices=["smoke", "default", "paper"])
    ap.add_argument("--seeds", type=int, nargs="*", help="seeds (default: the scale's evaluation seeds)")
    ap.add_argument("--arms", nargs="*", default=None, help="arms (default: the scale's)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = ap.parse_args(argv)

    import torch

    from icml25.studies.coalition_attribution.evaluate import METRICS, TABLE4, TYPES, identities_check, \
        oracle_check, table4_verdict
    from icml25.studies.coalition_attribution.experiment import make_functions, make_games, run
    from pathlib import Path

    from icml25.core.config import build, load_yaml, merge_scale, to_dict
    from icml25.studies.coalition_attribution.config import Config

    def settings_for(scale: str) -> dict:
        yaml_path = Path(__file__).resolve().parents[1] / "config" / "studies" / "coalition_attribution.yaml"
        return to_dict(build(Config, merge_scale(load_yaml(yaml_path), scale)))

    torch.set_num_threads(args.threads)
    s = settings_for(args.scale)
    seeds = args.seeds if args.seeds else s["seeds"]
    arms = args.arms if args.arms else s["arms"]
    t_start = time.perf_counter()
    results: dict[str, list[dict]] = {a: [] for a in arms}
    for seed in seeds:
        mlp_games = None
        for arm in arms:
            t0 = time.perf_counter()
            if arm in ("mlp", "mlp_adam"):
                if mlp_games is None:
                    mlp_games = make_games(s, "mlp", seed, make_functions(s, seed)[0])
                out = run(s, arm, seed, games=mlp_games)
            else:
                out = run(s, arm, seed)
            results[arm].append(out)
            extra = ""
            if "rel_mse" in out:
                extra = f" rel_mse max {out['rel_mse'].max():.2e} flagged {out['flagged']}"
            print(f"[{arm} seed {seed}] {time.perf_counter() - t0:6.1f} s  "
                  + " ".join(f"{k}={v:.1f}s" for k, v in out["seconds"].items()) + extra, flush=True)
    wall = time.perf_counter() - t_start

    def pooled(arm: str):
        fid = np.concatenate([r["seed"] * 1000 + r["coalitions"]["function"] for r in results[arm]])
        ctype = np.concatenate([r["coalitions"]["type"] for r in results[arm]])
        mets = {m: np.concatenate([r["coalitions"][m] for r in results[arm]]) for m in METRICS}
        return fid, ctype, mets

    c = s["claims"]
    print(f"\nTable 4 (pooled over seeds {seeds}; paper values in brackets)")
    print(f"{'arm':9s} {'type':4s} {'n':>4s} " + " ".join(f"{m:>16s}" for m in METRICS))
    for arm in arms:
        fid, ctype, mets = pooled(arm)
        for t in TYPES:
            sel = ctype == t
            cells = " ".join(f"{np.nanmean(mets[m][sel]) if sel.any() else float('nan'):7.3f} [{TABLE4[t][m]:.3f}]"
                             for m in METRICS)
            print(f"{arm:9s} {t:4s} {int(sel.sum()):4d} {cells}")
    for arm in arms:
        obj = np.concatenate([r["l1_objective"] for r in results[arm]])
        half = np.concatenate([r["l1_half_v"] for r in results[arm]])
        print(f"{arm:9s} mean L1 objective {obj.mean():.4f} (gamma = v/2: {half.mean():.4f})")

    print("\nVerdicts")
    if "mlp" in results:
        fid, ctype, mets = pooled("mlp")
        rep, notrep, st = table4_verdict(fid, ctype, mets, resamples=c["bootstrap_resamples"], ci_level=c["ci_level"],
                                         seed=c["bootstrap_seed"], f_min=c["f_min"], u_max=c["u_max"],
                                         p_range=c["p_range"])
        v = "reproduced" if rep else "not reproduced" if notrep else "inconclusive"
        print(f"claim 1 (Table 4, arm mlp): {v}")
        for m, d in st["per_metric"].items():
            failed = [k for k, ok in d["conditions"].items() if not ok]
            print(f"  {m:8s} means " + " ".join(f"{t}={x:.3f}" for t, x in d["mean"].items())
                  + "  F-P CI [{:.3f}, {:.3f}]  P-U CI [{:.3f}, {:.3f}]".format(*d["diff_ci"]["F-P"]["ci"],
                                                                              *d["diff_ci"]["P-U"]["ci"])
                  + (f"  failed: {failed}" if failed else ""))
    errs: dict[str, list] = {}
    vmax = []
    for arm in arms:
        for r in results[arm]:
            for which in ("learned", "random"):
                for k, e in r["identity_errors"][which].items():
                    errs.setdefault(k, []).append(e)
                vmax.append(r["vmax"])
    holds, st = identities_check({k: np.concatenate(e) for k, e in errs.items()}, np.concatenate(vmax),
                                 tol=s["identities"]["tol"])
    print(f"claim 2 (identities, {st['n_games']} games x gammas): {'holds' if holds else 'FAILS'}; max abs err "
          + ", ".join(f"{k} {d['max_abs_err']:.1e}" for k, d in st["per_identity"].items()))
    if "oracle" in results:
        _, ctype, mets = pooled("oracle")
        holds, st = oracle_check(ctype, mets, f_min=c["oracle_f_min"], u_q_max=c["oracle_u_q_max"])
        print(f"claim 3 (oracle): {'holds' if holds else 'FAILS'}; F means "
              + ", ".join(f"{m} {x:.4f}" for m, x in st["mean"]["F"].items()) + f"; U mean Q {st['mean']['U']['Q']:.4f}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nwall {wall:.1f} s, peak RSS {rss:.0f} MiB, scale {args.scale}, seeds {seeds}, torch threads {args.threads}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
