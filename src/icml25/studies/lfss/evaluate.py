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


def kmeans_eval(features, y_true, k: int, runs: int = 10, n_init: int = 1) -> dict[str, float]:
    """Mean (and sd) ACC/NMI/ARI of ``runs`` cosine k-means runs (seeds 0..runs-1, each the best of ``n_init``
    starts; the released evaluation: 10 runs of best-of-10) on ``features (N, D)``."""
    s = np.array([cluster_metrics(y_true, kmeans_cosine(features, k, seed=r, n_init=n_init)[0])
                  for r in range(runs)])
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
                         harm: float = 0.01, min_d_acc: float = 0.0) -> tuple[bool, bool, dict]:
    """Claim 2 (LFSS improves clustering): paired per-seed differences lfss - base of ACC and NMI (means of the
    10 k-means runs). Reproduced: mean ACC difference > 0 and ≥ ``min_d_acc`` (the effect-size floor; the
    pipeline passes ``claims.c2_min_d_acc`` = 1 pt), mean NMI difference > 0 and ACC difference > 0 in
    ≥ ``min_positive`` seeds. Not reproduced: mean ACC difference < -0.01 (1 pt). Else, or when the ``gate``
    fails, inconclusive.
    """
    ab, al = np.asarray(acc_base, dtype=np.float64), np.asarray(acc_lfss, dtype=np.float64)
    nb, nl = np.asarray(nmi_base, dtype=np.float64), np.asarray(nmi_lfss, dtype=np.float64)
    if not (ab.shape == al.shape == nb.shape == nl.shape) or ab.ndim != 1:
        raise ValueError("claim2_lfss_improves: the four per-seed arrays must be 1-D of equal length (paired)")
    d_acc, d_nmi = al - ab, nl - nb
    positive = d_acc > _EPS  # equal ACCs can differ by ~1e-17 in floating point: that is no improvement
    stat = {"d_acc_mean": float(d_acc.mean()), "d_nmi_mean": float(d_nmi.mean()),
            "n_acc_positive": int(positive.sum()), "d_acc": d_acc.tolist(), "d_nmi": d_nmi.tolist(),
            "n": int(ab.size), "gate": bool(gate)}
    if not gate:
        return False, False, {**stat, "note": INADEQUATE}
    rep = bool(d_acc.mean() > _EPS and d_acc.mean() >= min_d_acc - _EPS and d_nmi.mean() > _EPS
               and positive.sum() >= min_positive)
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


# ------------------------------------------------------------------------------------- claims.json from results
CHECK3_TRIALS = tuple((s, k) for s in range(5) for k in (3, 4, 5))  # (seed, K) of the identity trials


def claim1_statistics(curves: Sequence[dict], epochs_back: Sequence[int]) -> dict[str, float]:
    """AUROC(s -> c) and gap averaged over epochs {E - b for b in epochs_back} (E = last epoch of ``curves``)."""
    last = curves[-1]["epoch"]
    want = {last - b for b in epochs_back}
    rows = [c for c in curves if c["epoch"] in want]
    if len(rows) != len(want):
        raise ValueError(f"lfss: claim-1 epochs {sorted(want)} not all in the curves (1..{last})")
    return {"auroc": float(np.mean([r["auroc"] for r in rows])), "gap": float(np.mean([r["gap"] for r in rows])),
            "epochs": sorted(want)}


def gates_of(stat: dict) -> list:
    """The adequacy gate's two conditions as :class:`icml25.core.claims.Gate` entries (a failed one makes claims
    1-2 inconclusive, naming it): ``base_level`` (base seed-mean final ACC ≥ ratio × PCA-50 k-means ACC) and
    ``base_no_drift`` (largest fall of a seed's ACC from its best epoch ≤ the allowed drop)."""
    from icml25.core.claims import gate

    return [gate("base_level", stat["base_final_acc_mean"], at_least=stat["threshold"] - _EPS,
                 text=f"base arm's seed-mean final ACC vs {stat.get('ratio', 0.9):g} x cosine k-means ACC on PCA-50 "
                      f"pixels ({stat['reference_acc']:.3f}): {INADEQUATE} below"),
            gate("base_no_drift", stat["max_drop"], at_most=stat.get("max_drop_allowed", 0.05) + _EPS,
                 text=f"largest fall of a seed's base ACC from its best epoch: {INADEQUATE} above")]


