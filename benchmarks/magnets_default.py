"""Run the magnets grid (every seed: train the nested generator, decode every arm, mechanism checks) in memory
and print FD, class accuracy, FLOPs, decode wall time per sample, the verdicts, time and peak RSS.

    PYTHONPATH=src python benchmarks/magnets_default.py --scale default
    PYTHONPATH=src python benchmarks/magnets_default.py --scale smoke --seeds 100

Tune only on seeds that are not evaluation seeds (e.g. ``--seeds 100 101 102``).
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="default", choices=("smoke", "default"))
    ap.add_argument("--seeds", type=int, nargs="*", help="override the scale's seeds")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    from icml25.core.claims import verdict
    from icml25.core.config import build, load_yaml, merge_scale, to_dict
    from icml25.studies.magnets import evaluate as E
    from icml25.studies.magnets import experiment as X
    from icml25.studies.magnets.config import Config

    torch.set_num_threads(args.threads)
    yaml_path = Path(__file__).resolve().parents[1] / "config" / "studies" / "magnets.yaml"
    settings = to_dict(build(Config, merge_scale(load_yaml(yaml_path), args.scale)))
    seeds = args.seeds or settings["seeds"]
    t0 = time.perf_counter()
    data = X.prepare_data(settings)
    t_pre = time.perf_counter() - t0
    print(f"preprocess {t_pre:.1f} s:", {k: round(v, 4) for k, v in data["metrics"].items()})
    res = {}
    for seed in seeds:
        res[seed] = X.run(settings, "nested", seed, data=data)
        r = res[seed]
        print(f"seed {seed}: train {r['train_seconds']:.1f} s, final loss {np.mean(r['curves']['loss'][-20:]):.3f}; "
              f"checks " + ", ".join(f"{k}={v[0]}" for k, v in r["checks"].items()))
    base = settings["decode_arms"][0]
    print(f"\n{'arm':18s} {'FD':>8s} {'acc':>6s} {'FLOPs/sample':>13s} {'ratio':>6s} {'ms/sample':>9s}")
    for arm in settings["decode_arms"]:
        fd = [res[s]["arms"][arm]["fd"] for s in seeds]
        acc = [res[s]["arms"][arm]["class_acc"] for s in seeds]
        fl = res[seeds[0]]["arms"][arm]["flops_total"]
        ms = [res[s]["arms"][arm]["wall_ms_per_sample"] for s in seeds]
        ratio = fl / res[seeds[0]]["arms"]["full_nocache"]["flops_total"] if "full_nocache" in settings["decode_arms"] else float("nan")
        print(f"{arm:18s} {np.mean(fd):8.3f} {np.mean(acc):6.3f} {fl:13d} {ratio:6.3f} {np.mean(ms):9.3f}"
              f"   FD per seed {[round(x, 3) for x in fd]}")
    if {"magnets", "full_nocache"} <= set(settings["decode_arms"]):
        A = {a: [res[s]["arms"][a] for s in seeds] for a in settings["decode_arms"]}
        ratio = A["magnets"][0]["flops_total"] / A["full_nocache"][0]["flops_total"]
        v1 = E.decide_compute(ratio, [x["counter_matches_closed_form"] for a in A for x in A[a]])
        v2 = E.decide_quality([m["fd"] / b["fd"] for m, b in zip(A["magnets"], A["full_nocache"])])
        print("claim 1 compute:", verdict(v1[0], v1[1]), v1[2])
        print("claim 2 quality:", verdict(v2[0], v2[1]), v2[2])
        if "small_all" in A:
            v3 = E.decide_sanity([x["fd"] for x in A["magnets"]], [x["fd"] for x in A["small_all"]])
            print("claim 3 sanity :", verdict(v3[0], v3[1]), v3[2])
        t_ratio = np.mean([x["wall_ms_per_sample"] for x in A["magnets"]]) / np.mean(
            [x["wall_ms_per_sample"] for x in A["full_nocache"]])
        print(f"decode wall-time ratio magnets/full_nocache on this CPU: {t_ratio:.3f} (FLOPs ratio {ratio:.4f})")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\ntotal {time.perf_counter() - t0:.1f} s wall, "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_utime:.1f} s user CPU, peak RSS {rss:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
