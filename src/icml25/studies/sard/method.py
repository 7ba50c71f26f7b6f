"""The losses and attacks of two-stage learning to defer (L2D) and of SARD (Montreuil, Carlier, Ng, Ooi, ICML 2025).

Notation. There are J + 1 agents: j = 0 is the fixed main model, j = 1..J the fixed experts. A rejector
r: X → ℝ^{J+1} scores them; the allocation is π(x) = argmax_j r_j(x) (ties → lowest index) and the deferral loss is
ℓ_def = c_{π(x)}, with per-example costs c ∈ [0, 1]^{J+1} computed from the agents at the clean input.

Everything below except the deferral loss is a reconstruction [R] (the paper's method section was not read):

* **Two-stage surrogate** (two-stage multi-expert L2D of Mao et al., 2023): Φ_def = Σ_j τ_j Φ(r, x, j) with
  τ_j = Σ_{k≠j} c_k, so that the agent of smallest cost gets the largest weight.
* **Comp-sum family** (Mao, Mohri & Zhong, 2023): Φ_ν(r, x, j) = Ψ_ν(Σ_{k≠j} exp(r_k − r_j)) with Ψ_1(v) = log(1+v)
  (cross-entropy) and Ψ_ν(v) = (1 − (1+v)^{1−ν})/(ν − 1) otherwise (ν = 0: sum-exponential, ν = 2: MAE form).
* **ρ-margin comp-sum** (the adversarial comp-sum losses of the same authors): Φ^ρ_ν(r, x, j) =
  Ψ_ν(Σ_{k≠j} Φ_ρ(r_j − r_k)) with the ramp Φ_ρ(t) = min(1, max(0, 1 − t/ρ)).
* **SARD** (the paper's adversarial training objective): min_θ mean_i Σ_j τ_j(x_i, y_i) sup_{x′ ∈ B∞(x_i, γ)}
  Φ^ρ_ν(r_θ, x′, j); the costs stay at the clean input (only the rejector is attacked). The supremum is
  approximated by PGD on the smooth comp-sum objective Σ_j τ_j Φ_ν(r, x′, j) (one joint point, or one point per
  agent); the ramp loss is evaluated at the point found.
* **Smooth SARD surrogate** (``surrogate="smooth"``, the study's default for the ``sard`` arm): the ramp is flat
  outside (0, ρ), so an agent's ρ-margin term has no gradient towards any agent ranked above it and training on it
  collapses to a constant allocation. Mao, Mohri & Zhong (2023, §6) do not train on the ρ-margin supremum either;
  they minimise a smooth upper bound of it ("smooth adversarial comp-sum" losses). The same two steps apply here,
  term by term: Φ_ρ(t) ≤ e^{−t/ρ} gives Ψ_ν(Σ_{k≠j} Φ_ρ(Δ_jk(x))) ≤ Φ_ν(r(x)/ρ, x, j); and with
  δ = Δ_j(x′) − Δ_j(x) ∈ ℝ^J, the map δ ↦ Ψ_ν(Σ_k Φ_ρ(Δ_jk(x) + δ_k)) has partial derivatives of absolute value
  ≤ 1/ρ (Φ_ρ is 1/ρ-Lipschitz and Ψ_ν′ ≤ 1 on v ≥ 0 for ν ≥ 0), so for every x′ in the ball

      Φ^ρ_ν(r, x′, j) ≤ Φ_ν(r(x)/ρ, x, j) + (1/ρ) ‖δ‖₁          (ℓ1 form, ``penalty_norm="l1"``)
                      ≤ Φ_ν(r(x)/ρ, x, j) + (√J/ρ) ‖δ‖₂         (ℓ2 form via Cauchy–Schwarz, ``"l2"``).

  The ℓ1 form is the tighter of the two (‖δ‖₁ ≤ √J ‖δ‖₂); the ℓ2 form is the shape of Mao et al.'s smooth
  adversarial comp-sum, whose coefficient they treat as a hyper-parameter. Both are offered; the penalty is
  multiplied by a weight w (``penalty_weight``): w ≥ 1 keeps the upper bound, w < 1 does not. w **is** an extra
  hyper-parameter (the bound fixes only w = 1); the study's value and why are in the README ("Tuning").
  :func:`smooth_per_agent_loss`. The supremum of eq. (12) is taken **per agent** by default (``inner="per_agent"``:
  one PGD point x′_j per agent j maximising τ_j × the j-th penalty, the j-th term evaluated at its own point); the
  ``joint`` option uses one point for all agents, which only lower-bounds Σ_j τ_j sup_{x′} (…).
* **Attacks**: ℓ∞ PGD with random start; untargeted maximises the expected cost Σ_j c_j softmax_j(r(x′)),
  targeted (at agent t) maximises log softmax_t(r(x′)).

Shapes: scores and costs are (n, J+1) tensors; per-example losses are (n,).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Literal

import torch
from torch import Tensor

from .config import SARD_INNER, SARD_PENALTY_NORM, SARD_PENALTY_WEIGHT, SARD_SURROGATE

INNER_MODES = ("joint", "per_agent")
SURROGATES = ("ramp", "smooth")
PENALTY_NORMS = ("l1", "l2")


# ------------------------------------------------------------------------------------------- allocation


def _check_pair(scores: Tensor, costs: Tensor, who: str) -> None:
    if scores.ndim != 2 or costs.shape != scores.shape:
        raise ValueError(f"{who}: scores and costs must both be (n, J+1); got {tuple(scores.shape)} and "
                         f"{tuple(costs.shape)}")


def allocation(scores: Tensor) -> Tensor:
    """π(x) = argmax_j r_j(x), ties to the lowest index: (n, J+1) → (n,) int64.

    ``torch.argmax`` returns the first maximal index, which is the lowest-index tie rule."""
    if scores.ndim != 2:
        raise ValueError(f"allocation: scores must be (n, J+1), got {tuple(scores.shape)}")
    return torch.argmax(scores, dim=1)


def deferral_loss(scores: Tensor, costs: Tensor) -> Tensor:
    """ℓ_def = Σ_j c_j 1{π(x) = j} = c_{π(x)}: scores, costs (n, J+1) → (n,) (not differentiable in the scores)."""
    _check_pair(scores, costs, "deferral_loss")
    return costs.gather(1, allocation(scores).unsqueeze(1)).squeeze(1)


def tau_weights(costs: Tensor) -> Tensor:
    """τ_j = Σ_{k≠j} c_k = Σ_k c_k − c_j: (n, J+1) → (n, J+1)."""
    return costs.sum(dim=1, keepdim=True) - costs


# -------------------------------------------------------------------------------------------- surrogates


def psi(v: Tensor, nu: float) -> Tensor:
    """Ψ_ν(v) of the comp-sum family, v ≥ 0: log(1+v) for ν = 1, (1 − (1+v)^{1−ν})/(ν − 1) otherwise."""
    if nu == 1.0:
        return torch.log1p(v)
    return (1.0 - torch.pow(1.0 + v, 1.0 - nu)) / (nu - 1.0)


def ramp(t: Tensor, rho: float) -> Tensor:
    """The ρ-margin ramp Φ_ρ(t) = min(1, max(0, 1 − t/ρ)): 1 for t ≤ 0, 0 for t ≥ ρ, linear between."""
    if not rho > 0:
        raise ValueError(f"ramp: rho must be > 0, got {rho}")
    return torch.clamp(1.0 - t / rho, min=0.0, max=1.0)


def per_agent_loss(scores: Tensor, nu: float = 1.0, rho: float | None = None) -> Tensor:
    """Φ(r, x, j) for every agent j: (n, J+1) → (n, J+1).

    ``rho=None``: comp-sum Ψ_ν(Σ_{k≠j} e^{r_k − r_j}); for ν = 1 this is computed stably as
    logsumexp_k r_k − r_j (= −log softmax_j). A float ρ: Ψ_ν(Σ_{k≠j} Φ_ρ(r_j − r_k))."""
    if scores.ndim != 2:
        raise ValueError(f"per_agent_loss: scores must be (n, J+1), got {tuple(scores.shape)}")
    m = scores.shape[1]
    off = ~torch.eye(m, dtype=torch.bool, device=scores.device)  # off[j, k] = k != j
    diff = scores.unsqueeze(1) - scores.unsqueeze(2)  # diff[:, j, k] = r_k − r_j
    if rho is None:
        if nu == 1.0:
            return torch.logsumexp(scores, dim=1, keepdim=True) - scores
        v = (torch.exp(diff) * off).sum(dim=2)
    else:
        v = (ramp(-diff, rho) * off).sum(dim=2)  # Φ_ρ(r_j − r_k)
    return psi(v, nu)


def margin_penalty(scores_adv: Tensor, scores: Tensor, norm: str = "l1") -> Tensor:
    """‖Δ_j(x′) − Δ_j(x)‖ for every agent j: scores at x′ and at x, (n, J+1) each → (n, J+1).

    Δ_j = (r_j − r_k)_{k≠j}; with d = r(x′) − r(x) the j-th entry is Σ_k |d_j − d_k| (``norm="l1"``) or
    (Σ_k (d_j − d_k)²)^{1/2} (``norm="l2"``); the k = j term is 0 in both."""
    if scores_adv.shape != scores.shape or scores.ndim != 2:
        raise ValueError(f"margin_penalty: scores at x′ and x must both be (n, J+1); got {tuple(scores_adv.shape)} "
                         f"and {tuple(scores.shape)}")
    if norm not in PENALTY_NORMS:
        raise ValueError(f"margin_penalty: norm must be one of {PENALTY_NORMS}, got {norm!r}")
    d = scores_adv - scores
    diff = d.unsqueeze(2) - d.unsqueeze(1)
    if norm == "l1":
        return diff.abs().sum(dim=2)
    return torch.linalg.vector_norm(diff, ord=2, dim=2)


def penalty_coefficient(n_agents: int, rho: float, norm: str = "l1") -> float:
    """The coefficient of the penalty that makes the smooth surrogate an upper bound of the ρ-margin loss:
    1/ρ for the ℓ1 norm, √J/ρ for the ℓ2 norm (Cauchy–Schwarz over the J = n_agents − 1 margins)."""
    if norm not in PENALTY_NORMS:
        raise ValueError(f"penalty_coefficient: norm must be one of {PENALTY_NORMS}, got {norm!r}")
    return (1.0 if norm == "l1" else math.sqrt(n_agents - 1)) / rho


def smooth_per_agent_loss(scores_adv: Tensor, scores: Tensor, nu: float = 1.0, rho: float = 1.0,
                          weight: float = 1.0, norm: str = "l1") -> Tensor:
    """The smooth adversarial comp-sum for every agent: (n, J+1), (n, J+1) → (n, J+1).

    Φ_ν(r(x)/ρ, x, j) + weight · κ ‖Δ_j(x′) − Δ_j(x)‖ with κ = :func:`penalty_coefficient` (1/ρ for ℓ1, √J/ρ for
    ℓ2); ``scores`` are r(x) at the clean input, ``scores_adv`` r(x′). With ``weight`` ≥ 1 it is ≥ Φ^ρ_ν(r, x′, j)
    for every x′ (module docstring); a smaller weight gives up the bound (Mao et al. tune this weight)."""
    if not rho > 0:
        raise ValueError(f"smooth_per_agent_loss: rho must be > 0, got {rho}")
    if not weight >= 0:
        raise ValueError(f"smooth_per_agent_loss: weight must be >= 0, got {weight}")
    coef = penalty_coefficient(scores.shape[1], rho, norm)
    return per_agent_loss(scores / rho, nu=nu, rho=None) + weight * coef * margin_penalty(scores_adv, scores, norm)


def two_stage_surrogate(scores: Tensor, costs: Tensor, nu: float = 1.0, rho: float | None = None) -> Tensor:
    """The two-stage deferral surrogate Σ_j τ_j Φ(r, x, j): scores, costs (n, J+1) → (n,).

    ``rho=None`` gives the comp-sum Φ_ν (the clean two-stage L2D loss for ν = 1); a float ρ gives the ρ-margin
    comp-sum Φ^ρ_ν that SARD uses at the adversarial point. Costs are weights only (no gradient flows to them
    in the intended use)."""
    _check_pair(scores, costs, "two_stage_surrogate")
    return (tau_weights(costs) * per_agent_loss(scores, nu=nu, rho=rho)).sum(dim=1)


# ---------------------------------------------------------------------------------------------- attacks


def _check_attack(eps: float, steps: int) -> None:
    if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps >= 0):
        raise ValueError(f"attack: eps must be a finite number >= 0, got {eps!r}")
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"attack: steps must be an integer >= 1, got {steps!r}")


def pgd_iterates(model: Callable[[Tensor], Tensor], x: Tensor, objective: Callable[[Tensor], Tensor], eps: float,
                 steps: int, alpha: float | None = None, clip: tuple[float, float] | None = (0.0, 1.0),
                 rand_init: bool = True, generator: torch.Generator | None = None) -> Iterator[Tensor]:
    """Yield the start point and every PGD iterate (steps + 1 tensors shaped like x), see :func:`pgd_attack`.

    Projection: x′ ← min(max(x′, x − ε), x + ε), then clip to ``clip`` (when given); x is assumed inside ``clip``.
    ε = 0 yields x itself (bitwise) steps + 1 times."""
    _check_attack(eps, steps)
    x = x.detach()
    if eps == 0:
        for _ in range(steps + 1):
            yield x.clone()
        return
    alpha = 2.5 * eps / steps if alpha is None else float(alpha)
    lo, hi = x - eps, x + eps
    if clip is not None:
        lo, hi = lo.clamp(clip[0], clip[1]), hi.clamp(clip[0], clip[1])
    if rand_init:
        # drawn on the generator's device (CPU generators in the pipeline), then moved: same starts on CPU and GPU
        u = torch.rand(x.shape, generator=generator, dtype=x.dtype,
                       device=generator.device if generator is not None else x.device).to(x.device)
        x_adv = torch.minimum(torch.maximum(x + (2.0 * u - 1.0) * eps, lo), hi)
    else:
        x_adv = x.clone()
    yield x_adv
    for _ in range(steps):
        x_adv = x_adv.detach().requires_grad_(True)
        value = objective(model(x_adv)).sum()  # per-example objectives are independent: the sum's gradient
        (grad,) = torch.autograd.grad(value, x_adv)  # is each example's own gradient
        x_adv = torch.minimum(torch.maximum(x_adv.detach() + alpha * grad.sign(), lo), hi)
        yield x_adv


def pgd_attack(model: Callable[[Tensor], Tensor], x: Tensor, objective: Callable[[Tensor], Tensor], eps: float,
               steps: int, alpha: float | None = None, clip: tuple[float, float] | None = (0.0, 1.0),
               rand_init: bool = True, generator: torch.Generator | None = None) -> Tensor:
    """ℓ∞ projected gradient ascent of ``objective(model(x′))`` over B∞(x, ε) ∩ clip box (Madry et al. style).

    x: (n, d). ``objective`` maps scores (n, J+1) to per-example values (n,) (their sum is differentiated).
    α defaults to 2.5ε/steps; ``rand_init`` starts uniformly in the ball (one restart); ``clip=None`` disables
    the box (standardised tabular features). Returns the last iterate, detached; ε = 0 returns x bitwise.
    Gradients are taken with respect to x′ only: the model's parameters are not touched."""
    last = x
    for last in pgd_iterates(model, x, objective, eps, steps, alpha, clip, rand_init, generator):
        pass
    return last.detach()


