"""Run the roste grid in memory through ``experiment.run`` and print per-arm metrics and the verdicts.

    PYTHONPATH=src python benchmarks/roste_default.py --scale default --seeds 100 101 102   # tuning seeds
    PYTHONPATH=src python benchmarks/roste_default.py --scale smoke

Tune only on seeds that are not the evaluation seeds (0, 1, 2). Prints wall/CPU time and peak RSS.
"""
from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from icml25.studies.roste import experiment as X
from icml25.studies.roste.claims import build_claims
from icml25.studies.roste.config import PTQ_ARMS

ROOT = Path(__file__).resolve().parents[1]


def load_settings(scale: str) -> dict:
    raw = yaml.safe_load((ROOT / "config/studies/roste.yaml").read_text())
    over = raw.pop("scales")[scale] or {}
    return {**raw, **{k: ({**raw[k], **v} if isinstance(v, dict) else v) for k, v in over.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="default", choices=["smoke", "default"])
    ap.add_argument("--seeds", type=int, nargs="*", help="seeds (default: the scale's)")
    ap.add_argument("--arms", nargs="*", help="arms (default: the scale's)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    s = load_settings(args.scale)
    if args.seeds:
        s["seeds"] = args.seeds
    if args.arms:
        s["arms"] = args.arms
    cfg = X.as_config(s)
    t0, c0 = time.perf_counter(), time.process_time()
    per_seed: dict[str, dict[int, dict]] = {}
    for arm in cfg.arms:
        for seed in cfg.seeds:
            out = X.run(cfg, arm, seed)
            per_seed.setdefault(arm, {})[seed] = out["test"]
            print(f"{arm:12s} seed {seed}: " + " ".join(f"{k}={v:.4f}" for k, v in out["test"].items())
                  + (f" choices={out['search']['choices']}" if out["search"] else ""), flush=True)
    print("\narm          test_loss  token_acc  rougeL")
    for arm, runs in per_seed.items():
        m = {k: np.mean([r[k] for r in runs.values()]) for k in ("test_loss", "token_acc", "rougeL")}
        print(f"{arm:12s} {m['test_loss']:.4f}     {m['token_acc']:.4f}     {m['rougeL']:.4f}")
    claims = build_claims(per_seed, [{"max_abs_diff": 0.0}], [], {"rows": 1, "violations": 0}, 500, {})
    print("\nclaims (checks 3a-3c are computed by the pipeline's evaluate stage):")
    for c in claims[:2] + claims[-1:]:
        print(f"  {c.id}: {c.verdict}  {c.key_numbers}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nwall {time.perf_counter() - t0:.1f} s, cpu {time.process_time() - c0:.1f} s, peak RSS {rss:.0f} MB "
          f"({len(cfg.trained_arms())} trained arms x {len(cfg.seeds)} seeds; {', '.join(PTQ_ARMS)} retrain fp_sft here)")


if __name__ == "__main__":
    main()
