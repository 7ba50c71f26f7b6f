"""Held-out metrics and the pure verdict functions of the unisoma study.

Metric of claim 1: the relative L2 error of the final positions, per test sample, averaged over the 2
deformables: ‖(x₀ + Δ̂) − x₁‖₂ / ‖x₁‖₂ in physical units (predictions denormalised). Also reported: relative L2 of
the displacement Δ, the stress, and the PEEQ (over the deformables whose PEEQ varies in training, i.e. the metal).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from icml25.core.claims import gate, mde, sign_flip_test, summarize

METRICS = ("rel_l2_pos", "rel_l2_disp", "rel_l2_stress", "rel_l2_peeq")


def _rel(pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    """Per-sample relative L2 over all non-sample dims: (S, ...) -> (S,)."""
    s = pred.shape[0]
    return np.linalg.norm((pred - true).reshape(s, -1), axis=1) / np.linalg.norm(true.reshape(s, -1), axis=1)


def denormalise(preds: list[np.ndarray], norm: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Normalised predictions (S, N_m, 5) -> physical units; a channel constant over the training set (the z
    displacement, the rubber's PEEQ) is predicted as that constant."""
    return [np.where(norm[f"targets{m}_const"] > 0, norm[f"targets{m}_mean"],
                     p * norm[f"targets{m}_std"] + norm[f"targets{m}_mean"]) for m, p in enumerate(preds)]


