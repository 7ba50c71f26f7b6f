"""Training of one forecaster (paper Sec. 3, loss; TSLib training conventions).

Loss = MSE(y_hat, y) + lambda * mean(z^2/2 - log|dz/dx~|) (the Gaussianisation term, [R]; lambda = 0 for RevIN and
``mof_linear_nonll``). Adam, batch 32, at most ``epochs`` epochs, early stopping on validation MSE with a patience,
and the best-validation weights restored at the end.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from .method import gaussian_nll
from .model import MoFForecaster


def loss_terms(model: MoFForecaster, x: torch.Tensor, y: torch.Tensor, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(total loss, MSE) of a batch; x (B, L, C), y (B, H, C)."""
    parts = model.parts(x)
    mse = ((parts["y_hat"] - y) ** 2).mean()
    if lam and model.flow is not None:
        return mse + lam * gaussian_nll(parts["z"], parts["logdet"]), mse
    if model.norm is not None:  # Dish-TS / SAN / FAN: their own statistics or non-stationary-part loss
        return mse + model.aux_loss(parts, y), mse
    return mse, mse


def device_of(name: str) -> torch.device:
    """The torch device ``cpu`` or ``cuda``; asking for CUDA on a machine without it is a clear error."""
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("train.device: cuda requested but torch sees no CUDA device (the paper scale is meant "
                           "for GPU nodes; set train.device: cpu to run on CPU)")
    if name not in ("cpu", "cuda"):
        raise ValueError(f"train.device: expected cpu | cuda, got {name!r}")
    return torch.device(name)


@torch.no_grad()
def predict(model: MoFForecaster, x: np.ndarray | torch.Tensor, batch_size: int = 512,
            with_norm: bool = False) -> tuple[np.ndarray, ...]:
    """(y_hat (N, H, C), backbone inputs z (N, C, L)) of every window, in eval mode, float64 numpy, computed on
    the model's device; ``with_norm`` adds the instance-normalised inputs x~ (N, C, L)."""
    model.eval()
    device = next(model.parameters()).device
    x = torch.as_tensor(x, dtype=torch.float32)
    keys = ("y_hat", "z", "x_norm") if with_norm else ("y_hat", "z")
    out: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for i in range(0, len(x), batch_size):
        parts = model.parts(x[i:i + batch_size].to(device))
        for k in keys:
            out[k].append(parts[k].double().cpu().numpy())
    return tuple(np.concatenate(out[k]) for k in keys)


def mse_per_window(y_hat: np.ndarray, y: np.ndarray) -> np.ndarray:
    """MSE of every window averaged over horizon and channels: (N,)."""
    return ((np.asarray(y_hat) - np.asarray(y)) ** 2).mean(axis=(1, 2))


def train_model(model: MoFForecaster, train: tuple[np.ndarray, np.ndarray], val: tuple[np.ndarray, np.ndarray],
                opt: Mapping[str, Any], lam: float, seed: int) -> dict[str, Any]:
    """Train ``model`` in place on float32 windows; returns ``curves`` (per epoch ``train/mse``, ``val/mse``,
    ``train/grad_norm_var``: the variance of the per-step gradient norms), ``best_epoch`` and ``epochs_run``.

    ``opt`` keys: ``lr``, ``batch_size``, ``epochs``, ``patience``, ``windows_per_epoch`` (None = every training
    window each epoch; else a fresh random subset of that size per epoch), optional ``device`` (cpu | cuda; the
    model is moved there). Batches are drawn on the CPU with ``torch.Generator(seed)``."""
    gen = torch.Generator().manual_seed(seed)
    device = device_of(opt.get("device", "cpu"))
    model.to(device)
    xtr, ytr = (torch.as_tensor(a, dtype=torch.float32).to(device) for a in train)
    xva, yva = val
    optim = torch.optim.Adam(model.parameters(), lr=opt["lr"])
    curves: dict[str, list[float]] = {"train/mse": [], "val/mse": [], "train/grad_norm_var": []}
    best, best_state, best_epoch, bad = np.inf, copy.deepcopy(model.state_dict()), 0, 0
    n_use = len(xtr) if not opt.get("windows_per_epoch") else min(int(opt["windows_per_epoch"]), len(xtr))
    bs = int(opt["batch_size"])
    for epoch in range(int(opt["epochs"])):
        model.train()
        order = torch.randperm(len(xtr), generator=gen)[:n_use]
        losses, norms = [], []
        for i in range(0, n_use, bs):
            idx = order[i:i + bs].to(device)
            loss, mse = loss_terms(model, xtr[idx], ytr[idx], lam)
            optim.zero_grad(set_to_none=True)
            loss.backward()
            norms.append(float(nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])))
            optim.step()
            losses.append(float(mse.detach()))
        val_mse = float(mse_per_window(predict(model, xva)[0], yva).mean())
        curves["train/mse"].append(float(np.mean(losses)))
        curves["val/mse"].append(val_mse)
        curves["train/grad_norm_var"].append(float(np.var(norms)))
        if val_mse < best:
            best, best_state, best_epoch, bad = val_mse, copy.deepcopy(model.state_dict()), epoch, 0
        else:
            bad += 1
            if bad >= int(opt["patience"]):
                break
    model.load_state_dict(best_state)
    return {"curves": curves, "best_epoch": best_epoch, "epochs_run": len(curves["val/mse"]), "best_val_mse": best}
