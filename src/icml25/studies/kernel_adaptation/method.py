"""Predictors of a Bayesian linear two-layer network: NNGP, kernel rescaling and the adaptive (tree-level) theory.

Paper: Rubin, Fischer, Lindner, Dahmen, Seroussi, Ringel, Krämer, Helias, "From Kernels to Features: A Multi-Scale
Adaptive Theory of Feature Learning", ICML 2025 (PMLR 267:52225–52257, arXiv:2502.03210).

Network f(x) = Σ_{i≤N} v_i w_iᵀx with w_i ~ N(0, (g_w/D) I_D), v_i ~ N(0, g_v/(χN)); likelihood
exp(−Σ_μ (y_μ − f(x_μ))²/(2κ)) with κ = κ₀/χ. χ = 1 is standard scaling, χ = N mean-field scaling (Sec. 2).

Every equation here is our own saddle-point derivation for the linear network [R] (the paper's appendix is not
at hand). With A = WᵀW/N (D×D), integrating v out gives y | A ~ N(0, Σ(A)), Σ(A) = (g_v/χ) X A Xᵀ + κ I_P.
The Wishart prior of A is ∝ det A^{(N−D−1)/2} exp(−(N D/(2 g_w)) tr A); we replace N−D−1 by N [R]. The saddle
point of log p(A | y) (the paper's tree level, Sec. 3) solves

    A⁻¹ = (D/g_w) I + (g_v/(χN)) Xᵀ(Σ⁻¹ − Σ⁻¹ y yᵀ Σ⁻¹) X,

and the posterior-mean prediction at that A is f̄(x*) = (g_v/χ) x*ᵀ A Xᵀ Σ⁻¹ y. The y yᵀ term is O(χ/N): it
vanishes at χ = 1, N → ∞ (the NNGP) and is O(1) at χ = N, where it stretches A along the label direction.
Solutions are annealed along χ as in the paper's Algorithm 1 [V]: start at χ = 1 from the NNGP's A = (g_w/D) I
and warm-start every next χ from the previous solution.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

LOG_U_BOUNDS = (-5.0, 5.0)  #: search interval of log u for the fitted rescaling [R]


class AnnealError(ArithmeticError):
    """The adaptive solution lost positive definiteness (or did not converge) at a named χ along the anneal."""


def _check_inputs(X: np.ndarray, y: np.ndarray, X_test: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, y, X_test = (np.asarray(a, dtype=np.float64) for a in (X, y, X_test))
    if X.ndim != 2 or y.shape != (X.shape[0],) or X_test.ndim != 2 or X_test.shape[1] != X.shape[1]:
        raise ValueError(f"expected X (P,D), y (P,), X_test (P*,D); got {X.shape}, {y.shape}, {X_test.shape}")
    for name, a in (("X", X), ("y", y), ("X_test", X_test)):
        if not np.isfinite(a).all():
            raise ValueError(f"{name} contains non-finite values")
    return X, y, X_test


def _check_chi(chi: float, N: float | None = None) -> float:
    chi = float(chi)
    hi = np.inf if N is None else float(N)
    if not (1.0 <= chi <= hi * (1 + 1e-12)):
        raise ValueError(f"chi={chi} outside [1, {'N' if N is None else N}]: the scaling parameter interpolates "
                         "between standard (chi=1) and mean-field (chi=N) scaling")
    return chi


# ------------------------------------------------------------------------------------------------ NNGP


def nngp_kernels(X: np.ndarray, X_test: np.ndarray, chi: float, g_v: float = 1.0, g_w: float = 1.0
                 ) -> tuple[np.ndarray, np.ndarray]:
    """K = (g_v g_w/(χD)) X Xᵀ (P,P) and K* = (g_v g_w/(χD)) X* Xᵀ (P*,P): the prior kernel at A = (g_w/D) I."""
    s = g_v * g_w / (chi * X.shape[1])
    return s * (X @ X.T), s * (X_test @ X.T)


def nngp_predictor(X, y, X_test, chi: float, g_v: float = 1.0, g_w: float = 1.0, kappa0: float = 0.05
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean of the NNGP (infinite-width Gaussian process) f̄* = K*(K + κI)⁻¹ y, κ = κ₀/χ.

    K/κ does not depend on χ, so the predictor is χ-invariant; it equals ridge regression on x with
    λ = κ₀ D/(g_v g_w). Returns (f_train (P,), f_test (P*,)).
    """
    X, y, X_test = _check_inputs(X, y, X_test)
    chi = _check_chi(chi)
    K, Ks = nngp_kernels(X, X_test, chi, g_v, g_w)
    alpha = np.linalg.solve(K + (kappa0 / chi) * np.eye(len(y)), y)
    return K @ alpha, Ks @ alpha


