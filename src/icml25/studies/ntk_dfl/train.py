"""Baselines: local SGD on each client, then the same synchronous neighbourhood averaging as NTK-DFL.

D-PSGD (1 step, lr 0.1, batch 10), DFedAvg (20 steps, lr 0.1, batch 25) and DFedAvgM (20 steps, lr 0.01, batch 50,
momentum 0.9) follow the official NTK-DFL baseline configurations. Minibatches are drawn epoch-wise (a fresh
permutation of the client's samples each pass) from default_rng([seed, round, client]); the momentum buffer starts
at zero every round. A client with fewer samples than the batch uses all of them.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np
import torch
from torch import nn

from .method import FLOAT_BYTES, cross_entropy, mix, neighbourhood
from .model import forward


def minibatches(n: int, batch: int, steps: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``steps`` index batches of size min(batch, n), taken in order from successive permutations of 0..n-1."""
    b = min(batch, n)
    out, perm, pos = [], rng.permutation(n), 0
    for _ in range(steps):
        if pos + b > n:
            perm, pos = rng.permutation(n), 0
        out.append(perm[pos:pos + b])
        pos += b
    return out


def local_sgd(model: nn.Module, w: torch.Tensor, X: torch.Tensor, Y: torch.Tensor, steps: int, lr: float,
              batch: int, momentum: float, rng: np.random.Generator) -> torch.Tensor:
    """``steps`` SGD steps (heavy-ball ``momentum``) on mean cross-entropy from flat weights w (P,); Y one-hot."""
    w = w.detach().clone()
    buf = torch.zeros_like(w)
    for idx in minibatches(X.shape[0], batch, steps, rng):
        wg = w.requires_grad_(True)
        loss = cross_entropy(forward(model, wg, X[idx]), Y[idx])
        (g,) = torch.autograd.grad(loss, wg)
        with torch.no_grad():
            buf = momentum * buf + g if momentum else g
            w = (wg - lr * buf).detach()
    return w


def baseline_round(weights: torch.Tensor, data: Sequence[tuple[torch.Tensor, torch.Tensor]], graph: nx.Graph,
                   model: nn.Module, opt: Mapping[str, Any], seed: int, r: int) -> tuple[torch.Tensor, dict]:
    """One round of a local-update baseline: local SGD per client (``opt``: local_steps, lr, batch, momentum),
    then synchronous averaging on ``graph``. data[k] = (X_k, Y_k one-hot). Returns (K, P) and info with
    ``bytes`` (each client receives its neighbours' weights: |N_k|·P floats)."""
    K = weights.shape[0]
    local = torch.empty_like(weights)
    for k in range(K):
        rng = np.random.default_rng([int(seed), int(r), k])
        local[k] = local_sgd(model, weights[k], data[k][0], data[k][1], int(opt["local_steps"]), float(opt["lr"]),
                             int(opt["batch"]), float(opt.get("momentum", 0.0)), rng)
    floats = sum(len(neighbourhood(graph, k)) - 1 for k in range(K)) * weights.shape[1]
    return mix(local, graph), {"bytes": FLOAT_BYTES * floats}
