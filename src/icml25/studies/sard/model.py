"""The rejector r_θ: X → ℝ^{J+1} of the sard study: a ReLU MLP (64→128→128→3 on digits, 10→64→64→3 on diabetes;
8→hidden→3 on California Housing) or, on the image datasets of the paper scale (CIFAR-10, VOC 2007), a ResNet-18
(:class:`ResNet18`, also the architecture of the image main models g of :mod:`.agents`).

The agents are fixed; only this network is trained. Initialisation is torch's default for ``nn.Linear`` drawn under
``torch.manual_seed(seed)`` inside a forked RNG state, so every arm of a seed starts from the same weights and the
global RNG is left untouched.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

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


# ------------------------------------------------------------------------------- paper scale: ResNet-18 family


class _Block(nn.Module):
    """The basic residual block of ResNet-18 (He et al. 2016): two 3×3 conv + BN, identity or 1×1 projection."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.short = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.short = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.short(x))


class ResNet18(nn.Module):
    """ResNet-18 in its CIFAR form (3×3 stride-1 stem, no max-pool; stages of 2 blocks at widths w, 2w, 4w, 8w,
    strides 1, 2, 2, 2; global average pool; linear head). ``width`` = 64 is the standard network (11.2 M
    parameters at 10 outputs); the rehearsal uses a few channels. Input: images flattened to (n, C·H·W) in [0, 1]
    (so the attacks and losses of :mod:`.method` treat them like any feature vector) or (n, C, H, W).
    Output: (n, n_out) scores."""

    def __init__(self, image_shape: Sequence[int], n_out: int, width: int = 64):
        super().__init__()
        c, h, w = (int(v) for v in image_shape)
        if min(c, h, w, n_out, width) < 1:
            raise ValueError(f"ResNet18: need a positive image shape, n_out and width; got {list(image_shape)}, "
                             f"{n_out}, {width}")
        self.image_shape = (c, h, w)
        self.stem = nn.Sequential(nn.Conv2d(c, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        blocks, c_in = [], width
        for i, stride in enumerate((1, 2, 2, 2)):
            c_out = width * 2 ** i
            blocks += [_Block(c_in, c_out, stride), _Block(c_out, c_out, 1)]
            c_in = c_out
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(c_in, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim == 2:
            x = x.view(len(x), *self.image_shape)
        z = self.blocks(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(z, 1), 1))


def make_resnet18(image_shape: Sequence[int], n_out: int, width: int, seed: int) -> ResNet18:
    """:class:`ResNet18` with torch's default initialisation drawn under ``torch.manual_seed(seed)`` in a forked
    RNG state (deterministic in ``seed``; the global RNG is untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ResNet18(image_shape, n_out, width)


def build_rejector(spec: Mapping[str, Any], d_in: int, n_agents: int, seed: int) -> nn.Module:
    """The rejector a dataset section asks for: ``spec["rejector"]`` absent or ``"mlp"`` → :func:`make_rejector`
    with ``spec["hidden"]``; ``"resnet18"`` → :func:`make_resnet18` with ``spec["width"]`` on
    ``spec["image_shape"]`` (whose product must be ``d_in``)."""
    kind = spec.get("rejector", "mlp")
    if kind == "mlp":
        return make_rejector(d_in, spec["hidden"], n_agents, seed)
    if kind == "resnet18":
        shape = [int(v) for v in spec["image_shape"]]
        if int(np.prod(shape)) != d_in:
            raise ValueError(f"build_rejector: image_shape {shape} does not match {d_in} input features")
        return make_resnet18(shape, n_agents, int(spec["width"]), seed)
    raise ValueError(f"build_rejector: unknown rejector {kind!r} (mlp or resnet18)")