# ------------------------------------------------------------------------------------------- rescaling


@dataclass(frozen=True)
class _Rescaler:
    """Kernel-rescaled GP predictions f(u) = uK(uK + κI)⁻¹y via one eigendecomposition K = QΛQᵀ."""

    lam: np.ndarray  # (P,) eigenvalues of K (clipped at 0)
    Qy: np.ndarray  # (P,) Qᵀy
    Q: np.ndarray  # (P,P)
    KsQ: np.ndarray  # (P*,P) K* Q
    kappa: float

    @classmethod
    def build(cls, K: np.ndarray, Ks: np.ndarray, y: np.ndarray, kappa: float) -> "_Rescaler":
        lam, Q = np.linalg.eigh(K)
        return cls(np.clip(lam, 0.0, None), Q.T @ y, Q, Ks @ Q, kappa)

    def predict(self, u: float) -> tuple[np.ndarray, np.ndarray]:
        coef = u * self.Qy / (u * self.lam + self.kappa)
        return self.Q @ (self.lam * coef), self.KsQ @ coef

    def fit(self, target: np.ndarray, on: str = "train") -> float:
        """u minimising ‖f_u − target‖² on train (or test) points, bounded search over log u ∈ [−5, 5]."""
        idx = 0 if on == "train" else 1

        def loss(log_u: float) -> float:
            return float(np.sum((self.predict(np.exp(log_u))[idx] - target) ** 2))

        res = minimize_scalar(loss, bounds=LOG_U_BOUNDS, method="bounded", options={"xatol": 1e-9})
        return float(np.exp(res.x))


def rescaling_predictor(X, y, X_test, chi: float, u: float | None = None, target_train=None,
                        g_v: float = 1.0, g_w: float = 1.0, kappa0: float = 0.05
                        ) -> tuple[np.ndarray, np.ndarray, float]:
    """GP with the NNGP kernel rescaled, K → uK: f̄* = uK*(uK + κI)⁻¹y.

    Exactly one of ``u`` (given scale) and ``target_train`` ((P,) train predictions to match; u is then fitted by
    a bounded 1-D search over log u ∈ [−5, 5] minimising the train squared mismatch) must be given.
    Returns (f_train (P,), f_test (P*,), u).
    """
    X, y, X_test = _check_inputs(X, y, X_test)
    chi = _check_chi(chi)
    if (u is None) == (target_train is None):
        raise ValueError("rescaling_predictor: give exactly one of u and target_train")
    K, Ks = nngp_kernels(X, X_test, chi, g_v, g_w)
    if u is not None:
        u = float(u)
        if not u > 0:
            raise ValueError(f"rescaling_predictor: u must be positive, got {u}")
        alpha = np.linalg.solve(u * K + (kappa0 / chi) * np.eye(len(y)), y)
        return u * (K @ alpha), u * (Ks @ alpha), u
    target = np.asarray(target_train, dtype=np.float64)
    if target.shape != y.shape or not np.isfinite(target).all():
        raise ValueError(f"rescaling_predictor: target_train must be finite with shape {y.shape}, got {target.shape}")
    resc = _Rescaler.build(K, Ks, y, kappa0 / chi)
    u = resc.fit(target)
    f_train, f_test = resc.predict(u)
    return f_train, f_test, u


