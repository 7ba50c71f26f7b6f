"""Held-out measurements of a trained rejector: clean and adversarial deferral loss, allocation rates, targeted
attack success, and the attack-budget quantities of the mechanism check (claim 4).

All attacks are ℓ∞ PGD (:func:`.method.pgd_iterates`) with the evaluation settings (``settings["attack"]``); the
untargeted attack maximises the expected cost at the clean costs, the targeted one log softmax_t. Scores use the
hard deferral loss at the attacked point. With ``agents_see_perturbation`` the main model g is re-evaluated at x′
(its cost changes); the simulated experts keep their clean costs.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from .data import main_costs_at
from .method import allocation, attack_objective, pgd_iterates


def eps_key(eps: float) -> str:
    """Metric-name form of a budget: 0.1 → ``eps0.1``, 0 → ``eps0``."""
    return f"eps{float(eps):g}"


def _attack(model: nn.Module, x: Tensor, objective: Callable[[Tensor], Tensor], eps: float, steps: int,
            alpha_factor: float, clip: tuple[float, float] | None, rand_init: bool,
            generator: torch.Generator) -> tuple[Tensor, float, bool]:
    """PGD, returning the last iterate, the largest budget/box violation over all iterates (float64, ≥ 0) and,
    for ε = 0, whether every iterate equals x bitwise (True otherwise)."""
    alpha = alpha_factor * eps / steps if eps > 0 else None
    worst, bitwise = 0.0, True
    x64 = x.double()
    last = x
    for it in pgd_iterates(model, x, objective, eps, steps, alpha, clip, rand_init, generator):
        d = (it.double() - x64).abs().max().item() - eps
        worst = max(worst, d)
        if clip is not None:
            worst = max(worst, clip[0] - it.min().item(), it.max().item() - clip[1])
        if eps == 0:
            bitwise = bitwise and torch.equal(it.view(torch.int32), x.view(torch.int32))
        last = it
    return last.detach(), max(worst, 0.0), bitwise


def _chunked_attack(model: nn.Module, x: Tensor, make_objective: Callable[[slice], Callable[[Tensor], Tensor]],
                    eps: float, steps: int, alpha_factor: float, clip: tuple[float, float] | None, rand_init: bool,
                    generator: torch.Generator, chunk: int | None) -> tuple[Tensor, float, bool]:
    """:func:`_attack` over consecutive chunks of at most ``chunk`` points (None: all at once, the offline
    scales), drawing the random starts of the chunks in order from one generator."""
    size = len(x) if not chunk else int(chunk)
    parts, worst, bitwise = [], 0.0, True
    for i in range(0, len(x), size):
        s = slice(i, min(i + size, len(x)))
        x_adv, viol, bw = _attack(model, x[s], make_objective(s), eps, steps, alpha_factor, clip, rand_init,
                                  generator)
        parts.append(x_adv)
        worst, bitwise = max(worst, viol), bitwise and bw
    return torch.cat(parts), worst, bitwise


def evaluate_rejector(model: nn.Module, prep: Mapping[str, Any], attack: Mapping[str, Any], seed: int,
                      agents_see_perturbation: bool = False, device: str | torch.device = "cpu") -> dict[str, Any]:
    """Evaluate on the test split. Attack starts come from ``torch.Generator(seed + 3)`` (same for every arm).

    Returns ``metrics`` (floats: ``def_loss_clean``, ``def_loss_adv_eps{ε}``, ``alloc_rate_{j}`` (clean),
    ``adv_alloc_rate_{j}`` at the claim budget, ``targeted_success_{t}`` at the claim budget, ``ball_violation``,
    ``eps0_bitwise``), and ``points`` (per test point arrays: ``def_loss_clean``, ``def_loss_adv_eps{ε}``,
    ``targeted_success_{t}`` and ``targeted_eligible_{t}`` as 0/1)."""
    model.eval()
    te = prep["idx"]["test"]
    x = torch.from_numpy(prep["x"][te]).to(device)
    costs_np = prep["costs"][te].astype(np.float64)
    costs = torch.from_numpy(prep["costs"][te]).to(device)
    n_agents = costs.shape[1]
    steps, af = int(attack["steps"]), float(attack["alpha_factor"])
    rand_init, clip = bool(attack["rand_init"]), prep["clip"]
    chunk = attack.get("batch_size")
    gen = torch.Generator().manual_seed(seed + 3)

    def alloc(x_att: Tensor) -> np.ndarray:
        size = len(x_att) if not chunk else int(chunk)
        with torch.no_grad():
            return np.concatenate([allocation(model(x_att[i:i + size])).cpu().numpy()
                                   for i in range(0, len(x_att), size)])

    def hard_loss(x_att: Tensor, perturbed: bool) -> tuple[np.ndarray, np.ndarray]:
        """Per-point deferral loss and allocation at x_att (g's cost re-evaluated there if it sees x′)."""
        pi = alloc(x_att)
        c = costs_np.copy()
        if perturbed and agents_see_perturbation:
            c[:, 0] = main_costs_at(prep, x_att, te)
        return c[np.arange(len(pi)), pi], pi

    loss_clean, pi_clean = hard_loss(x, False)
    metrics: dict[str, Any] = {"def_loss_clean": float(loss_clean.mean())}
    points: dict[str, np.ndarray] = {"def_loss_clean": loss_clean}
    for j in range(n_agents):
        metrics[f"alloc_rate_{j}"] = float((pi_clean == j).mean())
    worst, bitwise_all = 0.0, True
    claim_eps = float(attack["claim_eps"])
    eps_grid = [float(e) for e in attack["eps_grid"]]
    for eps in sorted(set(eps_grid) | {claim_eps}):
        x_adv, viol, bitwise = _chunked_attack(model, x, lambda s: attack_objective("untargeted", costs=costs[s]),
                                               eps, steps, af, clip, rand_init, gen, chunk)
        worst, bitwise_all = max(worst, viol), bitwise_all and bitwise
        loss_adv, pi_adv = hard_loss(x_adv, True)
        metrics[f"def_loss_adv_{eps_key(eps)}"] = float(loss_adv.mean())
        points[f"def_loss_adv_{eps_key(eps)}"] = loss_adv
        if eps == claim_eps:
            for j in range(n_agents):
                metrics[f"adv_alloc_rate_{j}"] = float((pi_adv == j).mean())
    for t in range(n_agents):
        x_adv, viol, _ = _chunked_attack(model, x, lambda s: attack_objective("targeted", target=t), claim_eps,
                                         steps, af, clip, rand_init, gen, chunk)
        worst = max(worst, viol)
        pi_adv = alloc(x_adv)
        eligible = pi_clean != t
        success = eligible & (pi_adv == t)
        points[f"targeted_eligible_{t}"] = eligible.astype(np.float64)
        points[f"targeted_success_{t}"] = success.astype(np.float64)
        metrics[f"targeted_success_{t}"] = float(success.sum() / eligible.sum()) if eligible.any() else float("nan")
    metrics["ball_violation"] = worst
    metrics["eps0_bitwise"] = bool(bitwise_all) if 0.0 in eps_grid else None
    return {"metrics": metrics, "points": points}


def costliest_expert(beta: list[float]) -> int:
    """Agent index of the expert with the largest fee (ties → lowest index): 1 + argmax β."""
    return 1 + int(np.argmax(np.asarray(beta)))
