"""Verdicts of the sard study: pure functions of per-seed metric arrays (thresholds are the study's constants).

Claims 1–3 compare ``sard`` with ``clean_l2d`` on the same seeds. A seed draws the split, the simulated experts,
the rejector initialisation and the attack starts, so the **seed is the independent unit** (issue 31): each
claim reduces a seed's test points to one paired effect (sard − clean_l2d on that seed's test split) and decides
on the Student-t 95 % interval of the per-seed effects (:func:`icml25.core.claims.summarize`), with the exact
sign-flip p-value and the minimum detectable effect at that n beside it. Test points of different seeds are never
pooled as if independent.

* :func:`verdict_untargeted` — claim 1: adversarial deferral loss at ε = 0.1 (PGD-20), sard − clean_l2d.
* :func:`verdict_targeted` — claim 2: success rate of the attack towards the costliest expert t,
  P(π(x′) = t | π(x) ≠ t), sard − clean_l2d.
* :func:`verdict_clean_noninferiority` — claim 3: clean deferral loss, sard − clean_l2d.
* :func:`check_mechanism` — claim 4 (a check): :func:`check_surrogate_bound`, :func:`check_bayes_allocation`,
  :func:`check_attack_budget` and the diagnostic :func:`check_monotone_eps` all hold.

Claims 1 and 2 are superiority claims with an effect-size floor (:data:`C1_MEAN_MAX`, :data:`C2_DROP_MIN`; ours:
the paper's method section and tables were not read, so no paper number exists): reproduced when the mean effect
reaches the floor and the interval excludes 0; not reproduced when the interval lies entirely short of the floor
(the effect is smaller than the floor, or of the wrong sign); otherwise inconclusive.

**Adequacy gates** (ours; the paper states none; :func:`claim_gates`). (i) A rejector that sends (almost) every
test point to one agent cannot be attacked at all: :func:`collapsed_seeds` flags a seed whose rejector gives at
least ``adequacy.collapse_share`` of its clean allocations to one agent while the cost-optimal allocation gives no
agent that share; any collapsed seed of either arm fails the gate ``no_collapsed_rejector`` of claims 1–3.
(ii) Headroom: the untargeted attack must raise ``clean_l2d``'s deferral loss by at least claim 1's floor, and the
targeted attack must succeed on ``clean_l2d`` at least as often as claim 2's floor, else the testbed cannot show
the claimed reduction. A failed gate makes the claim inconclusive (``icml25.core.claims.apply_gates``), for a
"not reproduced" as well as a "reproduced".
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from icml25.core.claims import Gate, gate, mde, sign_flip_test, summarize, untested

CI_LEVEL = 0.95
C1_MEAN_MAX = -0.02           # claim 1: floor: mean per-seed difference of the adversarial deferral loss <= this
C2_DROP_MIN = 0.05            # claim 2: floor: sard's targeted success rate lower by at least 5 points (rate units)
C3_MARGIN = 0.03              # claim 3: non-inferiority margin of the clean deferral loss
BOUND_TOL = 1e-12             # claim 4: float64 rounding allowance of the surrogate bound (equality cases)
GRAD_TOL = 1e-10              # claim 4: |gradient| of the nu = 1 surrogate at r = log tau
BALL_TOL = 1e-6               # claim 4: float32 rounding of x +- eps (|x| < 16) allowed outside the ball/box
COLLAPSE_SHARE = 0.99         # adequacy: default of config key adequacy.collapse_share (one agent >= 99 % of a
                              # seed's clean test allocations)


def _per_seed_arrays(name: str, per_seed: Sequence[Any]) -> list[np.ndarray]:
    arrays = [np.asarray(a, dtype=np.float64).reshape(-1) for a in per_seed]
    if not arrays or any(a.size == 0 for a in arrays):
        raise ValueError(f"verdict: {name} must be a non-empty list of non-empty per-seed arrays")
    if not all(np.isfinite(a).all() for a in arrays):
        raise ValueError(f"verdict: {name} has non-finite values")
    return arrays


def _paired(**per_seed: Sequence[Any]) -> tuple[dict[str, list[np.ndarray]], list[int]]:
    arrays = {name: _per_seed_arrays(name, a) for name, a in per_seed.items()}
    lengths = {name: [len(a) for a in v] for name, v in arrays.items()}
    if len({tuple(v) for v in lengths.values()}) != 1:
        raise ValueError(f"verdict: per-seed arrays are not paired (seeds or points per seed differ): {lengths}")
    return arrays, next(iter(lengths.values()))


def seed_effects(diffs: Sequence[float]) -> dict[str, Any]:
    """The deciding statistics of one claim from its per-seed paired effects ``diffs`` (n,): the mean, its
    Student-t 95 % interval and ``ci_method`` (:func:`summarize`), the sd, the two-sided exact sign-flip p-value
    (n ≥ 2) and the minimum detectable effect at this n (:func:`icml25.core.claims.mde`)."""
    d = np.asarray(diffs, dtype=np.float64)
    s = summarize(d, level=CI_LEVEL, unit="seeds")
    return {"mean_diff": s["mean"], "ci_low": s["ci_low"], "ci_high": s["ci_high"], "sd": s["std"],
            "n_seeds": s["n"], "ci_method": s["ci_method"], "per_seed_diff": d.tolist(),
            "p_sign_flip": sign_flip_test(d) if d.size > 1 else None,
            "mde": mde(d.size, s["std"]) if d.size > 1 else None}


def _floor_rule(s: Mapping[str, Any], floor: float) -> tuple[bool, bool]:
    """Superiority with an effect-size floor (``floor`` < 0, lower is better): reproduced iff mean ≤ floor and CI
    high < 0; not reproduced iff CI low > floor (the effect is confidently short of the floor)."""
    return bool(s["mean_diff"] <= floor and s["ci_high"] < 0), bool(s["ci_low"] > floor)


def verdict_untargeted(adv_loss_sard: Sequence[Any], adv_loss_clean: Sequence[Any]
                       ) -> tuple[bool, bool, dict[str, Any]]:
    """Claim 1. Per-seed arrays of the per-test-point adversarial deferral loss at ε = 0.1 (values in [0, 1]),
    the same points in the same order for both arms. Per seed d_s = mean(sard) − mean(clean_l2d); Student-t 95 %
    interval over seeds. Reproduced: mean ≤ −0.02 and CI high < 0. Not reproduced: CI low > −0.02. Otherwise
    inconclusive."""
    p, lengths = _paired(adv_loss_sard=adv_loss_sard, adv_loss_clean=adv_loss_clean)
    d = [a.mean() - b.mean() for a, b in zip(p["adv_loss_sard"], p["adv_loss_clean"])]
    s = seed_effects(d)
    rep, nrep = _floor_rule(s, C1_MEAN_MAX)
    return rep, nrep, {**s, "mean_sard": float(np.mean([a.mean() for a in p["adv_loss_sard"]])),
                       "mean_clean": float(np.mean([b.mean() for b in p["adv_loss_clean"]])),
                       "points_per_seed": lengths, "threshold": C1_MEAN_MAX}


def verdict_targeted(success_sard: Sequence[Any], eligible_sard: Sequence[Any], success_clean: Sequence[Any],
                     eligible_clean: Sequence[Any]) -> tuple[bool, bool, dict[str, Any]]:
    """Claim 2. Per-seed 0/1 arrays per test point: ``eligible`` = 1{π(x) ≠ t}, ``success`` = 1{π(x) ≠ t and
    π(x′) = t}. Per seed the rate Σ success / Σ eligible of each arm and d_s = rate_sard − rate_clean; Student-t
    95 % interval over seeds. Reproduced: mean ≤ −0.05 (5 points) and CI high < 0. Not reproduced: CI low > −0.05.
    Otherwise inconclusive — including when an arm has no eligible point on some seed (it sends every test point
    to t, so that seed's rate is undefined; ``statistic["undefined_for"]`` names the arm and seeds)."""
    p, lengths = _paired(success_sard=success_sard, eligible_sard=eligible_sard, success_clean=success_clean,
                         eligible_clean=eligible_clean)
    for name, arrays in p.items():
        if not all(np.isin(a, (0.0, 1.0)).all() for a in arrays):
            raise ValueError(f"verdict_targeted: {name} must hold 0/1 values")
    for arm in ("sard", "clean"):
        if any((s > e).any() for s, e in zip(p[f"success_{arm}"], p[f"eligible_{arm}"])):
            raise ValueError(f"verdict_targeted: success_{arm} is 1 where eligible_{arm} is 0")
    empty = {arm: [i for i, e in enumerate(p[f"eligible_{arm}"]) if e.sum() == 0] for arm in ("sard", "clean")}
    empty = {arm: idx for arm, idx in empty.items() if idx}
    if empty:  # the rate is undefined: a rejector that already sends every point to t cannot be attacked towards t
        return False, False, {"mean_diff": float("nan"), "undefined_for": sorted(empty),
                              "undefined_seed_index": empty, "points_per_seed": lengths,
                              "threshold": -C2_DROP_MIN, "ci_method": "undefined (an arm has no eligible point)"}
    rates = {arm: np.array([s.sum() / e.sum() for s, e in zip(p[f"success_{arm}"], p[f"eligible_{arm}"])])
             for arm in ("sard", "clean")}
    s = seed_effects(rates["sard"] - rates["clean"])
    rep, nrep = _floor_rule(s, -C2_DROP_MIN)
    return rep, nrep, {**s, "rate_sard": float(rates["sard"].mean()), "rate_clean": float(rates["clean"].mean()),
                       "n_eligible_sard": int(sum(e.sum() for e in p["eligible_sard"])),
                       "n_eligible_clean": int(sum(e.sum() for e in p["eligible_clean"])),
                       "points_per_seed": lengths, "threshold": -C2_DROP_MIN}


def verdict_clean_noninferiority(clean_loss_sard: Sequence[Any], clean_loss_clean: Sequence[Any]
                                 ) -> tuple[bool, bool, dict[str, Any]]:
    """Claim 3. Per-seed arrays of the per-test-point clean deferral loss. Per seed d_s = mean(sard) −
    mean(clean_l2d); Student-t 95 % interval over seeds. Reproduced: CI high ≤ +0.03. Not reproduced: CI low >
    +0.03. Otherwise inconclusive."""
    p, lengths = _paired(clean_loss_sard=clean_loss_sard, clean_loss_clean=clean_loss_clean)
    d = [a.mean() - b.mean() for a, b in zip(p["clean_loss_sard"], p["clean_loss_clean"])]
    s = seed_effects(d)
    return bool(s["ci_high"] <= C3_MARGIN), bool(s["ci_low"] > C3_MARGIN), {
        **s, "mean_sard": float(np.mean([a.mean() for a in p["clean_loss_sard"]])),
        "mean_clean": float(np.mean([b.mean() for b in p["clean_loss_clean"]])), "points_per_seed": lengths,
        "margin": C3_MARGIN}


# ------------------------------------------------------------------------------------------ adequacy


def collapsed_seeds(alloc_rates: Sequence[Sequence[float]], oracle_rates: Sequence[Sequence[float]],
                    seeds: Sequence[int] | None = None, share: float = COLLAPSE_SHARE) -> list[int]:
    """Seeds whose rejector collapsed: ``alloc_rates[i]`` (J+1 shares of the clean test allocations of seed i, summing
    to 1) has a share ≥ ``share`` (default :data:`COLLAPSE_SHARE`), while the cost-optimal allocation of that seed
    (``oracle_rates[i]``, shares of argmin_j c_j) has none (then a near-constant rejector would be adequate). Returns the seeds (or the
    indices when ``seeds`` is None) in order."""
    a = np.asarray(alloc_rates, dtype=np.float64)
    o = np.asarray(oracle_rates, dtype=np.float64)
    if a.ndim != 2 or a.shape != o.shape:
        raise ValueError(f"collapsed_seeds: alloc_rates and oracle_rates must both be (seeds, J+1), got {a.shape} "
                         f"and {o.shape}")
    if not 0.5 < share <= 1:
        raise ValueError(f"collapsed_seeds: share (adequacy.collapse_share) must be in (0.5, 1], got {share}")
    names = list(range(len(a))) if seeds is None else [int(s) for s in seeds]
    flags = (a.max(axis=1) >= share) & (o.max(axis=1) < share)
    return [names[i] for i in np.flatnonzero(flags)]


def claim_gates(stem: str, collapsed: Mapping[str, Sequence[int]], *, attack_gain_clean: float,
                targeted_rate_clean: float, collapse_share: float = COLLAPSE_SHARE) -> list[Gate]:
    """The adequacy gates of claim ``stem`` (``c1_untargeted``, ``c2_targeted``, ``c3_clean_noninferiority``).

    ``collapsed``: {arm: collapsed seeds} (:func:`collapsed_seeds`); ``attack_gain_clean``: clean_l2d's mean over
    seeds of (adversarial − clean) deferral loss at the claim budget; ``targeted_rate_clean``: clean_l2d's mean
    targeted success rate. Every claim: no collapsed seed in either arm. Claim 1: the attack gain ≥ |C1_MEAN_MAX|.
    Claim 2: the baseline's targeted success ≥ C2_DROP_MIN."""
    bad = {arm: list(s) for arm, s in collapsed.items() if s}
    gates = [gate("no_collapsed_rejector", sum(len(s) for s in bad.values()), at_most=0,
                  text=(f"collapsed seeds {bad}: one agent gets >= {collapse_share:.0%} of a seed's clean test "
                        "allocations while the cost-optimal allocation does not" if bad else
                        "no rejector sends (almost) every test point to one agent"))]
    if stem == "c1_untargeted":
        gates.append(gate("attack_headroom", attack_gain_clean, at_least=-C1_MEAN_MAX,
                          text="the untargeted attack must raise clean_l2d's deferral loss by at least the claim's "
                               "floor, else no reduction of that size is possible"))
    elif stem == "c2_targeted":
        gates.append(gate("targeted_headroom", targeted_rate_clean, at_least=C2_DROP_MIN,
                          text="the targeted attack must succeed on clean_l2d at least as often as the claim's floor "
                               "(5 points)"))
    return gates


# ------------------------------------------------------------------------------------------ claim 4


def check_surrogate_bound(min_gap_comp_sum: float, min_gap_rho_margin: float) -> tuple[bool, dict[str, Any]]:
    """Σ_j τ_j Φ ≥ J log 2 ℓ_def on the random inputs: both minimum gaps ≥ −1e-12 (float64 rounding)."""
    gaps = {"min_gap_comp_sum": float(min_gap_comp_sum), "min_gap_rho_margin": float(min_gap_rho_margin)}
    holds = all(np.isfinite(v) and v >= -BOUND_TOL for v in gaps.values())
    return bool(holds), {**gaps, "tolerance": BOUND_TOL, "holds": bool(holds)}


def check_bayes_allocation(max_abs_grad: float, argmax_is_argmin_cost: float) -> tuple[bool, dict[str, Any]]:
    """At r = log τ the ν = 1 surrogate's gradient is ≤ 1e-10 in absolute value and argmax softmax = argmin cost on
    every row (fraction exactly 1)."""
    holds = bool(np.isfinite(max_abs_grad) and max_abs_grad <= GRAD_TOL and argmax_is_argmin_cost == 1.0)
    return holds, {"max_abs_grad": float(max_abs_grad), "argmax_is_argmin_cost": float(argmax_is_argmin_cost),
                   "tolerance": GRAD_TOL, "holds": holds}


def check_attack_budget(eps0_bitwise: Sequence[bool], ball_violation: Sequence[float]) -> tuple[bool, dict[str, Any]]:
    """Per evaluated run: the ε = 0 attack returned x bitwise, and the largest excursion of any PGD iterate outside
    B∞(x, ε) ∩ box is ≤ 1e-6 (float32 rounding of x ± ε)."""
    bits = [bool(b) for b in eps0_bitwise]
    viol = np.asarray(ball_violation, dtype=np.float64).reshape(-1)
    if not bits or viol.size == 0:
        raise ValueError("check_attack_budget: needs at least one run")
    worst = float(np.max(viol)) if np.isfinite(viol).all() else float("inf")
    holds = all(bits) and worst <= BALL_TOL
    return bool(holds), {"eps0_bitwise_all": all(bits), "n_runs": len(bits), "max_ball_violation": worst,
                         "tolerance": BALL_TOL, "holds": bool(holds)}


def check_monotone_eps(adv_loss_by_eps: Any, eps: Sequence[float]) -> tuple[bool, dict[str, Any]]:
    """Diagnostic: the mean adversarial deferral loss of every run (rows of a (runs, len(eps)) array, columns in the
    order of ``eps``) is non-decreasing in ε."""
    a = np.atleast_2d(np.asarray(adv_loss_by_eps, dtype=np.float64))
    e = np.asarray(eps, dtype=np.float64)
    if a.shape[1] != len(e) or len(e) < 2:
        raise ValueError(f"check_monotone_eps: need (runs, {len(e)}) values for >= 2 budgets, got {a.shape}")
    a = a[:, np.argsort(e)]
    steps = np.diff(a, axis=1)
    ok = (steps >= 0).all(axis=1) & np.isfinite(a).all(axis=1)
    return bool(ok.all()), {"runs_monotone": int(ok.sum()), "n_runs": int(len(ok)),
                            "min_increment": float(steps.min()), "holds": bool(ok.all())}


def check_mechanism(bound: tuple[bool, dict], bayes: tuple[bool, dict], budget: tuple[bool, dict],
                    monotone: tuple[bool, dict]) -> tuple[bool, dict[str, Any]]:
    """Claim 4 holds iff all four sub-checks hold (outputs of the four ``check_*`` functions)."""
    parts = {"surrogate_bound": bound, "bayes_allocation": bayes, "attack_budget": budget,
             "monotone_eps": monotone}
    holds = all(h for h, _ in parts.values())
    return bool(holds), {"holds": bool(holds), **{k: s for k, (_, s) in parts.items()}}


# ------------------------------------------------------------------------------------------ claims.json

#: (id stem, title, statement) of claims 1-3; the dataset is appended to the id for non-primary datasets
CLAIM_TEXT = (
    ("c1_untargeted", "Untargeted robustness",
     "SARD lowers the adversarial deferral loss under an untargeted PGD-20 attack at eps = 0.1 compared with clean "
     "two-stage learning to defer"),
    ("c2_targeted", "Targeted robustness",
     "SARD lowers the success rate of a targeted attack that pushes queries to the costliest expert, "
     "P(pi(x') = t | pi(x) != t), compared with clean two-stage learning to defer"),
    ("c3_clean_noninferiority", "Clean non-inferiority",
     "SARD keeps the clean deferral loss of clean two-stage learning to defer (non-inferiority margin 0.03)"),
)
_TESTS = {
    "c1_untargeted": ("per seed d = mean over test points of (sard - clean_l2d) adversarial deferral loss at the "
                      "claim budget; Student-t 95% CI over seeds",
                      "reproduced: mean(d) <= -0.02 and CI high < 0; not reproduced: CI low > -0.02; else "
                      "inconclusive"),
    "c2_targeted": ("per seed d = targeted-success rate of sard - that of clean_l2d; Student-t 95% CI over seeds",
                    "reproduced: mean(d) <= -0.05 and CI high < 0; not reproduced: CI low > -0.05; else "
                    "inconclusive"),
    "c3_clean_noninferiority": ("per seed d = mean over test points of (sard - clean_l2d) clean deferral loss; "
                                "Student-t 95% CI over seeds",
                                "reproduced: CI high <= +0.03; not reproduced: CI low > +0.03; else inconclusive"),
}
#: datasets the paper itself uses (paper scale); digits and diabetes are stand-ins
PAPER_DATASETS = ("cifar10", "california_housing", "voc2007")


def _word(rep: bool, nrep: bool) -> str:
    return "reproduced" if rep and not nrep else ("not reproduced" if nrep else "inconclusive")


def claim_outcomes(runs: Mapping[tuple[str, str, int], Mapping[str, Any]], dataset: str, arm: str,
                   seeds: Sequence[int], claim_eps_key: str, target: int,
                   collapse_share: float = COLLAPSE_SHARE
                   ) -> dict[str, tuple[bool, bool, dict[str, Any], list[Gate]]]:
    """Claims 1–3 for ``arm`` against ``clean_l2d`` on one dataset: ``{stem: (reproduced, not_reproduced,
    statistic, gates)}``. ``runs[(dataset, arm, seed)]`` holds ``points`` (per-test-point arrays) and ``metrics``
    (``alloc_rate_{j}``, ``agents/oracle_rate_{j}``, ``def_loss_clean``, ``def_loss_adv_<eps>``)."""
    def pts(a: str, key: str) -> list[np.ndarray]:
        return [np.asarray(runs[(dataset, a, s)]["points"][key]) for s in seeds]

    def rates(a: str, prefix: str) -> list[list[float]]:
        m = [runs[(dataset, a, s)]["metrics"] for s in seeds]
        n_agents = sum(1 for k in m[0] if k.startswith("alloc_rate_"))
        return [[mi[f"{prefix}{j}"] for j in range(n_agents)] for mi in m]

    collapsed = {a: collapsed_seeds(rates(a, "alloc_rate_"), rates(a, "agents/oracle_rate_"), seeds,
                                    collapse_share) for a in (arm, "clean_l2d")}
    adv = f"def_loss_adv_{claim_eps_key}"
    gain = float(np.mean([a.mean() - c.mean() for a, c in zip(pts("clean_l2d", adv),
                                                               pts("clean_l2d", "def_loss_clean"))]))
    succ, elig = pts("clean_l2d", f"targeted_success_{target}"), pts("clean_l2d", f"targeted_eligible_{target}")
    rate = float(np.mean([s.sum() / e.sum() if e.sum() else np.nan for s, e in zip(succ, elig)]))
    out = {
        "c1_untargeted": verdict_untargeted(pts(arm, adv), pts("clean_l2d", adv)),
        "c2_targeted": verdict_targeted(pts(arm, f"targeted_success_{target}"),
                                        pts(arm, f"targeted_eligible_{target}"), succ, elig),
        "c3_clean_noninferiority": verdict_clean_noninferiority(pts(arm, "def_loss_clean"),
                                                               pts("clean_l2d", "def_loss_clean")),
    }
    return {k: (*v, claim_gates(k, collapsed, attack_gain_clean=gain, targeted_rate_clean=rate,
                                 collapse_share=collapse_share)) for k, v in out.items()}


def _per_seed(runs: Mapping, dataset: str, arm: str, seeds: Sequence[int], key: str) -> list[float]:
    """One metric per seed; a metric undefined on a seed (a targeted success rate with no eligible point, stored
    as null in the train job's json) is NaN."""
    vals = [runs[(dataset, arm, s)]["metrics"][key] for s in seeds]
    return [float("nan") if v is None else float(v) for v in vals]


def describe_per_seed(values: Sequence[float]) -> dict[str, Any]:
    """:func:`icml25.core.claims.summarize` of the seeds where the metric is defined (finite), with
    ``undefined_seeds`` = how many were not; every field None (n = 0) when no seed defines it. Descriptive only:
    the verdicts never read it (found by the paper-scale rehearsal: a rejector that routes every test point to the
    targeted agent has no targeted success rate, and summarize refuses NaN)."""
    x = np.asarray(values, dtype=float)
    ok = x[np.isfinite(x)]
    if ok.size == 0:
        return {"mean": None, "ci_low": None, "ci_high": None, "std": None, "n": 0,
                "ci_method": "undefined on every seed", "undefined_seeds": int(x.size)}
    return {**summarize(ok), "undefined_seeds": int(x.size - ok.size)}


def build_claims(runs: Mapping[tuple[str, str, int], Mapping[str, Any]], *, datasets: Sequence[str],
                 primary: str, arms: Sequence[str], seeds: Sequence[int], claim_eps_key: str,
                 eps_keys: Sequence[str], eps_values: Sequence[float], targets: Mapping[str, int],
                 identities: Mapping[str, float], collapse_share: float = COLLAPSE_SHARE) -> list:
    """Every entry of the spec: claims 1–3 per dataset (``sard`` vs ``clean_l2d``; ids get ``_<dataset>`` unless
    ``dataset == primary``), with the same rules and gates applied to ``sard_ce`` in the statistic (secondary
    analysis, not a claim), and the claim-4 check over every evaluated run. ``evidence.paper_data`` is True only
    for the paper's own datasets (:data:`PAPER_DATASETS`). Returns :class:`icml25.core.claims.Claim` objects."""
    from icml25.core.claims import Claim, Evidence, apply_gates, check, verdict

    entries = []
    for ds in datasets:
        if not all((ds, a, s) in runs for a in ("clean_l2d", "sard") for s in seeds):
            continue
        main = claim_outcomes(runs, ds, "sard", seeds, claim_eps_key, targets[ds], collapse_share)
        second = (claim_outcomes(runs, ds, "sard_ce", seeds, claim_eps_key, targets[ds], collapse_share)
                  if all((ds, "sard_ce", s) in runs for s in seeds) else {})
        metric_key = {"c1_untargeted": f"def_loss_adv_{claim_eps_key}",
                      "c2_targeted": f"targeted_success_{targets[ds]}", "c3_clean_noninferiority": "def_loss_clean"}
        for stem, title, statement in CLAIM_TEXT:
            rep, nrep, stat, gates = main[stem]
            if stem in second:
                r2, n2, s2, g2 = second[stem]
                v2, gate_note = apply_gates("claim", verdict(r2, n2), g2)
                stat = {**stat, "secondary_sard_ce": {"verdict": v2, "test_alone": _word(r2, n2),
                                                      "gates_failed": [g.name for g in g2 if not g.passed],
                                                      "gate_note": gate_note, **s2}}
            arms_here = [a for a in arms if all((ds, a, s) in runs for s in seeds)]
            metrics = {a: describe_per_seed(_per_seed(runs, ds, a, seeds, metric_key[stem])) for a in arms_here}
            diff = stat.get("mean_diff")
            keys = {"d (sard - clean_l2d)": diff, "ci_low": stat.get("ci_low"), "ci_high": stat.get("ci_high"),
                    "per_seed_d": stat.get("per_seed_diff")}
            test, threshold = _TESTS[stem]
            entries.append(Claim(
                id=stem if ds == primary else f"{stem}_{ds}", title=f"{title} ({ds})",
                statement=f"{statement} ({ds}).", source="paper",
                data=f"{ds} (scikit-learn), simulated agents, test split of seeds {list(seeds)}",
                test=test, threshold=threshold, verdict=verdict(rep, nrep), statistic=stat, metrics=metrics,
                kind="claim", gates=gates,
                evidence=Evidence(n=len(seeds), unit="seeds", paper_data=ds in PAPER_DATASETS,
                                  ci_method=stat.get("ci_method", ""), mde=stat.get("mde")),
                key_numbers=keys))
    evaluated = [r for r in runs.values()]
    budget_runs = [r for r in evaluated if r["metrics"].get("eps0_bitwise") is not None]
    holds, stat = check_mechanism(
        check_surrogate_bound(identities["min_gap_comp_sum"], identities["min_gap_rho_margin"]),
        check_bayes_allocation(identities["bayes_max_abs_grad"], identities["bayes_argmax_is_argmin_cost"]),
        check_attack_budget([r["metrics"]["eps0_bitwise"] for r in budget_runs],
                            [r["metrics"]["ball_violation"] for r in budget_runs]),
        check_monotone_eps([[r["metrics"][f"def_loss_adv_{k}"] for k in eps_keys] for r in evaluated], eps_values))
    entries.append(check(
        "c4_mechanism", "The surrogate bound sum_j tau_j Phi >= J log 2 l_def holds (comp-sum and rho-margin), the "
        "nu = 1 surrogate's gradient vanishes at r = log tau (Bayes allocation to the cheapest agent), eps = 0 "
        "attacks return x bitwise and PGD iterates stay in the ball and box, and the adversarial deferral loss is "
        "non-decreasing in eps.", holds=holds, title="Mechanism: surrogate bound, Bayes allocation, attack budget",
        data=f"{int(identities['n'])} random float64 (scores, costs) rows; every evaluated run", test="exact checks",
        threshold=f"bound gap >= -{BOUND_TOL}, |grad| <= {GRAD_TOL}, ball excursion <= {BALL_TOL}, monotone in eps",
        statistic=stat, evidence=Evidence(n=len(evaluated), unit="runs", paper_data=None),
        key_numbers={"min_gap_comp_sum": stat["surrogate_bound"]["min_gap_comp_sum"],
                     "max_abs_grad": stat["bayes_allocation"]["max_abs_grad"],
                     "max_ball_violation": stat["attack_budget"]["max_ball_violation"],
                     "runs_monotone": stat["monotone_eps"]["runs_monotone"]}))
    if "voc2007" in datasets:
        entries.append(untested(
            "c_voc_detector_agents", "On VOC 2007 the paper's multi-task agents are Faster R-CNN detectors; claims "
            "1-3 on voc2007 hold with those agents.", scale="paper", title="VOC 2007 with Faster R-CNN agents",
            reason="not run with the paper's agents: torchvision (Faster R-CNN) is not a dependency of this project "
                   "and its pretrained detector weights cannot be obtained or pinned offline; the voc2007 claims "
                   "above use a ResNet-18 class + box main model on each image's largest object instead [R]",
            data="Pascal VOC 2007 trainval + test"))
    return entries
