"""Exact properties of the two-stage surrogates (mechanism check, claim 4), evaluated on random inputs in float64.

* **Surrogate bound.** For ν = 1 and any ρ > 0, Σ_j τ_j Φ(r, x, j) ≥ J·log 2·ℓ_def. Proof sketch: for every agent
  j ≠ π(x), r_j ≤ r_π, so e^{r_π − r_j} ≥ 1 and Φ_ρ(r_j − r_π) = 1; hence Φ(r, x, j) ≥ log 2 for both the comp-sum
  and the ρ-margin loss, and Σ_{j≠π} τ_j = (J − 1)Σ_k c_k + c_π ≥ J c_π because c ≥ 0.
* **Bayes allocation.** ∂/∂r_k Σ_j τ_j (−log softmax_j r) = softmax_k(r) Σ_j τ_j − τ_k, which vanishes at
  r = log τ: the minimiser's softmax is τ/Στ, whose argmax (largest τ_j = Σc − c_j) is the cheapest agent.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .method import deferral_loss, two_stage_surrogate

BOUND_RHO = 1.0


def random_scores_costs(n: int, n_agents: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random float64 scores (n, J+1) and costs in [0, 1] (n, J+1) covering hard cases.

    rng = ``default_rng([seed, 7])``. Scores N(0, s²) with s log-uniform in [1e-2, 10]; a quarter rounded to
    multiples of 0.5 (ties in the argmax). Costs U[0, 1]; a quarter of the rows keep one nonzero cost (equality
    cases of the bound) and 10 % of all entries are set to 0 or 1."""
    rng = np.random.default_rng([seed, 7])
    s = np.exp(rng.uniform(math.log(1e-2), math.log(10.0), size=(n, 1)))
    r = rng.standard_normal((n, n_agents)) * s
    ties = rng.random(n) < 0.25
    r[ties] = np.round(r[ties] * 2.0) / 2.0
    c = rng.random((n, n_agents))
    single = rng.random(n) < 0.25
    keep = rng.integers(0, n_agents, size=n)
    c[single] = c[single] * (np.arange(n_agents)[None, :] == keep[single, None])
    edge = rng.random((n, n_agents)) < 0.1
    c[edge] = rng.integers(0, 2, size=int(edge.sum())).astype(np.float64)
    return torch.from_numpy(r), torch.from_numpy(c)


def surrogate_bound_gaps(n: int = 100_000, n_agents: int = 3, seed: int = 0,
                         rho: float = BOUND_RHO) -> dict[str, float]:
    """min over n random (scores, costs) of Σ_j τ_j Φ(r, x, j) − J·log 2·ℓ_def, for the comp-sum (ν = 1) and the
    ρ-margin (ν = 1) surrogate; J = n_agents − 1. Both are ≥ 0 when the bound holds."""
    r, c = random_scores_costs(n, n_agents, seed)
    rhs = (n_agents - 1) * math.log(2.0) * deferral_loss(r, c)
    return {"min_gap_comp_sum": float((two_stage_surrogate(r, c, nu=1.0, rho=None) - rhs).min()),
            "min_gap_rho_margin": float((two_stage_surrogate(r, c, nu=1.0, rho=rho) - rhs).min()),
            "n": n}


def bayes_allocation(n: int = 100_000, n_agents: int = 3, seed: int = 0) -> dict[str, float]:
    """At r = log τ (costs U(0, 1), distinct with probability 1), the largest |∂ Σ_j τ_j Φ_1 / ∂r|, the largest
    |softmax(r) − τ/Στ| and the fraction of rows where argmax softmax(r) = argmin c."""
    rng = np.random.default_rng([seed, 8])
    c = torch.from_numpy(rng.uniform(0.0, 1.0, size=(n, n_agents)))
    tau = c.sum(dim=1, keepdim=True) - c
    r = torch.log(tau).requires_grad_(True)
    (grad,) = torch.autograd.grad(two_stage_surrogate(r, c, nu=1.0, rho=None).sum(), r)
    soft = torch.softmax(r.detach(), dim=1)
    return {"max_abs_grad": float(grad.abs().max()),
            "max_softmax_err": float((soft - tau / tau.sum(dim=1, keepdim=True)).abs().max()),
            "argmax_is_argmin_cost": float((soft.argmax(dim=1) == c.argmin(dim=1)).double().mean()),
            "n": n}