def attack_objective(kind: Literal["untargeted", "targeted"], costs: Tensor | None = None,
                     target: int | Tensor | None = None) -> Callable[[Tensor], Tensor]:
    """The attacker's objective on scores (n, J+1) → (n,).

    * ``untargeted``: expected cost Σ_j c_j softmax_j(r) (costs (n, J+1) at the clean input), a smooth proxy of
      the deferral loss it is meant to raise;
    * ``targeted``: log softmax_t(r), pushing the allocation to agent t (an int, or a (n,) int tensor)."""
    if kind == "untargeted":
        if costs is None:
            raise ValueError("attack_objective: kind='untargeted' needs costs (n, J+1)")
        c = costs.detach()
        return lambda scores: (c * torch.softmax(scores, dim=1)).sum(dim=1)
    if kind == "targeted":
        if target is None:
            raise ValueError("attack_objective: kind='targeted' needs a target agent")
        if isinstance(target, Tensor):
            t = target.long().view(-1, 1)
            return lambda scores: torch.log_softmax(scores, dim=1).gather(1, t).squeeze(1)
        t_int = int(target)
        return lambda scores: torch.log_softmax(scores, dim=1)[:, t_int]
    raise ValueError(f"attack_objective: kind must be 'untargeted' or 'targeted', got {kind!r}")


