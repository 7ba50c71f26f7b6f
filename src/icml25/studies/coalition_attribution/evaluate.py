"""Verdict functions of the coalition_attribution study (Zheng, Deng & Zhang, ICML 2025). Pure: arrays in,
``(reproduced, not_reproduced, statistic)`` for a claim and ``(holds, statistic)`` for a check out.

1. :func:`table4_verdict` — Table 4 ordering of R, R', Q over purely faithful (F), partially faithful (P) and purely
   unfaithful (U) coalitions of the trained MLP, with bootstrap CIs over target functions.
2. :func:`identities_check` — every identity of Sec. 3 holds to float64 precision on every game.
3. :func:`oracle_check` — on the exact function, F coalitions are fully faithful and U coalitions have Q ~ 0.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

METRICS = ("R", "R_prime", "Q")
TYPES = ("F", "P", "U")

#: Table 4 of the paper (toy experiment): E[R], E[R'], E[Q] per coalition type.
TABLE4 = {"F": {"R": 0.944, "R_prime": 0.936, "Q": 0.948},
          "P": {"R": 0.471, "R_prime": 0.608, "Q": 0.590},
          "U": {"R": 0.031, "R_prime": 0.016, "Q": 0.013}}


def _per_function_sums(fid: np.ndarray, ctype: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(F, 3) sums and counts of the non-NaN values per function and type."""
    _, inv = np.unique(fid, return_inverse=True)
    n_f = int(inv.max()) + 1 if inv.size else 0
    sums = np.zeros((n_f, len(TYPES)))
    counts = np.zeros((n_f, len(TYPES)))
    ok = ~np.isnan(vals)
    for c, t in enumerate(TYPES):
        sel = ok & (ctype == t)
        np.add.at(sums[:, c], inv[sel], vals[sel])
        np.add.at(counts[:, c], inv[sel], 1.0)
    return sums, counts


def table4_verdict(function_id: Sequence, ctype: Sequence[str], metrics: Mapping[str, Sequence[float]], *,
                   resamples: int = 2000, ci_level: float = 0.95, seed: int = 0, f_min: float = 0.80,
                   u_max: float = 0.15, p_range: Sequence[float] = (0.2, 0.8)) -> tuple[bool, bool, dict[str, Any]]:
    """Claim 1 (Table 4). One entry per coalition, pooled over seeds and functions: ``function_id`` (C,) names the
    target function (unique across seeds, e.g. ``seed * 1000 + k``), ``ctype`` (C,) is 'F'/'P'/'U', ``metrics``
    maps R, R_prime, Q to (C,) values (NaN excluded and counted).

    For each M: pooled means mean_F, mean_P, mean_U; percentile bootstrap CIs of mean_F - mean_P and mean_P - mean_U
    from ``resamples`` resamples of target functions (with replacement; coalitions follow their function).
    Reproduced: for every M, mean_F > mean_P > mean_U, mean_F >= f_min, mean_U <= u_max, p_min <= mean_P <= p_max and
    both CIs exclude 0 (lower bound > 0). Not reproduced: for some M an ordering reverses with its CI excluding 0
    (upper bound < 0). Otherwise inconclusive."""
    fid = np.asarray(function_id)
    ctype = np.asarray(ctype, dtype=str)
    if fid.shape != ctype.shape:
        raise ValueError(f"function_id and ctype differ in length: {fid.shape} vs {ctype.shape}")
    alpha = (1.0 - ci_level) / 2.0
    rng = np.random.default_rng(seed)
    n_f = np.unique(fid).size
    idx = rng.integers(0, max(n_f, 1), size=(resamples, n_f))
    weights = np.zeros((resamples, n_f))
    np.add.at(weights, (np.repeat(np.arange(resamples), n_f), idx.ravel()), 1.0)
    stat: dict[str, Any] = {"n_functions": int(n_f), "n_coalitions": {t: int((ctype == t).sum()) for t in TYPES},
                            "resamples": resamples, "ci_level": ci_level, "table4": TABLE4, "per_metric": {}}
    all_ok, any_reversed = True, False
    for m in METRICS:
        vals = np.asarray(metrics[m], dtype=np.float64)
        if vals.shape != ctype.shape:
            raise ValueError(f"metrics[{m!r}] has {vals.shape[0]} entries, expected {ctype.shape[0]}")
        sums, counts = _per_function_sums(fid, ctype, vals)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = sums.sum(0) / counts.sum(0)
            boot = (weights @ sums) / (weights @ counts)
        diffs = {"F-P": (mean[0] - mean[1], boot[:, 0] - boot[:, 1]), "P-U": (mean[1] - mean[2], boot[:, 1] - boot[:, 2])}
        ci = {}
        for name, (d, b) in diffs.items():
            finite = b[np.isfinite(b)]
            lo, hi = (np.quantile(finite, [alpha, 1 - alpha]) if finite.size else (np.nan, np.nan))
            ci[name] = {"diff": float(d), "ci": [float(lo), float(hi)], "undefined_resamples": int(b.size - finite.size)}
        conds = {
            "F>P": bool(mean[0] > mean[1]), "P>U": bool(mean[1] > mean[2]), "F>=f_min": bool(mean[0] >= f_min),
            "U<=u_max": bool(mean[2] <= u_max), "P_in_range": bool(p_range[0] <= mean[1] <= p_range[1]),
            "ci_F-P_excludes_0": bool(ci["F-P"]["ci"][0] > 0), "ci_P-U_excludes_0": bool(ci["P-U"]["ci"][0] > 0),
        }
        reversed_ = bool(ci["F-P"]["ci"][1] < 0 or ci["P-U"]["ci"][1] < 0)
        all_ok &= all(conds.values())
        any_reversed |= reversed_
        stat["per_metric"][m] = {"mean": {t: float(mean[c]) for c, t in enumerate(TYPES)},
                                 "n_nan": {t: int((np.isnan(vals) & (ctype == t)).sum()) for t in TYPES},
                                 "diff_ci": ci, "conditions": conds, "reversed": reversed_}
    stat["thresholds"] = {"f_min": f_min, "u_max": u_max, "p_range": list(p_range)}
    return bool(all_ok), bool(any_reversed and not all_ok), stat


