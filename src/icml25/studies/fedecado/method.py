"""FedECADO-R: federated learning as the simulation of an equivalent circuit (Agarwal, Joshi, Pileggi, "FedECADO: A
Dynamical System Model of Federated Learning", ICML 2025, PMLR 267:531; https://proceedings.mlr.press/v267/).

The paper models min_x Σ_i p_i f_i(x) (p_i = n_i/n, relative data size) as a circuit: every client is a node whose
voltage x_i follows the gradient flow of its local loss, tied to a central node x_c by a branch carrying a current
I_i. No code is public and the paper's equations could not be read in full, so this module implements a labelled
reconstruction [R] ("FedECADO-R") in which the consensus optimum is an exact fixed point:

    p_i ẋ_i = −p_i ∇f_i(x_i) − I_i,      L_i İ_i = x_i − x_c,      Σ_i I_i = 0 (KCL at the centre),
    L_i = L / p_i.

At equilibrium x_i = x_c = x* and I_i = −p_i ∇f_i(x*), so Σ_i p_i ∇f_i(x*) = 0: x* minimises Σ p_i f_i.

* Client sub-circuit (paper §4, "multi-rate integration"; forward Euler = local SGD): :func:`client_integrate`
  integrates ẋ = −(g_i(x) + I_i/p_i) with I_i frozen, over the client's own simulated time T_i = Σ Δt, with a fixed
  step (= the client's learning rate) or with local-truncation-error (LTE) step control [R].
* Server (paper §4–5, "aggregate sensitivity" and adaptive backward Euler): :func:`central_update` synchronises the
  active clients in continuous time by linear interpolation/extrapolation of their trajectories [R: form] and
  advances x_c and the currents by backward-Euler sub-steps over [0, T_max] with LTE control [R: estimator].

All functions are array-agnostic: they work on 1-D float torch tensors (the public API) and on numpy arrays (the
quadratic study problem runs in numpy float64 for speed).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

SENSITIVITIES = ("data", "data_x_time")
SYNC_MODES = ("linear", "hold")
STEP_CONTROLS = ("fixed", "lte")


def _copy(a: Any) -> Any:
    return a.clone() if hasattr(a, "clone") else np.array(a, copy=True)


def _maxabs(a: Any) -> float:
    return float(abs(a).max())


def _as_vector(values: list[float], like: Any) -> Any:
    if hasattr(like, "clone"):  # torch tensor
        import torch
        return torch.tensor(values, dtype=torch.float64)
    return np.asarray(values, dtype=np.float64)


# ----------------------------------------------------------------------------------------------- client


def client_integrate(x0: Any, grad_fn: Callable[[Any, int], Any], flow: Any, p_i: float, n_steps: int, dt: float,
                     step_control: str = "fixed", tol: float = 1e-3, dt_min: float = 1e-6,
                     dt_max: float | None = None) -> tuple[Any, float, Any]:
    """Forward-Euler integration of one client's sub-circuit with the branch current frozen (paper §4 [V]; flow
    term [R]): x_{n+1} = x_n − Δt_n (g(x_n, n) + flow / p_i), n = 0..n_steps−1, where ``grad_fn(x, n)`` is the
    minibatch gradient of step n. With zero flow and ``fixed`` control this is plain SGD with learning rate dt.

    ``step_control="lte"`` [R; the step rule of the authors' ECCO-DNN optimiser]: with F = −(g + flow/p_i) on the
    same minibatch at x_n and at the trial x_{n+1}, accept the step if (Δt/2)·‖F(x_{n+1}) − F(x_n)‖_∞ ≤ tol, else
    halve Δt (floor dt_min; a step at dt_min is accepted whatever its error) and retry; after an accepted step with
    error < tol/4 double Δt, capped at dt_max (None: the initial dt, so steps never exceed the learning rate).

    x0, flow: (P,) float tensors (or numpy arrays); returns (x_end (P,), T_i = Σ accepted Δt (float),
    dts (n_steps,) float64 accepted step sizes).
    """
    if step_control not in STEP_CONTROLS:
        raise ValueError(f"client_integrate: step_control must be one of {STEP_CONTROLS}, got {step_control!r}")
    if not p_i > 0:
        raise ValueError(f"client_integrate: p_i must be > 0, got {p_i}")
    if not dt > 0 or n_steps < 0:
        raise ValueError(f"client_integrate: need dt > 0 and n_steps >= 0, got dt={dt}, n_steps={n_steps}")
    drift = flow / p_i
    x = x0
    dts: list[float] = []
    if step_control == "fixed":
        for k in range(n_steps):
            x = x - dt * (grad_fn(x, k) + drift)
            dts.append(dt)
    else:
        cap = dt if dt_max is None else dt_max
        h = min(dt, cap)
        for k in range(n_steps):
            g0 = grad_fn(x, k)
            while True:
                x1 = x - h * (g0 + drift)
                err = 0.5 * h * _maxabs(grad_fn(x1, k) - g0)  # flow cancels in F(x1) − F(x0)
                if err <= tol or h <= dt_min:
                    break
                h = max(0.5 * h, dt_min)
            x = x1
            dts.append(h)
            if err < 0.25 * tol:
                h = min(2.0 * h, cap)
    return x, float(sum(dts)), _as_vector(dts, x0)


# ----------------------------------------------------------------------------------------------- server


def branch_admittance(h: float, L_i: float, w_i: float, h_bar: float = 1.0) -> float:
    """Admittance of branch i in one backward-Euler step of length h [R]: Y_i = (L_i/h + 1/G_i)⁻¹ with the client's
    aggregate sensitivity G_i = w_i (1/h + h̄) (capacitance w_i over the step plus a scalar Hessian surrogate h̄).
    With w_i = p_i and L_i = L/p_i, Y_i = p_i (L/h + 1/(1/h + h̄))⁻¹ ∝ p_i."""
    G_i = w_i * (1.0 / h + h_bar)
    return 1.0 / (L_i / h + 1.0 / G_i)


def _sensitivity_weight(sensitivity: str, p_i: float, T_i: float, T_max: float) -> float:
    if sensitivity == "data":
        return p_i  # [V] ∝ data size
    if sensitivity == "data_x_time":
        return p_i * T_i / T_max  # [R] alternative: data size × share of simulated time
    raise ValueError(f"central_update: sensitivity must be one of {SENSITIVITIES}, got {sensitivity!r}")


def central_update(x_c: Any, flows: Any, active: Iterable[int], x_end: Mapping[int, Any], T: Mapping[int, float],
                   p: Any, kappa: float = 2.0, h_bar: float = 1.0, sensitivity: str = "data", lte_tol: float = 1e-2,
                   v_prev: Any = None, *, sync: str = "linear",
                   h_min_frac: float = 1.0 / 256) -> tuple[Any, Any, dict[str, Any]]:
    """One round of the server: continuous-time synchronisation + adaptive backward Euler on the central node.

    Synchronisation (paper §4 [V: linear inter/extrapolation; R: form]): Γ_i(τ) = x_c⁰ + s_i(τ)(x_i^end − x_c⁰),
    τ ∈ [0, T_max], T_max = max_S T_i, s_i = τ/T_i (``sync="linear"``, extrapolating beyond T_i) or
    min(τ/T_i, 1) (``"hold"`` [R switch]).

    Backward Euler over [0, T_max] [R], first step h = T_max, L = κ T_max², L_i = L/p_i. Trial step τ → τ+h:
        Ĩ_i = I_i + (h/L_i)(Γ_i(τ+h) − x_c)  (i ∈ S),    Ĩ_i = I_i  (i ∉ S),
        Y_i = :func:`branch_admittance` (h, L_i, w_i, h̄),  w_i = p_i (``data``) or p_i T_i/T_max (``data_x_time``),
        Δx_c = (Σ_S Y_i)⁻¹ Σ_all Ĩ_i,   I_i ← Ĩ_i − Y_i Δx_c (i ∈ S),   x_c ← x_c + Δx_c,
    so Σ_i I_i = 0 after every accepted step (KCL). LTE [V: adaptive BE; R: estimator]: v = Δx_c/h,
    LTE = (h/2)‖v − v_prev‖_∞ (v_prev carried across steps and rounds; none yet → LTE = 0); reject and halve h if
    LTE > lte_tol and h > T_max·h_min_frac, double h if LTE < lte_tol/4. The last step lands exactly on T_max.

    x_c: (P,) round-start central state; flows: (K, P) currents I; active: client ids S; x_end, T: dicts over S of
    (P,) end states and simulated times; p: (K,) data weights. Returns (x_c_new (P,), flows_new (K, P), info) with
    info = {n_substeps, n_rejects, L, T_max, v_prev, steps (list of accepted h)}. Inputs are not modified.
    """
    if sync not in SYNC_MODES:
        raise ValueError(f"central_update: sync must be one of {SYNC_MODES}, got {sync!r}")
    S = sorted(int(i) for i in active)
    if not S:
        raise ValueError("central_update: no active client")
    missing = [i for i in S if i not in x_end or i not in T]
    if missing:
        raise ValueError(f"central_update: x_end/T lack active clients {missing}")
    T_max = max(float(T[i]) for i in S)
    if not T_max > 0 or any(float(T[i]) <= 0 for i in S):
        raise ValueError(f"central_update: every active T_i must be > 0, got {[float(T[i]) for i in S]}")
    L = kappa * T_max ** 2
    L_i = {i: L / float(p[i]) for i in S}
    w = {i: _sensitivity_weight(sensitivity, float(p[i]), float(T[i]), T_max) for i in S}
    disp = {i: x_end[i] - x_c for i in S}

    xc, I = _copy(x_c), _copy(flows)
    tau, h = 0.0, T_max
    steps: list[float] = []
    n_rejects = 0
    while T_max - tau > 1e-12 * T_max:
        last = h >= (T_max - tau) * (1 - 1e-12)
        if last:
            h = T_max - tau
        t1 = T_max if last else tau + h
        I_sum = I.sum(0)
        I_new: dict[int, Any] = {}
        for i in S:
            s = t1 / float(T[i])
            if sync == "hold":
                s = min(s, 1.0)
            I_new[i] = I[i] + (h / L_i[i]) * (x_c + s * disp[i] - xc)
            I_sum = I_sum + (I_new[i] - I[i])
        Y = {i: branch_admittance(h, L_i[i], w[i], h_bar) for i in S}
        dx = I_sum / sum(Y.values())
        v = dx / h
        lte = 0.0 if v_prev is None else 0.5 * h * _maxabs(v - v_prev)
        if lte > lte_tol and h > T_max * h_min_frac:
            h *= 0.5
            n_rejects += 1
            continue
        for i in S:
            I[i] = I_new[i] - Y[i] * dx
        xc = xc + dx
        v_prev = v
        steps.append(h)
        tau = t1
        if lte < 0.25 * lte_tol:
            h *= 2.0
    info = {"n_substeps": len(steps), "n_rejects": n_rejects, "L": L, "T_max": T_max, "v_prev": v_prev,
            "steps": steps}
    return xc, I, info


def zero_current_step_factor(T: Mapping[int, float], p: Any, kappa: float = 2.0, h_bar: float = 1.0) -> float:
    """How much further than FedNova :func:`central_update` moves the server when it has no current (issue 33).

    With zero currents, ``sensitivity="data"``, ``sync="linear"`` and one accepted sub-step h = T_max, the update
    is Δx_c = T_max (1 + 1/(κ(1 + h̄ T_max))) Σ_S p̃_i (x_i − x_c)/T_i: FedNova's direction, whose own step is
    T_eff = Σ_S p̃_i T_i, scaled by (T_max/T_eff)(1 + 1/(κ(1 + h̄ T_max))) — the value returned (1.98 on issue
    33's random case). ``fednova_matched`` is FedNova with this factor as its server learning rate: the comparison
    at equal effective step. T: dict over the active clients of simulated times; p: (K,) data weights."""
    S = sorted(T)
    q = np.array([float(p[i]) for i in S])
    q = q / q.sum()
    times = np.array([float(T[i]) for i in S])
    T_max, T_eff = float(times.max()), float(q @ times)
    return T_max / T_eff * (1.0 + 1.0 / (kappa * (1.0 + h_bar * T_max)))


def kcl_residual(flows: Any) -> float:
    """‖Σ_i I_i‖_∞ of flows (K, P): zero (to rounding) after every :func:`central_update`."""
    return _maxabs(flows.sum(0))


# ------------------------------------------------------------------------------ quadratic closed forms


def _local_gd_contraction(A: np.ndarray, taus: np.ndarray, eta: float) -> np.ndarray:
    """B_i = (I − ηA_i)^{τ_i}: τ_i local GD steps map x ↦ c_i + B_i(x − c_i). Returns (K, d, d)."""
    d = A.shape[1]
    return np.stack([np.linalg.matrix_power(np.eye(d) - eta * A[i], int(taus[i])) for i in range(len(A))])


def _weighted_fixed_point(A: np.ndarray, c: np.ndarray, weights: np.ndarray, taus: np.ndarray,
                          eta: float) -> np.ndarray:
    d = A.shape[1]
    M = np.eye(d)[None] - _local_gd_contraction(A, taus, eta)
    lhs = np.einsum("k,kij->ij", weights, M)
    rhs = np.einsum("k,kij,kj->i", weights, M, c)
    return np.linalg.solve(lhs, rhs)


def fixed_point_fedavg(A: np.ndarray, c: np.ndarray, p: np.ndarray, taus: np.ndarray, eta: float) -> np.ndarray:
    """Fixed point of FedAvg with τ_i local full-batch GD steps of size η on f_i = ½(x−c_i)ᵀA_i(x−c_i), full
    participation: x_FA = (Σ p_i(I − B_i))⁻¹ Σ p_i(I − B_i)c_i, B_i = (I − ηA_i)^{τ_i}. A (K,d,d), c (K,d),
    p (K,), taus (K,) ints → (d,). It differs from x* when the τ_i (or the A_i) differ: objective inconsistency."""
    return _weighted_fixed_point(A, c, np.asarray(p, float), taus, eta)


def fixed_point_fednova(A: np.ndarray, c: np.ndarray, p: np.ndarray, taus: np.ndarray, eta: float) -> np.ndarray:
    """Fixed point of FedNova (normalised averaging, a_i = τ_i): as :func:`fixed_point_fedavg` with weights
    p_i/τ_i. Its distance to x* is O(η) (it keeps the drift bias of multi-step local GD)."""
    return _weighted_fixed_point(A, c, np.asarray(p, float) / np.asarray(taus, float), taus, eta)
