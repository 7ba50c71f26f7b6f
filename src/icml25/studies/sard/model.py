"""The rejector r_θ: X → ℝ^{J+1} of the sard study: a ReLU MLP (64→128→128→3 on digits, 10→64→64→3 on diabetes).

The agents are fixed; only this network is trained. Initialisation is torch's default for ``nn.Linear`` drawn under
``torch.manual_seed(seed)`` inside a forked RNG state, so every arm of a seed starts from the same weights and the
global RNG is left untouched.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def make_rejector(d_in: int, hidden: Sequence[int], n_agents: int, seed: int) -> nn.Sequential:
    """MLP d_in → hidden[0] → … → n_agents with ReLU between layers; deterministic in ``seed``."""
    if d_in < 1 or n_agents < 2 or any(h < 1 for h in hidden):
        raise ValueError(f"make_rejector: need d_in >= 1, n_agents >= 2, hidden widths >= 1; got {d_in}, "
                         f"{n_agents}, {list(hidden)}")
    widths = [d_in, *hidden, n_agents]
    layers: list[nn.Module] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
            layers.append(nn.Linear(a, b))
            if i < len(widths) - 2:
                layers.append(nn.ReLU())
    return nn.Sequential(*layers)
