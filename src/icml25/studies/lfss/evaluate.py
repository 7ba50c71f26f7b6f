"""Evaluation of the lfss study: clustering metrics, the stability-vs-correctness statistics, the adequacy gate,
and one pure verdict function per claim/check of the study (thresholds as in the study README).

Accuracies are fractions in [0, 1]; "pts" in the README are 0.01 of these.
"""
from __future__ import annotations

from collections.abc import Sequence
from itertools import permutations

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score, roc_auc_score

from .method import hungarian_align, kmeans_cosine, stability_from_labels, unstable_mask

INADEQUATE = "learner inadequate"
_EPS = 1e-12  # float tolerance at the thresholds (a mean of 0.06, 0.05, 0.04 is 0.05 - 7e-18)


# --------------------------------------------------------------------------------------------------- metrics
def cluster_mapping(y_true, y_pred) -> dict[int, int]:
    """Cluster id -> class id of the one-to-one matching with most agreements (Hungarian on the contingency)."""
    yt, yp = np.asarray(y_true), np.asarray(y_pred)
    if yt.shape != yp.shape or yt.ndim != 1:
        raise ValueError(f"y_true {yt.shape} and y_pred {yp.shape} must be 1-D of equal length")
    cls, ti = np.unique(yt, return_inverse=True)
    clu, pi = np.unique(yp, return_inverse=True)
    c = np.zeros((clu.size, cls.size), dtype=np.int64)
    np.add.at(c, (pi, ti), 1)
    r, col = linear_sum_assignment(c, maximize=True)
    return {int(clu[a]): int(cls[b]) for a, b in zip(r, col)}


def mapped_correct(y_true, y_pred) -> np.ndarray:
    """c_i = 1 where the Hungarian-mapped cluster label equals y_i (bool (N,))."""
    m = cluster_mapping(y_true, y_pred)
    mapped = np.array([m.get(int(p), -1) for p in np.asarray(y_pred)])
    return mapped == np.asarray(y_true)


def cluster_metrics(y_true, y_pred) -> tuple[float, float, float]:
    """``(acc, nmi, ari)``: Hungarian accuracy, NMI (arithmetic normalisation) and ARI of a clustering."""
    acc = float(mapped_correct(y_true, y_pred).mean())
    return (acc, float(normalized_mutual_info_score(y_true, y_pred)), float(adjusted_rand_score(y_true, y_pred)))


def kmeans_eval(features, y_true, k: int, runs: int = 10) -> dict[str, float]:
    """Mean (and sd) ACC/NMI/ARI of ``runs`` cosine k-means runs (seeds 0..runs-1) on ``features (N, D)``."""
    s = np.array([cluster_metrics(y_true, kmeans_cosine(features, k, seed=r)[0]) for r in range(runs)])
    return {"acc": float(s[:, 0].mean()), "nmi": float(s[:, 1].mean()), "ari": float(s[:, 2].mean()),
            "acc_sd": float(s[:, 0].std()), "runs": int(runs)}


def stability_correctness(s, correct, delta: float = 0.1) -> dict[str, float]:
    """Claim-1 statistics of one epoch: AUROC of s predicting correctness, accuracy of the samples flagged by the
    threshold rule with ``delta`` (the least stable ~δN) and of the rest, and gap = acc_stable - acc_unstable.

    AUROC is NaN when every sample is correct or every one wrong.
    """
    s, c = np.asarray(s, dtype=np.float64), np.asarray(correct, dtype=bool)
    au = float(roc_auc_score(c, s)) if 0 < c.sum() < c.size else float("nan")
    flag = unstable_mask(s, delta)
    acc_u = float(c[flag].mean()) if flag.any() else float("nan")
    acc_s = float(c[~flag].mean()) if (~flag).any() else float("nan")
    return {"auroc": au, "acc_unstable": acc_u, "acc_stable": acc_s, "gap": acc_s - acc_u,
            "n_flagged": int(flag.sum())}


