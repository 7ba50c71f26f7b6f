"""NTK-DFL, one communication round (Thompson et al., ICML 2025, Sec. 3 "NTK-DFL" and Algorithm 1).

Per round r with graph G_r and step size η_r:

1. synchronous averaging (Sec. 3.2, "per-round parameter averaging"): w̄_k = (|N_k|+1)^{-1} Σ_{j∈N_k∪{k}} w_j;
2. Jacobian exchange (Sec. 3.1): every j ∈ N_k∪{k} evaluates J_j = ∂f(X_j; w̄_k)/∂w (n_j, C, P) and f(X_j; w̄_k);
   client k stacks them into J (N, C, P), f⁰ (N, C), Y (N, C);
3. empirical NTK: H = J̃J̃ᵀ / C with J̃ = J reshaped (N, C·P) (the official code's trace-over-outputs kernel);
4. function evolution (eq. 5 with cross-entropy): df/ds = −N^{-1} H (softmax(f) − Y), f(0) = f⁰, read at
   s = η_r·t; ``ode``: the official adaptive Dormand–Prince 5(4) (``dopri5``, torchdiffeq's ``odeint`` in the
   official code, scipy's ``solve_ivp(method="RK45")`` here), classical ``rk4`` or forward ``euler``;
5. weight evolution: w^{(t)} = w̄_k − (η_r/N) Σ_c J[:,c,:]ᵀ R_t[:,c], R_t = Σ_{τ<t} softmax(f^{(τ)}) − t·Y;
6. time selection: t* = argmin_{t∈T_cand} CE(f(X; w^{(t)}), Y) on the real network (``t_select="network"``) or
   on the linearised outputs f^{(t)} (``"linearized"`` [R]); all clients then set w_k ← w_k^{(t*)} at once.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import networkx as nx
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, jacrev, vmap

from .model import forward, set_weights

FLOAT_BYTES = 4  # bytes per float sent (fp32)


# ------------------------------------------------------------------------------------------------ kernel


def empirical_ntk(model: nn.Module, x: torch.Tensor, chunk: int = 100) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample Jacobians of the logits and the empirical NTK at the model's current weights.

    x (N, D) -> J (N, C, P) with J[n, c, :] = ∂f_c(x_n)/∂w (parameters in ``model.parameters()`` order, i.e. the
    flat-vector order), and H = J̃J̃ᵀ / C (N, N), J̃ = J.reshape(N, C·P). Jacobians come from
    ``torch.func.vmap(jacrev(f))`` over chunks of ``chunk`` samples, so the autograd working memory is bounded by
    the chunk (J itself is N·C·P floats). dtype follows the model.
    """
    if chunk < 1:
        raise ValueError(f"empirical_ntk: chunk must be >= 1, got {chunk}")
    params = {name: p.detach() for name, p in model.named_parameters()}
    names = list(params)

    def f_single(p: dict[str, torch.Tensor], xi: torch.Tensor) -> torch.Tensor:
        return functional_call(model, p, (xi.unsqueeze(0),)).squeeze(0)

    jac_fn = vmap(jacrev(f_single), in_dims=(None, 0))
    sizes = [p.numel() for p in params.values()]
    J: torch.Tensor | None = None
    for start in range(0, x.shape[0], chunk):
        xb = x[start:start + chunk]
        jac = jac_fn(params, xb)  # name -> (n, C, *shape)
        if J is None:  # filled in place chunk by chunk: no concatenation copies
            J = torch.empty(x.shape[0], jac[names[0]].shape[1], sum(sizes), dtype=jac[names[0]].dtype,
                            device=jac[names[0]].device)
        col = 0
        for name, size in zip(names, sizes):
            J[start:start + xb.shape[0], :, col:col + size] = jac[name].reshape(xb.shape[0], -1, size)
            col += size
    if J is None:
        raise ValueError("empirical_ntk: x has no samples")
    Jt = J.reshape(J.shape[0], -1)
    H = (Jt @ Jt.T) / J.shape[1]
    return J, H


# ------------------------------------------------------------------------------------------------ evolution


