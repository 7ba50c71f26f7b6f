"""Verdicts of the sard study: pure functions of per-seed, per-test-point metric arrays (thresholds are the study's
constants, fixed before any result was seen).

Claims 1–3 compare ``sard`` with ``clean_l2d`` on the same seeds (same split, agents, rejector initialisation and
attack starts), so their test points are paired. Uncertainty is a paired percentile bootstrap over the test points
pooled across seeds (:data:`N_BOOT` resamples, 95 %).

* :func:`verdict_untargeted` — claim 1: adversarial deferral loss at ε = 0.1 (PGD-20), sard − clean_l2d.
* :func:`verdict_targeted` — claim 2: success rate of the attack towards the costliest expert t,
  P(π(x′) = t | π(x) ≠ t), sard − clean_l2d.
* :func:`verdict_clean_noninferiority` — claim 3: clean deferral loss, sard − clean_l2d.
* :func:`check_mechanism` — claim 4 (a check): :func:`check_surrogate_bound`, :func:`check_bayes_allocation`,
  :func:`check_attack_budget` and the diagnostic :func:`check_monotone_eps` all hold.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

N_BOOT = 2000                 # bootstrap resamples
CI_LEVEL = 0.95
C1_MEAN_MAX = -0.02           # claim 1: mean paired difference of the adversarial deferral loss at most this
C2_DROP_MIN = 0.05            # claim 2: sard's targeted success rate lower by at least 5 points (rate units)
C3_MARGIN = 0.03              # claim 3: non-inferiority margin of the clean deferral loss
BOUND_TOL = 1e-12             # claim 4: float64 rounding allowance of the surrogate bound (equality cases)
GRAD_TOL = 1e-10              # claim 4: |gradient| of the nu = 1 surrogate at r = log tau
BALL_TOL = 1e-6               # claim 4: float32 rounding of x +- eps (|x| < 16) allowed outside the ball/box


def _pool(name: str, per_seed: Sequence[Any]) -> tuple[np.ndarray, list[int]]:
    arrays = [np.asarray(a, dtype=np.float64).reshape(-1) for a in per_seed]
    if not arrays or any(a.size == 0 for a in arrays):
        raise ValueError(f"verdict: {name} must be a non-empty list of non-empty per-seed arrays")
    pooled = np.concatenate(arrays)
    if not np.isfinite(pooled).all():
        raise ValueError(f"verdict: {name} has non-finite values")
    return pooled, [len(a) for a in arrays]


def _paired(**per_seed: Sequence[Any]) -> tuple[dict[str, np.ndarray], list[int]]:
    pooled, lengths = {}, {}
    for name, arrays in per_seed.items():
        pooled[name], lengths[name] = _pool(name, arrays)
    if len({tuple(v) for v in lengths.values()}) != 1:
        raise ValueError(f"verdict: per-seed arrays are not paired (points per seed differ): {lengths}")
    return pooled, next(iter(lengths.values()))


def paired_bootstrap(statistic: Callable[[np.ndarray], np.ndarray], n_points: int, n_boot: int = N_BOOT,
                     seed: int = 0) -> tuple[float, float]:
    """Percentile CI of a statistic of resampled test points: ``statistic(idx)`` maps an index matrix (B, N) to B
    values. Resampling is uniform with replacement over the N pooled points, rng ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n_points, size=(n_boot, n_points))
    boot = statistic(idx)  # NaN (a resample where a ratio is undefined) is left out
    lo, hi = np.nanpercentile(boot, [50 * (1 - CI_LEVEL), 50 * (1 + CI_LEVEL)])
    return float(lo), float(hi)


def _mean_diff(a: np.ndarray, b: np.ndarray, n_boot: int, seed: int) -> dict[str, Any]:
    d = a - b
    lo, hi = paired_bootstrap(lambda idx: d[idx].mean(axis=1), len(d), n_boot, seed)
    return {"mean_diff": float(d.mean()), "ci_low": lo, "ci_high": hi, "n_points": int(len(d)),
            "mean_sard": float(a.mean()), "mean_clean": float(b.mean())}


