"""The federated training loop shared by every method and both problems (quadratic, MNIST).

A round: the plan names the active clients S and each client's work (n_steps, Δt); every active client starts from
the server state x and runs :func:`~.method.client_integrate` (with its branch current for FedECADO-R, zero flow
for the baselines, the proximal gradient for FedProx); the server rule of the method combines the results.

Methods: ``fedavg``, ``fedprox``, ``fednova``, ``fedexp`` (see :mod:`.baselines`), ``feddecorr`` and ``fedrs``
(FedAvg's server; their client objectives come with ``grad_for``, see :mod:`.model`), ``fednova_matched`` (FedNova
whose server learning rate is, every round, FedECADO-R's zero-current step factor
:func:`~.method.zero_current_step_factor`: the comparison at equal effective step, issue 33), ``fedecado`` (fixed client
steps), ``fedecado_lte`` (client LTE step control), ``fedecado_noflow`` (ablation: clients get zero flow and the
currents are reset to 0 after every round, I ≡ 0 between rounds).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .baselines import fedavg_aggregate, fedexp_aggregate, fednova_aggregate, prox_gradient
from .method import central_update, client_integrate, kcl_residual, zero_current_step_factor

METHODS = ("fedavg", "fedprox", "fednova", "fedexp", "feddecorr", "fedrs", "fednova_matched", "fedecado",
           "fedecado_lte", "fedecado_noflow")
FEDECADO_METHODS = ("fedecado", "fedecado_lte", "fedecado_noflow")

#: plan(round) → (active client ids, {client: (n_steps, dt)})
Plan = Callable[[int], tuple[Sequence[int], Mapping[int, tuple[int, float]]]]
#: grad_for(round, client) → grad_fn(x, k)
GradFor = Callable[[int, int], Callable[[Any, int], Any]]


def _zeros_like(x: Any, K: int) -> Any:
    if hasattr(x, "clone"):
        import torch
        return torch.zeros((K, x.shape[0]), dtype=x.dtype, device=x.device)
    import numpy as np
    return np.zeros((K, x.shape[0]), dtype=x.dtype)


def federated_train(method: str, x0: Any, p: Any, rounds: int, plan: Plan, grad_for: GradFor, *,
                    fedecado: Mapping[str, Any] | None = None, client_lte: Mapping[str, Any] | None = None,
                    prox_mu: float = 0.01, fedexp_eps: float = 1e-3,
                    server_lr: Mapping[str, float] | None = None,
                    on_round: Callable[[int, Any, dict[str, Any]], None] | None = None) -> tuple[Any, Any]:
    """Run ``rounds`` rounds of ``method`` from x0 (P,); p (K,) data weights.

    fedecado: keyword arguments of :func:`~.method.central_update` (kappa, h_bar, sensitivity, lte_tol, sync,
    h_min_frac); client_lte: tol, dt_min, dt_max_factor (dt_max = factor × the client's lr) for ``fedecado_lte``;
    server_lr: {fedavg, fedprox, fednova, feddecorr, fedrs: η_s} server learning rates of the baselines (missing: 1,
    as published); ``fednova_matched`` ignores it (its step is matched to FedECADO-R's with fedecado's κ, h̄).
    ``on_round(r, x, info)`` gets the server state after round r and info {T_max, n_steps_total, kcl_residual,
    n_substeps, n_rejects, L, eta_g}. Returns (x_final (P,), flows (K, P) or None).
    """
    if method not in METHODS:
        raise ValueError(f"federated_train: method must be one of {METHODS}, got {method!r}")
    eta_s = float((server_lr or {}).get(method, 1.0))
    K = len(p)
    fed = dict(fedecado or {})
    lte = dict(client_lte or {})
    x = x0
    zero = x0 * 0
    flows = _zeros_like(x0, K) if method in FEDECADO_METHODS else None
    v_prev = None
    for r in range(rounds):
        active, work = plan(r)
        x_end: dict[int, Any] = {}
        T: dict[int, float] = {}
        for i in active:
            n_steps, dt = work[i]
            g = grad_for(r, i)
            if method == "fedprox":
                g = prox_gradient(g, x, prox_mu)
            flow = flows[i] if method in ("fedecado", "fedecado_lte") else zero
            if method == "fedecado_lte":
                x_end[i], T[i], _ = client_integrate(
                    x, g, flow, float(p[i]), n_steps, dt, "lte", tol=lte.get("tol", 1e-3),
                    dt_min=lte.get("dt_min", 1e-6), dt_max=lte.get("dt_max_factor", 1.0) * dt)
            else:
                x_end[i], T[i], _ = client_integrate(x, g, flow, float(p[i]), n_steps, dt)
        info: dict[str, Any] = {"T_max": max(T.values()), "n_steps_total": sum(work[i][0] for i in active)}
        if method in ("fedavg", "fedprox", "feddecorr", "fedrs"):
            x = fedavg_aggregate(x_end, p, x, server_lr=eta_s)
        elif method == "fednova":
            x = fednova_aggregate(x, x_end, T, p, server_lr=eta_s)
        elif method == "fednova_matched":
            info["step_factor"] = zero_current_step_factor(T, p, fed.get("kappa", 2.0), fed.get("h_bar", 1.0))
            x = fednova_aggregate(x, x_end, T, p, server_lr=info["step_factor"])
        elif method == "fedexp":
            x, info["eta_g"] = fedexp_aggregate(x, x_end, p, eps=fedexp_eps)
        else:
            x, flows, cinfo = central_update(x, flows, active, x_end, T, p, v_prev=v_prev, **fed)
            v_prev = cinfo["v_prev"]
            info.update(n_substeps=cinfo["n_substeps"], n_rejects=cinfo["n_rejects"], L=cinfo["L"],
                        kcl_residual=kcl_residual(flows))
            if method == "fedecado_noflow":
                flows = flows * 0
        if on_round is not None:
            on_round(r, x, info)
    return x, flows
