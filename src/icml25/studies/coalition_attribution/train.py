"""Full-batch training of the toy's MLPs on all 2**n inputs (Sec. 5, Table 4 setup; settings are [R])."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from .model import StackedMLP


def fit_mlps(x: np.ndarray, y: np.ndarray, settings: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Train one MLP per row of ``y`` on the shared inputs ``x`` (float32 training [R]; the trained network is
    then evaluated in float64).

    x: (B, n) float; y: (K, B) targets. settings: ``hidden``, ``layers``, ``lr``, ``epochs``, ``log_every``, ``lr_decay``
    ('none' or 'linear' to 0 at the last epoch).
    Returns ``pred`` (K, B) float64 predictions after training, ``rel_mse`` (K,) = MSE / Var(y_k) (Var floored at
    1e-12), ``curve_step`` (T,) and ``curve_loss`` (T, K) per-network MSE logged every ``log_every`` epochs."""
    gen = torch.Generator().manual_seed(int(seed))
    xt = torch.as_tensor(np.asarray(x), dtype=torch.float32)
    yt = torch.as_tensor(np.asarray(y), dtype=torch.float32)
    model = StackedMLP(yt.shape[0], xt.shape[1], int(settings["hidden"]), int(settings["layers"]), generator=gen)
    opt = torch.optim.Adam(model.parameters(), lr=float(settings["lr"]))
    epochs, every = int(settings["epochs"]), int(settings["log_every"])
    decay = settings.get("lr_decay", "none")
    if decay not in ("none", "linear"):
        raise ValueError(f"mlp.lr_decay must be 'none' or 'linear', got {decay!r}")
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, (lambda e: 1.0 - e / epochs) if decay == "linear" else (lambda e: 1.0))
    steps, losses = [], []
    for epoch in range(epochs):
        opt.zero_grad(set_to_none=True)
        per_model = ((model(xt) - yt) ** 2).mean(dim=1)
        per_model.sum().backward()
        opt.step()
        sched.step()
        if epoch % every == 0:
            steps.append(epoch)
            losses.append(per_model.detach().numpy().copy())
    model = model.double()  # the game is read off the trained network in float64
    with torch.no_grad():
        pred = model(xt.double()).numpy()
    mse = ((pred - np.asarray(y)) ** 2).mean(axis=1)
    rel = mse / np.maximum(np.asarray(y).var(axis=1), 1e-12)
    steps.append(epochs)
    losses.append(mse)
    return {"pred": pred, "rel_mse": rel, "curve_step": np.asarray(steps), "curve_loss": np.stack(losses),
            "model": model}
