"""Run the lfss grid of a scale in memory (``experiment.run`` per arm x seed) and print metrics and verdicts.

    python benchmarks/lfss_default.py                          # default scale, its seeds and claim arms
    python benchmarks/lfss_default.py --scale smoke
    python benchmarks/lfss_default.py --seeds 100 101 --set train.ema=0.99   # tuning (non-evaluation seeds)
    python benchmarks/lfss_default.py --set data.per_class=500 --arms base lfss lfss_no_ss lfss_no_proto
                                                               # "default_full": all 5000 images, the ablations

The settings are the study config (``config/studies/lfss.yaml`` at ``--scale``, validated by its ``Config``)
with ``--set`` overrides, so the pipeline (``snakemake --config studies=[lfss]``) computes the same numbers.

Runs ``--jobs`` processes of ``train.threads`` torch threads each. Prints the gate reference (cosine k-means on
PCA-50 pixels) per seed, one row per arm x seed (final ACC/NMI/ARI = mean of the k-means runs, best curve ACC,
claim-1 AUROC and gap, CPU and wall seconds), the adequacy gate, the verdicts of claims 1-2 and check 3, the
wall time and the peak RSS (this process and its largest worker). ``--json`` writes everything to a file.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any


def _parse_set(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, val = item.partition("=")
        if not sep:
            raise SystemExit(f"--set {item!r}: use section.key=value (value in JSON)")
        *parents, leaf = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = json.loads(val)
    return out


def settings_for(scale: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """The study config of ``scale`` with ``overrides``, validated, as the plain dicts the training loop reads."""
    from pathlib import Path

    from icml25.core.config import build, load_yaml, merge_scale
    from icml25.studies.lfss.config import Config
    from icml25.studies.lfss.experiment import settings_of

    yaml = Path(__file__).resolve().parents[1] / "config" / "studies" / "lfss.yaml"
    return settings_of(build(Config, merge_scale(load_yaml(yaml), scale, overrides), "lfss"))


def _job(task: tuple[str, Any, str, int]) -> dict[str, Any]:
    kind, settings, arm, seed = task
    from icml25.studies.lfss.experiment import reference, run

    t0, c0 = time.perf_counter(), time.process_time()
    if kind == "ref":
        out = {"kind": "ref", "seed": seed, **reference(settings, seed)}
    else:
        res = run(settings, arm, seed)
        out = {"kind": "run", **{k: res[k] for k in ("arm", "seed", "final", "claim1", "curve_acc", "curves")}}
    out["wall_s"] = time.perf_counter() - t0
    out["cpu_s"] = time.process_time() - c0
    out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def verdicts(settings: dict, refs: dict[int, dict], runs: dict[tuple[str, int], dict], seeds: list[int]) -> dict:
    """Gate, claims 1-2 and check 3 from the collected results (the evaluate stage's computation)."""
    from icml25.studies.lfss.evaluate import (adequacy_gate, check3_stability_identities,
                                              claim1_unstable_misclustered, claim2_lfss_improves,
                                              stability_identities)

    out: dict[str, Any] = {}
    gate = True
    if all(("base", s) in runs for s in seeds):
        base = [runs["base", s] for s in seeds]
        gate, out["gate"] = adequacy_gate([r["final"]["acc"] for r in base], [r["curve_acc"] for r in base],
                                          [refs[s]["acc"] for s in seeds])
        out["gate"]["passes"] = gate
        out["claim1"] = claim1_unstable_misclustered([r["claim1"]["auroc"] for r in base],
                                                     [r["claim1"]["gap"] for r in base], gate=gate)
    if all((a, s) in runs for a in ("base", "lfss") for s in seeds):
        get = lambda a, m: [runs[a, s]["final"][m] for s in seeds]  # noqa: E731
        out["claim2"] = claim2_lfss_improves(get("base", "acc"), get("lfss", "acc"), get("base", "nmi"),
                                             get("lfss", "nmi"), gate=gate)
    trials = [stability_identities(seed=s, n=200, k=k) for s in range(5) for k in (3, 4, 5)]
    out["check3"] = check3_stability_identities(trials)
    return out


def _verdict(entry: tuple) -> str:
    if len(entry) == 2:
        return "holds" if entry[0] else "FAILS"
    rep, nrep, stat = entry
    v = "reproduced" if rep else "not reproduced" if nrep else "inconclusive"
    return v + (f" ({stat['note']})" if "note" in stat else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="default", choices=["smoke", "default"], help="config scale")
    parser.add_argument("--seeds", type=int, nargs="+", help="seeds (default: the scale's)")
    parser.add_argument("--arms", nargs="+", help="arms (default: the scale's)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=JSON",
                        help="override a setting, e.g. train.ema=0.99 (repeatable)")
    parser.add_argument("--json", help="write settings, results and verdicts to this file")
    args = parser.parse_args(argv)

    settings = settings_for(args.scale, _parse_set(args.set))
    seeds = args.seeds or settings["seeds"]
    arms = args.arms or settings["arms"]
    t0 = time.perf_counter()
    tasks = [("run", settings, a, s) for s in seeds for a in arms] + [("ref", settings, "", s) for s in seeds]
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as pool:
        results = list(pool.map(_job, tasks))
    wall = time.perf_counter() - t0
    refs = {r["seed"]: r for r in results if r["kind"] == "ref"}
    runs = {(r["arm"], r["seed"]): r for r in results if r["kind"] == "run"}
    out = verdicts(settings, refs, runs, seeds)

    print(f"lfss {args.scale}: seeds {seeds}, arms {arms}, {args.jobs} jobs x {settings['train']['threads']} "
          f"thread(s)")
    print("gate reference (cosine k-means on PCA-50 pixels): "
          + ", ".join(f"seed {s}: ACC {refs[s]['acc']:.3f} NMI {refs[s]['nmi']:.3f}" for s in seeds))
    print(f"{'arm':14s} {'seed':>4s} {'ACC':>6s} {'NMI':>6s} {'ARI':>6s} {'bestACC':>7s} {'AUROC':>6s} "
          f"{'gap':>6s} {'cpu_s':>6s} {'wall_s':>6s}")
    for (a, s), r in sorted(runs.items(), key=lambda kv: (kv[0][1], arms.index(kv[0][0]))):
        f, c = r["final"], r["claim1"]
        print(f"{a:14s} {s:4d} {f['acc']:6.3f} {f['nmi']:6.3f} {f['ari']:6.3f} {max(r['curve_acc']):7.3f} "
              f"{c['auroc']:6.3f} {c['gap']:6.3f} {r['cpu_s']:6.0f} {r['wall_s']:6.0f}")
    if "gate" in out:
        g = out["gate"]
        print(f"adequacy gate: {'passes' if g['passes'] else 'FAILS'} (base final ACC {g['base_final_acc_mean']:.3f} "
              f"vs 0.9 x ref = {g['threshold']:.3f}; max drop from best epoch {g['max_drop']:.3f})")
    for key in ("claim1", "claim2", "check3"):
        if key in out:
            stat = out[key][-1]
            shown = {k: v for k, v in stat.items() if not isinstance(v, list)}
            print(f"{key}: {_verdict(out[key])}  {json.dumps(shown, default=float)}")
    self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    cpu = sum(r["cpu_s"] for r in results)
    print(f"wall {wall:.0f} s; worker CPU {cpu:.0f} s; peak RSS: driver {self_rss:.0f} MB, largest worker "
          f"{child_rss:.0f} MB")
    if args.json:
        from icml25.core.io import write_json

        write_json(args.json, {"scale": args.scale, "settings": settings, "seeds": seeds, "arms": arms,
                               "refs": refs, "runs": [r for r in results if r["kind"] == "run"],
                               "verdicts": {k: list(v) for k, v in out.items() if k != "gate"},
                               "gate": out.get("gate"), "wall_s": wall, "worker_cpu_s": cpu,
                               "peak_rss_mb": {"driver": self_rss, "worker": child_rss}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
