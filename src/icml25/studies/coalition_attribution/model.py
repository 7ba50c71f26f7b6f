"""K independent ReLU MLPs trained side by side (one per target function of the toy, Sec. 5 of Zheng, Deng &
Zhang, ICML 2025). Each network has its own weights (stacked on a leading axis), so training the sum of the K
per-network losses with Adam is exactly K independent trainings (Adam is elementwise). [R]: depth and width."""
from __future__ import annotations

import math

import torch
from torch import nn


class StackedMLP(nn.Module):
    """K MLPs n_in -> hidden x layers (ReLU) -> 1. forward(x (B, n_in)) -> (K, B)."""

    def __init__(self, n_models: int, n_in: int, hidden: int = 100, layers: int = 3,
                 generator: torch.Generator | None = None) -> None:
        super().__init__()
        dims = [n_in] + [hidden] * layers + [1]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for d_in, d_out in zip(dims[:-1], dims[1:]):
            bound = 1.0 / math.sqrt(d_in)  # torch.nn.Linear's default initialisation range
            self.weights.append(nn.Parameter(
                torch.empty(n_models, d_in, d_out, dtype=torch.float32).uniform_(-bound, bound, generator=generator)))
            self.biases.append(nn.Parameter(
                torch.empty(n_models, 1, d_out, dtype=torch.float32).uniform_(-bound, bound, generator=generator)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.unsqueeze(0).expand(self.weights[0].shape[0], -1, -1)
        last = len(self.weights) - 1
        for k, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = torch.baddbmm(b, h, w)
            if k < last:
                h = torch.relu(h)
        return h.squeeze(-1)