def inner_objective(costs: Tensor, nu: float = 1.0, agent: int | None = None) -> Callable[[Tensor], Tensor]:
    """SARD's inner maximisation objective on scores: Σ_j τ_j Φ_ν(r, x′, j) (``agent=None``, the joint point) or
    τ_j Φ_ν(r, x′, j) for one agent j (the per-agent points). Smooth comp-sum: the ramp has no gradient outside
    (0, ρ), so the attack follows the comp-sum and the ramp loss is evaluated at the point it finds."""
    tau = tau_weights(costs.detach())
    if agent is None:
        return lambda scores: (tau * per_agent_loss(scores, nu=nu, rho=None)).sum(dim=1)
    return lambda scores: tau[:, agent] * per_agent_loss(scores, nu=nu, rho=None)[:, agent]


def penalty_objective(costs: Tensor, scores: Tensor, agent: int | None = None, norm: str = "l1"
                      ) -> Callable[[Tensor], Tensor]:
    """Inner objective of the smooth surrogate on scores at x′: Σ_j τ_j ‖Δ_j(x′) − Δ_j(x)‖ (``agent=None``) or the
    j-th term alone (``norm`` l1 or l2, :func:`margin_penalty`); ``scores`` = r(x), held fixed (detached). Its
    gradient vanishes at x′ = x, so PGD needs its random start."""
    tau = tau_weights(costs.detach())
    ref = scores.detach()
    if agent is None:
        return lambda s: (tau * margin_penalty(s, ref, norm)).sum(dim=1)
    return lambda s: tau[:, agent] * margin_penalty(s, ref, norm)[:, agent]