# ------------------------------------------------------------------------------------------------- the gate
def adequacy_gate(base_final_acc: Sequence[float], base_curve_acc: Sequence[Sequence[float]],
                  reference_acc: float | Sequence[float], ratio: float = 0.9,
                  max_drop: float = 0.05) -> tuple[bool, dict]:
    """Adequacy gate of the base learner (claims 1-2 are inconclusive when it fails).

    Fails if the seed-mean of ``base_final_acc`` (S,) is below ``ratio`` x the mean ``reference_acc`` (cosine
    k-means on PCA-50 pixels, one value or one per seed), or if any seed's per-epoch ACC curve
    (``base_curve_acc`` (S, E)) ends more than ``max_drop`` below its best epoch.
    """
    fin = np.asarray(base_final_acc, dtype=np.float64)
    ref = float(np.mean(reference_acc))
    drops = np.array([float(np.max(c) - c[-1]) for c in map(np.asarray, base_curve_acc)])
    if fin.size == 0 or drops.size != fin.size:
        raise ValueError(f"adequacy_gate: {fin.size} final ACCs but {drops.size} curves (need one per seed, ≥ 1)")
    threshold = ratio * ref
    level_ok = bool(fin.mean() >= threshold - _EPS)
    drift_ok = bool(drops.max() <= max_drop + _EPS)
    stat = {"base_final_acc_mean": float(fin.mean()), "reference_acc": ref, "threshold": threshold,
            "max_drop": float(drops.max()), "drops": drops.tolist(), "level_ok": level_ok, "drift_ok": drift_ok}
    return level_ok and drift_ok, stat


# --------------------------------------------------------------------------------------------- claim verdicts
def claim1_unstable_misclustered(auroc: Sequence[float], gap: Sequence[float], gate: bool = True,
                                 auroc_min: float = 0.58, gap_min: float = 0.05) -> tuple[bool, bool, dict]:
    """Claim 1 (unstable samples are misclustered), base arm, per-seed AUROC(s -> c) and gap (fractions), each
    already averaged over epochs {E-10, E-5, E}.

    Reproduced: mean AUROC ≥ 0.58, every seed's AUROC > 0.5 and mean gap ≥ 0.05 (5 pts). Not reproduced: mean
    AUROC ≤ 0.5 or mean gap ≤ 0. Else (or when the adequacy ``gate`` fails, or a value is NaN) inconclusive.
    """
    a, g = np.asarray(auroc, dtype=np.float64), np.asarray(gap, dtype=np.float64)
    stat = {"auroc_mean": float(a.mean()), "auroc_min_seed": float(a.min()), "gap_mean": float(g.mean()),
            "auroc": a.tolist(), "gap": g.tolist(), "n": int(a.size), "gate": bool(gate)}
    if not gate:
        return False, False, {**stat, "note": INADEQUATE}
    if a.size == 0 or a.size != g.size or np.isnan(a).any() or np.isnan(g).any():
        return False, False, {**stat, "note": "missing or NaN statistics"}
    rep = bool(a.mean() >= auroc_min - _EPS and (a > 0.5).all() and g.mean() >= gap_min - _EPS)
    nrep = bool(a.mean() <= 0.5 or g.mean() <= 0.0)
    return rep, nrep and not rep, stat


def claim2_lfss_improves(acc_base: Sequence[float], acc_lfss: Sequence[float], nmi_base: Sequence[float],
                         nmi_lfss: Sequence[float], gate: bool = True, min_positive: int = 2,
                         harm: float = 0.01) -> tuple[bool, bool, dict]:
    """Claim 2 (LFSS improves clustering): paired per-seed differences lfss - base of ACC and NMI (means of the
    10 k-means runs). Reproduced: both mean differences > 0 and ACC difference > 0 in ≥ ``min_positive`` seeds.
    Not reproduced: mean ACC difference < -0.01 (1 pt). Else, or when the ``gate`` fails, inconclusive.
    """
    ab, al = np.asarray(acc_base, dtype=np.float64), np.asarray(acc_lfss, dtype=np.float64)
    nb, nl = np.asarray(nmi_base, dtype=np.float64), np.asarray(nmi_lfss, dtype=np.float64)
    if not (ab.shape == al.shape == nb.shape == nl.shape) or ab.ndim != 1:
        raise ValueError("claim2_lfss_improves: the four per-seed arrays must be 1-D of equal length (paired)")
    d_acc, d_nmi = al - ab, nl - nb
    stat = {"d_acc_mean": float(d_acc.mean()), "d_nmi_mean": float(d_nmi.mean()),
            "n_acc_positive": int((d_acc > 0).sum()), "d_acc": d_acc.tolist(), "d_nmi": d_nmi.tolist(),
            "n": int(ab.size), "gate": bool(gate)}
    if not gate:
        return False, False, {**stat, "note": INADEQUATE}
    rep = bool(d_acc.mean() > 0 and d_nmi.mean() > 0 and (d_acc > 0).sum() >= min_positive)
    nrep = bool(d_acc.mean() < -harm - _EPS)
    return rep, nrep and not rep, stat


