"""Verdicts of the fedecado study: pure functions of per-seed metric arrays (thresholds are the study's constants).

* :func:`check_objective_inconsistency` — claim 1 (mechanism, exact; a check): FedAvg/FedNova reach their closed-form
  fixed points; FedAvg's is biased (‖x_FA − x*‖/‖x*‖ ≥ 0.2) and its bias does not shrink with η, FedNova's halves.
* :func:`verdict_fedecado_reaches_optimum` — claim 2 (checks the reconstruction): FedECADO-R converges to x* with
  full and with partial participation, and KCL holds after every round. The spec gives it three outcomes, so it has
  the claim signature; ``statistic["holds"]`` says whether it holds as a check.
* :func:`verdict_accuracy` — claim 3 (the paper's claim at small scale): paired final test accuracy, FedECADO-R −
  FedAvg, in percentage points; differences to the other baselines reported with "on par" = mean ≥ −0.5 pt.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

# claim 1
C1_ITER_TOL = 1e-8            # relative difference iterate vs closed-form fixed point
C1_MIN_BIAS = 0.2             # ‖x_FA − x*‖/‖x*‖ at least this
C1_FEDAVG_RATIO = (0.8, 1.25)  # bias(η/2)/bias(η) of FedAvg in this interval (bias does not vanish with η)
C1_FEDNOVA_RATIO = (0.4, 0.6)  # ... of FedNova (O(η) bias)
# claim 2
C2_FULL_TOL = 1e-8            # relative error after the full-participation run
C2_PARTIAL_TOL = 1e-6         # relative error after the partial-participation run
C2_KCL_TOL = 1e-10            # ‖Σ_i I_i‖_∞ after every round
C2_FAIL = 1.0                 # any relative error above this (or non-finite) → not reproduced
# claim 3
C3_FAIL_PT = -1.0             # mean paired difference below this (points) → not reproduced
C3_MIN_POSITIVE = 2           # seeds with a positive difference needed to reproduce
C3_ON_PAR_PT = -0.5           # "on par" with a baseline: mean difference at least this


def _arr(name: str, values: Any) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64).reshape(-1)
    if a.size == 0:
        raise ValueError(f"verdict: {name} is empty")
    return a


def _same_length(**arrays: np.ndarray) -> int:
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"verdict: per-seed arrays differ in length: {lengths}")
    return next(iter(lengths.values()))


def check_objective_inconsistency(iter_diff_fedavg: Any, iter_diff_fednova: Any, bias_fedavg: Any,
                                  ratio_fedavg: Any, ratio_fednova: Any) -> tuple[bool, dict[str, Any]]:
    """Claim 1. Per seed: relative difference of the FedAvg and FedNova iterates to their closed-form fixed points
    (≤ 1e-8), FedAvg's relative bias ‖x_FA − x*‖/‖x*‖ (≥ 0.2), and the bias ratios when η is halved (FedAvg in
    [0.8, 1.25], FedNova in [0.4, 0.6]). Holds iff every seed passes every condition (NaN fails)."""
    a = {"iter_diff_fedavg": _arr("iter_diff_fedavg", iter_diff_fedavg),
         "iter_diff_fednova": _arr("iter_diff_fednova", iter_diff_fednova),
         "bias_fedavg": _arr("bias_fedavg", bias_fedavg),
         "ratio_fedavg": _arr("ratio_fedavg", ratio_fedavg), "ratio_fednova": _arr("ratio_fednova", ratio_fednova)}
    n = _same_length(**a)
    ok = ((a["iter_diff_fedavg"] <= C1_ITER_TOL) & (a["iter_diff_fednova"] <= C1_ITER_TOL)
          & (a["bias_fedavg"] >= C1_MIN_BIAS)
          & (a["ratio_fedavg"] >= C1_FEDAVG_RATIO[0]) & (a["ratio_fedavg"] <= C1_FEDAVG_RATIO[1])
          & (a["ratio_fednova"] >= C1_FEDNOVA_RATIO[0]) & (a["ratio_fednova"] <= C1_FEDNOVA_RATIO[1]))
    holds = bool(ok.all())
    stat = {"n_seeds": n, "seeds_passing": int(ok.sum()), "pass_per_seed": ok.tolist(), "holds": holds,
            **{k: v.tolist() for k, v in a.items()},
            "max_iter_diff": float(max(a["iter_diff_fedavg"].max(), a["iter_diff_fednova"].max())),
            "min_bias_fedavg": float(a["bias_fedavg"].min()),
            "ratio_fedavg_range": [float(a["ratio_fedavg"].min()), float(a["ratio_fedavg"].max())],
            "ratio_fednova_range": [float(a["ratio_fednova"].min()), float(a["ratio_fednova"].max())]}
    return holds, stat


def verdict_fedecado_reaches_optimum(rel_err_full: Any, rel_err_partial: Any,
                                     kcl_max: Any) -> tuple[bool, bool, dict[str, Any]]:
    """Claim 2. Per seed: relative error ‖x − x*‖/‖x*‖ after the full-participation run (≤ 1e-8) and after the
    partial-participation run (≤ 1e-6), and the largest ‖Σ_i I_i‖_∞ over all rounds (≤ 1e-10).
    Reproduced = every seed passes all three; not reproduced = any relative error > 1 or non-finite;
    else inconclusive."""
    a = {"rel_err_full": _arr("rel_err_full", rel_err_full),
         "rel_err_partial": _arr("rel_err_partial", rel_err_partial), "kcl_max": _arr("kcl_max", kcl_max)}
    n = _same_length(**a)
    ok = (a["rel_err_full"] <= C2_FULL_TOL) & (a["rel_err_partial"] <= C2_PARTIAL_TOL) & (a["kcl_max"] <= C2_KCL_TOL)
    errs = np.concatenate([a["rel_err_full"], a["rel_err_partial"]])
    failed = bool((~np.isfinite(errs)).any() or (errs > C2_FAIL).any())
    reproduced = bool(ok.all()) and not failed
    stat = {"n_seeds": n, "seeds_passing": int(ok.sum()), "pass_per_seed": ok.tolist(), "holds": reproduced,
            **{k: v.tolist() for k, v in a.items()},
            "max_rel_err_full": float(np.nanmax(a["rel_err_full"])) if np.isfinite(a["rel_err_full"]).any()
            else float("nan"),
            "max_rel_err_partial": float(np.nanmax(a["rel_err_partial"])) if np.isfinite(a["rel_err_partial"]).any()
            else float("nan"),
            "max_kcl": float(np.nanmax(a["kcl_max"])) if np.isfinite(a["kcl_max"]).any() else float("nan")}
    return reproduced, failed, stat


def verdict_accuracy(acc_fedecado: Any, acc_fedavg: Any,
                     acc_others: Mapping[str, Any] | None = None) -> tuple[bool, bool, dict[str, Any]]:
    """Claim 3. Final test accuracies (fractions in [0, 1]) per seed, paired by seed. d = 100·(FedECADO-R − FedAvg)
    points. Reproduced if mean(d) > 0 and d > 0 in ≥ 2 seeds; not reproduced if mean(d) < −1 pt; else
    inconclusive. For each entry of ``acc_others`` (e.g. fednova, fedprox) the mean paired difference and
    ``on_par`` (mean ≥ −0.5 pt) are reported; they do not enter the verdict."""
    e, b = _arr("acc_fedecado", acc_fedecado), _arr("acc_fedavg", acc_fedavg)
    n = _same_length(acc_fedecado=e, acc_fedavg=b)
    if not (np.isfinite(e).all() and np.isfinite(b).all()):
        raise ValueError("verdict_accuracy: accuracies must be finite")
    d = 100.0 * (e - b)
    mean = float(d.mean())
    n_pos = int((d > 0).sum())
    reproduced = mean > 0 and n_pos >= C3_MIN_POSITIVE
    not_reproduced = mean < C3_FAIL_PT
    others = {}
    for name, acc in (acc_others or {}).items():
        o = _arr(f"acc_{name}", acc)
        _same_length(acc_fedecado=e, **{f"acc_{name}": o})
        do = 100.0 * (e - o)
        others[name] = {"diff_pt": do.tolist(), "mean_diff_pt": float(do.mean()),
                        "on_par": bool(do.mean() >= C3_ON_PAR_PT), "n_positive": int((do > 0).sum())}
    stat = {"n_seeds": n, "diff_pt": d.tolist(), "mean_diff_pt": mean, "n_positive": n_pos,
            "std_diff_pt": float(d.std(ddof=1)) if n > 1 else float("nan"),
            "acc_fedecado": e.tolist(), "acc_fedavg": b.tolist(), "vs_others": others}
    return bool(reproduced), bool(not_reproduced), stat