def best_rescaling_error(X, y, X_test, f_test_target, chi: float, g_v: float = 1.0, g_w: float = 1.0,
                         kappa0: float = 0.05) -> tuple[float, float]:
    """min_u ‖f_u − f_target‖₂/‖f_target‖₂ on the test points and its u (study claim 3, mechanism)."""
    K, Ks = nngp_kernels(X, X_test, chi, g_v, g_w)
    resc = _Rescaler.build(K, Ks, y, kappa0 / chi)
    u = resc.fit(f_test_target, on="test")
    err = np.linalg.norm(resc.predict(u)[1] - f_test_target) / np.linalg.norm(f_test_target)
    return float(err), u


# ------------------------------------------------------------------------------------- adaptive theory


def saddle_map(A: np.ndarray, X: np.ndarray, y: np.ndarray, N: float, chi: float, g_v: float = 1.0,
               g_w: float = 1.0, kappa0: float = 0.05) -> np.ndarray:
    """One application of the tree-level saddle equation: returns sym(A_new), A_new⁻¹ = (D/g_w)I + (g_v/(χN))
    Xᵀ(Σ⁻¹ − Σ⁻¹yyᵀΣ⁻¹)X with Σ = (g_v/χ) X A Xᵀ + (κ₀/χ) I. Raises AnnealError if A_new⁻¹ is not positive
    definite (the saddle point left the cone of kernels)."""
    P, D = X.shape
    sigma = (g_v / chi) * (X @ A @ X.T) + (kappa0 / chi) * np.eye(P)
    S = np.linalg.solve(sigma, np.column_stack([X, y]))
    M = X.T @ S[:, :D]
    b = X.T @ S[:, D]
    a_inv = (D / g_w) * np.eye(D) + (g_v / (chi * N)) * (M - np.outer(b, b))
    a_inv = 0.5 * (a_inv + a_inv.T)
    try:
        np.linalg.cholesky(a_inv)
    except np.linalg.LinAlgError:
        raise AnnealError(f"adaptive theory: A^-1 (saddle equation) not positive definite at chi={chi:.6g} "
                          f"(min eig {np.linalg.eigvalsh(a_inv)[0]:.3g})") from None
    a_new = np.linalg.inv(a_inv)
    return 0.5 * (a_new + a_new.T)


def saddle_residual(A, X, y, N, chi, g_v=1.0, g_w=1.0, kappa0=0.05) -> float:
    """max |saddle_map(A) − A|: the fixed-point residual of a tree-level solution."""
    return float(np.max(np.abs(saddle_map(A, X, y, N, chi, g_v, g_w, kappa0) - A)))