def per_sample_metrics(preds: list[np.ndarray], init_pos: list[np.ndarray], targets: list[np.ndarray],
                       norm: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-sample test metrics (S,) averaged over deformables.

    ``preds``: physical predictions (S, N_m, 5); ``init_pos``: (S, N_m, 3); ``targets``: (S, N_m, 5) physical
    [Δ, stress, PEEQ]. Fields constant over the training set (``targets{m}_const``) are left out of their average.
    """
    out: dict[str, list[np.ndarray]] = {k: [] for k in METRICS}
    for m, (p, x0, t) in enumerate(zip(preds, init_pos, targets)):
        const = norm[f"targets{m}_const"]
        out["rel_l2_pos"].append(_rel(x0 + p[..., :3], x0 + t[..., :3]))
        out["rel_l2_disp"].append(_rel(p[..., :3], t[..., :3]))
        if not const[3]:
            out["rel_l2_stress"].append(_rel(p[..., 3], t[..., 3]))
        if not const[4]:
            out["rel_l2_peeq"].append(_rel(p[..., 4], t[..., 4]))
    return {k: np.mean(v, axis=0) for k, v in out.items() if v}


# ----------------------------------------------------------------------------------------------------------------
# Verdicts (pure functions of metric arrays)
# ----------------------------------------------------------------------------------------------------------------
def decide_headline(unisoma: np.ndarray, implicit: np.ndarray, *, floor: float = 0.0
                    ) -> tuple[bool, bool, dict[str, Any]]:
    """Claim 1: explicit beats implicit. ``unisoma``, ``implicit``: per-sample test rel-L2 of positions, shape
    (n_seeds, n_test), the same test samples in the same order. The training seed is the independent unit (the
    test samples are the same for every seed, so pooling them across seeds would count one sample several times
    and ignore seed-to-seed training variance): per seed d_s = mean over samples of (unisoma − implicit), then
    the Student-t 95 % interval over seeds. Superiority with effect-size floor ``floor`` ≥ 0 (rel-L2 units):
    reproduced iff mean(d) ≤ −floor and CI high < 0; not reproduced iff CI low > −floor; else inconclusive."""
    u, i = np.atleast_2d(np.asarray(unisoma, float)), np.atleast_2d(np.asarray(implicit, float))
    if u.shape != i.shape:
        raise ValueError(f"decide_headline: unpaired shapes {u.shape} and {i.shape}")
    if not (np.isfinite(u).all() and np.isfinite(i).all()):
        raise ValueError("decide_headline: non-finite rel-L2 values")
    d = (u - i).mean(axis=1)
    s = summarize(d, unit="seeds")
    stat = {"mean_diff": s["mean"], "ci_low": s["ci_low"], "ci_high": s["ci_high"], "sd": s["std"],
            "n_seeds": int(d.size), "n_test": int(u.shape[1]), "ci_method": s["ci_method"],
            "mde": mde(d.size, s["std"]) if d.size > 1 else None,
            "p_sign_flip": sign_flip_test(d) if d.size > 1 else None, "floor": floor,
            "unisoma_mean": float(u.mean()), "implicit_mean": float(i.mean()), "per_seed_diff": d.tolist()}
    return bool(s["mean"] <= -floor and s["ci_high"] < 0), bool(s["ci_low"] > -floor), stat


def baseline_gate(implicit_rel_l2_disp: Any, max_rel_l2: float):
    """Adequacy gate of claim 1: the implicit baseline must learn the deformation at all. Its mean (over seeds)
    relative L2 of the displacement must be ≤ ``max_rel_l2`` (``adequacy.max_baseline_rel_l2_disp``); predicting
    zero displacement gives exactly 1, so a baseline near 1 has not learnt and beating it says nothing about
    explicit modelling."""
    v = float(np.mean(np.asarray(implicit_rel_l2_disp, dtype=float)))
    return gate("baseline_learns", v, at_most=max_rel_l2,
                text="implicit's relative L2 of the displacement (1 = predicting no displacement)")


def decide_equivariance(dev_self: float, dev_others: float, dev_tokens: float, tol: float = 1e-5
                        ) -> tuple[bool, dict[str, float]]:
    """Check 2: permuting one entity's nodes permutes its outputs (``dev_self`` = max |Δ| after un-permuting),
    leaves other entities' outputs unchanged (``dev_others``) and slice tokens invariant (``dev_tokens``); all
    ≤ ``tol`` (float64)."""
    stat = {"max_dev_self": float(dev_self), "max_dev_others": float(dev_others),
            "max_dev_tokens": float(dev_tokens), "tol": tol}
    return bool(max(dev_self, dev_others, dev_tokens) <= tol), stat


def decide_allocation(sum_dev: float, bypass_bitwise: bool, counts_run: Mapping[str, bool], tol: float = 1e-6
                      ) -> tuple[bool, dict[str, Any]]:
    """Check 3: allocation weights sum to 1 over K (max |Σα − 1| ≤ ``tol``), K = 1 returns its input bitwise,
    and one model class runs every entity-count configuration in ``counts_run``."""
    stat = {"max_sum_dev": float(sum_dev), "bypass_bitwise": bool(bypass_bitwise), "counts_run": dict(counts_run),
            "tol": tol}
    return bool(sum_dev <= tol and bypass_bitwise and counts_run and all(counts_run.values())), stat


def decide_data_safety(roundtrip_equal: bool, malicious_rejected: bool, side_effect_absent: bool,
                       ordered_dict_rejected: bool) -> tuple[bool, dict[str, bool]]:
    """Check 4: the simulator's pickles load through the restricted loader and equal what was written; a
    malicious pickle (a ``__reduce__`` creating a file) and an ``OrderedDict`` global are rejected, and the file
    never appears."""
    stat = {"roundtrip_equal": bool(roundtrip_equal), "malicious_rejected": bool(malicious_rejected),
            "side_effect_absent": bool(side_effect_absent), "ordered_dict_rejected": bool(ordered_dict_rejected)}
    return all(stat.values()), stat


def decide_param_match(unisoma_params: int, implicit_params: int, tol: float = 0.10) -> tuple[bool, dict]:
    """Baseline fairness: the implicit baseline's parameter count is within ±10% of Unisoma's."""
    ratio = implicit_params / unisoma_params
    return bool(abs(ratio - 1) <= tol + 1e-12), {"unisoma_params": int(unisoma_params),
                                         "implicit_params": int(implicit_params), "ratio": float(ratio)}
