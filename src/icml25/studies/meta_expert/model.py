"""The network: a small CNN with four feature taps (the offline stand-in for WRN-28-2 [R]), K linear experts on the
last pooled feature (optionally with head/medium/tail BN branches), and, for Meta-Expert, the membership estimator.

Backbone (default widths (8, 8, 16, 32)): stem 1→ch0 (3×3 conv–BN–ReLU, a 2×2 max-pool when ``stem_pool``),
then three stages ch_{j−1}→ch_j (3×3 conv–BN–ReLU–2×2 max-pool). f_j = global average of tap j (B, ch_j):
f_0 after the stem, f_1..f_3 after the stages; the experts read f_3 (or its BN branches).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from .method import N_EXPERTS, MembershipEstimator


def _block(c_in: int, c_out: int, pool: bool) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out),
                               nn.ReLU(inplace=True)]
    if pool:
        layers.append(nn.MaxPool2d(2))
    return nn.Sequential(*layers)


class SmallCNN(nn.Module):
    """Input (B, 1, H, W) → list of four feature maps (stem, stage 1, 2, 3)."""

    def __init__(self, widths: Sequence[int] = (8, 8, 16, 32), stem_pool: bool = True, in_channels: int = 1):
        super().__init__()
        if len(widths) != 4:
            raise ValueError(f"SmallCNN: widths needs 4 entries (stem, 3 stages), got {widths}")
        self.widths = tuple(int(w) for w in widths)
        self.stem = _block(in_channels, self.widths[0], stem_pool)
        self.stages = nn.ModuleList(_block(self.widths[j], self.widths[j + 1], True) for j in range(3))

    def forward(self, x: Tensor) -> list[Tensor]:
        maps = [self.stem(x.contiguous(memory_format=torch.channels_last))]  # ~1.5x faster convs on CPU
        for stage in self.stages:
            maps.append(stage(maps[-1]))
        return maps


class SSLNet(nn.Module):
    """Backbone + ``n_experts`` linear experts (+ the membership estimator when ``dea``).

    ``forward(x)`` returns a dict: ``feats`` (4 pooled features), ``logits`` (K, B, C) the experts' logits
    (mean over branches), ``branches`` (K, 3, B, C) per-branch logits (H, M, T; equal to ``logits`` repeated
    without ``bn_branches``), and with ``dea`` also ``o`` (B, 3) and ``w`` (B, 3) (needs ``log_prior``, ``taus``).
    """

    def __init__(self, num_classes: int = 10, widths: Sequence[int] = (8, 8, 16, 32), n_experts: int = 1, *,
                 stem_pool: bool = True, bn_branches: bool = False, dea: bool = False, fusion: bool = True,
                 cut1: int = 2, cut2: int = 4, dea_hidden: Sequence[int] = (128, 64)):
        super().__init__()
        if dea and n_experts != N_EXPERTS:
            raise ValueError(f"SSLNet: the membership estimator needs {N_EXPERTS} experts, got {n_experts}")
        self.backbone = SmallCNN(widths, stem_pool)
        ch3 = self.backbone.widths[3]
        self.num_classes, self.n_experts, self.bn_branches = num_classes, n_experts, bn_branches
        self.experts = nn.ModuleList(nn.Linear(ch3, num_classes) for _ in range(n_experts))
        self.branch_bns = nn.ModuleList(nn.BatchNorm2d(ch3) for _ in range(3)) if bn_branches else None
        self.estimator = (MembershipEstimator(self.backbone.widths, num_classes, cut1, cut2, fusion=fusion,
                                              hidden=dea_hidden) if dea else None)

    def forward(self, x: Tensor, log_prior: Tensor | None = None, taus: Tensor | None = None) -> dict[str, Tensor]:
        maps = self.backbone(x)
        feats = [m.mean(dim=(2, 3)) for m in maps]
        if self.branch_bns is not None:  # H/M/T BN branches on the last map, each pooled and fed to every expert
            pooled = [bn(maps[-1]).mean(dim=(2, 3)) for bn in self.branch_bns]
            branches = torch.stack([torch.stack([head(f) for f in pooled]) for head in self.experts])
            logits = branches.mean(dim=1)
        else:
            logits = torch.stack([head(feats[-1]) for head in self.experts])
            branches = logits.unsqueeze(1).expand(-1, 3, -1, -1)
        out = {"feats": feats, "logits": logits, "branches": branches}
        if self.estimator is not None:
            if log_prior is None or taus is None:
                raise ValueError("SSLNet with dea: forward needs log_prior and taus")
            out["o"], out["w"] = self.estimator(feats, logits, log_prior, taus)
        return out


@torch.no_grad()
def ema_update(ema: nn.Module, model: nn.Module, decay: float) -> None:
    """Exponential moving average of the parameters (ema ← d·ema + (1−d)·θ); buffers (BN statistics) copied."""
    for pe, pm in zip(ema.parameters(), model.parameters()):
        pe.mul_(decay).add_(pm.detach(), alpha=1.0 - decay)
    for be, bm in zip(ema.buffers(), model.buffers()):
        be.copy_(bm)
