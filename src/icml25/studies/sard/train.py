"""Training of the rejector for one arm (only the rejector is learned; the agents are fixed).

Arms (the loss is [R], see :mod:`.method`):

* ``clean``: the two-stage comp-sum surrogate mean Σ_j τ_j Φ_ν(r, x, j) (``clean_l2d``);
* ``adversarial``: SARD. With ``surrogate: smooth`` (the default of ``sard``) the smooth upper bound
  mean Σ_j τ_j [Φ_ν(r(x)/ρ, j) + w κ ‖Δ_j(x′) − Δ_j(x)‖], x′ from PGD on the penalty (one point per agent by
  default, ``inner``); with ``surrogate: ramp``
  mean Σ_j τ_j Φ^ρ_ν(r, x′, j) with x′ from PGD on the smooth comp-sum; with ρ None, Φ_ν at x′ (``sard_ce``).

Adam, minibatches drawn by ``torch.randperm`` with a generator seeded by the run seed; no early stopping (the last
epoch is evaluated). Per epoch: the mean training surrogate and the validation deferral loss, clean and under the
untargeted attack at the training budget.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from .method import attack_objective, clean_loss, deferral_loss, pgd_attack, sard_loss


def batch_loss(model: nn.Module, xb: Tensor, cb: Tensor, arm: Mapping[str, Any], train: Mapping[str, Any],
               clip: tuple[float, float] | None, generator: torch.Generator, warm: bool = False) -> Tensor:
    """The arm's training loss on one batch (scalar). ``warm``: an epoch of the optional ρ warm-up, in which an
    adversarial arm evaluates the comp-sum Φ_ν at x′ instead of the ramp loss (``rho_warmup_epochs``, [R], off by
    default)."""
    if arm["loss"] == "clean":
        return clean_loss(model, xb, cb, nu=float(arm["nu"]))
    if arm["loss"] == "adversarial":
        rho = None if (arm["rho"] is None or warm) else float(arm["rho"])
        return sard_loss(model, xb, cb, float(train["eps"]), int(train["steps"]), nu=float(arm["nu"]), rho=rho,
                         inner=arm["inner"], surrogate=arm["surrogate"],
                         penalty_weight=float(arm["penalty_weight"]), penalty_norm=arm["penalty_norm"], clip=clip,
                         generator=generator)
    raise ValueError(f"train: arm loss must be 'clean' or 'adversarial', got {arm['loss']!r}")


def _chunks(n: int, size: int | None) -> list[slice]:
    """Consecutive slices of range(n) of at most ``size`` (None: one slice)."""
    size = n if not size else int(size)
    return [slice(i, min(i + size, n)) for i in range(0, max(n, 1), size)]


@torch.no_grad()
def _clean_def_loss(model: nn.Module, x: Tensor, c: Tensor, chunk: int | None = None) -> float:
    return float(torch.cat([deferral_loss(model(x[s]), c[s]) for s in _chunks(len(x), chunk)]).mean())


def _adv_def_loss(model: nn.Module, x: Tensor, c: Tensor, eps: float, steps: int,
                  clip: tuple[float, float] | None, generator: torch.Generator, chunk: int | None = None) -> float:
    losses = []
    for s in _chunks(len(x), chunk):
        x_adv = pgd_attack(model, x[s], attack_objective("untargeted", costs=c[s]), eps, steps, clip=clip,
                           generator=generator)
        with torch.no_grad():
            losses.append(deferral_loss(model(x_adv), c[s]))
    return float(torch.cat(losses).mean())


def train_rejector(model: nn.Module, x_train: Tensor, c_train: Tensor, x_val: Tensor, c_val: Tensor,
                   arm: Mapping[str, Any], train: Mapping[str, Any], epochs: int, seed: int,
                   clip: tuple[float, float] | None) -> dict[str, list[float]]:
    """Train ``model`` in place. x (n, d) float32, c (n, J+1) costs in [0, 1].

    Random streams: minibatch order ``torch.Generator(seed)``; training PGD starts ``torch.Generator(seed + 1)``;
    validation attack starts ``torch.Generator(seed + 2)``. Returns per-epoch curves ``epoch``,
    ``train_surrogate``, ``val_def_loss_clean``, ``val_def_loss_adv``."""
    if train.get("optimizer", "adam") != "adam":
        raise ValueError(f"train.optimizer: only 'adam' is implemented, got {train['optimizer']!r}")
    opt = torch.optim.Adam(model.parameters(), lr=float(train["lr"]))
    g_batch = torch.Generator().manual_seed(seed)
    g_pgd = torch.Generator().manual_seed(seed + 1)
    g_val = torch.Generator().manual_seed(seed + 2)
    bs, n = int(train["batch_size"]), x_train.shape[0]
    warmup = int(arm.get("rho_warmup_epochs", 0))
    curves: dict[str, list[float]] = {"epoch": [], "train_surrogate": [], "val_def_loss_clean": [],
                                      "val_def_loss_adv": []}
    for epoch in range(1, epochs + 1):
        model.train()
        perm = torch.randperm(n, generator=g_batch)
        total, count = 0.0, 0
        for start in range(0, n, bs):
            b = perm[start:start + bs].to(x_train.device)
            loss = batch_loss(model, x_train[b], c_train[b], arm, train, clip, g_pgd, epoch <= warmup)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(b)
            count += len(b)
        model.eval()
        curves["epoch"].append(epoch)
        curves["train_surrogate"].append(total / count)
        chunk = train.get("val_batch_size")
        curves["val_def_loss_clean"].append(_clean_def_loss(model, x_val, c_val, chunk))
        curves["val_def_loss_adv"].append(_adv_def_loss(model, x_val, c_val, float(train["eps"]),
                                                        int(train["val_steps"]), clip, g_val, chunk))
    return curves