def verdict_untargeted(adv_loss_sard: Sequence[Any], adv_loss_clean: Sequence[Any], n_boot: int = N_BOOT,
                       seed: int = 0) -> tuple[bool, bool, dict[str, Any]]:
    """Claim 1. Per-seed arrays of the per-test-point adversarial deferral loss at ε = 0.1 (values in [0, 1]).
    d = sard − clean_l2d, pooled. Reproduced: mean(d) ≤ −0.02 and CI high < 0. Not reproduced: CI low > 0.
    Otherwise inconclusive."""
    p, lengths = _paired(adv_loss_sard=adv_loss_sard, adv_loss_clean=adv_loss_clean)
    s = _mean_diff(p["adv_loss_sard"], p["adv_loss_clean"], n_boot, seed)
    reproduced = s["mean_diff"] <= C1_MEAN_MAX and s["ci_high"] < 0
    not_reproduced = s["ci_low"] > 0
    return bool(reproduced), bool(not_reproduced), {**s, "points_per_seed": lengths, "threshold": C1_MEAN_MAX}


def verdict_targeted(success_sard: Sequence[Any], eligible_sard: Sequence[Any], success_clean: Sequence[Any],
                     eligible_clean: Sequence[Any], n_boot: int = N_BOOT,
                     seed: int = 0) -> tuple[bool, bool, dict[str, Any]]:
    """Claim 2. Per-seed 0/1 arrays per test point: ``eligible`` = 1{π(x) ≠ t}, ``success`` = 1{π(x) ≠ t and
    π(x′) = t}. Rate = Σ success / Σ eligible (pooled); d = rate_sard − rate_clean, with a paired bootstrap of the
    points (each arm's rate recomputed on the same resample). Reproduced: d ≤ −0.05 (5 points) and the CI excludes
    0. Not reproduced: CI low > 0. Otherwise inconclusive — including when an arm has no eligible point at all
    (it sends every test point to t, so the rate is undefined; ``statistic["undefined_for"]`` names it)."""
    p, lengths = _paired(success_sard=success_sard, eligible_sard=eligible_sard, success_clean=success_clean,
                         eligible_clean=eligible_clean)
    for name, a in p.items():
        if not np.isin(a, (0.0, 1.0)).all():
            raise ValueError(f"verdict_targeted: {name} must hold 0/1 values")
    for arm in ("sard", "clean"):
        if (p[f"success_{arm}"] > p[f"eligible_{arm}"]).any():
            raise ValueError(f"verdict_targeted: success_{arm} is 1 where eligible_{arm} is 0")
    n = len(p["success_sard"])
    empty = [arm for arm in ("sard", "clean") if p[f"eligible_{arm}"].sum() == 0]
    if empty:  # the rate is undefined: a rejector that already sends every point to t cannot be attacked towards t
        return False, False, {"rate_diff": float("nan"), "undefined_for": empty, "n_points": int(n),
                              "points_per_seed": lengths, "threshold": -C2_DROP_MIN}

    def rate(arm: str, idx: np.ndarray | None = None) -> np.ndarray | float:
        s, e = p[f"success_{arm}"], p[f"eligible_{arm}"]
        if idx is None:
            return float(s.sum() / e.sum())
        es = e[idx].sum(axis=1)
        return s[idx].sum(axis=1) / np.where(es > 0, es, np.nan)

    d = rate("sard") - rate("clean")
    lo, hi = paired_bootstrap(lambda idx: rate("sard", idx) - rate("clean", idx), n, n_boot, seed)
    reproduced = d <= -C2_DROP_MIN and (hi < 0 or lo > 0)
    not_reproduced = lo > 0
    stat = {"rate_diff": float(d), "rate_sard": rate("sard"), "rate_clean": rate("clean"), "ci_low": lo,
            "ci_high": hi, "n_points": int(n), "n_eligible_sard": int(p["eligible_sard"].sum()),
            "n_eligible_clean": int(p["eligible_clean"].sum()), "points_per_seed": lengths,
            "threshold": -C2_DROP_MIN}
    return bool(reproduced), bool(not_reproduced), stat


def verdict_clean_noninferiority(clean_loss_sard: Sequence[Any], clean_loss_clean: Sequence[Any],
                                 n_boot: int = N_BOOT, seed: int = 0) -> tuple[bool, bool, dict[str, Any]]:
    """Claim 3. Per-seed arrays of the per-test-point clean deferral loss. d = sard − clean_l2d, pooled.
    Reproduced: CI high ≤ +0.03. Not reproduced: CI low > +0.03. Otherwise inconclusive."""
    p, lengths = _paired(clean_loss_sard=clean_loss_sard, clean_loss_clean=clean_loss_clean)
    s = _mean_diff(p["clean_loss_sard"], p["clean_loss_clean"], n_boot, seed)
    reproduced = s["ci_high"] <= C3_MARGIN
    not_reproduced = s["ci_low"] > C3_MARGIN
    return bool(reproduced), bool(not_reproduced), {**s, "points_per_seed": lengths, "margin": C3_MARGIN}


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
