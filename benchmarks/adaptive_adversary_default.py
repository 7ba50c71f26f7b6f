"""Run the adaptive_adversary grid of one scale through ``experiment.run`` (every adversary × seed), print a table
of metrics (mean error and failure rate per learner, with the closed forms for ``adaptive``) and the computed
verdicts of the study's claims and checks, the wall time, trials per second and peak RSS.

    PYTHONPATH=src python benchmarks/adaptive_adversary_default.py                    # default scale, seeds 0 1 2
    PYTHONPATH=src python benchmarks/adaptive_adversary_default.py --scale smoke
    PYTHONPATH=src python benchmarks/adaptive_adversary_default.py --seeds 100 101    # tuning seeds
    PYTHONPATH=src python benchmarks/adaptive_adversary_default.py --trials out.parquet

The simulation is single-threaded (one process); pass ``--jobs 2`` to run arm × seed units in two processes.
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import pandas as pd


def _unit(args):
    from icml25.studies.adaptive_adversary.experiment import run
    settings, arm, seed = args
    out = run(settings, arm, seed)
    return out["trials"], out["cells"], out["seconds"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="default", choices=["smoke", "default", "paper"])
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default: the scale's)")
    parser.add_argument("--jobs", type=int, default=1, help="processes for the arm × seed units")
    parser.add_argument("--trials", default=None, help="write the trial table to this parquet file")
    parser.add_argument("--json", default=None, help="write the verdict statistics to this json file")
    args = parser.parse_args(argv)

    from icml25.studies.adaptive_adversary import evaluate as ev
    from icml25.studies.adaptive_adversary.data import write_trials
    from pathlib import Path

    from icml25.core.config import build, load_yaml, merge_scale, to_dict
    from icml25.studies.adaptive_adversary.config import Config

    yaml_path = Path(__file__).resolve().parents[1] / "config" / "studies" / "adaptive_adversary.yaml"
    settings = to_dict(build(Config, merge_scale(load_yaml(yaml_path), args.scale)))
    seeds = list(settings["seeds"] if args.seeds is None else args.seeds)
    units = [(settings, arm, s) for arm in settings["arms"] for s in seeds]
    t0 = time.perf_counter()
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            outs = list(pool.map(_unit, units))
    else:
        outs = [_unit(u) for u in units]
    wall = time.perf_counter() - t0
    trials = pd.concat([o[0] for o in outs], ignore_index=True)
    cells = pd.concat([o[1] for o in outs], ignore_index=True)
    sim_seconds = sum(o[2] for o in outs)
    t1 = time.perf_counter()

    pd.set_option("display.width", 200, "display.max_rows", 500)
    table = (cells.groupby(["adversary", "learner", "c", "eta_over_c", "m"])
             .agg(mean_err=("mean_err", "mean"), fail_rate=("fail_rate", "mean"), n=("n", "sum"))
             .unstack("learner"))
    table.columns = [f"{metric}_{learner}" for metric, learner in table.columns]
    table = table.drop(columns="n_robust").rename(columns={"n_decoder": "n"})
    print(f"== {args.scale}: seeds {seeds}, {len(trials)} trials ==")
    analytic = ev.analytic_cells(settings).set_index(["c", "eta_over_c", "m"])
    ada = table.loc["adaptive"].join(analytic[["budget", "p_abort", "robust_fail_analytic", "le_cam_bound"]])
    print("-- adaptive (mean error and failure rate per learner; closed forms) --")
    print(ada.round(4).to_string())
    for adv in [a for a in settings["arms"] if a != "adaptive"]:
        print(f"-- {adv} --")
        print(table.loc[adv].round(4).to_string())

    verdicts = {}
    rep, nrep, s1 = ev.claim_separation(cells)
    verdicts["1_separation"] = (rep, nrep, s1)
    holds, s2 = ev.check_mechanism(trials)
    verdicts["2_mechanism"] = (holds, s2)
    rep3, nrep3, s3 = ev.claim_phase_boundary(cells)
    verdicts["3_phase_boundary"] = (rep3, nrep3, s3)
    eval_seconds = time.perf_counter() - t1

    def word(rep, nrep):
        return "reproduced" if rep else ("not reproduced" if nrep else "inconclusive")

    print("== verdicts ==")
    print(f"claim 1 separation: {word(rep, nrep)}; adaptive min mean err {s1['adaptive_min_mean_err']:.4f}, "
          f"oblivious max robust mean err {s1['oblivious_max_robust_mean_err']:.4f}, decay violations "
          f"{s1['decay_violations']} (max drop {s1['max_decay']:.4f}), complete grid {s1['complete_grid']}")
    a, b, c = s2["a_budget"], s2["b_formula"], s2["c_indistinguishable"]
    print(f"check 2 mechanism: {'holds' if holds else 'FAILS'}; (a) {a['holds']}: {a.get('n_over_budget')} over "
          f"budget, {a.get('n_not_max_ab')} != max(a,b); (b) {b['holds']}: {b.get('n_outside')}/{b.get('n_cells')} "
          f"cells beyond 3 SE, max z {b.get('max_z', float('nan')):.2f}; (c) {c['holds']}: min p "
          f"{c.get('min_p', float('nan')):.4g} vs {c.get('threshold', float('nan')):.3g} over {c.get('n_tests')} "
          f"tests, in-A fraction min p0 {c.get('min_in_a_frac_p0')} qA {c.get('min_in_a_frac_qA')}")
    low = ", ".join(f"c={r['c']}: {r['rate']:.4f}" for r in s3["low"])
    bd = s3["boundary"]
    print(f"claim 3 phase boundary: {word(rep3, nrep3)}; eta=0.5c, m=2000: {low or 'n/a'}; eta=c, m=2000: "
          + (f"{bd['rate']:.4f} (95% CI {bd['ci'][0]:.4f}-{bd['ci'][1]:.4f}, analytic {bd['analytic']:.4f}, "
             f"per c {json.dumps({k: round(v, 4) for k, v in bd['per_c'].items()})})" if bd else "n/a"))
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rss_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"== time: simulate {wall:.1f} s wall ({sim_seconds:.1f} s in units, {len(trials) / sim_seconds:.0f} "
          f"trials/s per process), evaluate {eval_seconds:.1f} s; peak RSS {rss_mb:.0f} MB"
          + (f" (children {rss_children:.0f} MB)" if args.jobs > 1 else ""))
    if args.trials:
        write_trials(trials, args.trials)
    if args.json:
        from icml25.core.io import write_json
        write_json(args.json, {k: v[-1] for k, v in verdicts.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
