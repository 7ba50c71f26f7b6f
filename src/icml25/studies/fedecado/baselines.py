"""Server rules of the baselines, as the study defines them (the clients of every method run
:func:`~.method.client_integrate`; FedProx changes the client gradient, :func:`prox_gradient`).

With S the active clients and p̃_i = p_i / Σ_S p_j:

* FedAvg (McMahan et al. 2017): x⁺ = Σ_S p̃_i x_i.
* FedProx (Li et al. 2020): client gradient g_i(x) + μ(x − x_round), aggregated as FedAvg; μ = 0.01.
* FedNova (Wang et al. 2020) with a_i = T_i (the client's simulated time, lr × steps) [R]:
  x⁺ = x − T_eff Σ_S p̃_i (x − x_i)/T_i,  T_eff = Σ_S p̃_i T_i.
* FedExp (Jhunjhunwala et al. 2023) [R: weighting]: Δ_i = x_i − x, Δ̄ = Σ_S p̃_i Δ_i,
  η_g = max(1, Σ_S ‖Δ_i‖² / (2|S|(‖Δ̄‖² + ε))), x⁺ = x + η_g Δ̄, ε = 1e-3.

Server learning rate (issue 31, symmetric tuning; Reddi et al. 2021, "Adaptive federated optimization", the
server step of FedOpt): FedAvg, FedProx and FedNova take ``server_lr`` = η_s on their aggregate update,
x⁺ = x + η_s (x_agg − x); η_s = 1 is the method as published. FedECADO-R's continuous-time synchronisation moves
the server further than the plain average (about 2× FedNova's step), so the baselines get this knob, tuned on
tuning seeds (``tuning/fedecado.jsonl``). FedExp's η_g is already an (adaptive) server step and gets none.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def _normalised(p: Any, S: list[int]) -> dict[int, float]:
    total = sum(float(p[i]) for i in S)
    if not total > 0:
        raise ValueError("baselines: the active clients have zero total weight")
    return {i: float(p[i]) / total for i in S}


def fedavg_aggregate(x_end: Mapping[int, Any], p: Any, x: Any = None, server_lr: float = 1.0) -> Any:
    """x⁺ = Σ_S p̃_i x_i over the clients of ``x_end`` (dict id → (P,)); with a server learning rate η_s ≠ 1
    (needs the round-start state ``x``): x⁺ = x + η_s (Σ_S p̃_i x_i − x)."""
    S = sorted(x_end)
    q = _normalised(p, S)
    out = q[S[0]] * x_end[S[0]]
    for i in S[1:]:
        out = out + q[i] * x_end[i]
    if server_lr != 1.0:
        if x is None:
            raise ValueError("fedavg_aggregate: server_lr != 1 needs the round-start state x")
        out = x + server_lr * (out - x)
    return out


def fednova_aggregate(x: Any, x_end: Mapping[int, Any], T: Mapping[int, float], p: Any,
                      server_lr: float = 1.0) -> Any:
    """x⁺ = x − η_s T_eff Σ_S p̃_i (x − x_i)/T_i with T_eff = Σ_S p̃_i T_i (normalised averaging, a_i = T_i;
    η_s the server learning rate, 1 as published)."""
    S = sorted(x_end)
    q = _normalised(p, S)
    T_eff = sum(q[i] * float(T[i]) for i in S)
    direction = sum(q[i] * (x - x_end[i]) / float(T[i]) for i in S)
    return x - server_lr * T_eff * direction


def fedexp_aggregate(x: Any, x_end: Mapping[int, Any], p: Any, eps: float = 1e-3) -> tuple[Any, float]:
    """FedExp's extrapolated server step; returns (x⁺, η_g)."""
    S = sorted(x_end)
    q = _normalised(p, S)
    deltas = {i: x_end[i] - x for i in S}
    mean = sum(q[i] * deltas[i] for i in S)
    sq = sum(float((deltas[i] ** 2).sum()) for i in S)
    eta_g = max(1.0, sq / (2 * len(S) * (float((mean ** 2).sum()) + eps)))
    return x + eta_g * mean, eta_g


def prox_gradient(grad_fn: Callable[[Any, int], Any], anchor: Any, mu: float) -> Callable[[Any, int], Any]:
    """FedProx client gradient: g(x, k) + μ(x − anchor)."""
    def g(x: Any, k: int) -> Any:
        return grad_fn(x, k) + mu * (x - anchor)
    return g
