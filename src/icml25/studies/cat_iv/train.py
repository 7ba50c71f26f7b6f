"""Running one arm on one dataset (the train stage's computation; spec "Arms and baselines", "Stages").

Arms: ``cat_k2`` (nonlinear branch, K = 2), ``cat_linear_k2`` (linear-branch ablation), ``cat_unknown_k``
(step 6, ours), and the linear baselines ``ciiv_like``, ``sisvive_like``, ``tsht_like`` [R]. Every arm sees the
same complete-case, covariate-residualised data (:func:`icml25.studies.cat_iv.method.prepare`).
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from .baselines import BASELINES
from .config import Config
from .method import cat_select, prepare, two_stage_least_squares_se

CAT_ARMS = {"cat_k2": ("nonlinear", 2), "cat_linear_k2": ("linear", 2), "cat_unknown_k": ("nonlinear", None)}
ARMS = (*CAT_ARMS, *BASELINES)


def f1_score(selected: Iterable[int], truth: Iterable[int]) -> float:
    """F1 of a selected index set against the true valid set (0 when nothing is selected)."""
    s, t = set(selected), set(truth)
    tp = len(s & t)
    if tp == 0:
        return 0.0
    precision, recall = tp / len(s), tp / len(t)
    return 2 * precision * recall / (precision + recall)


def run_arm(arm: str, x: np.ndarray, y: np.ndarray, z: np.ndarray, w: np.ndarray | None, config: Config, *,
            seed: int, residual_method: str) -> dict[str, Any]:
    """Select with one arm; returns ``selected`` (ascending), ``runtime_s`` and, for CAT arms, ``scores``
    (p, p) and ``dcor`` (p, p) (plus ``pvalues`` for the unknown-K arm) as nested lists."""
    if arm not in ARMS:
        raise ValueError(f"arm: unknown {arm!r} (known: {list(ARMS)})")
    t0 = time.perf_counter()
    w = None if w is None or w.shape[1] == 0 else w
    prepared = prepare(x, y, z, w, residual_method=residual_method, seed=seed, trees=config.forest_trees,
                       forest_residuals=config.forest_residuals)
    out: dict[str, Any] = {}
    if arm in CAT_ARMS:
        effect, k = CAT_ARMS[arm]
        result = cat_select(prepared, k, effect=effect, alpha=config.alpha, standardize_x=config.standardize_x,
                            binary_branch=config.binary_branch, unknown_k_test=config.unknown_k_test,
                            permutations=config.permutations, seed=seed)
        out.update(selected=sorted(result.selected), scores=result.scores.tolist(), dcor=result.dcor.tolist())
        if result.pvalues is not None:
            out["pvalues"] = result.pvalues.tolist()
            out["unknown_k_test"] = result.info["unknown_k_test"]
            out["selected_by_test"] = {t: sorted(v) for t, v in result.info["selected_by_test"].items()}
    else:
        out["selected"] = sorted(BASELINES[arm](prepared.x, prepared.y, prepared.z))
    out["runtime_s"] = time.perf_counter() - t0
    out["_prepared"] = prepared
    return out


def synthetic_record(arm: str, data: Mapping[str, np.ndarray], config: Config, *, setting: str, n: int,
                     seed: int) -> dict[str, Any]:
    """One arm on one synthetic dataset: selection, F1 and exact recovery against ``data['valid']``."""
    out = run_arm(arm, data["X"], data["Y"], data["Z"], data["W"], config, seed=seed,
                  residual_method=config.residual_method)
    out.pop("_prepared")
    truth = [int(v) for v in data["valid"]]
    return {"setting": setting, "n": n, "seed": seed, **out, "f1": f1_score(out["selected"], truth),
            "exact": float(sorted(out["selected"]) == sorted(truth))}


def real_record(arm: str, data: Mapping[str, np.ndarray], config: Config, *, seed: int) -> dict[str, Any]:
    """One arm on a real dataset: selection (indices and names) with K = 2 for known-K arms, and the
    post-selection 2SLS effect of the treatment (covariates partialled out, Frisch–Waugh–Lovell) and its HC0
    sandwich standard error."""
    out = run_arm(arm, data["X"], data["Y"], data["Z"], data["W"], config, seed=seed,
                  residual_method=config.real.residual_method)
    prepared = out.pop("_prepared")
    names = [str(c) for c in data["candidates"]]
    selected = out["selected"]
    beta, se = (two_stage_least_squares_se(prepared.x, prepared.y, prepared.z[:, selected]) if selected
                else (None, None))
    return {**out, "selected_names": [names[j] for j in selected], "candidates": names,
            "n_rows": int(prepared.x.shape[0]), "beta_2sls": beta, "beta_2sls_se": se,
            "k": CAT_ARMS.get(arm, (None, None))[1]}
