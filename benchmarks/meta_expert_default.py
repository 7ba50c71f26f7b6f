"""Run the meta_expert grid of one scale in memory (every arm × seed × profile through ``experiment.run``), print the
final metrics, the claims' verdicts, CPU time and peak RSS.

    python benchmarks/meta_expert_default.py                         # default scale, its evaluation seeds
    python benchmarks/meta_expert_default.py --scale smoke
    python benchmarks/meta_expert_default.py --seeds 100 101 102     # tuning seeds (never the evaluation seeds)
    python benchmarks/meta_expert_default.py --set train.iterations=1500 --profiles consistent uniform reversed
"""
from __future__ import annotations

import argparse
import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # before numpy / torch load BLAS
    os.environ.setdefault(_var, "1")

import json  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _set(cfg: dict, item: str) -> None:
    key, value = item.split("=", 1)
    *path, leaf = key.split(".")
    node = cfg
    for p in path:
        node = node[p]
    node[leaf] = json.loads(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="default", choices=["smoke", "default"], help="config scale")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="override the seeds")
    parser.add_argument("--arms", nargs="+", default=None, help="override the arms")
    parser.add_argument("--profiles", nargs="+", default=None, help="override the unlabelled profiles")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                        help="override a config key, e.g. train.iterations=1500 (repeatable)")
    parser.add_argument("--json", default=None, help="write final metrics and verdicts to this JSON file")
    args = parser.parse_args(argv)

    import torch

    from icml25.core.config import build, load_yaml, merge_scale, to_dict
    from icml25.studies.meta_expert.claims import collect, evaluate_claims
    from icml25.studies.meta_expert.config import Config
    from icml25.studies.meta_expert.experiment import make_split, run

    raw = merge_scale(load_yaml(ROOT / "config/studies/meta_expert.yaml"), args.scale)
    for name in ("seeds", "arms", "profiles"):
        if getattr(args, name):
            raw[name] = list(getattr(args, name))
    for item in args.set:
        _set(raw, item)
    cfg = to_dict(build(Config, raw, path="meta_expert"))
    torch.set_num_threads(cfg["train"]["threads"])
    keep = ("top1", "acc_head", "acc_medium", "acc_tail", "e1_head", "e3_head", "e1_tail", "e3_tail",
            "dea_interval_acc")
    t0, c0 = time.perf_counter(), time.process_time()
    records = []
    for seed in cfg["seeds"]:
        for profile in cfg["profiles"]:
            split = make_split(cfg, seed, profile)
            for arm in cfg["arms"]:
                c1 = time.process_time()
                out = run(cfg, arm, seed, profile, split=split)
                records.append({k: out[k] for k in ("arm", "seed", "profile", "final", "profile_estimate")})
                shown = {k: round(out["final"][k], 4) for k in keep if k in out["final"]}
                print(f"{arm:18s} {profile:10s} seed {seed:3d} cpu {time.process_time() - c1:6.1f}s {shown}",
                      flush=True)
    runs = collect([{"runs": records}])
    claims, _ = evaluate_claims(runs, [], cfg["bootstrap_resamples"], (cfg["method"]["cut1"], cfg["method"]["cut2"]))
    print()
    for c in claims:
        print(f"{c.id:18s} {c.kind:6s} {c.verdict:15s} {json.dumps(c.key_numbers)}")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nwall {wall:.1f} s, cpu {cpu:.1f} s, peak RSS {rss_mb:.0f} MB, {len(records)} runs")
    if args.json:
        doc = {"records": [{**r, "final": {k: v for k, v in r["final"].items() if k != "w"}} for r in records],
               "claims": [{"id": c.id, "verdict": c.verdict, "statistic": c.statistic} for c in claims],
               "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": rss_mb}
        Path(args.json).write_text(json.dumps(doc, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
