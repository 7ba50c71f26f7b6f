"""Cell summaries, closed forms per cell, and the verdicts of the study's claims and checks.

All claims concern our own construction (an illustration of Lechner, Bie & Kamath, ICML 2025, arXiv:2509.05137;
not the paper's proof). Pure functions on pandas tables: the trial table (:data:`.data.TRIAL_COLUMNS`) and the
cell table of :func:`cell_table` (one row per adversary × learner × c × η × m × seed).

1. Separation (check): adaptive errors stay at ≈ ½, oblivious ones vanish for ``robust``.
2. Mechanism (checks): (a) insertion budget, (b) closed-form failure rate, (c) indistinguishability.
3. Phase boundary (check): failure ≈ 0 at η = c/2, ≈ 0.13–0.15 at η = c.

Every entry is a **check** (issue 31): the construction's errors and failure rates have closed forms, so a
simulated value off its closed form or off a bracketing range is a bug of the code, not a finding about the paper.
Each statistical check has a stated false-alarm rate: (1) the trials per cell are sized so that correct code fails
the spec's thresholds with probability ≤ 1% (a normal union bound over its comparisons, reported as
``false_alarm_bound``); (2b), (2c) and (3) are exact binomial / chi-square / KS tests Bonferroni-corrected to a
family level of 1%. Each check also states its power against a named bug (issue 33): :func:`separation_power`
(1), :func:`binomial_family_sizing` (2b, 3: exact false-alarm rate and the shift detected with probability 0.8),
:func:`indistinguishable_power` (2c, Monte Carlo in the hardest cell).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from icml25.core.claims import Claim, Evidence, check, summarize

from .method import LEARNERS, budget, le_cam_lower_bound, abort_probability, robust_failure_rate

CELL_KEYS = ["adversary", "c", "eta_over_c", "eta", "m", "budget"]
OBLIVIOUS = ("obl_decoy", "obl_code_flood", "obl_point_flood")
_TOL = 1e-9
_FP = 1e-12  # float slack of threshold comparisons (means of equal values are not exact)

# claim 1 (spec thresholds)
SEP_RATIO = 1.5          # cells with η ≥ 1.5c
SEP_M = (500, 2000)      # ... and these m
SEP_ADAPTIVE_MIN = 0.45  # every learner's adaptive mean error ≥
SEP_DECAY_TOL = 0.03     # err(m=2000) ≥ err(m=500) − 0.03
SEP_OBLIVIOUS_MAX = 0.05  # robust's oblivious mean error ≤
SEP_ADAPTIVE_FAIL = 0.40  # not reproduced if an adaptive cell < 0.40 ...
SEP_OBLIVIOUS_FAIL = 0.10  # ... or an oblivious cell > 0.10
SEP_FALSE_ALARM = 0.01   # trials are sized so correct code fails check 1 with probability <= this
ERR_VAR_MAX = 0.25       # per-trial variance bound of an error in [0, 1] (the false-alarm bound of check 1)
# check 2
FAMILY_ALPHA = 0.01      # family-wise false-alarm rate of each statistical check (Bonferroni over its tests)
INDIST_RATIO = 1.5       # indistinguishability for η ≥ 1.5c
INDIST_ALPHA = FAMILY_ALPHA  # family level, Bonferroni over all tests
CHI2_MIN_BIN = 10        # pooled observations per chi-square category
POWER = 0.8              # each check states the deviation it detects with this probability (issue 33)
INDIST_POWER_SHIFTS = (0.1, 0.15)  # c2c's stated alternatives: one truth's #<0> drawn from Bin(m, (1 + shift) c)
INDIST_POWER_REPS = 300  # Monte Carlo replications of c2c's size and of its power at each shift
# claim 3
PHASE_M = 2000
PHASE_LOW_RATIO, PHASE_LOW_MAX = 0.5, 0.02
PHASE_MID_RATIO, PHASE_MID_RANGE = 1.0, (0.13, 0.15)


# --- tables --------------------------------------------------------------------------------------------------

def cell_table(trials: pd.DataFrame) -> pd.DataFrame:
    """Per adversary × cell × seed × learner: n trials, n_fail, fail_rate, mean_err (exact TV), plus the largest
    insertion count and the abort rate. Long format, one row per learner."""
    out = []
    for learner in LEARNERS:
        g = trials.groupby(CELL_KEYS + ["seed"], sort=True)
        df = g.agg(n=("trial", "size"), n_fail=(f"{learner}_fail", "sum"), mean_err=(f"{learner}_err", "mean"),
                   max_inserted=("inserted", "max"), abort_rate=("aborted", "mean")).reset_index()
        df.insert(len(CELL_KEYS), "learner", learner)
        df["fail_rate"] = df["n_fail"] / df["n"]
        out.append(df)
    return pd.concat(out, ignore_index=True).astype({"n_fail": np.int64})


def analytic_cells(settings: Mapping[str, Any]) -> pd.DataFrame:
    """Per (c, η/c, m) of the grid: B, P_abort = 1 − F(B)², robust's closed-form adaptive failure rate and Le
    Cam's bound (``K`` from settings, default 2⁴⁰)."""
    rows = []
    rule = settings.get("budget_rule", "floor_eta_m")
    for c in settings["c"]:
        for ratio in settings["eta_over_c"]:
            eta = round(float(ratio) * float(c), 12)
            if eta > float(settings["eta_max"]) + 1e-12:
                continue
            for m in settings["m"]:
                b = budget(eta, m, rule)
                rows.append({"c": float(c), "eta_over_c": float(ratio), "eta": eta, "m": int(m), "budget": b,
                             "p_abort": abort_probability(m, c, b),
                             "robust_fail_analytic": robust_failure_rate(m, c, b),
                             "le_cam_bound": le_cam_lower_bound(m, c, eta, int(settings.get("K", 2**40)))
                             if rule == "floor_eta_m" else math.nan})
    return pd.DataFrame(rows)


