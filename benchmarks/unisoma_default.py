"""Run the unisoma grid in memory through ``experiment.run`` and print metrics and the headline verdict.

    PYTHONPATH=src python benchmarks/unisoma_default.py --scale default --seeds 0 1 2
"""
from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np
import yaml

from icml25.studies.unisoma.evaluate import decide_headline
from icml25.studies.unisoma.experiment import run


def settings(scale: str) -> dict:
    doc = yaml.safe_load(Path(__file__).resolve().parents[1].joinpath("config/studies/unisoma.yaml").read_text())
    scales = doc.pop("scales")
    out = dict(doc)
    for k, v in (scales.get(scale) or {}).items():
        out[k] = {**out[k], **v} if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="default", choices=["smoke", "default"])
    ap.add_argument("--seeds", type=int, nargs="+", default=None, help="model seeds (default: the scale's)")
    ap.add_argument("--arms", nargs="+", default=None)
    args = ap.parse_args()
    cfg = settings(args.scale)
    seeds = args.seeds or cfg["seeds"]
    arms = args.arms or cfg["arms"]
    cfg["seeds"] = seeds
    t0, res = time.time(), {}
    for arm in arms:
        for seed in seeds:
            r = run(cfg, arm, seed)
            res[arm, seed] = r
            print(f"{arm:16s} seed {seed}: " + " ".join(f"{k}={v:.4f}" for k, v in r["test_mean"].items())
                  + f" params={r['history']['param_count']} train_s={r['history']['seconds']:.1f}", flush=True)
    if "unisoma" in arms and "implicit" in arms:
        u = np.stack([res["unisoma", s]["test"]["rel_l2_pos"] for s in seeds])
        i = np.stack([res["implicit", s]["test"]["rel_l2_pos"] for s in seeds])
        rep, notrep, stat = decide_headline(u, i)
        print("headline:", "reproduced" if rep else "not reproduced" if notrep else "inconclusive (test)", stat)
    print(f"wall {time.time() - t0:.1f} s, peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
