"""Linear IV-selection baselines, all [R] reconstructions (spec "Arms and baselines"); data are centred first.

* :func:`ciiv_like` — after Windmeijer, Liang, Hartwig & Bowden (2021), confidence-interval IV selection: per-IV
  Wald ratios with homoskedastic standard errors and 95% intervals; the largest set of intervals sharing a point.
* :func:`sisvive_like` — after Kang, Zhang, Cai & Small (2016), sisVIVE: Lasso of the projected outcome on the
  projected instruments after removing the fitted treatment direction; zero coefficients are the valid IVs.
* :func:`tsht_like` — after Guo, Kang, Cai & Small (2018), two-stage hard thresholding: relevant IVs by a
  threshold on the first-stage coefficients, then majority voting among them.

Inputs: x, y: (n,), z: (n, p); outputs: ascending candidate indices.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np


def _centre(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return x - x.mean(), y - y.mean(), z - z.mean(axis=0)


def ciiv_like(x: np.ndarray, y: np.ndarray, z: np.ndarray, level: float = 0.95) -> list[int]:
    """Largest set whose per-IV Wald 95% intervals share a point (max lower ≤ min upper); first in the
    lexicographic enumeration wins ties.

    β_j = z_jᵀy / z_jᵀx; SE_j = σ̂_j ‖z_j‖ / |z_jᵀx| with σ̂_j² = ‖y − β_j x‖² / (n − 1) (homoskedastic).
    """
    from scipy import stats

    x, y, z = _centre(x, y, z)
    n, p = z.shape
    zx, zy = z.T @ x, z.T @ y
    beta = zy / zx
    resid = y[:, None] - x[:, None] * beta[None, :]
    sigma = np.sqrt((resid**2).sum(axis=0) / (n - 1))
    se = sigma * np.sqrt((z**2).sum(axis=0)) / np.abs(zx)
    half = stats.norm.ppf(0.5 + level / 2) * se
    lo, hi = beta - half, beta + half
    for size in range(p, 0, -1):
        for subset in itertools.combinations(range(p), size):
            idx = list(subset)
            if lo[idx].max() <= hi[idx].min():
                return idx
    return []  # unreachable: a single interval always shares a point with itself


def sisvive_like(x: np.ndarray, y: np.ndarray, z: np.ndarray, folds: int = 10) -> list[int]:
    """Valid = {j : α̂_j = 0} of LassoCV (``folds``-fold, no intercept) of M_v P_Z Y on the columns M_v P_Z Z_j.

    v = P_Z X, M_v = I − vvᵀ/vᵀv. P_Z Z_j = Z_j, so the design is M_v Z.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LassoCV

    x, y, z = _centre(x, y, z)
    gram = z.T @ z

    def project(u: np.ndarray) -> np.ndarray:
        return z @ np.linalg.solve(gram, z.T @ u)

    v = project(x)
    vv = float(v @ v)
    if vv <= 0:
        raise ValueError("sisvive_like: P_Z X is zero (no relevant instrument)")

    def annihilate(u: np.ndarray) -> np.ndarray:
        return u - np.outer(v, v @ u) / vv if u.ndim == 2 else u - v * (v @ u) / vv

    target, design = annihilate(project(y)), annihilate(z)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        lasso = LassoCV(cv=folds, fit_intercept=False, max_iter=10000).fit(design, target)
    return [j for j in range(z.shape[1]) if lasso.coef_[j] == 0.0]


def tsht_like(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> list[int]:
    """Two-stage hard thresholding with majority voting.

    Reduced forms Γ̂ = (ZᵀZ)⁻¹ZᵀY, γ̂ = (ZᵀZ)⁻¹ZᵀX, residual (co)variances σ_YY, σ_XX, σ_XY (n − p − 1 dof).
    With λ = √(2.01 log max(p, n)): j is relevant if |γ̂_j| > SE(γ̂_j)·λ; relevant j votes for relevant k if
    |Γ̂_k − β_j γ̂_k| ≤ SE·λ, β_j = Γ̂_j/γ̂_j held fixed (delta method: SE² = [(ZᵀZ)⁻¹]_kk (σ_YY + β_j² σ_XX −
    2 β_j σ_XY)); only mutual votes count; valid = relevant k with more than |relevant|/2 votes.
    """
    x, y, z = _centre(x, y, z)
    n, p = z.shape
    inv = np.linalg.inv(z.T @ z)
    big_gamma, gamma = inv @ (z.T @ y), inv @ (z.T @ x)
    ey, ex = y - z @ big_gamma, x - z @ gamma
    dof = max(n - p - 1, 1)
    s_yy, s_xx, s_xy = ey @ ey / dof, ex @ ex / dof, ex @ ey / dof
    diag = np.diag(inv)
    lam = np.sqrt(2.01 * np.log(max(p, n)))
    relevant = np.flatnonzero(np.abs(gamma) > np.sqrt(s_xx * diag) * lam)
    if relevant.size == 0:
        return []
    votes = np.zeros((p, p), dtype=bool)
    for j in relevant:
        beta = big_gamma[j] / gamma[j]
        for k in relevant:
            var = diag[k] * (s_yy + beta**2 * s_xx - 2 * beta * s_xy)
            votes[j, k] = abs(big_gamma[k] - beta * gamma[k]) <= np.sqrt(max(var, 0.0)) * lam
    votes &= votes.T
    counts = votes.sum(axis=0)
    return [int(k) for k in relevant if counts[k] > relevant.size / 2]


BASELINES = {"ciiv_like": ciiv_like, "sisvive_like": sisvive_like, "tsht_like": tsht_like}