def stacked_agent_objective(values: Callable[[Tensor], Tensor], costs: Tensor) -> Callable[[Tensor], Tensor]:
    """The per-agent inner objectives of eq. (12) on a stacked input, as one vectorised function: the scores s
    (n_agents·n, J+1) hold n_agents blocks of n rows, and row i of block j gets τ_j(c_i) · values(s)[row, j], where
    ``values`` maps scores (N, J+1) row-wise to per-agent values (N, J+1) (the penalty of :func:`margin_penalty`
    against r(x) repeated per block, or :func:`per_agent_loss`). Returns (n_agents·n,).

    Each row's value and its gradient are those of :func:`penalty_objective` / :func:`inner_objective` with
    ``agent=j`` on block j (every op is row-wise; the test checks both bitwise); one call instead of one per agent
    saves per-op overhead in the PGD loop."""
    tau = tau_weights(costs.detach())  # (n, J+1)
    n, m = tau.shape
    col = torch.arange(m, device=tau.device).repeat_interleave(n).unsqueeze(1)  # (m·n, 1): block j -> column j
    weight = tau.t().reshape(-1)  # (m·n,): block j -> τ_j
    return lambda s: weight * values(s).gather(1, col).squeeze(1)


def _per_agent_points(model: Callable[[Tensor], Tensor], x: Tensor, objective: Callable[[Tensor], Tensor],
                      n_agents: int, eps: float, steps: int, alpha: float | None,
                      clip: tuple[float, float] | None, generator: torch.Generator | None) -> Tensor:
    """One PGD point per (example, agent) in a single stacked attack: block j of the (n_agents·n, d) input is x
    attacked with agent j's objective (``objective``: :func:`stacked_agent_objective`); every example's
    objective is its own, so stacking changes nothing but the number of forward passes. Returns the scores
    (n_agents, n, J+1) at the points, block j at x′_j."""
    n = x.shape[0]
    x_adv = pgd_attack(model, x.repeat(n_agents, 1), objective, eps, steps, alpha, clip, True, generator)
    return model(x_adv).view(n_agents, n, -1)