def build_claims(results: dict[tuple[str, int], dict], references: dict[int, dict], trials: Sequence[dict], *,
                 ratio: float = 0.9, max_drop: float = 0.05, min_d_acc: float = 0.01, paper_data: bool = False
                 ) -> tuple[list, dict]:
    """Claims 1-2 and check 3 as :class:`icml25.core.claims.Claim` entries, and the adequacy gate's statistics.

    ``results[(arm, seed)]``: ``final`` (mean ACC/NMI/ARI of the k-means runs), ``curve_acc`` (per-epoch ACC),
    ``claim1`` (:func:`claim1_statistics`); ``references[seed]``: the PCA-50 k-means reference; ``trials``: one
    :func:`stability_identities` dict per trial. The unit of claims 1-2 is the training seed (Student-t intervals
    over seeds, exact sign-flip p, MDE); the adequacy gate (``ratio``, ``max_drop``) is attached as two
    :class:`icml25.core.claims.Gate` entries, so a failed gate makes the claims inconclusive and the note says what
    the test alone gave. ``min_d_acc``: claim 2's effect-size floor; ``paper_data``: the run used the paper's data
    set (not the MNIST-5k stand-in)."""
    from icml25.core.claims import Claim, Evidence, check, mde, sign_flip_test, summarize, untested, verdict

    seeds = sorted({s for (_, s) in results})
    have = lambda arm: all((arm, s) in results for s in seeds)  # noqa: E731
    data = "the paper's data set" if paper_data else "MNIST-5k subset (stand-in for the paper's image benchmarks)"
    claims, gate_stat, gates = [], None, []
    c1 = dict(id="c1_unstable_misclustered", source="paper", title="Unstable samples are misclustered",
              statement="Samples whose representation is unstable between consecutive epochs are more often "
                        "misclustered: stability s predicts the correctness of the Hungarian-mapped k-means label")
    c1_more = dict(
        data=f"{data}, base arm, training images",
        test="per seed: AUROC(s -> correct) and gap = ACC of the rest - ACC of the least-stable 10 %, each averaged "
             "over epochs E-10, E-5, E; Student-t 95% CI of the mean AUROC over seeds",
        threshold="reproduced: mean AUROC >= 0.58, every seed > 0.5 and mean gap >= 5 pts; not reproduced: mean "
                  "AUROC <= 0.5 or mean gap <= 0; adequacy gate (base_level, base_no_drift) must pass")
    if have("base") and seeds:
        base = [results["base", s] for s in seeds]
        refs = [references[s]["acc"] for s in seeds]
        _, gate_stat = adequacy_gate([r["final"]["acc"] for r in base], [r["curve_acc"] for r in base], refs,
                                     ratio=ratio, max_drop=max_drop)
        gate_stat = {**gate_stat, "ratio": ratio, "max_drop_allowed": max_drop}
        gates = gates_of(gate_stat)
        auroc = [r["claim1"]["auroc"] for r in base]
        rep, nrep, stat = claim1_unstable_misclustered(auroc, [r["claim1"]["gap"] for r in base], gate=True)
        summ = summarize(auroc)
        claims.append(Claim(verdict=verdict(rep, nrep), statistic={**stat, "gate": gate_stat, "seeds": seeds},
                            gates=gates, metrics={"base": summ},
                            evidence=Evidence(len(seeds), "seeds", paper_data=paper_data, ci_method=summ["ci_method"],
                                              mde=mde(len(seeds), summ["std"]) if len(seeds) > 1 else None),
                            key_numbers={"mean AUROC": stat["auroc_mean"],
                                         "AUROC CI": f"[{summ['ci_low']:.3f}, {summ['ci_high']:.3f}]",
                                         "mean gap": stat["gap_mean"], "base ACC": gate_stat["base_final_acc_mean"],
                                         "gate threshold": gate_stat["threshold"]}, **c1, **c1_more))
    else:
        claims.append(untested(c1["id"], c1["statement"], scale="default", title=c1["title"], paper_data=paper_data,
                               reason="needs the base arm"))

    c2 = dict(id="c2_lfss_improves", source="paper", title="LFSS improves clustering",
              statement="Adding the sample-stability supervision (LFSS) to the base deep-clustering learner improves "
                        "clustering ACC and NMI")
    c2_more = dict(
        data=f"{data}, final target features, mean of the k-means runs per model",
        test="paired per-seed differences lfss - base of ACC and NMI; Student-t 95% CI of the mean dACC over seeds, "
             "exact one-sided sign-flip p",
        threshold=f"reproduced: mean dACC >= {100 * min_d_acc:g} pt (floor) and > 0, mean dNMI > 0 and dACC > 0 in "
                  ">= 2 seeds; not reproduced: mean dACC < -1 pt; adequacy gate must pass")
    if have("base") and have("lfss") and seeds:
        get = lambda a, m: [results[a, s]["final"][m] for s in seeds]  # noqa: E731
        rep, nrep, stat = claim2_lfss_improves(get("base", "acc"), get("lfss", "acc"), get("base", "nmi"),
                                               get("lfss", "nmi"), gate=True, min_d_acc=min_d_acc)
        summ = summarize(stat["d_acc"])
        p = sign_flip_test(stat["d_acc"], alternative="greater") if len(seeds) > 1 else None
        claims.append(Claim(verdict=verdict(rep, nrep), statistic={**stat, "seeds": seeds, "sign_flip_p": p},
                            gates=list(gates),
                            evidence=Evidence(len(seeds), "seeds", paper_data=paper_data, ci_method=summ["ci_method"],
                                              mde=mde(len(seeds), summ["std"]) if len(seeds) > 1 else None),
                            metrics={**{a: summarize(get(a, "acc")) for a in ("base", "lfss")}, "d_acc": summ},
                            key_numbers={"mean dACC": stat["d_acc_mean"],
                                         "dACC CI": f"[{summ['ci_low']:.3f}, {summ['ci_high']:.3f}]",
                                         "mean dNMI": stat["d_nmi_mean"], "seeds dACC > 0": stat["n_acc_positive"],
                                         "sign-flip p": p}, **c2, **c2_more))
    else:
        claims.append(untested(c2["id"], c2["statement"], scale="default", title=c2["title"], paper_data=paper_data,
                               reason="needs the base and lfss arms"))

    holds, stat = check3_stability_identities(list(trials))
    claims.append(check("c3_stability_identities", "Stability-score identities: pseudo-labels unchanged when the "
                        "new k-means ids are permuted; s unchanged by rescaling rows; s = 1 when old = new; the "
                        "aligned labels reach the brute-force maximum agreement (K <= 5); exactly floor(delta N) - 1 "
                        "samples flagged when s has no ties", holds=holds, statistic=stat, source="paper",
                        data=f"random clustered features, {len(trials)} trials (N = 200, K = 3-5)",
                        test="exact comparisons", threshold="every identity in every trial",
                        evidence=Evidence(len(trials), "trials"), title="Stability identities",
                        key_numbers={"trials": len(trials), "failed": sum(stat["failed"].values())}))
    passes = all(g.passed for g in gates) if gates else True
    return claims, {"passes": passes, **(gate_stat or {})}