def wilson_interval(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k/n (95% by default); (0, 1) when n = 0."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def _seed_means(cells: pd.DataFrame, keys: list[str], col: str = "mean_err") -> pd.DataFrame:
    """Mean over seeds of a per-seed metric, with the per-seed values kept as a list."""
    g = cells.groupby(keys, sort=True)[col]
    return g.agg(value="mean", per_seed=list).reset_index()


# --- check 1: separation ----------------------------------------------------------------------------------------

def check_separation(cells: pd.DataFrame) -> tuple[bool, bool, dict[str, Any]]:
    """Check 1 (reported as ``(passes, clearly_fails, stat)``). Cells with η ≥ 1.5c and m ∈ {500, 2000}: under
    ``adaptive`` every learner's mean error (mean over seeds) ≥ 0.45 and err(2000) ≥ err(500) − 0.03; under each
    oblivious strategy with the same (c, η, m) ``robust``'s mean error ≤ 0.05. Passes: all cells pass (the full set
    present). Clearly fails: an adaptive cell < 0.40 or an oblivious cell > 0.10. Else undecided."""
    sel = cells[(cells["eta_over_c"] >= SEP_RATIO - _TOL) & cells["m"].isin(SEP_M)]
    ada = _seed_means(sel[sel["adversary"] == "adaptive"], ["c", "eta_over_c", "m", "learner"])
    obl = _seed_means(sel[sel["adversary"].isin(OBLIVIOUS) & (sel["learner"] == "robust")],
                      ["adversary", "c", "eta_over_c", "m"])
    adaptive_cells = ada.to_dict("records")
    oblivious_cells = obl.to_dict("records")
    decay = []
    for (c, ratio, learner), g in ada.groupby(["c", "eta_over_c", "learner"]):
        by_m = dict(zip(g["m"], g["value"]))
        if all(m in by_m for m in SEP_M):
            decay.append({"c": c, "eta_over_c": ratio, "learner": learner, "err_500": by_m[SEP_M[0]],
                          "err_2000": by_m[SEP_M[1]],
                          "ok": by_m[SEP_M[1]] >= by_m[SEP_M[0]] - SEP_DECAY_TOL - _FP})
    # completeness: every adaptive (c, η/c) has both m for every learner, and every oblivious strategy each cell
    ada_cells = {(r["c"], r["eta_over_c"], r["m"]) for r in adaptive_cells}
    complete = bool(ada_cells) and len(decay) == len({(c, r) for c, r, _ in ada_cells}) * len(LEARNERS)
    for adv in OBLIVIOUS:
        have = {(r["c"], r["eta_over_c"], r["m"]) for r in oblivious_cells if r["adversary"] == adv}
        complete = complete and ada_cells <= have
    ada_min = min((r["value"] for r in adaptive_cells), default=math.nan)
    obl_max = max((r["value"] for r in oblivious_cells), default=math.nan)
    not_reproduced = bool(any(r["value"] < SEP_ADAPTIVE_FAIL - _FP for r in adaptive_cells)
                          or any(r["value"] > SEP_OBLIVIOUS_FAIL + _FP for r in oblivious_cells))
    passes = (all(r["value"] >= SEP_ADAPTIVE_MIN - _FP for r in adaptive_cells) and all(d["ok"] for d in decay)
              and all(r["value"] <= SEP_OBLIVIOUS_MAX + _FP for r in oblivious_cells))
    reproduced = bool(complete and passes and not not_reproduced)
    n_cell = int(sel.loc[sel["adversary"] == "adaptive"].groupby(["c", "eta_over_c", "m", "learner"])["n"].sum()
                 .min()) if adaptive_cells else 0
    stat = {"false_alarm_bound": separation_false_alarm(n_cell, len(adaptive_cells), len(decay)),
            "power": separation_power(n_cell),
            "trials_per_cell": n_cell, "adaptive_min_mean_err": ada_min, "oblivious_max_robust_mean_err": obl_max,
            "n_adaptive_cells": len(adaptive_cells), "n_oblivious_cells": len(oblivious_cells),
            "complete_grid": complete, "decay_violations": sum(not d["ok"] for d in decay),
            "max_decay": max((d["err_500"] - d["err_2000"] for d in decay), default=math.nan),
            "adaptive_cells": adaptive_cells, "oblivious_cells": oblivious_cells, "no_decay": decay}
    return reproduced, not_reproduced, stat


def separation_false_alarm(n: int, n_level: int, n_decay: int) -> float:
    """Union bound on the probability that correct code fails check 1 with ``n`` trials per cell (seeds pooled):
    ``n_level`` adaptive (cell, learner) means whose true value is ≈ ½ must stay ≥ 0.45 and ``n_decay`` differences
    whose true value is ≥ 0 must stay ≥ −0.03. Each trial's error lies in [0, 1] (variance ≤ ¼), so by the normal
    approximation P(one mean < 0.45) ≤ Φ(−0.05 √n / ½) and P(one difference < −0.03) ≤ Φ(−0.03 √n / √(2·¼)).
    (The oblivious errors are exactly 0 for correct code: no false alarm.) NaN for n = 0."""
    from scipy import stats  # lazy: scipy.stats costs ~0.6 CPU-s of every job's start-up
    if n <= 0:
        return math.nan
    level = stats.norm.cdf(-(0.5 - SEP_ADAPTIVE_MIN) * math.sqrt(n / ERR_VAR_MAX))
    decay = stats.norm.cdf(-SEP_DECAY_TOL * math.sqrt(n / (2 * ERR_VAR_MAX)))
    return float(min(1.0, n_level * level + n_decay * decay))


def trials_for_false_alarm(n_level: int, n_decay: int, alpha: float = SEP_FALSE_ALARM) -> int:
    """The smallest trials per cell (seeds pooled) with :func:`separation_false_alarm` ≤ ``alpha``."""
    n = 1
    while separation_false_alarm(n, n_level, n_decay) > alpha:
        n *= 2
    lo, hi = n // 2, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if separation_false_alarm(mid, n_level, n_decay) <= alpha else (mid, hi)
    return hi


def separation_power(n: int, power: float = POWER) -> dict[str, float]:
    """The deviations that make check 1 fail to pass with probability ≥ ``power`` at ``n`` trials per cell (normal
    approximation, per-trial variance ≤ ¼, one affected cell): an adaptive (cell, learner) whose true mean error is
    0.5 − ``level_shift`` (mean < 0.45 needs 0.05 + z_power·½/√n); a true decay from m = 500 to 2000 of
    ``decay_shift`` (0.03 + z_power·√(½/n)); an oblivious cell whose true ``robust`` error is ``oblivious_error``
    (0.05 + z_power·½/√n). NaN for n = 0."""
    from scipy import stats  # lazy: scipy.stats costs ~0.6 CPU-s of every job's start-up
    if n <= 0:
        return {"level_shift": math.nan, "decay_shift": math.nan, "oblivious_error": math.nan, "power": power}
    z = float(stats.norm.ppf(power))
    return {"level_shift": (0.5 - SEP_ADAPTIVE_MIN) + z * math.sqrt(ERR_VAR_MAX / n),
            "decay_shift": SEP_DECAY_TOL + z * math.sqrt(2 * ERR_VAR_MAX / n),
            "oblivious_error": SEP_OBLIVIOUS_MAX + z * math.sqrt(ERR_VAR_MAX / n), "power": power}


# --- sizing of the exact binomial tests (checks 2b and 3) -----------------------------------------------------------

def binomial_rejection(n: int, p0: float, alpha: float) -> np.ndarray:
    """Boolean mask over k = 0..n: the exact two-sided binomial test of k successes in n against p0 (scipy's
    ``binomtest`` p-value: the total probability of outcomes no more likely than k, relative tolerance 1e-7) has
    p < ``alpha``, i.e. the check flags the cell."""
    from scipy import stats  # lazy: scipy.stats costs ~0.6 CPU-s of every job's start-up
    k = np.arange(n + 1)
    pmf = stats.binom.pmf(k, n, min(max(p0, 0.0), 1.0))
    order = np.sort(pmf)
    cum = np.cumsum(order)
    idx = np.searchsorted(order, pmf * (1 + 1e-7), side="right")
    pvalue = np.minimum(1.0, np.where(idx > 0, cum[np.maximum(idx - 1, 0)], 0.0))
    return pvalue < alpha


def binomial_power(n: int, p0: float, p1: float, alpha: float, reject: np.ndarray | None = None) -> float:
    """Probability that the exact test against p0 at level ``alpha`` flags a cell whose true rate is p1
    (p1 = p0: the false-alarm rate of the cell)."""
    from scipy import stats  # lazy: scipy.stats costs ~0.6 CPU-s of every job's start-up
    reject = binomial_rejection(n, p0, alpha) if reject is None else reject
    return float(stats.binom.pmf(np.arange(n + 1), n, min(max(p1, 0.0), 1.0))[reject].sum())


def binomial_detectable_shift(n: int, p0: float, alpha: float, power: float = POWER) -> float:
    """The larger of the smallest upward and the smallest downward shift |p1 − p0| that the exact test flags with
    probability ≥ ``power`` (a direction that cannot reach it, e.g. below p0 ≈ 0, is left out); bisection."""
    reject = binomial_rejection(n, p0, alpha)
    shifts = []
    for sign, limit in ((1, 1.0 - p0), (-1, p0)):
        if limit <= 0 or binomial_power(n, p0, p0 + sign * limit, alpha, reject) < power:
            continue
        lo, hi = 0.0, limit
        for _ in range(30):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if binomial_power(n, p0, p0 + sign * mid, alpha, reject) >= power else (mid, hi)
        shifts.append(hi)
    return max(shifts) if shifts else math.nan


def binomial_family_sizing(cells: list[tuple[int, float]], alpha: float, power: float = POWER
                           ) -> dict[str, float]:
    """For independent cells (n, closed-form p) each tested at level ``alpha``: the exact probability that correct
    code flags at least one cell (1 − Π(1 − size_i)), and the largest over cells of the rate shift detected with
    probability ≥ ``power`` (:func:`binomial_detectable_shift`)."""
    if not cells:
        return {"false_alarm": math.nan, "detectable_shift": math.nan, "power": power}
    keep = 1.0
    shift = 0.0
    for n, p in cells:
        keep *= 1.0 - binomial_power(n, p, p, alpha)
        d = binomial_detectable_shift(n, p, alpha, power)
        shift = max(shift, d) if math.isfinite(d) else shift
    return {"false_alarm": 1.0 - keep, "detectable_shift": shift, "power": power}


# --- check 2: mechanism -------------------------------------------------------------------------------------------

def check_insertion_budget(trials: pd.DataFrame) -> tuple[bool, dict[str, Any]]:
    """Check 2(a): insertions never exceed ⌊ηm⌋ (the recorded budget); for the adaptive attack they equal
    max(a, b) when it did not abort and 0 when it did."""
    if trials.empty:
        return False, {"n_trials": 0, "note": "no trials"}
    over = trials["inserted"] > trials["budget"]
    ada = trials[trials["adversary"] == "adaptive"]
    expect = np.where(ada["aborted"], 0, np.maximum(ada["a"], ada["b"]))
    wrong = ada["inserted"].to_numpy() != expect
    holds = bool(not over.any() and not wrong.any())
    return holds, {"n_trials": int(len(trials)), "n_adaptive": int(len(ada)), "n_over_budget": int(over.sum()),
                   "n_not_max_ab": int(wrong.sum()),
                   "max_excess": int((trials["inserted"] - trials["budget"]).max())}


def check_failure_formula(trials: pd.DataFrame) -> tuple[bool, dict[str, Any]]:
    """Check 2(b): in every adaptive cell (seeds pooled), ``robust``'s failure count is consistent with the closed
    form p = ½[F(B)² − F(B)F(0) + F(0)]: an exact two-sided binomial test per cell, p-value ≥ 0.01 / (number of
    cells) (Bonferroni: correct code fails the check with probability ≤ 1%). The |z| against √(p(1−p)/n) is
    reported."""
    from scipy import stats  # lazy: scipy.stats costs ~0.6 CPU-s of every job's start-up
    ada = trials[trials["adversary"] == "adaptive"]
    if ada.empty:
        return False, {"n_cells": 0, "note": "no adaptive trials"}
    rows = []
    for (c, ratio, eta, m, b), g in ada.groupby(["c", "eta_over_c", "eta", "m", "budget"], sort=True):
        p = robust_failure_rate(int(m), float(c), int(b))
        n = len(g)
        k = int(g["robust_fail"].sum())
        emp = k / n
        se = math.sqrt(p * (1 - p) / n)
        z = abs(emp - p) / se if se > 0 else (0.0 if emp == p else math.inf)
        rows.append({"c": c, "eta_over_c": ratio, "m": int(m), "budget": int(b), "n": n, "empirical": emp,
                     "analytic": p, "se": se, "z": z,
                     "p_value": float(stats.binomtest(k, n, min(max(p, 0.0), 1.0)).pvalue)})
    threshold = FAMILY_ALPHA / len(rows)
    for r in rows:
        r["ok"] = r["p_value"] >= threshold
    holds = all(r["ok"] for r in rows)
    sizing = binomial_family_sizing([(r["n"], r["analytic"]) for r in rows], threshold)
    return holds, {"n_cells": len(rows), "n_outside": sum(not r["ok"] for r in rows), "threshold": threshold,
                   "family_alpha": FAMILY_ALPHA, "min_p": min(r["p_value"] for r in rows),
                   "max_z": max(r["z"] for r in rows), "false_alarm": sizing["false_alarm"],
                   "detectable_shift": sizing["detectable_shift"], "power": sizing["power"], "cells": rows}


def _chi2_pvalue(x: np.ndarray, y: np.ndarray) -> float:
    """Chi-square homogeneity p-value of two samples of counts, adjacent values merged into categories holding at
    least CHI2_MIN_BIN pooled observations (a last short category joins the previous one); 1.0 if one category."""
    from scipy import stats  # lazy: scipy.stats costs ~0.6 CPU-s of every job's start-up
    pooled = np.concatenate([x, y])
    values, counts = np.unique(pooled, return_counts=True)
    edges, acc = [], 0
    for v, k in zip(values, counts):
        acc += k
        if acc >= CHI2_MIN_BIN:
            edges.append(v)
            acc = 0
    if acc and edges:
        edges.pop()
    if len(edges) < 2:
        return 1.0
    cats_x = np.searchsorted(np.asarray(edges), x, side="left")
    cats_y = np.searchsorted(np.asarray(edges), y, side="left")
    k = len(edges)
    cats_x, cats_y = np.minimum(cats_x, k - 1), np.minimum(cats_y, k - 1)
    table = np.vstack([np.bincount(cats_x, minlength=k), np.bincount(cats_y, minlength=k)])
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2:
        return 1.0
    return float(stats.chi2_contingency(table)[1])


def indistinguishable_power(m: int, c: float, n_p0: int, n_qa: int, alpha: float,
                            shifts: tuple[float, ...] = INDIST_POWER_SHIFTS, reps: int = INDIST_POWER_REPS,
                            seed: int = 0) -> dict[str, Any]:
    """Monte Carlo size and power of c2c's chi-square test on #⟨0⟩ in one cell at per-test level ``alpha``:
    correct code draws #⟨0⟩ ~ Bin(m, c) under both truths (``false_alarm``: the share of ``reps`` replications
    with p < alpha); each stated alternative, a bug that draws it from Bin(m, (1 + shift)·c) under attacked q_A
    (``power[shift]``). The Monte Carlo standard error is at most 0.5/√reps."""
    g = np.random.Generator(np.random.PCG64(seed))
    null, alt = 0, {float(sh): 0 for sh in shifts}
    for _ in range(reps):
        x = g.binomial(m, c, n_p0)
        null += _chi2_pvalue(x, g.binomial(m, c, n_qa)) < alpha
        for sh in alt:
            alt[sh] += _chi2_pvalue(x, g.binomial(m, min(1.0, (1 + sh) * c), n_qa)) < alpha
    return {"false_alarm": null / reps, "power": {str(sh): k / reps for sh, k in alt.items()}, "reps": reps,
            "m": int(m), "c": float(c), "n_p0": int(n_p0), "n_qA": int(n_qa)}


def check_indistinguishable(trials: pd.DataFrame) -> tuple[bool, dict[str, Any]]:
    """Check 2(c): for η ≥ 1.5c, attacked (not aborted) p₀ and q_A samples are indistinguishable, per cell with
    seeds pooled: chi-square on #⟨0⟩ and on #⟨A⟩, two-sample KS on #points, every p ≥ 0.01/(number of tests);
    and the fraction of non-code points inside A is 1.0 in every attacked sample of both truths."""
    from scipy import stats  # lazy: scipy.stats costs ~0.6 CPU-s of every job's start-up
    ada = trials[(trials["adversary"] == "adaptive") & ~trials["aborted"]
                 & (trials["eta_over_c"] >= INDIST_RATIO - _TOL)]
    rows = []
    for (c, ratio, m), g in ada.groupby(["c", "eta_over_c", "m"], sort=True):
        p0, qa = g[g["truth"] == "p0"], g[g["truth"] == "qA"]
        if len(p0) < 2 or len(qa) < 2:
            continue
        rows.append({"c": c, "eta_over_c": ratio, "m": int(m), "n_p0": len(p0), "n_qA": len(qa),
                     "p_n_zero": _chi2_pvalue(p0["n_zero"].to_numpy(), qa["n_zero"].to_numpy()),
                     "p_n_code_a": _chi2_pvalue(p0["n_code_a"].to_numpy(), qa["n_code_a"].to_numpy()),
                     "p_n_points": float(stats.ks_2samp(p0["n_points"], qa["n_points"]).pvalue)})
    n_tests = 3 * len(rows)
    if not n_tests:
        return False, {"n_tests": 0, "note": "no attacked cells with eta >= 1.5c"}
    threshold = INDIST_ALPHA / n_tests
    pmin = min(min(r["p_n_zero"], r["p_n_code_a"], r["p_n_points"]) for r in rows)
    frac = {}
    for truth in ("p0", "qA"):
        f = ada.loc[(ada["truth"] == truth) & (ada["n_points"] > 0), "in_a_frac"]
        frac[truth] = float(f.min()) if len(f) else math.nan
    holds = bool(pmin >= threshold and frac["p0"] == 1.0 and frac["qA"] == 1.0)
    hard = min(rows, key=lambda r: (r["m"] * r["c"], min(r["n_p0"], r["n_qA"])))   # fewest codes, fewest trials
    sizing = indistinguishable_power(hard["m"], hard["c"], hard["n_p0"], hard["n_qA"], threshold)
    return holds, {"n_tests": n_tests, "threshold": threshold, "min_p": pmin, "sizing": sizing,
                   "min_in_a_frac_p0": frac["p0"], "min_in_a_frac_qA": frac["qA"], "cells": rows}


def check_mechanism(trials: pd.DataFrame) -> tuple[bool, dict[str, Any]]:
    """Check 2 as a whole: (a), (b) and (c) all hold."""
    parts = {"a_budget": check_insertion_budget(trials), "b_formula": check_failure_formula(trials),
             "c_indistinguishable": check_indistinguishable(trials)}
    return all(h for h, _ in parts.values()), {k: {"holds": h, **s} for k, (h, s) in parts.items()}


# --- check 3: phase boundary ---------------------------------------------------------------------------------------

def check_phase_boundary(cells: pd.DataFrame) -> tuple[bool | None, dict[str, Any]]:
    """Check 3, ``robust`` under ``adaptive`` at m = 2000 (a check since issue 31: the rates have closed forms).

    Closed forms (arithmetic): at η = 0.5c, ½[F(B)² − F(B)F(0) + F(0)] ≤ 0.02 for every c; at η = c, its
    trial-weighted mean over c lies in [0.13, 0.15]. Simulation: in each of those (c, η) cells (seeds pooled) the
    failure count is consistent with its closed form, exact two-sided binomial test, p ≥ 0.01 / (number of cells)
    (Bonferroni: correct code fails with probability ≤ 1%). Returns ``(holds, stat)``: True when all hold, False
    when one fails, None when a required cell is missing. The 95% Wilson intervals are reported."""
    from scipy import stats  # lazy: scipy.stats costs ~0.6 CPU-s of every job's start-up
    sel = cells[(cells["adversary"] == "adaptive") & (cells["learner"] == "robust") & (cells["m"] == PHASE_M)]
    rows = []
    for ratio in (PHASE_LOW_RATIO, PHASE_MID_RATIO):
        for c, g in sel[np.isclose(sel["eta_over_c"], ratio)].groupby("c", sort=True):
            k, n, b = int(g["n_fail"].sum()), int(g["n"].sum()), int(g["budget"].iloc[0])
            p = robust_failure_rate(PHASE_M, float(c), b)
            rows.append({"c": float(c), "eta_over_c": float(ratio), "budget": b, "n": n, "rate": k / n,
                         "ci": list(wilson_interval(k, n)), "analytic": p,
                         "p_value": float(stats.binomtest(k, n, min(max(p, 0.0), 1.0)).pvalue)})
    low = [r for r in rows if r["eta_over_c"] == PHASE_LOW_RATIO]
    mid = [r for r in rows if r["eta_over_c"] == PHASE_MID_RATIO]
    if not low or not mid:
        return None, {"m": PHASE_M, "low": low, "boundary": {}, "complete": False, "cells": rows}
    threshold = FAMILY_ALPHA / len(rows)
    for r in rows:
        r["ok"] = r["p_value"] >= threshold
    n_mid = sum(r["n"] for r in mid)
    analytic_mid = sum(r["n"] * r["analytic"] for r in mid) / n_mid
    rate_mid = sum(r["n"] * r["rate"] for r in mid) / n_mid
    a, b = PHASE_MID_RANGE
    closed_ok = all(r["analytic"] <= PHASE_LOW_MAX for r in low) and a <= analytic_mid <= b
    sim_ok = all(r["ok"] for r in rows)
    sizing = binomial_family_sizing([(r["n"], r["analytic"]) for r in rows], threshold)
    boundary = {"n": n_mid, "rate": rate_mid, "analytic": analytic_mid,
                "ci": list(wilson_interval(round(rate_mid * n_mid), n_mid)),
                "per_c": {r["c"]: r["rate"] for r in mid}}
    return bool(closed_ok and sim_ok), {"m": PHASE_M, "low": low, "boundary": boundary, "complete": True,
                                        "closed_forms_in_range": bool(closed_ok), "simulation_matches": bool(sim_ok),
                                        "threshold": threshold, "family_alpha": FAMILY_ALPHA,
                                        "false_alarm": sizing["false_alarm"],
                                        "detectable_shift": sizing["detectable_shift"], "power": sizing["power"],
                                        "min_p": min(r["p_value"] for r in rows), "cells": rows}


# --- claims.json entries --------------------------------------------------------------------------------------------

NOTICE = ("Own illustration: a construction of ours that illustrates the paper's theorem (adaptive additive "
          "learnability is strictly stronger than oblivious additive learnability); the paper's proof and class "
          "are not implemented.")
DATA = "simulated trials of our own 'self-describing code' construction [R] (no paper data: the paper is theory)"


def _seed_summary(values_by_seed: Mapping[int, float]) -> dict[str, Any]:
    """Mean and Student-t interval over seeds (core.claims.summarize) of one value per seed."""
    return summarize([values_by_seed[s] for s in sorted(values_by_seed)])


def _per_seed(cells: pd.DataFrame, mask: pd.Series, col: str = "mean_err") -> dict[int, float]:
    """One value per seed: the mean of ``col`` over the cells selected by ``mask``."""
    sel = cells[mask]
    return {int(s): float(v) for s, v in sel.groupby("seed")[col].mean().items()}


def _no_data(stat: Mapping[str, Any]) -> bool:
    return "note" in stat


def entry_separation(cells: pd.DataFrame) -> Claim:
    """Check 1 as a claims.json entry (evidence: the seeds). Holds when every cell passes the spec's thresholds,
    fails on a clear violation (an adaptive cell < 0.40 or an oblivious one > 0.10), undecided (None) otherwise or
    when the grid is incomplete."""
    rep, nrep, stat = check_separation(cells)
    sel = (cells["eta_over_c"] >= SEP_RATIO - _TOL) & cells["m"].isin(SEP_M)
    metrics = {}
    for learner in LEARNERS:
        per = _per_seed(cells, sel & (cells["adversary"] == "adaptive") & (cells["learner"] == learner))
        if per:
            metrics[f"adaptive/{learner}"] = _seed_summary(per)
    for adv in OBLIVIOUS:
        per = _per_seed(cells, sel & (cells["adversary"] == adv) & (cells["learner"] == "robust"))
        if per:
            metrics[f"{adv}/robust"] = _seed_summary(per)
    n_seeds = int(cells.loc[sel, "seed"].nunique())
    why = ""
    if not stat["complete_grid"]:
        why = (" Undecided by construction of the run: the grid lacks cells with eta >= 1.5c at both m = 500 "
               "and m = 2000 for every learner under 'adaptive' and for every oblivious strategy.")
    elif not rep and not nrep:
        why = (f" {stat['decay_violations']} no-decay comparison(s) miss the 0.03 tolerance (largest drop "
               f"{stat['max_decay']:.3f}); adaptive min {stat['adaptive_min_mean_err']:.3f} vs 0.45, oblivious max "
               f"{stat['oblivious_max_robust_mean_err']:.3f} vs 0.05.")
    fa = stat["false_alarm_bound"]
    sizing = (f" False-alarm bound of correct code at {stat['trials_per_cell']} trials per cell: {fa:.2g} "
              f"(target <= {SEP_FALSE_ALARM}).") if stat["complete_grid"] and math.isfinite(fa) else ""
    return check(
        "c1_separation",
        "Separation (own illustration). In cells with eta >= 1.5c and m in {500, 2000}: under the adaptive "
        "adversary every learner's mean TV error is >= 0.45 and does not decay with m (error at m = 2000 >= error "
        "at m = 500 - 0.03); under each oblivious strategy with the same (c, eta, m) the robust learner's mean "
        "error is <= 0.05.",
        holds=True if rep else (False if nrep else None), title="adaptive holds every learner at 1/2, oblivious "
        "does not", data=DATA, metrics=metrics,
        test=("per cell, mean over seeds of the trials' mean error; every adaptive (cell, learner) >= 0.45 and "
              "no decay; every oblivious (strategy, cell) robust <= 0.05; the full grid present; trials sized so "
              "correct code fails with probability <= 1% (normal union bound)"),
        threshold="holds: all cells pass; fails: an adaptive cell < 0.40 or an oblivious cell > 0.10",
        statistic=stat, evidence=Evidence(n_seeds, "seeds"),
        key_numbers={"adaptive_min_mean_err": stat["adaptive_min_mean_err"],
                     "oblivious_max_robust_mean_err": stat["oblivious_max_robust_mean_err"],
                     "decay_violations": stat["decay_violations"], "max_decay": stat["max_decay"],
                     "false_alarm_bound": fa},
        note=NOTICE + " A check, not a claim (issue 31): the adaptive error is 1/2(1 - P_abort) by construction "
             "and the oblivious one 0." + why + sizing)


def entry_budget(trials: pd.DataFrame) -> Claim:
    """Check 2(a) as a claims.json entry (evidence: the trials)."""
    holds, stat = check_insertion_budget(trials)
    return check("c2a_budget", "Mechanism (a): the adversaries never insert more than floor(eta m) points; the "
                 "adaptive attack inserts exactly max(a, b) when it does not abort, 0 when it does.",
                 holds=None if _no_data(stat) else holds, data=DATA, title="insertions within the budget",
                 test="every trial: inserted <= budget; adaptive: inserted == (0 if aborted else max(a, b))",
                 threshold="no exception", statistic=stat, evidence=Evidence(stat["n_trials"], "trials"),
                 key_numbers={"n_over_budget": stat.get("n_over_budget"), "n_not_max_ab": stat.get("n_not_max_ab")})


def entry_formula(trials: pd.DataFrame) -> Claim:
    """Check 2(b) as a claims.json entry (evidence: the adaptive cells)."""
    holds, stat = check_failure_formula(trials)
    return check("c2b_formula", "Mechanism (b): in every adaptive cell the robust learner's failure rate equals "
                 "the closed form 1/2[F(B)^2 - F(B)F(0) + F(0)] (F the Bin(m, c) CDF, B = floor(eta m)); exact "
                 "binomial test per cell, Bonferroni to a 1% family false-alarm rate.",
                 holds=None if _no_data(stat) else holds, data=DATA,
                 title="robust failure rate = closed form",
                 test="per adaptive cell, seeds pooled: exact two-sided binomial test of the failure count against "
                      "the closed form",
                 threshold=f"every cell p >= {FAMILY_ALPHA} / number of cells", statistic=stat,
                 evidence=Evidence(stat["n_cells"], "cells"),
                 key_numbers={"n_cells": stat["n_cells"], "n_outside": stat.get("n_outside"),
                              "min_p": stat.get("min_p"), "threshold": stat.get("threshold"),
                              "max_z": stat.get("max_z")})


def entry_indistinguishable(trials: pd.DataFrame) -> Claim:
    """Check 2(c) as a claims.json entry (evidence: the cells tested)."""
    holds, stat = check_indistinguishable(trials)
    return check("c2c_indistinguishable", "Mechanism (c): for eta >= 1.5c, attacked p0 and attacked q_A samples "
                 "are indistinguishable (chi-square on #<0> and #<A>, KS on #points, every p >= 0.01 / number of "
                 "tests) and every non-code point lies in the decoded set A for both truths.",
                 holds=None if _no_data(stat) else holds, data=DATA, title="attacked p0 and q_A look alike",
                 test="per cell with eta >= 1.5c, seeds pooled, not-aborted trials: 3 two-sample tests; "
                      "Bonferroni over all; in-A fraction == 1.0",
                 threshold="min p >= 0.01 / n_tests and in-A fraction 1.0 for both truths", statistic=stat,
                 evidence=Evidence(stat["n_tests"] // 3, "cells"),
                 key_numbers={"min_p": stat.get("min_p"), "threshold": stat.get("threshold"),
                              "min_in_a_frac_p0": stat.get("min_in_a_frac_p0"),
                              "min_in_a_frac_qA": stat.get("min_in_a_frac_qA")})


def entry_phase_boundary(cells: pd.DataFrame) -> Claim:
    """Check 3 as a claims.json entry (evidence: the seeds)."""
    holds, stat = check_phase_boundary(cells)
    base = (cells["adversary"] == "adaptive") & (cells["learner"] == "robust") & (cells["m"] == PHASE_M)
    metrics = {}
    for name, ratio in (("eta=0.5c", PHASE_LOW_RATIO), ("eta=c", PHASE_MID_RATIO)):
        per = _per_seed(cells, base & np.isclose(cells["eta_over_c"], ratio), "fail_rate")
        if per:
            metrics[f"adaptive/robust/{name}"] = _seed_summary(per)
    n_seeds = int(cells.loc[base, "seed"].nunique())
    bd = stat["boundary"]
    why = ""
    if not stat["complete"]:
        why = (f" Undecided by construction of the run: no adaptive cell at m = {PHASE_M} with both "
               "eta = 0.5c and eta = c.")
    return check(
        "c3_phase_boundary",
        "Phase boundary (own illustration). Under the adaptive adversary at m = 2000 the robust learner's failure "
        "rate is <= 0.02 at eta = 0.5c and about 0.13-0.15 at eta = c: the closed forms lie there and the "
        "simulated rates agree with them.",
        holds=holds, title="failure ~0 at eta = c/2, 0.13-0.15 at eta = c", data=DATA, metrics=metrics,
        test=("closed forms: eta = 0.5c <= 0.02 for each c, eta = c (c pooled) in [0.13, 0.15]; simulation: per "
              "(c, eta) cell, seeds pooled, exact two-sided binomial test against its closed form"),
        threshold=f"closed forms in range and every cell p >= {FAMILY_ALPHA} / number of cells (1% family "
                  "false-alarm rate)",
        statistic=stat, evidence=Evidence(n_seeds, "seeds"),
        key_numbers={"max_rate_eta_half_c": max((r["rate"] for r in stat["low"]), default=None),
                     "rate_eta_c": bd.get("rate"), "analytic_eta_c": bd.get("analytic"),
                     "min_p": stat.get("min_p")},
        note=NOTICE + " A check, not a claim (issue 31): the rates have closed forms; until issue 31 the rule "
             "asked the simulated rate itself to lie in [0.13, 0.15]." + why)


def evaluate_claims(trials: pd.DataFrame, cells: pd.DataFrame) -> list[Claim]:
    """Every claim and check of the study, in the spec's order (1, 2a, 2b, 2c, 3)."""
    return [entry_separation(cells), entry_budget(trials), entry_formula(trials), entry_indistinguishable(trials),
            entry_phase_boundary(cells)]


def cells_report(cells: pd.DataFrame, analytic: pd.DataFrame) -> pd.DataFrame:
    """Empirical vs analytic per adversary × learner × (c, η/c, m), seeds pooled: n, fail_rate, mean_err, the
    abort rate, and the closed forms of the grid (B, P_abort, robust's adaptive failure rate, Le Cam's bound)."""
    keys = ["adversary", "learner", "c", "eta_over_c", "eta", "m", "budget"]
    g = cells.groupby(keys, sort=True)
    out = g.agg(n=("n", "sum"), n_fail=("n_fail", "sum"), abort_rate=("abort_rate", "mean"),
                mean_err=("mean_err", "mean"), n_seeds=("seed", "nunique")).reset_index()
    out["fail_rate"] = out["n_fail"] / out["n"]
    ana = analytic[["c", "eta_over_c", "m", "p_abort", "robust_fail_analytic", "le_cam_bound"]]
    out = out.merge(ana, on=["c", "eta_over_c", "m"], how="left")
    return out