def _rhs(H: torch.Tensor, f: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """df/ds = −N^{-1} H (softmax(f) − Y)."""
    return -(H @ (torch.softmax(f, dim=-1) - y)) / f.shape[0]


ODE_METHODS: tuple[str, ...] = ("euler", "rk4", "dopri5")


def _evolve_dopri5(H: torch.Tensor, f0: torch.Tensor, y_onehot: torch.Tensor, lr: float, t_max: int,
                   rtol: float, atol: float) -> torch.Tensor:
    """df/ds = −N^{-1} H (softmax(f) − Y) by scipy's adaptive Dormand–Prince 5(4) (``solve_ivp``, ``RK45``) in
    float64, dense output read at s = lr·t, t = 0..t_max; returns (t_max+1, N, C) in f0's dtype and device."""
    import numpy as np
    from scipy.integrate import solve_ivp

    shape = tuple(f0.shape)
    Hn = H.detach().to("cpu", torch.float64).numpy()
    Yn = y_onehot.detach().to("cpu", torch.float64).numpy()
    n = shape[0]

    def rhs(_s: float, v: np.ndarray) -> np.ndarray:
        f = v.reshape(shape)
        p = np.exp(f - f.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        return (-(Hn @ (p - Yn)) / n).ravel()

    s_eval = lr * np.arange(t_max + 1, dtype=np.float64)
    y0 = f0.detach().to("cpu", torch.float64).numpy().ravel()
    if t_max == 0:
        return f0.unsqueeze(0).clone()
    sol = solve_ivp(rhs, (0.0, float(s_eval[-1])), y0, method="RK45", t_eval=s_eval, rtol=rtol, atol=atol)
    if not sol.success:
        raise FloatingPointError(f"evolve_function: dopri5 failed: {sol.message}")
    out = torch.from_numpy(sol.y.T.reshape(t_max + 1, *shape)).to(dtype=f0.dtype, device=f0.device)
    out[0] = f0
    return out


def evolve_function(H: torch.Tensor, f0: torch.Tensor, y_onehot: torch.Tensor, lr: float, t_max: int,
                    method: str = "dopri5", rtol: float = 1e-7, atol: float = 1e-9) -> torch.Tensor:
    """Linearised cross-entropy dynamics of the outputs (eq. 5), read at s = lr·t for t = 0..t_max.

    H (N, N), f0 (N, C), y_onehot (N, C) -> (t_max+1, N, C). ``dopri5`` (default, the official code's solver:
    torchdiffeq ``odeint``, adaptive Dormand–Prince 5(4) with its default tolerances ``rtol`` 1e-7, ``atol``
    1e-9): scipy's ``solve_ivp(method="RK45")``, the same Dormand–Prince pair, in float64; ``euler``:
    f^{(t+1)} = f^{(t)} − (lr/N) H (softmax(f^{(t)}) − Y), which for a linear model is exactly full-batch gradient
    descent; ``rk4``: classical Runge-Kutta with step lr.
    """
    if method not in ODE_METHODS:
        raise ValueError(f"evolve_function: method must be one of {ODE_METHODS}, got {method!r}")
    if t_max < 0:
        raise ValueError(f"evolve_function: t_max must be >= 0, got {t_max}")
    if method == "dopri5":
        return _evolve_dopri5(H, f0, y_onehot, lr, t_max, rtol, atol)
    traj = [f0]
    f = f0
    for _ in range(t_max):
        if method == "euler":
            f = f + lr * _rhs(H, f, y_onehot)
        else:
            k1 = _rhs(H, f, y_onehot)
            k2 = _rhs(H, f + 0.5 * lr * k1, y_onehot)
            k3 = _rhs(H, f + 0.5 * lr * k2, y_onehot)
            k4 = _rhs(H, f + lr * k3, y_onehot)
            f = f + (lr / 6.0) * (k1 + 2 * k2 + 2 * k3 + k4)
        traj.append(f)
    return torch.stack(traj, 0)


def evolve_weights(w_bar: torch.Tensor, J: torch.Tensor, f_traj: torch.Tensor, y_onehot: torch.Tensor, lr: float,
                   t: int) -> torch.Tensor:
    """Weights after t steps of the NTK evolution (flat, (P,)).

    w^{(t)} = w̄ − (lr/N) Σ_c J[:,c,:]ᵀ R_t[:,c] with R_t = Σ_{τ=0}^{t-1} softmax(f^{(τ)}) − t·Y: the sum of the
    cross-entropy gradients along the linearised trajectory, mapped to weights with the Jacobian at w̄.
    w_bar (P,), J (N, C, P), f_traj (≥ t+1, N, C), y_onehot (N, C). t = 0 returns w̄.
    """
    if not 0 <= t < f_traj.shape[0]:
        raise ValueError(f"evolve_weights: t={t} outside 0..{f_traj.shape[0] - 1} (trajectory length)")
    if t == 0:
        return w_bar.clone()
    resid = torch.softmax(f_traj[:t], dim=-1).sum(0) - t * y_onehot
    # Σ_c J[:,c,:]ᵀ R[:,c] as one (N·C) x P matrix-vector product on a view of J (no copy of J).
    grad_sum = resid.reshape(1, -1) @ J.reshape(-1, J.shape[-1])
    return w_bar - (lr / J.shape[0]) * grad_sum.reshape(-1)


def evolve_weights_at(w_bar: torch.Tensor, J: torch.Tensor, f_traj: torch.Tensor, y_onehot: torch.Tensor,
                      lr: float, ts: Sequence[int]) -> torch.Tensor:
    """:func:`evolve_weights` at several t at once: (len(ts), P), row i = w^{(ts[i])}.

    The softmax sums Σ_{τ<t} softmax(f^{(τ)}) are accumulated once over the sorted candidates (each trajectory
    step is read once, not once per candidate) and mapped to weights in one (len(ts), N·C) x (N·C, P) product.
    """
    ts = [int(t) for t in ts]
    if not ts or min(ts) < 0 or max(ts) >= f_traj.shape[0]:
        raise ValueError(f"evolve_weights_at: ts={ts} outside 0..{f_traj.shape[0] - 1} (trajectory length)")
    sums: dict[int, torch.Tensor] = {}
    run = torch.zeros_like(y_onehot)
    prev = 0
    for t in sorted(set(ts)):
        if t > prev:
            run = run + torch.softmax(f_traj[prev:t], dim=-1).sum(0)
        sums[t], prev = run, t
    resid = torch.stack([sums[t] - t * y_onehot for t in ts]).reshape(len(ts), -1)
    return w_bar.unsqueeze(0) - (lr / J.shape[0]) * (resid @ J.reshape(-1, J.shape[-1]))


def cross_entropy(logits: torch.Tensor, y_onehot: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of logits (N, C) against one-hot (or soft) targets (N, C)."""
    return -(y_onehot * torch.log_softmax(logits, dim=-1)).sum(-1).mean()


# ------------------------------------------------------------------------------------------------ mixing


def mixing_matrix(graph: nx.Graph, n_clients: int, dtype: torch.dtype = torch.float32,
                  device: torch.device | str | None = None) -> torch.Tensor:
    """M (K, K) with M[k, j] = 1/(|N_k|+1) for j ∈ N_k ∪ {k}, else 0 (row-stochastic; doubly so if regular)."""
    M = torch.zeros(n_clients, n_clients, dtype=torch.float64)
    for k in range(n_clients):
        nbrs = [k, *[j for j in graph.neighbors(k) if j != k]] if k in graph else [k]
        M[k, nbrs] = 1.0 / len(nbrs)
    return M.to(dtype=dtype, device=device)


def mix(weights: torch.Tensor, graph: nx.Graph) -> torch.Tensor:
    """Synchronous neighbourhood averaging (Algorithm 1, line "aggregate"): (K, P) -> (K, P), every client at once
    from the same old weights."""
    return mixing_matrix(graph, weights.shape[0], weights.dtype, weights.device) @ weights


def neighbourhood(graph: nx.Graph, k: int) -> list[int]:
    """N_k ∪ {k}, sorted."""
    return sorted({k, *(graph.neighbors(k) if k in graph else [])})


# ------------------------------------------------------------------------------------------------ round


def _as_onehot(y: torch.Tensor, n_classes: int, dtype: torch.dtype) -> torch.Tensor:
    if y.ndim == 1:
        return F.one_hot(y.long(), n_classes).to(dtype)
    return y.to(dtype)


def round_bytes(graph: nx.Graph, sizes: Sequence[int], n_classes: int, n_params: int) -> int:
    """fp32 bytes sent in one NTK-DFL round: per client k, weights in from each neighbour and w̄_k out to each
    (2·|N_k|·P floats), and from each neighbour j its Jacobian, outputs and labels (n_j·(C·P + 2C) floats)."""
    floats = 0
    for k in range(len(sizes)):
        for j in neighbourhood(graph, k):
            if j != k:
                floats += 2 * n_params + sizes[j] * (n_classes * n_params + 2 * n_classes)
    return FLOAT_BYTES * floats


def ntk_dfl_round(weights: torch.Tensor, data: Sequence[tuple[torch.Tensor, torch.Tensor]], graph: nx.Graph,
                  model_fn: Callable[[], nn.Module], lr: float, t_cand: Sequence[int], t_select: str = "network",
                  ode: str = "dopri5", chunk: int = 100, rtol: float = 1e-7,
                  atol: float = 1e-9) -> tuple[torch.Tensor, dict[str, Any]]:
    """One synchronous NTK-DFL round for all K clients (Algorithm 1).

    weights (K, P) flat client weights; data[k] = (X_k (n_k, D), Y_k one-hot (n_k, C) or labels (n_k,));
    graph on nodes 0..K-1; ``model_fn()`` builds the architecture (its own weights are ignored); lr = η_r;
    t_cand the candidate evolution steps; ``ode``, ``rtol``, ``atol`` see :func:`evolve_function`. Returns new
    weights (K, P) and info: ``t_star`` (K,) long,
    ``losses`` (K, len(t_cand)) the selection losses, ``bytes`` (int, see :func:`round_bytes`), ``w_bar`` (K, P).
    """
    if t_select not in ("network", "linearized"):
        raise ValueError(f"ntk_dfl_round: t_select must be 'network' or 'linearized', got {t_select!r}")
    t_cand = [int(t) for t in t_cand]
    if not t_cand or min(t_cand) < 0:
        raise ValueError(f"ntk_dfl_round: t_cand must be non-empty non-negative ints, got {t_cand}")
    K = weights.shape[0]
    if len(data) != K:
        raise ValueError(f"ntk_dfl_round: {len(data)} data shards for {K} clients")
    model = model_fn()
    dtype = weights.dtype
    w_bar = mix(weights, graph)
    n_classes = None
    new = torch.empty_like(weights)
    t_star = torch.empty(K, dtype=torch.long)
    losses = torch.empty(K, len(t_cand), dtype=torch.float64)
    for k in range(K):
        nbrs = neighbourhood(graph, k)
        X = torch.cat([data[j][0] for j in nbrs]).to(dtype)
        set_weights(model, w_bar[k])
        with torch.no_grad():
            f0 = forward(model, w_bar[k], X)
        n_classes = f0.shape[1]
        Y = torch.cat([_as_onehot(data[j][1], n_classes, dtype) for j in nbrs])
        J, H = empirical_ntk(model, X, chunk)
        with torch.no_grad():
            traj = evolve_function(H, f0, Y, lr, max(t_cand), ode, rtol, atol)
            cands = evolve_weights_at(w_bar[k], J, traj, Y, lr, t_cand)
            for i, (t, w_t) in enumerate(zip(t_cand, cands)):
                logits = forward(model, w_t, X) if t_select == "network" else traj[t]
                losses[k, i] = cross_entropy(logits, Y).double()
        best = int(torch.argmin(losses[k]))  # ties -> the smallest candidate listed first
        t_star[k] = t_cand[best]
        new[k] = cands[best]
    sizes = [int(d[0].shape[0]) for d in data]
    info = {"t_star": t_star, "losses": losses, "w_bar": w_bar,
            "bytes": round_bytes(graph, sizes, n_classes or 0, weights.shape[1])}
    return new, info
