"""Run the sard grid of one scale in memory (every dataset × arm × seed through ``experiment.run``), print the
metrics, the verdicts of claims 1–4, the wall time and the peak RSS.

    python benchmarks/sard_default.py                        # default scale, its evaluation seeds
    python benchmarks/sard_default.py --scale smoke
    python benchmarks/sard_default.py --seeds 100 101 102    # tuning seeds (never the evaluation seeds)
    python benchmarks/sard_default.py --set arm_config.sard.rho=0.5 --datasets digits --arms clean_l2d sard

Claims 1–3 compare ``sard`` with ``clean_l2d`` (digits is the primary dataset; diabetes is reported with the same
rules). The same verdict functions applied to ``sard_ce`` are printed as a secondary analysis: they are not the
claims. ``--set`` overrides one config key (dotted path, Python literal value) for exploration; the result is
validated by the study's ``Config``. The pipeline (``snakemake --config 'studies=[sard]'``) computes the same numbers
and writes the claims with the adequacy gate of ``evaluate.py``; this script prints the raw verdicts too.
"""
from __future__ import annotations

import argparse
import ast
import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # before numpy / torch load BLAS
    os.environ.setdefault(_var, "1")

import json  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402


def _override(st: dict, assignment: str) -> None:
    key, _, raw = assignment.partition("=")
    node = st
    parts = key.split(".")
    for part in parts[:-1]:
        node = node[part]
    if parts[-1] not in node:
        raise SystemExit(f"--set: unknown key {key!r}")
    node[parts[-1]] = ast.literal_eval(raw)


def _word(rep: bool, nrep: bool) -> str:
    return "reproduced" if rep else ("not reproduced" if nrep else "inconclusive")