def identities_check(errors: Mapping[str, Sequence[float]], vmax: Sequence[float], *, tol: float = 1e-9
                     ) -> tuple[bool, dict[str, Any]]:
    """Claim 2. ``errors[name]`` (G,) max abs error of identity ``name`` on each game (pooled over arms, seeds and
    both gammas), ``vmax`` (G,) = max|v| of that game. Holds iff there is at least one game and every error is
    <= tol * (1 + vmax) (NaN fails)."""
    vmax = np.asarray(vmax, dtype=np.float64)
    if not errors or vmax.size == 0:
        return False, {"n_games": int(vmax.size), "note": "no games"}
    bound = tol * (1.0 + vmax)
    per: dict[str, Any] = {}
    ok = True
    for name, e in errors.items():
        e = np.asarray(e, dtype=np.float64)
        if e.shape != vmax.shape:
            raise ValueError(f"errors[{name!r}] has shape {e.shape}, expected {vmax.shape}")
        fails = ~(e <= bound)
        ok &= not fails.any()
        per[name] = {"max_abs_err": float(np.nanmax(e)) if np.isfinite(e).any() else float("nan"),
                     "max_rel_err": float(np.nanmax(e / (1.0 + vmax))) if np.isfinite(e).any() else float("nan"),
                     "n_fail": int(fails.sum())}
    return bool(ok), {"n_games": int(vmax.size), "tol": tol, "per_identity": per}


def oracle_check(ctype: Sequence[str], metrics: Mapping[str, Sequence[float]], *, f_min: float = 0.99,
                 u_q_max: float = 0.01) -> tuple[bool, dict[str, Any]]:
    """Claim 3 (arm oracle, exact f). Holds iff the means (NaN excluded) over F coalitions of R, R', Q are all
    >= f_min and the mean Q over U coalitions is <= u_q_max; a missing type fails."""
    ctype = np.asarray(ctype, dtype=str)
    means = {}
    for t in ("F", "U"):
        sel = ctype == t
        means[t] = {}
        for m in METRICS:
            x = np.asarray(metrics[m], dtype=np.float64)[sel]
            x = x[~np.isnan(x)]
            means[t][m] = float(x.mean()) if x.size else float("nan")
    conds = {f"F_{m}>=f_min": bool(means["F"][m] >= f_min) for m in METRICS}
    conds["U_Q<=u_q_max"] = bool(means["U"]["Q"] <= u_q_max)
    return all(conds.values()), {"mean": means, "conditions": conds, "n": {t: int((ctype == t).sum()) for t in TYPES},
                                 "thresholds": {"f_min": f_min, "u_q_max": u_q_max}}
