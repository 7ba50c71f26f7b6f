"""The study's claims.json entries from the train outputs: claims 1–3 (verdicts by the pure ``decide_*`` functions of
:mod:`.evaluate`) and check 4 (the aggregation identities), plus the summary that ``metrics/eval.json`` holds."""
from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from icml25.core.claims import Claim, Evidence, check, gate, mde, summarize, verdict

from .evaluate import (INTERVALS, RELEASED_LOG_MATCHING_WEIGHT, check_identities, decide_improvement,
                       decide_routing, decide_specialisation, routing_matrix, runs_required)

DATA = {"mnist5k": "long-tailed MNIST-5k (labelled 100…5 per class, γ = 20; balanced 1000-image test set), a CPU "
                   "stand-in for CIFAR-10-LT",
        "cifar10": "CIFAR-10-LT (the paper's data)", "svhn": "SVHN-LT (the paper's data)",
        "stl10": "STL-10-LT (the paper's data)",
        "paper_settings": "CIFAR-10-LT, SVHN-LT and STL-10-LT (the paper's data; every setting of scales.paper, "
                          "each setting x unlabelled profile one run of its seed)"}
ME, FM, CPE = "meta_expert", "fixmatch", "cpe"
UNIT = "seeds"  # the independent unit: a seed draws the labelled set, initialisation and data order; the unlabelled
#                 profiles of one seed share its labelled set, so they are averaged within the seed


