"""The CAT method (spec "Method", steps 1–7; paper Sec. 4 "Cross Auxiliary-based independent Test").

1. Covariates W (optional): X, Y and every Z_j are replaced by residuals on W (random forest or OLS).
2. Per candidate Z_j an estimate ĥ_j of the effect f: the ``nonlinear`` control-function branch or the
   ``linear`` Wald-ratio branch.
3. Auxiliary residuals A_j = Y − ĥ_j(X).
4. Pairwise scores s_ij = dCor(A_i, Z_j) + dCor(A_j, Z_i) (V-statistic dCor), symmetric, zero diagonal.
5. Known K: the K-subset with the smallest summed score (lexicographic enumeration, first wins ties).
6. Unknown K (ours, [R]): the largest set whose ordered pairs all pass an independence test of A_i vs Z_j at
   the Bonferroni level α / (p(p−1)): the spec's bias-corrected dCor t-test (``unknown_k_test="t"``), or a
   permutation test of dCor (``"permutation"``), which is calibrated on the univariate samples CAT tests (the
   t approximation is not; see :func:`icml25.studies.cat_iv.dcor.dcor_permutation_pvalues`).

Two reconstructions differ from the authors' R code by default or by choice (study README):

* ``binary_branch`` (default **False**, as the authors' code): candidates with ≤ 2 distinct values would use the
  Wald-ratio branch; the authors apply the control function to every candidate.
* ``forest_residuals`` (default ``"oob"``): random-forest residualisation on W subtracts out-of-bag predictions;
  ``"in_sample"`` subtracts in-sample predictions as the authors' code does.

All arrays are float64; rows with a NaN anywhere are dropped. p ≤ 15.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from .dcor import dcor_matrices, dcor_matrix, dcor_permutation_pvalues, dcor_t_pvalue

MAX_CANDIDATES = 15
Effect = Literal["nonlinear", "linear"]
ResidualMethod = Literal["random_forest", "linear"]
UnknownKTest = Literal["t", "permutation"]
ForestResiduals = Literal["oob", "in_sample"]


# ------------------------------------------------------------------------------------------ input handling


@dataclass(frozen=True)
class Prepared:
    """Complete-case, covariate-residualised inputs. x, y: (n,); z: (n, p); binary: (p,) bool."""

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    binary: np.ndarray
    n_dropped: int = 0


def _vector(a, name: str) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise ValueError(f"{name}: expected shape (n,), got {a.shape}")
    return a


def _matrix(a, name: str) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"{name}: expected shape (n, p), got {a.shape}")
    return a


def residualize(v: np.ndarray, w: np.ndarray, method: ResidualMethod = "random_forest", seed: int = 0,
                trees: int = 500, forest_residuals: ForestResiduals = "oob") -> np.ndarray:
    """Residuals of each column of v (n, k) on covariates w (n, q) (step 1) → (n, k).

    ``linear``: OLS with intercept. ``random_forest`` [R]: sklearn forest (``trees`` trees,
    ``random_state=seed``) per column. ``forest_residuals="oob"`` (default) subtracts out-of-bag predictions
    (what R's ``predict(randomForest(...))`` returns without new data), so the forest cannot memorise the
    column; ``"in_sample"`` subtracts the forest's predictions on its own training rows, as the authors' code
    does (those residuals are shrunk towards 0 because each row is in ~63% of the trees).
    """
    if forest_residuals not in ("oob", "in_sample"):
        raise ValueError(f"forest_residuals: unknown {forest_residuals!r} (known: oob, in_sample)")
    v, w = _matrix(v, "v"), _matrix(w, "covariates")
    if method == "linear":
        design = np.column_stack([np.ones(len(w)), w])
        coef, *_ = np.linalg.lstsq(design, v, rcond=None)
        return v - design @ coef
    if method == "random_forest":
        from sklearn.ensemble import RandomForestRegressor

        out = np.empty_like(v)
        for j in range(v.shape[1]):
            forest = RandomForestRegressor(n_estimators=trees, random_state=seed,
                                           oob_score=forest_residuals == "oob", n_jobs=1)
            forest.fit(w, v[:, j])
            fitted = forest.oob_prediction_ if forest_residuals == "oob" else forest.predict(w)
            out[:, j] = v[:, j] - fitted
        return out
    raise ValueError(f"residual_method: unknown {method!r} (known: random_forest, linear)")


def prepare(treatment, outcome, candidates, covariates=None, *, residual_method: ResidualMethod = "random_forest",
            seed: int = 0, trees: int = 500, forest_residuals: ForestResiduals = "oob") -> Prepared:
    """Validate shapes, drop rows with NaN, note binary candidates (≤ 2 distinct values, before any
    residualisation) and residualise on covariates if given."""
    x, y, z = _vector(treatment, "treatment"), _vector(outcome, "outcome"), _matrix(candidates, "candidates")
    n = x.shape[0]
    if y.shape[0] != n or z.shape[0] != n:
        raise ValueError(f"treatment, outcome and candidates need the same rows, got {n}, {y.shape[0]}, "
                         f"{z.shape[0]}")
    if z.shape[1] > MAX_CANDIDATES:
        raise ValueError(f"candidates: p = {z.shape[1]} > {MAX_CANDIDATES} (exhaustive subset search)")
    w = None if covariates is None else _matrix(covariates, "covariates")
    if w is not None and w.shape[0] != n:
        raise ValueError(f"covariates: expected {n} rows, got {w.shape[0]}")
    keep = np.isfinite(x) & np.isfinite(y) & np.isfinite(z).all(axis=1)
    if w is not None:
        keep &= np.isfinite(w).all(axis=1)
    x, y, z = x[keep], y[keep], z[keep]
    if x.shape[0] < 10:
        raise ValueError(f"only {x.shape[0]} complete rows; need at least 10")
    binary = np.array([np.unique(z[:, j]).size <= 2 for j in range(z.shape[1])])
    if w is not None and w.shape[1] > 0:
        res = residualize(np.column_stack([x, y, z]), w[keep], residual_method, seed, trees, forest_residuals)
        x, y, z = res[:, 0], res[:, 1], res[:, 2:]
    return Prepared(x, y, z, binary, int((~keep).sum()))


# ------------------------------------------------------------------------------------------ effect branches


def wald_ratio(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> float:
    """β = cov(Y, Z)/cov(X, Z) (``linear`` branch, step 2); raises if |cov(X, Z)| < machine epsilon."""
    zc = z - z.mean()
    cov_xz = float(zc @ (x - x.mean())) / (len(z) - 1)
    if abs(cov_xz) < np.finfo(np.float64).eps:
        raise ValueError(f"linear branch: |cov(X, Z)| = {abs(cov_xz):.3g} < machine epsilon (irrelevant candidate)")
    cov_yz = float(zc @ (y - y.mean())) / (len(z) - 1)
    return cov_yz / cov_xz


def _standardize(v: np.ndarray) -> np.ndarray:
    sd = v.std()
    return (v - v.mean()) / sd if sd > 0 else v - v.mean()


def control_function_effect(x: np.ndarray, y: np.ndarray, z: np.ndarray, standardize_x: bool = True) -> np.ndarray:
    """ĥ_j(X) of the ``nonlinear`` branch (control function, Guo & Small 2016; step 2) → (n,).

    OLS of X on [1, Z, Z², Z³] gives the residual V̂; OLS of Y on [1, X, X², X³, X⁴, V̂] gives c₁..c₄ and
    ĥ(X) = Σ_k c_k X^k. Z is standardised before its powers (the column span, hence V̂, is unchanged);
    X is standardised when ``standardize_x`` [R] (ĥ then changes only by a constant, which dCor ignores).
    """
    zs = _standardize(z)
    first = np.column_stack([np.ones_like(zs), zs, zs**2, zs**3])
    coef, *_ = np.linalg.lstsq(first, x, rcond=None)
    v_hat = x - first @ coef
    xs = _standardize(x) if standardize_x else x
    powers = np.column_stack([xs**k for k in range(1, 5)])
    second = np.column_stack([np.ones_like(xs), powers, v_hat])
    coef, *_ = np.linalg.lstsq(second, y, rcond=None)
    return powers @ coef[1:5]


def auxiliary_residuals(treatment, outcome, candidates, effect: Effect = "nonlinear", *,
                        standardize_x: bool = True, binary_branch: bool = False,
                        binary: np.ndarray | None = None) -> np.ndarray:
    """Columns A_j = Y − ĥ_j(X) (step 3); treatment, outcome: (n,), candidates: (n, p) → (n, p).

    With ``binary_branch`` [R] (off by default, as in the authors' code), candidates with ≤ 2 distinct values
    (or flagged in ``binary``) use the ``linear`` branch whatever ``effect`` says. Rows with a NaN are dropped
    (the result then has fewer rows).
    """
    if effect not in ("nonlinear", "linear"):
        raise ValueError(f"effect: unknown {effect!r} (known: nonlinear, linear)")
    x, y, z = _vector(treatment, "treatment"), _vector(outcome, "outcome"), _matrix(candidates, "candidates")
    if not (x.shape[0] == y.shape[0] == z.shape[0]):
        raise ValueError(f"treatment, outcome and candidates need the same rows, got {x.shape[0]}, "
                         f"{y.shape[0]}, {z.shape[0]}")
    keep = ~(np.isnan(x) | np.isnan(y) | np.isnan(z).any(axis=1))
    x, y, z = x[keep], y[keep], z[keep]
    if binary is None:
        binary = np.array([np.unique(z[:, j]).size <= 2 for j in range(z.shape[1])])
    out = np.empty_like(z)
    for j in range(z.shape[1]):
        if effect == "linear" or (binary_branch and binary[j]):
            out[:, j] = y - wald_ratio(x, y, z[:, j]) * x
        else:
            out[:, j] = y - control_function_effect(x, y, z[:, j], standardize_x)
    return out


# ------------------------------------------------------------------------------------------ scores, selection


@dataclass
class CatResult:
    """Outcome of one CAT selection: selected indices, score matrix s (p, p), dCor D[i, j] = dCor(A_i, Z_j),
    t-test p-values P[i, j] of A_i vs Z_j (NaN on the diagonal; only for unknown K)."""

    selected: list[int]
    scores: np.ndarray
    dcor: np.ndarray
    pvalues: np.ndarray | None = None
    info: dict = field(default_factory=dict)


def score_matrix(residuals: np.ndarray, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, D): D[i, j] = dCor(A_i, Z_j) and s = D + Dᵀ with zero diagonal (step 4); exactly symmetric."""
    d = dcor_matrix(residuals, candidates)
    s = d + d.T
    np.fill_diagonal(s, 0.0)
    return s, d


def select_known_k(scores: np.ndarray, k: int) -> list[int]:
    """argmin over K-subsets (lexicographic, first wins ties) of Σ_{i<j∈S} s_ij (step 5)."""
    p = scores.shape[0]
    if not 2 <= k <= p:
        raise ValueError(f"k must satisfy 2 <= k <= p = {p}, got {k}")
    best, best_sum = None, np.inf
    upper = np.triu(scores, 1)
    for subset in itertools.combinations(range(p), k):
        idx = np.array(subset)
        total = upper[np.ix_(idx, idx)].sum()
        if total < best_sum:
            best, best_sum = list(subset), total
    return best


def pairwise_pvalues(residuals: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """P[i, j] = one-sided p of the bias-corrected dCor t-test of A_i vs Z_j (step 6); diagonal NaN."""
    r = dcor_matrix(residuals, candidates, bias_corrected=True)
    p = np.asarray(dcor_t_pvalue(r, residuals.shape[0]), dtype=float)
    np.fill_diagonal(p, np.nan)
    return p


def select_unknown_k(pvalues: np.ndarray, scores: np.ndarray, alpha: float = 0.05) -> list[int]:
    """Largest S (|S| ≥ 2) whose ordered pairs all have p > α/(p(p−1)); ties → smaller score sum, then
    first in lexicographic order; none → [] (step 6, [R])."""
    p = pvalues.shape[0]
    level = alpha / (p * (p - 1))
    ok = pvalues > level
    compatible = ok & ok.T
    upper = np.triu(scores, 1)
    for size in range(p, 1, -1):
        best, best_sum = None, np.inf
        for subset in itertools.combinations(range(p), size):
            idx = np.array(subset)
            block = compatible[np.ix_(idx, idx)]
            if block.sum() != size * (size - 1):  # every off-diagonal pair passes
                continue
            total = upper[np.ix_(idx, idx)].sum()
            if total < best_sum:
                best, best_sum = list(subset), total
        if best is not None:
            return best
    return []


def cat_select(prepared: Prepared, k: int | None, *, effect: Effect = "nonlinear", alpha: float = 0.05,
               standardize_x: bool = True, binary_branch: bool = False, unknown_k_test: UnknownKTest = "t",
               permutations: int = 399, seed: int = 0) -> CatResult:
    """Run steps 2–6 on prepared inputs; ``k=None`` selects with the unknown-K rule.

    Unknown K: the selection rests on ``unknown_k_test``; with ``"permutation"`` both rules are computed and
    ``info`` holds ``selected_by_test = {"t": [...], "permutation": [...]}`` (the permutation p-values use
    ``permutations`` draws seeded by ``seed``).
    """
    if unknown_k_test not in ("t", "permutation"):
        raise ValueError(f"unknown_k_test: unknown {unknown_k_test!r} (known: t, permutation)")
    p = prepared.z.shape[1]
    if k is not None and not 2 <= k <= p:
        raise ValueError(f"k must satisfy 2 <= k <= p = {p}, got {k}")
    a = auxiliary_residuals(prepared.x, prepared.y, prepared.z, effect, standardize_x=standardize_x,
                            binary_branch=binary_branch, binary=prepared.binary)
    if k is not None:
        scores, d = score_matrix(a, prepared.z)
        return CatResult(select_known_k(scores, k), scores, d)
    d, r_star = dcor_matrices(a, prepared.z)  # one pass for the V- and the bias-corrected statistics
    scores = d + d.T
    np.fill_diagonal(scores, 0.0)
    pvalues = np.asarray(dcor_t_pvalue(r_star, a.shape[0]), dtype=float)
    np.fill_diagonal(pvalues, np.nan)
    by_test = {"t": select_unknown_k(pvalues, scores, alpha)}
    info: dict = {"level": alpha / (p * (p - 1)), "unknown_k_test": unknown_k_test}
    if unknown_k_test == "permutation":
        perm = dcor_permutation_pvalues(a, prepared.z, permutations, seed)
        np.fill_diagonal(perm, np.nan)
        by_test["permutation"] = select_unknown_k(perm, scores, alpha)
        info["permutation_pvalues"] = perm.tolist()
        pvalues_used = perm
    else:
        pvalues_used = pvalues
    info["selected_by_test"] = by_test
    return CatResult(by_test[unknown_k_test], scores, d, pvalues_used, info)


# ------------------------------------------------------------------------------------------ public API


def select_valid_ivs(treatment, outcome, candidates, k: int | None = None, covariates=None, seed: int = 0, *,
                     effect: Effect = "nonlinear", residual_method: ResidualMethod = "random_forest",
                     alpha: float = 0.05, standardize_x: bool = True, binary_branch: bool = False,
                     trees: int = 500, unknown_k_test: UnknownKTest = "t", permutations: int = 399,
                     forest_residuals: ForestResiduals = "oob") -> list[int]:
    """Ascending indices of the candidate columns CAT selects as valid instruments.

    treatment, outcome: (n,); candidates: (n, p), p ≤ 15; covariates: (n, q) or None. ``k=None`` uses the
    unknown-K rule (step 6); otherwise ValueError unless 2 ≤ k ≤ p.
    """
    prepared = prepare(treatment, outcome, candidates, covariates, residual_method=residual_method, seed=seed,
                       trees=trees, forest_residuals=forest_residuals)
    result = cat_select(prepared, k, effect=effect, alpha=alpha, standardize_x=standardize_x,
                        binary_branch=binary_branch, unknown_k_test=unknown_k_test, permutations=permutations,
                        seed=seed)
    return sorted(result.selected)


def cat_pairwise_scores(treatment, outcome, candidates, covariates=None, effect: Effect = "nonlinear",
                        seed: int = 0, *, residual_method: ResidualMethod = "random_forest",
                        standardize_x: bool = True, binary_branch: bool = False, trees: int = 500,
                        forest_residuals: ForestResiduals = "oob") -> np.ndarray:
    """The score matrix s (p, p) of step 4: s_ij = dCor(A_i, Z_j) + dCor(A_j, Z_i), s_ii = 0."""
    prepared = prepare(treatment, outcome, candidates, covariates, residual_method=residual_method, seed=seed,
                       trees=trees, forest_residuals=forest_residuals)
    a = auxiliary_residuals(prepared.x, prepared.y, prepared.z, effect, standardize_x=standardize_x,
                            binary_branch=binary_branch, binary=prepared.binary)
    return score_matrix(a, prepared.z)[0]


def two_stage_least_squares(x: np.ndarray, y: np.ndarray, instruments: np.ndarray) -> float:
    """Post-selection 2SLS slope of Y on X with instruments (n, k) and an intercept; x, y: (n,)."""
    instruments = _matrix(instruments, "instruments")
    if instruments.shape[1] == 0:
        raise ValueError("2SLS needs at least one instrument")
    first = np.column_stack([np.ones(len(x)), instruments])
    coef, *_ = np.linalg.lstsq(first, x, rcond=None)
    second = np.column_stack([np.ones(len(x)), first @ coef])
    coef, *_ = np.linalg.lstsq(second, y, rcond=None)
    return float(coef[1])


def two_stage_least_squares_se(x: np.ndarray, y: np.ndarray, instruments: np.ndarray) -> tuple[float, float]:
    """Post-selection 2SLS slope and its heteroskedasticity-robust (HC0 sandwich) standard error.

    With X = [1, x], Z = [1, instruments] (n, k + 1) and X̂ = P_Z X: β = (X̂ᵀX̂)⁻¹X̂ᵀy, residuals u = y − Xβ (the
    structural residuals, with the observed x), Var(β) = (X̂ᵀX̂)⁻¹ X̂ᵀ diag(u²) X̂ (X̂ᵀX̂)⁻¹ (White 1980; Wooldridge
    2010, §5.2). Returns ``(slope, se of the slope)``; the slope equals :func:`two_stage_least_squares`.
    """
    instruments = _matrix(instruments, "instruments")
    if instruments.shape[1] == 0:
        raise ValueError("2SLS needs at least one instrument")
    n = len(x)
    zm = np.column_stack([np.ones(n), instruments])
    xm = np.column_stack([np.ones(n), x])
    xhat = zm @ np.linalg.lstsq(zm, xm, rcond=None)[0]
    bread = np.linalg.inv(xhat.T @ xhat)
    beta = bread @ (xhat.T @ y)
    u = y - xm @ beta
    meat = (xhat * (u ** 2)[:, None]).T @ xhat
    cov = bread @ meat @ bread
    return float(beta[1]), float(np.sqrt(cov[1, 1]))
