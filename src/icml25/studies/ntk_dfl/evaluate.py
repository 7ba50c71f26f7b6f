"""Verdict functions of the ntk_dfl study: pure numpy, one per claim and one per exact check.

Accuracies come in as fractions in [0, 1] (held-out test split, one value per seed, seeds in the same order for
every arm); thresholds are in percentage points (pts) and are applied to 100·a − 100·b.

Claims (paper: Thompson et al., ICML 2025, Sec. 5 "Experiments"):

1. :func:`claim_rounds_to_target` — NTK-DFL needs fewer rounds than D-PSGD and DFedAvg to reach a target accuracy.
2. :func:`claim_averaging_gain` — the final network-mean model beats the mean client model.
3. :func:`claim_accuracy` — higher final aggregated accuracy than the best baseline under strong heterogeneity.

Checks (exact identities of our implementation):

4. :func:`check_linear_identity` — NTK evolution of a linear model = full-batch gradient descent.
5. :func:`check_mixing_mean` — one averaging step on a d-regular graph keeps the network mean.

Claims return ``(reproduced, not_reproduced, statistic)``; checks return ``(holds, statistic)``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from icml25.core.claims import bootstrap_ci


def _pts(x: Sequence[float] | np.ndarray) -> np.ndarray:
    return 100.0 * np.asarray(x, dtype=float)


def rounds_to_target(curve: Sequence[float], target: float) -> int | None:
    """First round (1-based) whose accuracy is >= target, or None if no round reaches it."""
    hits = np.flatnonzero(np.asarray(curve, dtype=float) >= target)
    return int(hits[0]) + 1 if hits.size else None


def claim_rounds_to_target(agg_curves: Mapping[str, Sequence[Sequence[float]]], target_frac: float = 0.95,
                           gmean_max: float = 0.8, min_seeds: int = 2, arm: str = "ntk_dfl",
                           baselines: Sequence[str] = ("dfedavg", "dpsgd"),
                           reference: str = "dfedavg") -> tuple[bool, bool, dict[str, Any]]:
    """Claim 1: fewer communication rounds to a target accuracy (paper: 4.6× fewer).

    ``agg_curves[arm]`` is (n_seeds, R) aggregated test accuracy after rounds 1..R. Per seed the target is
    ``target_frac`` × the reference arm's (DFedAvg's) final accuracy and r(a) the first round reaching it. The ratio
    r(arm)/r(b) uses R+1 for an arm that never reaches the target (so two arms that both miss give 1, and a missing
    baseline gives r(arm)/(R+1), a conservative ratio). Reproduced if, for every baseline b, the ratio is < 1 in
    >= ``min_seeds`` seeds and its geometric mean over seeds is <= ``gmean_max``; not reproduced if the ratio is
    >= 1 in >= ``min_seeds`` seeds for any baseline; else inconclusive. The speed-up factor 1/gmean is reported.
    """
    for a in (arm, reference, *baselines):
        if a not in agg_curves:
            raise KeyError(f"claim_rounds_to_target: no curves for arm {a!r}")
    ref = np.asarray(agg_curves[reference], dtype=float)
    n_seeds, R = ref.shape
    targets = target_frac * ref[:, -1]
    rounds = {a: [rounds_to_target(c, t) for c, t in zip(np.asarray(agg_curves[a], float), targets)]
              for a in (arm, *baselines)}
    for a, rs in rounds.items():
        if len(rs) != n_seeds:
            raise ValueError(f"claim_rounds_to_target: arm {a!r} has {len(rs)} seeds, {reference!r} {n_seeds}")

    def censored(r: int | None) -> int:
        return R + 1 if r is None else r

    per_b = {}
    for b in baselines:
        ratios = np.array([censored(x) / censored(y) for x, y in zip(rounds[arm], rounds[b])])
        gmean = float(np.exp(np.log(ratios).mean()))
        per_b[b] = {"ratios": ratios.tolist(), "n_below_1": int((ratios < 1).sum()),
                    "n_at_least_1": int((ratios >= 1).sum()), "gmean_ratio": gmean,
                    "speedup_factor": 1.0 / gmean}
    reproduced = all(s["n_below_1"] >= min_seeds and s["gmean_ratio"] <= gmean_max for s in per_b.values())
    not_reproduced = any(s["n_at_least_1"] >= min_seeds for s in per_b.values())
    stat = {"targets": targets.tolist(), "rounds": rounds, "rounds_censored_at": R + 1, "per_baseline": per_b,
            "n_seeds": int(n_seeds)}
    return reproduced, not_reproduced, stat


def claim_averaging_gain(agg_acc: Sequence[float], mean_client_acc: Sequence[float],
                         gap_min_pts: float = 5.0) -> tuple[bool, bool, dict[str, Any]]:
    """Claim 2: final model averaging helps (paper: >= 10 pts over the mean local accuracy).

    Per seed gap = 100·acc(mean-of-weights model) − 100·mean_k acc(client k) at the final round of NTK-DFL.
    Reproduced if mean gap >= ``gap_min_pts`` and gap > 0 in every seed; not reproduced if mean gap <= 0; else
    inconclusive.
    """
    gap = _pts(agg_acc) - _pts(mean_client_acc)
    if gap.size == 0 or gap.shape != np.shape(agg_acc):
        raise ValueError(f"claim_averaging_gain: need equal-length non-empty per-seed arrays, got "
                         f"{np.shape(agg_acc)} and {np.shape(mean_client_acc)}")
    mean = float(gap.mean())
    return (mean >= gap_min_pts and bool((gap > 0).all()), mean <= 0,
            {"gap_pts": gap.tolist(), "mean_gap_pts": mean, "n_positive": int((gap > 0).sum()),
             "n_seeds": int(gap.size)})


def claim_accuracy(arm_acc: Sequence[float], baseline_acc: Mapping[str, Sequence[float]], n_resamples: int = 10000,
                   ci_low_min_pts: float = -1.0, seed: int = 0) -> tuple[bool, bool, dict[str, Any]]:
    """Claim 3: higher final aggregated accuracy than the best baseline under strong heterogeneity.

    The best baseline is the one with the highest mean final accuracy over seeds; d = 100·acc(ntk_dfl) −
    100·acc(best) per seed, percentile bootstrap 95 % CI of mean d (``n_resamples``, default_rng(seed)).
    Reproduced if mean d > 0 and CI lower bound > ``ci_low_min_pts``; not reproduced if the CI upper bound < 0;
    else inconclusive.
    """
    if not baseline_acc:
        raise ValueError("claim_accuracy: no baselines")
    a = _pts(arm_acc)
    means = {b: float(np.mean(v)) for b, v in baseline_acc.items()}
    best = max(means, key=means.get)
    b = _pts(baseline_acc[best])
    if a.shape != b.shape or a.size == 0:
        raise ValueError(f"claim_accuracy: arm has {a.size} seeds, {best!r} has {b.size}")
    d = a - b
    low, high = bootstrap_ci(d, n_resamples=n_resamples, seed=seed)
    mean = float(d.mean())
    return (mean > 0 and low > ci_low_min_pts, high < 0,
            {"best_baseline": best, "baseline_means": means, "d_pts": d.tolist(), "mean_d_pts": mean,
             "ci_low_pts": low, "ci_high_pts": high, "n_resamples": int(n_resamples), "n_seeds": int(d.size)})


def check_linear_identity(gaps: Sequence[Mapping[int, float]], tol: float = 1e-9) -> tuple[bool, dict[str, Any]]:
    """Claim 4 (exact): max |W_ntk(t) − W_gd(t)| <= tol for every t and every seed (``gaps`` one {t: gap} per
    seed). A non-finite gap fails."""
    vals = [float(g) for by_t in gaps for g in by_t.values()]
    if not vals:
        raise ValueError("check_linear_identity: no gaps")
    worst = max(vals, key=lambda v: math.inf if not math.isfinite(v) else v)
    holds = all(math.isfinite(v) and v <= tol for v in vals)
    by_t: dict[int, float] = {}
    for g in gaps:
        for t, v in g.items():
            by_t[int(t)] = max(by_t.get(int(t), -math.inf), float(v))
    return holds, {"max_abs_diff": worst, "max_by_t": by_t, "tol": tol, "n_seeds": len(gaps)}


def check_mixing_mean(gaps: Sequence[float], tol: float = 1e-6) -> tuple[bool, dict[str, Any]]:
    """Claim 5 (exact): max |mean_k w̄_k − mean_k w_k| <= tol (float32) in every seed; non-finite fails."""
    g = np.asarray(gaps, dtype=float)
    if g.size == 0:
        raise ValueError("check_mixing_mean: no gaps")
    holds = bool(np.isfinite(g).all() and (g <= tol).all())
    return holds, {"max_abs_diff": float(np.nanmax(g)) if np.isfinite(g).any() else math.inf, "tol": tol,
                   "n_seeds": int(g.size)}


def evaluate_all(results: Mapping[str, Sequence[Mapping[str, Any]]], checks: Sequence[Mapping[str, Any]],
                 settings: Mapping[str, Any]) -> dict[str, tuple]:
    """All five verdicts from ``results[arm]`` (list of :func:`experiment.run` outputs, same seed order for every
    arm) and ``checks`` (list of :func:`experiment.run_checks` outputs). Returns {claim id: verdict tuple}."""
    c, k = settings["claims"], settings["checks"]
    curves = {a: [r["curves"]["agg_acc"] for r in rs] for a, rs in results.items()}
    final = {a: [r["final"]["agg_acc"] for r in rs] for a, rs in results.items()}
    seeds = {a: [r["seed"] for r in rs] for a, rs in results.items()}
    if len({tuple(s) for s in seeds.values()}) != 1:
        raise ValueError(f"evaluate_all: arms ran different seeds: {seeds}")
    return {
        "rounds_to_target": claim_rounds_to_target(curves, c["target_frac"], c["ratio_gmean_max"],
                                                   c["min_seeds"]),
        "averaging_gain": claim_averaging_gain(final["ntk_dfl"],
                                               [r["final"]["mean_client_acc"] for r in results["ntk_dfl"]],
                                               c["gap_min_pts"]),
        "accuracy": claim_accuracy(final["ntk_dfl"], {b: final[b] for b in ("dfedavg", "dpsgd")},
                                   c["n_resamples"], c["ci_low_min_pts"]),
        "linear_identity": check_linear_identity([x["identity_gaps"] for x in checks], k["identity_tol"]),
        "mixing_mean": check_mixing_mean([x["mixing_gap"] for x in checks], k["mixing_tol"]),
    }
