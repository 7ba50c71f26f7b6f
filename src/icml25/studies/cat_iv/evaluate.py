"""Claims of the cat_iv study, computed from the train outputs (spec "Claims this study checks").

Every claim of the spec appears exactly once; a claim whose inputs (arm, sample size) are absent at the running
scale gets verdict "inconclusive" with a note naming what is missing. Seeds are all evaluation seeds (nothing in
this study is tuned); at scales with another seed count than the spec's 20, count thresholds become the same
fractions (18/20 → 0.9) and the note says so.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from icml25.core.claims import Claim, bootstrap_ci, paired_differences, summarize, verdict

from .data import VALID, get_synthetic
from .method import auxiliary_residuals, two_stage_least_squares

CLAIM_SETTING = "case1_sin"
CLAIM_N = (300, 1000)
MECHANISM_N = 1000
SPEC_SEEDS = 20
WALD_TOL = 1e-12
CAT_SCORE_ARMS = ("cat_k2", "cat_linear_k2", "cat_unknown_k")

Records = dict[tuple[str, str, int], dict[int, dict[str, Any]]]


def collect(docs: Iterable[Mapping[str, Any]]) -> tuple[Records, dict[str, dict[str, Any]]]:
    """Index train outputs: ``synth[(arm, setting, n)][seed] = record`` and ``real[arm][dataset] = record``."""
    synth: Records = defaultdict(dict)
    real: dict[str, dict[str, Any]] = defaultdict(dict)
    for doc in docs:
        for key in ("arm", "synthetic", "real"):
            if key not in doc:
                raise ValueError(f"train output lacks key {key!r}")
        arm = doc["arm"]
        for rec in doc["synthetic"]:
            synth[(arm, rec["setting"], int(rec["n"]))][int(rec["seed"])] = rec
        for dataset, rec in doc["real"].items():
            real[arm][dataset] = rec
    return dict(synth), dict(real)


def per_seed(synth: Records, arm: str, n: int, key: str, setting: str = CLAIM_SETTING) -> dict[int, float]:
    """``{seed: record[key]}`` of one arm at one n (empty if absent)."""
    return {s: float(r[key]) for s, r in sorted(synth.get((arm, setting, n), {}).items())}


def summaries(synth: Records, resamples: int) -> dict[str, Any]:
    """Per setting, arm and n: F1 and exact-recovery summaries (mean, bootstrap CI) and mean runtime."""
    out: dict[str, Any] = {}
    for (arm, setting, n), recs in sorted(synth.items()):
        seeds = sorted(recs)
        f1 = [recs[s]["f1"] for s in seeds]
        exact = [recs[s]["exact"] for s in seeds]
        out.setdefault(setting, {}).setdefault(arm, {})[str(n)] = {
            "f1": summarize(f1, n_resamples=resamples), "exact": summarize(exact, n_resamples=resamples),
            "runtime_s": float(np.mean([recs[s]["runtime_s"] for s in seeds])), "seeds": seeds}
    return out


def wald_branch_check(arrays: Mapping[str, np.ndarray], settings_n_seeds: Iterable[tuple[str, int, int]]
                      ) -> dict[str, Any]:
    """Claim 3(c): the ``linear`` branch's implied slope β = (Y − A_j)ᵀX / XᵀX against the just-identified 2SLS
    slope computed by projection; returns the largest relative difference over datasets and candidates."""
    worst, count = 0.0, 0
    for setting, n, seed in settings_n_seeds:
        data = get_synthetic(arrays, setting, n, seed)
        x, y, z = data["X"], data["Y"], data["Z"]
        a = auxiliary_residuals(x, y, z, effect="linear", binary_branch=False)
        for j in range(z.shape[1]):
            implied = float((y - a[:, j]) @ x / (x @ x))
            reference = two_stage_least_squares(x, y, z[:, [j]])
            worst = max(worst, abs(implied - reference) / max(1.0, abs(reference)))
            count += 1
    return {"max_rel_diff": worst if count else None, "checks": count}


def _seed_note(counts: Iterable[int]) -> str:
    counts = sorted(set(counts))
    if counts and counts != [SPEC_SEEDS]:
        return f" Seeds per cell: {counts} (spec: {SPEC_SEEDS}); count thresholds applied as fractions."
    return ""


def claim_headline(synth: Records, resamples: int) -> Claim:
    """Claim 1: ``cat_k2`` mean F1 ≥ 0.95 and exact ≥ 0.90 at both n; not reproduced if mean F1 < 0.85."""
    stat, metrics, counts, missing = {}, {}, [], []
    for n in CLAIM_N:
        f1, exact = per_seed(synth, "cat_k2", n, "f1"), per_seed(synth, "cat_k2", n, "exact")
        if not f1:
            missing.append(n)
            continue
        counts.append(len(f1))
        metrics[f"cat_k2/f1/n{n}"] = summarize(list(f1.values()), n_resamples=resamples)
        metrics[f"cat_k2/exact/n{n}"] = summarize(list(exact.values()), n_resamples=resamples)
        stat[f"f1_n{n}"] = metrics[f"cat_k2/f1/n{n}"]["mean"]
        stat[f"exact_n{n}"] = metrics[f"cat_k2/exact/n{n}"]["mean"]
    present = [n for n in CLAIM_N if n not in missing]
    not_rep = any(stat[f"f1_n{n}"] < 0.85 for n in present)
    rep = not missing and all(stat[f"f1_n{n}"] >= 0.95 and stat[f"exact_n{n}"] >= 0.90 for n in present)
    note = f"cat_k2 results missing at n = {missing} at this scale." if missing else ""
    return Claim(
        id="c1_headline", source="paper",
        statement="CAT with known K = 2 recovers the valid IV set {Z1, Z2} of case1_sin.",
        data=f"{CLAIM_SETTING}, n in {list(CLAIM_N)}, seeds {counts or 0}",
        test="mean F1 and exact-recovery rate of cat_k2 per n",
        threshold="reproduced: F1 >= 0.95 and exact >= 0.90 at both n; not reproduced: F1 < 0.85 at either n",
        verdict=verdict(bool(rep), not_rep), statistic=stat, metrics=metrics,
        note=(note + _seed_note(counts)).strip())


def claim_vs_linear(synth: Records, resamples: int) -> Claim:
    """Claim 2: paired F1(cat_k2) − max(F1(ciiv_like), F1(sisvive_like)) per seed; tsht_like within 0.05."""
    stat, metrics, notes, counts, computed = {}, {}, [], [], []
    tsht_ok: list[bool] = []
    for n in CLAIM_N:
        cat, ciiv, sis = (per_seed(synth, a, n, "f1") for a in ("cat_k2", "ciiv_like", "sisvive_like"))
        absent = [a for a, v in (("cat_k2", cat), ("ciiv_like", ciiv), ("sisvive_like", sis)) if not v]
        if absent:
            notes.append(f"n = {n}: no results for {absent}.")
            continue
        seeds = sorted(set(cat) & set(ciiv) & set(sis))
        counts.append(len(seeds))
        best_linear = np.maximum([ciiv[s] for s in seeds], [sis[s] for s in seeds])
        diff = paired_differences([cat[s] for s in seeds], best_linear)
        low, high = bootstrap_ci(diff, n_resamples=resamples)
        computed.append(n)
        stat[f"diff_mean_n{n}"], stat[f"diff_ci_n{n}"] = float(diff.mean()), [low, high]
        metrics[f"diff/n{n}"] = summarize(diff, n_resamples=resamples)
        for arm, vals in (("cat_k2", cat), ("ciiv_like", ciiv), ("sisvive_like", sis)):
            metrics[f"{arm}/f1/n{n}"] = summarize([vals[s] for s in seeds], n_resamples=resamples)
        tsht = per_seed(synth, "tsht_like", n, "f1")
        if tsht:
            metrics[f"tsht_like/f1/n{n}"] = summarize(list(tsht.values()), n_resamples=resamples)
            gap = float(np.mean([cat[s] for s in seeds]) - np.mean(list(tsht.values())))
            stat[f"cat_minus_tsht_n{n}"] = gap
            tsht_ok.append(gap >= -0.05)
        else:
            notes.append(f"n = {n}: no tsht_like results.")
            tsht_ok.append(False)
    not_rep = any(stat[f"diff_ci_n{n}"][0] <= 0.0 <= stat[f"diff_ci_n{n}"][1] for n in computed)
    rep = (computed == list(CLAIM_N) and all(tsht_ok)
           and all(stat[f"diff_mean_n{n}"] >= 0.20 and stat[f"diff_ci_n{n}"][0] > 0.10 for n in computed))
    return Claim(
        id="c2_vs_linear", source="paper",
        statement="CAT selects valid IVs better than linear selection methods in the nonlinear model.",
        data=f"{CLAIM_SETTING}, n in {list(CLAIM_N)}, paired seeds {counts or 0}",
        test="per-seed paired F1(cat_k2) - max(F1(ciiv_like), F1(sisvive_like)), mean and 95% bootstrap CI "
             f"({resamples} resamples); mean F1(cat_k2) - mean F1(tsht_like)",
        threshold="reproduced: mean >= 0.20 and CI low > 0.10 at both n, and F1(cat_k2) >= F1(tsht_like) - 0.05; "
                  "not reproduced: CI contains 0",
        verdict=verdict(bool(rep), not_rep), statistic=stat, metrics=metrics,
        note=(" ".join(notes) + _seed_note(counts)).strip())


def claim_mechanism(synth: Records, wald: Mapping[str, Any]) -> Claim:
    """Claim 3: exact symmetry and zero diagonal of s; s01 smallest at n = 1000 in ≥ 18/20 seeds; linear
    branch = Wald ratio to 1e-12."""
    stat: dict[str, Any] = {}
    parts: dict[str, bool | None] = {}
    notes = []
    mats = [np.asarray(r["scores"]) for (arm, _, _), recs in synth.items() if arm in CAT_SCORE_ARMS
            for r in recs.values()]
    if mats:
        bad = sum(not (np.array_equal(m, m.T) and not np.diag(m).any()) for m in mats)
        stat["score_matrices"], stat["not_symmetric_or_nonzero_diag"] = len(mats), bad
        parts["symmetric"] = bad == 0
    else:
        parts["symmetric"] = None
        notes.append("no CAT score matrices.")
    recs = synth.get(("cat_k2", CLAIM_SETTING, MECHANISM_N), {})
    if recs:
        hits = 0
        for r in recs.values():
            s = np.asarray(r["scores"])
            iu = np.triu_indices(s.shape[0], 1)
            others = [s[i, j] for i, j in zip(*iu) if (i, j) != VALID]
            hits += int(s[VALID] < min(others))
        stat["s01_smallest"], stat["seeds"] = hits, len(recs)
        stat["s01_smallest_rate"] = hits / len(recs)
        parts["s01_smallest"] = hits / len(recs) >= 18 / 20
        if len(recs) != SPEC_SEEDS:
            notes.append(f"{len(recs)} seeds at n = {MECHANISM_N} (spec: 20); threshold applied as rate >= 0.9.")
    else:
        parts["s01_smallest"] = None
        notes.append(f"no cat_k2 results at n = {MECHANISM_N}.")
    if wald.get("max_rel_diff") is not None:
        stat["wald_max_rel_diff"] = wald["max_rel_diff"]
        parts["wald"] = wald["max_rel_diff"] <= WALD_TOL
    else:
        parts["wald"] = None
        notes.append("no synthetic data for the Wald check.")
    known = [v for v in parts.values() if v is not None]
    return Claim(
        id="c3_mechanism", source="ours",
        statement="The CAT score matrix is symmetric with zero diagonal, the valid pair has the smallest score, "
                  "and the linear branch is the Wald ratio.",
        data=f"all CAT score matrices; cat_k2 on {CLAIM_SETTING} at n = {MECHANISM_N}; all {CLAIM_SETTING} datasets",
        test="exact equality s = s^T, diag(s) = 0; share of seeds where s_01 < every other off-diagonal score; "
             "max relative |beta_linear_branch - beta_2SLS|",
        threshold=f"all matrices exact; share >= 18/20; difference <= {WALD_TOL:g}",
        verdict=verdict(len(known) == 3 and all(known), any(v is False for v in parts.values())),
        statistic=stat, metrics={}, note=" ".join(notes))


def claim_unknown_k(synth: Records) -> Claim:
    """Claim 4: non-empty ``cat_unknown_k`` outputs equal {0, 1} in ≥ 90% of cases; non-empty rate ≥ 0.5."""
    recs = [r for n in CLAIM_N for r in synth.get(("cat_unknown_k", CLAIM_SETTING, n), {}).values()]
    present = [n for n in CLAIM_N if synth.get(("cat_unknown_k", CLAIM_SETTING, n))]
    missing = [n for n in CLAIM_N if n not in present]
    if not recs:
        return Claim(id="c4_unknown_k", source="ours",
                     statement="Without K, the bias-corrected dCor t-test rule returns the valid set when it "
                               "returns anything, and usually returns something.",
                     data=f"{CLAIM_SETTING}, n in {list(CLAIM_N)}", test="rates over seeds and n",
                     threshold="correct rate among non-empty >= 0.90 and non-empty rate >= 0.5",
                     verdict=verdict(False), statistic=None,
                     note="cat_unknown_k was not run at this scale.")
    nonempty = [r for r in recs if r["selected"]]
    correct = sum(sorted(r["selected"]) == list(VALID) for r in nonempty)
    nonempty_rate = len(nonempty) / len(recs)
    correct_rate = correct / len(nonempty) if nonempty else None
    passed = nonempty_rate >= 0.5 and correct_rate is not None and correct_rate >= 0.90
    note = f"cat_unknown_k results missing at n = {missing}." if missing else ""
    return Claim(
        id="c4_unknown_k", source="ours",
        statement="Without K, the bias-corrected dCor t-test rule returns the valid set when it returns anything, "
                  "and usually returns something.",
        data=f"{CLAIM_SETTING}, n in {present}, {len(recs)} cases", test="rates over seeds and n (pooled)",
        threshold="correct rate among non-empty >= 0.90 and non-empty rate >= 0.5",
        verdict=verdict(passed and not missing, not passed),
        statistic={"nonempty_rate": nonempty_rate, "correct_rate_nonempty": correct_rate, "cases": len(recs)},
        metrics={"cat_unknown_k/nonempty": {"mean": nonempty_rate},
                 "cat_unknown_k/correct_given_nonempty": {"mean": correct_rate}},
        note=note)


def claim_card(real: Mapping[str, Mapping[str, Any]]) -> Claim:
    """Claim 5: on Card with K = 2, ``cat_k2`` selects ``nearc4`` and the post-selection 2SLS return to
    education lies in [0.05, 0.20]; failure is inconclusive (no ground truth)."""
    rec = real.get("cat_k2", {}).get("card")
    base = dict(id="c5_card", source="paper",
                statement="On Card (1995), CAT with K = 2 selects college proximity (nearc4) and gives a plausible "
                          "return to schooling.",
                test="selection of cat_k2 (K = 2); 2SLS of lwage on educ with the selected IVs, covariates "
                     "partialled out",
                threshold="nearc4 selected and 0.05 <= beta <= 0.20; failure => inconclusive")
    if rec is None:
        return Claim(**base, data="Card", verdict=verdict(False), statistic=None,
                     note="no cat_k2 result on Card at this scale.")
    beta = rec["beta_2sls"]
    ok = "nearc4" in rec["selected_names"] and beta is not None and 0.05 <= beta <= 0.20
    note = "" if rec["n_rows"] == 1601 else f"Card subsample of {rec['n_rows']} complete rows (spec: 1601)."
    if not ok:
        note = (note + " Failure is inconclusive by the spec (no ground truth).").strip()
    return Claim(**base, data=f"Card, {rec['n_rows']} rows", verdict=verdict(ok, False),
                 statistic={"selected": rec["selected_names"], "beta_2sls": beta},
                 metrics={"cat_k2/beta_2sls": {"mean": beta}}, note=note)


def evaluate_claims(synth: Records, real: Mapping[str, Mapping[str, Any]], wald: Mapping[str, Any],
                    resamples: int) -> list[Claim]:
    """All five claims of the spec, in order."""
    return [claim_headline(synth, resamples), claim_vs_linear(synth, resamples), claim_mechanism(synth, wald),
            claim_unknown_k(synth), claim_card(real)]