def sard_loss(model: Callable[[Tensor], Tensor], x: Tensor, costs: Tensor, eps: float, steps: int, nu: float = 1.0,
              rho: float | None = 1.0, inner: str = SARD_INNER, *, surrogate: str = SARD_SURROGATE,
              penalty_weight: float = SARD_PENALTY_WEIGHT, penalty_norm: str = SARD_PENALTY_NORM,
              alpha: float | None = None, clip: tuple[float, float] | None = (0.0, 1.0),
              generator: torch.Generator | None = None) -> Tensor:
    """The SARD training loss on a batch (scalar tensor, differentiable in the model's parameters), eq. (12):
    mean_i Σ_j τ_j(c_i) sup_{x′ ∈ B∞(x_i, ε)} ℓ_j(r_θ, x′), the supremum approximated by PGD (``steps`` steps,
    budget ε, random start). The defaults are those of the pipeline's ``sard`` arm (``config.SARD_*``).

    ``inner="per_agent"`` (default): one PGD point per (example, agent), the j-th term evaluated at its own point
    (the supremum of eq. (12) is inside the sum over agents); ``inner="joint"``: one point per example for all
    agents (a lower bound of the per-agent supremum).
    ``surrogate`` (with a float ρ): ``"smooth"`` (default) minimises the upper bound
    mean_i Σ_j τ_j [Φ_ν(r(x_i)/ρ, j) + w κ ‖Δ_j(x′_i) − Δ_j(x_i)‖] with x′ from PGD on the penalty
    (:func:`smooth_per_agent_loss`; ``penalty_norm`` "l1" (κ = 1/ρ) or "l2" (κ = √J/ρ); ``penalty_weight`` w,
    1 = the bound); ``"ramp"`` evaluates the literal ρ-margin loss Φ^ρ_ν at x′ found by PGD on the smooth comp-sum
    (:func:`inner_objective`). ``rho=None`` evaluates the comp-sum Φ_ν at x′ (arm ``sard_ce``: convex in the
    scores). ``alpha`` (PGD step, default 2.5ε/steps), ``clip`` (box, None for unbounded features),
    ``generator`` (random start). x: (n, d), costs: (n, J+1)."""
    if inner not in INNER_MODES:
        raise ValueError(f"sard_loss: inner must be one of {INNER_MODES}, got {inner!r}")
    if surrogate not in SURROGATES:
        raise ValueError(f"sard_loss: surrogate must be one of {SURROGATES}, got {surrogate!r}")
    if penalty_norm not in PENALTY_NORMS:
        raise ValueError(f"sard_loss: penalty_norm must be one of {PENALTY_NORMS}, got {penalty_norm!r}")
    if x.ndim != 2 or costs.ndim != 2 or costs.shape[0] != x.shape[0]:
        raise ValueError(f"sard_loss: x must be (n, d) and costs (n, J+1); got {tuple(x.shape)}, "
                         f"{tuple(costs.shape)}")
    costs = costs.detach()
    m = costs.shape[1]
    tau = tau_weights(costs)
    if surrogate == "smooth" and rho is not None:
        rho, w = float(rho), float(penalty_weight)
        scores = model(x)
        if inner == "joint":
            x_adv = pgd_attack(model, x, penalty_objective(costs, scores, norm=penalty_norm), eps, steps, alpha,
                               clip, True, generator)
            return (tau * smooth_per_agent_loss(model(x_adv), scores, nu=nu, rho=rho, weight=w,
                                                norm=penalty_norm)).sum(dim=1).mean()
        ref = scores.detach().repeat(m, 1)  # r(x) per block: the penalty of block j's rows is against r(x)
        adv = _per_agent_points(model, x, stacked_agent_objective(lambda s: margin_penalty(s, ref, penalty_norm),
                                                                  costs), m, eps, steps, alpha, clip, generator)
        terms = [smooth_per_agent_loss(adv[j], scores, nu=nu, rho=rho, weight=w, norm=penalty_norm)[:, j]
                 for j in range(m)]
        return (tau * torch.stack(terms, dim=1)).sum(dim=1).mean()
    if inner == "joint":
        x_adv = pgd_attack(model, x, inner_objective(costs, nu), eps, steps, alpha, clip, True, generator)
        return two_stage_surrogate(model(x_adv), costs, nu=nu, rho=rho).mean()
    adv = _per_agent_points(model, x, stacked_agent_objective(lambda s: per_agent_loss(s, nu=nu, rho=None), costs),
                            m, eps, steps, alpha, clip, generator)
    terms = [per_agent_loss(adv[j], nu=nu, rho=rho)[:, j] for j in range(m)]
    return (tau * torch.stack(terms, dim=1)).sum(dim=1).mean()


def clean_loss(model: Callable[[Tensor], Tensor], x: Tensor, costs: Tensor, nu: float = 1.0) -> Tensor:
    """The clean two-stage L2D loss mean_i Σ_j τ_j Φ_ν(r_θ, x_i, j) (arm ``clean_l2d``): scalar tensor."""
    return two_stage_surrogate(model(x), costs.detach(), nu=nu, rho=None).mean()