# ------------------------------------------------------------------------------------ check 3: the identities
def brute_force_align(ref_labels, labels, k: int) -> tuple[np.ndarray, int]:
    """Best relabelling over all k! permutations (for k ≤ 5) and its agreement count."""
    if k > 5:
        raise ValueError(f"brute_force_align is for k ≤ 5, got k={k}")
    ref, lab = np.asarray(ref_labels), np.asarray(labels)
    best, best_perm = -1, None
    for perm in permutations(range(k)):
        agree = int((np.asarray(perm)[lab] == ref).sum())
        if agree > best:
            best, best_perm = agree, np.asarray(perm)
    return best_perm[lab], best


def stability_identities(seed: int = 0, n: int = 200, k: int = 4, d: int = 8, delta: float = 0.1) -> dict[str, bool]:
    """Evaluate the five stability-score identities on random clustered features drawn with ``default_rng(seed)``.

    Keys: ``permutation_invariant`` (pseudo-labels unchanged when the new k-means ids are permuted),
    ``scale_invariant`` (s unchanged when rows of either feature matrix are rescaled by positive factors),
    ``self_one`` (s_i = 1 when old = new), ``alignment_optimal`` (aligned labels' agreement with the old labels
    equals the brute-force maximum, k ≤ 5), ``flag_count`` (exactly ⌊δN⌋ - 1 flagged when s has no ties).
    """
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d)) * 3
    cls = rng.integers(k, size=n)
    old = centres[cls] + rng.normal(size=(n, d))
    new = old + 0.8 * rng.normal(size=(n, d))
    old_lab, _ = kmeans_cosine(old, k, seed=0)
    new_lab, _ = kmeans_cosine(new, k, seed=0)
    base = stability_from_labels(old, new, old_lab, new_lab, k, delta)
    perm = rng.permutation(k)
    permuted = stability_from_labels(old, new, old_lab, perm[new_lab], k, delta)
    scale_old, scale_new = rng.uniform(0.1, 10, size=(n, 1)), rng.uniform(0.1, 10, size=(n, 1))
    scaled = stability_from_labels(old * scale_old, new * scale_new, old_lab, new_lab, k, delta)
    same = stability_from_labels(old, old, old_lab, old_lab, k, delta)
    aligned = hungarian_align(old_lab, new_lab, k)
    _, best = brute_force_align(old_lab, new_lab, k)
    no_ties = np.unique(base["s"]).size == n
    return {
        "permutation_invariant": bool(np.array_equal(base["pseudo"], permuted["pseudo"])),
        "scale_invariant": bool(np.allclose(base["s"], scaled["s"], rtol=0, atol=1e-12)),
        "self_one": bool(np.allclose(same["s"], 1.0, rtol=0, atol=1e-12)),
        "alignment_optimal": bool(int((aligned == old_lab).sum()) == best),
        "flag_count": bool(no_ties and int((base["pseudo"] == -1).sum()) == int(np.floor(delta * n)) - 1),
    }


def check3_stability_identities(results: Sequence[dict[str, bool]]) -> tuple[bool, dict]:
    """Check 3 holds iff every identity holds in every trial (``results``: one dict of
    :func:`stability_identities` per trial)."""
    if not results:
        raise ValueError("check3_stability_identities: no trials")
    keys = sorted(results[0])
    failed = {key: int(sum(not r[key] for r in results)) for key in keys}
    holds = all(v == 0 for v in failed.values())
    return holds, {"trials": len(results), "failed": failed, "identities": keys}