def claim_verdicts(E, res: dict, arm: str, ds: str, seeds: list[int], claim_eps: str, target: int) -> dict:
    """Claims 1–3 for ``arm`` vs clean_l2d on one dataset."""
    def pts(a: str, key: str) -> list[np.ndarray]:
        return [res[(ds, a, s)]["points"][key] for s in seeds]

    out = {}
    r = E.verdict_untargeted(pts(arm, f"def_loss_adv_{claim_eps}"), pts("clean_l2d", f"def_loss_adv_{claim_eps}"))
    out["c1_untargeted"] = r
    r = E.verdict_targeted(pts(arm, f"targeted_success_{target}"), pts(arm, f"targeted_eligible_{target}"),
                           pts("clean_l2d", f"targeted_success_{target}"),
                           pts("clean_l2d", f"targeted_eligible_{target}"))
    out["c2_targeted"] = r
    out["c3_clean_noninferiority"] = E.verdict_clean_noninferiority(pts(arm, "def_loss_clean"),
                                                                    pts("clean_l2d", "def_loss_clean"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="default", choices=["smoke", "default"], help="settings scale")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="override the seeds")
    parser.add_argument("--datasets", nargs="+", default=None, help="restrict to these datasets")
    parser.add_argument("--arms", nargs="+", default=None, help="restrict to these arms")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a settings key")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--json", default=None, help="write metrics and verdicts to this JSON file")
    args = parser.parse_args(argv)

    import torch

    from pathlib import Path

    from icml25.core.config import build, load_yaml, merge_scale
    from icml25.studies.sard import evaluate as E
    from icml25.studies.sard.config import Config
    from icml25.studies.sard.experiment import run, run_identities
    from icml25.studies.sard.metrics import costliest_expert, eps_key

    torch.set_num_threads(args.threads)
    yaml_path = Path(__file__).resolve().parents[1] / "config" / "studies" / "sard.yaml"
    st = build(Config, merge_scale(load_yaml(yaml_path), args.scale), "sard").model_dump(mode="json")
    for assignment in args.set:
        _override(st, assignment)
    if args.seeds is not None:
        st["seeds"] = list(args.seeds)
    if args.datasets:
        st["datasets"] = [d for d in st["datasets"] if d in args.datasets]
    if args.arms:
        st["arms"] = [a for a in st["arms"] if a in args.arms]
    st = build(Config, st, "sard").model_dump(mode="json")  # overrides validated like the yaml
    seeds, arms, datasets = st["seeds"], st["arms"], st["datasets"]

    t0 = time.perf_counter()
    res: dict[tuple[str, str, int], dict] = {}
    for ds in datasets:
        for seed in seeds:
            for arm in arms:
                out = run(st, arm, seed, ds)
                res[(ds, arm, seed)] = out
                m = out["metrics"]
                print(f"{ds:8s} {arm:27s} seed {seed:3d} {out['seconds']:6.1f}s  clean {m['def_loss_clean']:.3f}  "
                      + "  ".join(f"{k[13:]} {m[k]:.3f}" for k in m if k.startswith("def_loss_adv_"))
                      + f"  alloc {[round(m[f'alloc_rate_{j}'], 2) for j in range(3)]}", flush=True)
    t_ident = time.perf_counter()
    ident = run_identities(st)
    t_ident = time.perf_counter() - t_ident
    total = time.perf_counter() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    claim_eps = eps_key(st["attack"]["claim_eps"])
    eps_grid = sorted(float(e) for e in st["attack"]["eps_grid"])
    print(f"\nheld-out metrics, mean ± sd over seeds {seeds} (deferral losses; targeted success at {claim_eps})")
    for ds in datasets:
        target = costliest_expert(st[ds]["beta"])
        first = res[(ds, arms[0], seeds[0])]["metrics"]
        print(f"  {ds}: agents {({k[7:]: round(v, 3) for k, v in first.items() if k.startswith('agents/')})}")
        for arm in arms:
            def ms(key: str) -> str:
                v = np.array([res[(ds, arm, s)]["metrics"][key] for s in seeds], dtype=float)
                return f"{np.nanmean(v):.3f}±{np.nanstd(v, ddof=1) if len(v) > 1 else 0:.3f}"
            cols = "  ".join(f"adv{e:g} {ms('def_loss_adv_' + eps_key(e))}" for e in eps_grid)
            print(f"    {arm:27s} clean {ms('def_loss_clean')}  {cols}  tgt{target} {ms(f'targeted_success_{target}')}"
                  f"  alloc0 {ms('alloc_rate_0')}")

    verdicts: dict[str, dict] = {}
    print("\nverdicts (claims 1-3: arm vs clean_l2d, paired bootstrap over pooled test points)")
    for ds in datasets:
        target = costliest_expert(st[ds]["beta"])
        for arm in ("sard", "sard_ce"):
            if not all((ds, a, s) in res for a in (arm, "clean_l2d") for s in seeds):
                continue
            tag = "claims" if arm == "sard" else "secondary (sard_ce, not a claim)"
            for name, (rep, nrep, stat) in claim_verdicts(E, res, arm, ds, seeds, claim_eps, target).items():
                verdicts[f"{ds}/{arm}/{name}"] = {"verdict": _word(rep, nrep), **stat}
                brief = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in stat.items()
                         if k in ("mean_diff", "rate_diff", "rate_sard", "rate_clean", "ci_low", "ci_high",
                                  "undefined_for")}
                print(f"  {ds:8s} {arm:8s} {name:24s} {_word(rep, nrep):15s} {brief}   [{tag}]")
    if all((ds, "clean_l2d_agents_perturbed", s) in res and (ds, "clean_l2d", s) in res
           for ds in datasets for s in seeds):
        for ds in datasets:
            a = np.mean([res[(ds, "clean_l2d_agents_perturbed", s)]["metrics"][f"def_loss_adv_{claim_eps}"]
                         for s in seeds])
            b = np.mean([res[(ds, "clean_l2d", s)]["metrics"][f"def_loss_adv_{claim_eps}"] for s in seeds])
            print(f"  threat model ({ds}): clean_l2d adversarial loss at {claim_eps}: agents see x' {a:.3f} vs "
                  f"only the rejector {b:.3f}")
    runs = list(res.values())
    budget_runs = [r for r in runs if r["metrics"]["eps0_bitwise"] is not None]
    mech = E.check_mechanism(
        E.check_surrogate_bound(ident["min_gap_comp_sum"], ident["min_gap_rho_margin"]),
        E.check_bayes_allocation(ident["bayes_max_abs_grad"], ident["bayes_argmax_is_argmin_cost"]),
        E.check_attack_budget([r["metrics"]["eps0_bitwise"] for r in budget_runs],
                              [r["metrics"]["ball_violation"] for r in budget_runs]),
        E.check_monotone_eps([[r["metrics"]["def_loss_adv_" + eps_key(e)] for e in eps_grid] for r in runs],
                             eps_grid))
    verdicts["c4_mechanism"] = mech[1]
    print(f"  claim 4 mechanism: {'holds' if mech[0] else 'FAILS'}")
    for part in ("surrogate_bound", "bayes_allocation", "attack_budget", "monotone_eps"):
        print(f"      {part:18s} {mech[1][part]}")
    print(f"\nscale {args.scale}: {len(res)} runs, wall {total:.1f} s (identities {t_ident:.1f} s), "
          f"peak RSS {rss_mb:.0f} MB")
    if args.json:
        doc = {"scale": args.scale, "seconds": total, "peak_rss_mb": rss_mb, "verdicts": verdicts,
               "identities": ident,
               "metrics": {f"{d}/{a}/seed{s}": r["metrics"] for (d, a, s), r in res.items()},
               "curves": {f"{d}/{a}/seed{s}": r["curves"] for (d, a, s), r in res.items()}}
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