def collect(chunks: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """{arm: [run record, ...]} sorted by (profile, seed); a run appearing twice raises."""
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for doc in chunks:
        for r in doc["runs"]:
            runs[r["arm"]].append(r)
    for arm, rs in runs.items():
        keys = [(r["profile"], r["seed"]) for r in rs]
        if len(set(keys)) != len(keys):
            raise ValueError(f"evaluate: arm {arm} has duplicate runs {keys}")
        rs.sort(key=lambda r: (r["profile"], r["seed"]))
    return dict(runs)


def _paired(runs: Mapping[str, list[dict]], arms: Sequence[str]) -> list[tuple[str, int]]:
    """(profile, seed) runs present for every arm of ``arms``."""
    sets = [{(r["profile"], r["seed"]) for r in runs.get(a, [])} for a in arms]
    return sorted(set.intersection(*sets)) if sets else []


def _final(runs: Mapping[str, list[dict]], arm: str, keys: list[tuple[str, int]], metric: str) -> np.ndarray:
    by = {(r["profile"], r["seed"]): r["final"] for r in runs.get(arm, [])}
    return np.array([by[k][metric] for k in keys], dtype=float)


def per_seed(keys: Sequence[tuple[str, int]], values: np.ndarray) -> tuple[list[int], np.ndarray]:
    """(seeds, per-seed means of ``values`` over that seed's profiles): the independent units of a claim."""
    seeds = sorted({s for _, s in keys})
    vals = np.asarray(values, dtype=float)
    return seeds, np.array([vals[[i for i, (_, s) in enumerate(keys) if s == seed]].mean() for seed in seeds])


def _metric_summary(values: np.ndarray, resamples: int = 0) -> dict[str, Any]:
    v = values[np.isfinite(values)]
    if not v.size:
        return {"mean": None, "n": 0}
    return summarize(v, unit="runs")


def _paper_data(dataset: str) -> bool:
    return dataset != "mnist5k"


def claim_specialisation(runs: Mapping[str, list[dict]], dataset: str = "mnist5k",
                         min_e3_head_acc: float = 0.1) -> Claim:
    """Claim 1, with the adequacy gate ``e3_predicts_head``: E3's mean head accuracy ≥ ``min_e3_head_acc`` (chance
    on 10 classes). Below it E3 (τ = 4) never predicts a head class and the head half of the claim (E1 > E3 on head
    classes) is decided by construction, not measured (issue 31)."""
    keys = _paired(runs, [ME])
    statement = ("Experts specialise by interval: the long-tailed expert E1 is more accurate than the inverse expert "
                 "E3 on head classes, and E3 more accurate than E1 on tail classes.")
    test = ("per run: head accuracy E1 > E3 and tail accuracy E3 > E1 (Meta-Expert's EMA experts, final); "
            "Student-t intervals of the per-seed head and tail gaps (reported)")
    threshold = ("reproduced: both hold in all runs (>= 8 of 9 from 9 runs); not reproduced: either fails in more "
                 "than half of the runs; else inconclusive")
    if not keys:
        return not_computed("c1_specialisation", statement, test, threshold, dataset, "experts specialise")
    cols = {m: _final(runs, ME, keys, m) for m in ("e1_head", "e3_head", "e1_tail", "e3_tail", "e1_medium",
                                                     "e2_medium", "e3_medium")}
    rep, notrep, stat = decide_specialisation(cols["e1_head"], cols["e3_head"], cols["e1_tail"], cols["e3_tail"])
    seeds, head_gap = per_seed(keys, 100 * (cols["e1_head"] - cols["e3_head"]))
    _, tail_gap = per_seed(keys, 100 * (cols["e3_tail"] - cols["e1_tail"]))
    hs, ts = summarize(head_gap, unit=UNIT), summarize(tail_gap, unit=UNIT)
    stat.update({"head_gap_pt_ci": [hs["ci_low"], hs["ci_high"]], "tail_gap_pt_ci": [ts["ci_low"], ts["ci_high"]],
                 "tail_gap_mde_pt": mde(ts["n"], ts["std"]), "seeds": seeds})
    metrics = {m: _metric_summary(v) for m, v in cols.items()}
    gates = [gate("e3_predicts_head", float(cols["e3_head"].mean()), at_least=min_e3_head_acc,
                  text="E3's head-class accuracy; below chance the head half is decided by the tau = 4 adjustment, "
                       "not measured (the paper's Table 1 has E3 at 3.57 % on head classes too)")]
    return Claim(id="c1_specialisation", statement=statement, source="paper", data=DATA[dataset], test=test,
                 threshold=threshold, verdict=verdict(rep, notrep), statistic=stat, metrics=metrics, gates=gates,
                 evidence=Evidence(len(seeds), UNIT, paper_data=_paper_data(dataset),
                                   ci_method=ts["ci_method"] + " (per-seed tail gap E3 - E1)",
                                   mde=stat["tail_gap_mde_pt"]),
                 title="experts specialise",
                 key_numbers={"head_gap_pt": round(stat["head_gap_pt_mean"], 2),
                              "tail_gap_pt": round(stat["tail_gap_pt_mean"], 2),
                              "tail_gap_ci_pt": [round(ts["ci_low"], 2), round(ts["ci_high"], 2)],
                              "runs_both": stat["runs_both"], "e3_head_acc": round(float(cols["e3_head"].mean()), 4)})


def not_computed(cid: str, statement: str, test: str, threshold: str, dataset: str, title: str,
                        source: str = "paper") -> Claim:
    """An entry whose arms were not run: inconclusive with a note (nothing measured is allowed for an
    inconclusive verdict only through a key number saying so)."""
    return Claim(id=cid, statement=statement, source=source, data=DATA[dataset], test=test, threshold=threshold,
                 verdict="inconclusive", note="not computed: the arms it compares were not run",
                 evidence=Evidence(0, UNIT, paper_data=_paper_data(dataset), ci_method="none (no runs)"),
                 key_numbers={"runs": 0}, title=title)


def claim_routing(runs: Mapping[str, list[dict]], dataset: str = "mnist5k") -> Claim:
    """Claim 2, ours since issue 31: the DEA is trained on the true interval of labelled samples, so whether it
    routes held-out samples to their interval's expert is a supervised side task of Meta-Expert (the mechanism
    engaging), not a result the paper reports; the spec's accuracy bound 0.48 was the released log's matching
    *weight* and is dropped (the weight is shown beside ours as context)."""
    keys = _paired(runs, [ME])
    statement = ("Mechanism (a supervised side task): the dynamic expert assignment, trained on the true interval of "
                 "labelled samples, gives the test samples of each interval (head, medium, tail) their interval's "
                 "expert the largest mean weight.")
    test = ("3 checks per run (head→E1, medium→E2, tail→E3: diagonal weight strictly largest); Student-t interval "
            "of the per-seed smallest diagonal lead (reported); DEA interval accuracy reported, not tested")
    threshold = "reproduced: >= 75 % of the checks pass; not reproduced: <= 50 % pass; else inconclusive"
    if not keys:
        return not_computed("c2_routing", statement, test, threshold, dataset,
                                   "DEA routes to the right expert", source="ours")
    by = {(r["profile"], r["seed"]): r["final"] for r in runs[ME]}
    wm = np.stack([routing_matrix(by[k]) for k in keys])
    acc = np.array([by[k]["dea_interval_acc"] for k in keys])
    rep, notrep, stat = decide_routing(wm, acc)
    seeds, lead = per_seed(keys, np.asarray(stat["min_margin_by_run"]))
    ls = summarize(lead, unit=UNIT)
    stat.update({"lead_ci": [ls["ci_low"], ls["ci_high"]], "seeds": seeds})
    metrics = {"dea_interval_acc": _metric_summary(acc)}
    for i, name in enumerate(INTERVALS):
        metrics[f"w_{name}_matching_expert"] = _metric_summary(wm[:, i, i])
    return Claim(id="c2_routing", statement=statement, source="ours", data=DATA[dataset], test=test,
                 threshold=threshold, verdict=verdict(rep, notrep), statistic=stat, metrics=metrics,
                 evidence=Evidence(len(seeds), UNIT, paper_data=_paper_data(dataset),
                                   ci_method=ls["ci_method"] + " (smallest diagonal lead of the DEA weights)",
                                   mde=mde(ls["n"], ls["std"])),
                 title="DEA routes to the right expert (supervised side task)",
                 note=(f"The released CIFAR-10-LT log gives the matching expert a DEA weight of about "
                       f"{RELEASED_LOG_MATCHING_WEIGHT} on head and medium samples (a weight, not an accuracy); here "
                       f"the mean matching weight is {stat['matching_weight_mean']:.3f} and the DEA interval "
                       f"accuracy {stat['dea_interval_acc_mean']:.3f}."),
                 key_numbers={"checks_passed": f"{stat['checks_passed']}/{stat['checks']}",
                              "matching_weight_mean": round(stat["matching_weight_mean"], 4),
                              "dea_acc_mean": round(stat["dea_interval_acc_mean"], 4)})


def claim_improvement(runs: Mapping[str, list[dict]], dataset: str = "mnist5k", floor_pt: float = 0.0,
                      min_headroom_pt: float = 1.0) -> Claim:
    """Claim 3 with the effect floor ``floor_pt`` and the adequacy gate ``headroom``: 100 − the better baseline's
    mean top-1 (points) ≥ ``min_headroom_pt`` (a comparison at the ceiling cannot show a gain)."""
    keys = _paired(runs, [ME, FM, CPE])
    statement = "Meta-Expert improves top-1 accuracy over FixMatch and over CPE (its three experts without the DEA)."
    test = ("paired differences of final EMA top-1 (points) Meta-Expert − FixMatch and Meta-Expert − CPE (E2 at "
            "test), one per seed (mean over its profiles); Student-t 95 % interval of the mean")
    threshold = (f"effect floor {floor_pt:g} pt (the paper's tables give no single gain to hold a miniature to); "
                 "reproduced: mean >= floor and CI low > 0 for both; not reproduced: CI high < floor for either; "
                 "else inconclusive")
    if not keys:
        return not_computed("c3_improvement", statement, test, threshold, dataset,
                                   "Meta-Expert beats FixMatch and CPE")
    me, fm, cp = (_final(runs, a, keys, "top1") for a in (ME, FM, CPE))
    seeds, me_s = per_seed(keys, me)
    fm_s, cp_s = per_seed(keys, fm)[1], per_seed(keys, cp)[1]
    rep, notrep, stat = decide_improvement(me_s, fm_s, cp_s, floor_pt=floor_pt)
    tails = {a: _final(runs, a, keys, "acc_tail") for a in (ME, FM, CPE)}
    stat["tail_diff_pt"] = {"vs_fixmatch": float(100 * (tails[ME] - tails[FM]).mean()),
                            "vs_cpe": float(100 * (tails[ME] - tails[CPE]).mean())}
    stat["seed_list"] = seeds
    metrics = {f"{a}_top1": _metric_summary(v) for a, v in ((ME, me), (FM, fm), (CPE, cp))}
    metrics.update({f"{a}_tail": _metric_summary(v) for a, v in tails.items()})
    room = float(100.0 * (1.0 - max(fm.mean(), cp.mean())))
    gates = [gate("headroom", room, at_least=min_headroom_pt,
                  text="100 - the better baseline's mean top-1 (pt): room for a gain")]
    worst_mde = max(stat["vs_fixmatch"]["mde_pt"], stat["vs_cpe"]["mde_pt"]) if len(seeds) > 1 else None
    return Claim(id="c3_improvement", statement=statement, source="paper", data=DATA[dataset], test=test,
                 threshold=threshold, verdict=verdict(rep, notrep), statistic=stat, metrics=metrics, gates=gates,
                 evidence=Evidence(len(seeds), UNIT, paper_data=_paper_data(dataset),
                                   ci_method=stat["vs_fixmatch"]["ci_method"] + " (paired top-1 differences)",
                                   mde=worst_mde),
                 title="Meta-Expert beats FixMatch and CPE",
                 key_numbers={"vs_fixmatch_pt": round(stat["vs_fixmatch"]["mean_pt"], 2),
                              "vs_fixmatch_ci_pt": [round(stat["vs_fixmatch"]["ci_low_pt"], 2),
                                                    round(stat["vs_fixmatch"]["ci_high_pt"], 2)],
                              "vs_cpe_pt": round(stat["vs_cpe"]["mean_pt"], 2),
                              "vs_cpe_ci_pt": [round(stat["vs_cpe"]["ci_low_pt"], 2),
                                               round(stat["vs_cpe"]["ci_high_pt"], 2)]})


def check_aggregation(runs: Mapping[str, list[dict]]) -> Claim:
    weights = [np.asarray(r["final"]["w"], dtype=float) for arm in runs for r in runs[arm] if "w" in r["final"]]
    holds, stat = check_identities(0, weights)
    return check("c4_identities", "Aggregation identities: one-hot DEA weights return that expert's logits, τ = 0 "
                 "leaves the logits unchanged, the training aggregate ignores per-expert constant shifts, and the DEA "
                 "weights lie on the simplex (sum to 1 ± 1e-6).", holds=holds,
                 data="random tensors (float64) and the trained models' test-set DEA weights",
                 test="max absolute errors of the identities", threshold="one-hot and τ = 0 exact (<= 1e-12), shift "
                 "<= 1e-9, |Σw − 1| <= 1e-6 and w >= 0", evidence=Evidence(stat["weight_sets"], "weight sets"),
                 statistic=stat, title="aggregation identities",
                 key_numbers={"w_sum_max_abs_err": stat["w_sum_max_abs_err"]})


def read_curves(paths: Iterable[str | Path]) -> dict[str, dict[int, list[float]]]:
    """{arm: {iteration: [top1 of each run]}} from the train stage's curve csv files."""
    out: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for p in paths:
        with open(p, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                if "top1" not in row or "iteration" not in row:
                    raise ValueError(f"{p}: curve csv needs columns iteration and top1")
                out[row["arm"]][int(float(row["iteration"]))].append(float(row["top1"]))
    return {a: dict(v) for a, v in out.items()}


def evaluate_claims(runs: Mapping[str, list[dict]], curve_paths: Iterable[str | Path], cuts: tuple[int, int], *,
                    dataset: str = "mnist5k", floor_pt: float = 0.0, min_e3_head_acc: float = 0.1,
                    min_headroom_pt: float = 1.0) -> tuple[list[Claim], dict[str, Any]]:
    """The four entries and the eval summary: per arm the mean/CI over runs of every scalar final metric, the
    Meta-Expert routing matrix and expert interval accuracies (for the figures), and mean top-1 curves.
    ``dataset`` sets ``paper_data``; ``floor_pt`` is claim 3's effect floor; the rest are the adequacy gates."""
    claims = [claim_specialisation(runs, dataset, min_e3_head_acc), claim_routing(runs, dataset),
              claim_improvement(runs, dataset, floor_pt, min_headroom_pt), check_aggregation(runs)]
    arms: dict[str, dict[str, Any]] = {}
    for arm, rs in runs.items():
        names = sorted({k for r in rs for k, v in r["final"].items() if isinstance(v, (int, float))})
        arms[arm] = {m: _metric_summary(np.array([r["final"].get(m, np.nan) for r in rs], dtype=float))
                     for m in names}
    summary: dict[str, Any] = {"arms": arms, "cuts": list(cuts), "intervals": list(INTERVALS),
                               "runs": {a: [[r["profile"], r["seed"]] for r in rs] for a, rs in runs.items()},
                               "runs_required_of": {str(n): runs_required(n) for n in (3, 9)}}
    if ME in runs:
        finals = [r["final"] for r in runs[ME]]
        summary["routing_matrix"] = np.mean([routing_matrix(f) for f in finals], axis=0).tolist()
        summary["expert_interval_acc"] = {
            f"E{k}": [float(np.mean([f[f"e{k}_{n}"] for f in finals])) for n in INTERVALS] for k in (1, 2, 3)}
        summary["expert_interval_acc"]["aggregate"] = [float(np.mean([f[f"acc_{n}"] for f in finals]))
                                                       for n in INTERVALS]
        summary["profile_estimates"] = [r["profile_estimate"] for r in runs[ME]]
    curves = read_curves(curve_paths)
    summary["curves"] = {a: {str(it): float(np.mean(v)) for it, v in sorted(c.items())} for a, c in curves.items()}
    return claims, summary