def adaptive_mean(A: np.ndarray, X: np.ndarray, y: np.ndarray, X_test: np.ndarray, chi: float,
                  g_v: float = 1.0, kappa0: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean at kernel A: f̄(x*) = (g_v/χ) x*ᵀ A Xᵀ Σ⁻¹ y, Σ = (g_v/χ) X A Xᵀ + (κ₀/χ) I.
    Returns (f_train (P,), f_test (P*,))."""
    sigma = (g_v / chi) * (X @ A @ X.T) + (kappa0 / chi) * np.eye(len(y))
    beta = (g_v / chi) * (A @ (X.T @ np.linalg.solve(sigma, y)))  # effective linear read-out (D,)
    return X @ beta, X_test @ beta


def solve_saddle(A0: np.ndarray, X, y, N, chi, g_v=1.0, g_w=1.0, kappa0=0.05, damping=0.02, tol=1e-10,
                 max_iter=5000) -> tuple[np.ndarray, int]:
    """Damped fixed point A ← (1−δ)A + δ·saddle_map(A) until max|ΔA| < tol; returns (A, iterations).
    Raises AnnealError when A stops being positive definite or the iteration limit is reached."""
    A = A0.copy()
    for it in range(1, max_iter + 1):
        step = damping * (saddle_map(A, X, y, N, chi, g_v, g_w, kappa0) - A)
        A = A + step
        if not np.isfinite(A).all():
            raise AnnealError(f"adaptive theory: A became non-finite at chi={chi:.6g}, iteration {it}")
        if np.max(np.abs(step)) < tol:
            return A, it
    raise AnnealError(f"adaptive theory: no convergence at chi={chi:.6g} after {max_iter} iterations "
                      f"(last max|dA|={np.max(np.abs(step)):.3g} >= tol={tol:g})")


def anneal(X, y, N: int, chi_path: np.ndarray, g_v=1.0, g_w=1.0, kappa0=0.05, damping=0.02, tol=1e-10,
           max_iter=5000) -> dict[str, np.ndarray]:
    """Algorithm 1 [V]: solve the saddle equation along increasing χ, each warm-started from the previous one
    (the first from the NNGP's A = (g_w/D) I). Returns ``{chi_path (K,), A (K,D,D), min_eig (K,), iters (K,)}``.

    Raises AnnealError naming the χ reached if A loses positive definiteness or does not converge.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    chi_path = np.asarray(chi_path, dtype=np.float64)
    if chi_path.ndim != 1 or chi_path.size == 0 or np.any(np.diff(chi_path) < 0):
        raise ValueError("anneal: chi_path must be a non-empty non-decreasing 1-D array")
    for c in chi_path:
        _check_chi(c, N)
    D = X.shape[1]
    A = (g_w / D) * np.eye(D)
    As, eigs, iters = [], [], []
    for chi in chi_path:
        A, it = solve_saddle(A, X, y, N, chi, g_v, g_w, kappa0, damping, tol, max_iter)
        lo = float(np.linalg.eigvalsh(A)[0])
        if not lo > 0:
            raise AnnealError(f"adaptive theory: A not positive definite at chi={chi:.6g} (min eig {lo:.3g})")
        As.append(A)
        eigs.append(lo)
        iters.append(it)
    return {"chi_path": chi_path, "A": np.stack(As), "min_eig": np.array(eigs), "iters": np.array(iters)}


def adaptive_predictor(X, y, X_test, N: int, chi: float, g_v: float = 1.0, g_w: float = 1.0,
                       kappa0: float = 0.05, n_anneal: int = 40, damping: float = 0.02, tol: float = 1e-10,
                       max_iter: int = 5000) -> dict[str, np.ndarray]:
    """Tree-level adaptive-kernel prediction at ``chi``, annealed over ``n_anneal`` geometric χ from 1 to ``chi``.

    Returns ``{f_train (P,), f_test (P*,), A (D,D), chi_path (n_anneal,), min_eig (n_anneal,)}``.
    Raises ValueError for χ outside [1, N] and AnnealError if A loses positive definiteness along the way.
    """
    X, y, X_test = _check_inputs(X, y, X_test)
    chi = _check_chi(chi, N)
    path = np.geomspace(1.0, chi, int(n_anneal))
    sol = anneal(X, y, N, path, g_v, g_w, kappa0, damping, tol, max_iter)
    f_train, f_test = adaptive_mean(sol["A"][-1], X, y, X_test, chi, g_v, kappa0)
    return {"f_train": f_train, "f_test": f_test, "A": sol["A"][-1], "chi_path": path, "min_eig": sol["min_eig"]}


# --------------------------------------------------------------------------------------------- observables


def spike_ratio(A: np.ndarray, direction: np.ndarray) -> float:
    """r(A, u) = uᵀAu / [tr(P⊥ A P⊥)/(D−1)], P⊥ = I − uuᵀ, u = direction/‖direction‖.

    1 for an isotropic A; > 1 when A is stretched along u (directional feature learning).
    """
    A = np.asarray(A, dtype=np.float64)
    u = np.asarray(direction, dtype=np.float64)
    D = A.shape[0]
    if A.shape != (D, D) or u.shape != (D,) or D < 2:
        raise ValueError(f"spike_ratio: expected A (D,D) and direction (D,) with D>=2, got {A.shape}, {u.shape}")
    norm = np.linalg.norm(u)
    if not norm > 0:
        raise ValueError("spike_ratio: direction must be non-zero")
    u = u / norm
    along = float(u @ A @ u)
    perp = (float(np.trace(A)) - along) / (D - 1)  # tr(P⊥AP⊥) = tr A − uᵀAu for a unit u
    return along / perp


def discrepancy(y: np.ndarray, f_mean: np.ndarray) -> float:
    """ε = mean_μ (y_μ − f̄(x_μ))²: the squared error of the posterior-mean predictor."""
    return float(np.mean((np.asarray(y) - np.asarray(f_mean)) ** 2))
