"""Networks of the lfss study (Sec. 3.1 of the paper, BYOL/ProPos-style).

Online encoder g_q + projector P_q, predictor p; target g_k, P_k = EMA of the online pair; "old" network o = a
frozen copy of (g_k, P_k) taken at every epoch boundary. The encoder here is the small digit CNN of the offline
scales [R]: two blocks of 3x3 conv (padding 1), BatchNorm, ReLU, 2x2 max-pool, then global average pooling
(``channels[-1]``-d features). Heads are Linear-BN-ReLU-Linear (hidden h, output D).
"""
from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from torch import nn


def small_cnn(channels: Sequence[int] = (16, 32), in_channels: int = 1) -> nn.Sequential:
    """The [R] encoder: per width c a block conv3x3(c)-BN-ReLU-maxpool2; then global average pool -> (B, c_last)."""
    layers: list[nn.Module] = []
    c_in = in_channels
    for c in channels:
        layers += [nn.Conv2d(c_in, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True),
                   nn.MaxPool2d(2)]
        c_in = c
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    return nn.Sequential(*layers)


def mlp_head(d_in: int, hidden: int, d_out: int) -> nn.Sequential:
    """Linear-BN-ReLU-Linear (projector and predictor of the paper)."""
    return nn.Sequential(nn.Linear(d_in, hidden), nn.BatchNorm1d(hidden), nn.ReLU(inplace=True),
                         nn.Linear(hidden, d_out))


class LFSSNet(nn.Module):
    """Online (``encoder_q``, ``projector_q``), ``predictor``, target (``encoder_k``, ``projector_k``) and the
    frozen previous-epoch ``old`` network.

    The predictor's linear layers start from N(0, 0.01²) weights and zero biases (as released). The old
    network's BatchNorm layers have momentum 0, so forward passes in train mode (batch statistics, as in
    training) never change its snapshot of running statistics.
    """

    def __init__(self, channels: Sequence[int] = (16, 32), hidden: int = 256, dim: int = 64, in_channels: int = 1):
        super().__init__()
        self.encoder_q = small_cnn(channels, in_channels)
        self.projector_q = mlp_head(channels[-1], hidden, dim)
        self.predictor = mlp_head(dim, hidden, dim)
        for m in self.predictor.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.01)
                nn.init.zeros_(m.bias)
        self.encoder_k = copy.deepcopy(self.encoder_q)
        self.projector_k = copy.deepcopy(self.projector_q)
        for p in [*self.encoder_k.parameters(), *self.projector_k.parameters()]:
            p.requires_grad_(False)
        self.old = self._frozen_copy()

    # ------------------------------------------------------------------------------------------ sub-networks
    def online(self, x: torch.Tensor) -> torch.Tensor:
        """q = P_q(g_q(x)), (B, D)."""
        return self.projector_q(self.encoder_q(x))

    def target(self, x: torch.Tensor) -> torch.Tensor:
        """k = P_k(g_k(x)), (B, D); no gradient."""
        with torch.no_grad():
            return self.projector_k(self.encoder_k(x))

    def old_embed(self, x: torch.Tensor) -> torch.Tensor:
        """o(x), (B, D), from the previous-epoch snapshot; no gradient."""
        with torch.no_grad():
            return self.old(x)

    def _frozen_copy(self) -> nn.Sequential:
        old = copy.deepcopy(nn.Sequential(self.encoder_k, self.projector_k))
        for p in old.parameters():
            p.requires_grad_(False)
        for m in old.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.momentum = 0.0
        old.train(self.training)
        return old

    @torch.no_grad()
    def refresh_old(self) -> None:
        """o ← copy of the current target (end of every epoch)."""
        self.old = self._frozen_copy()

    @torch.no_grad()
    def ema_update(self, m: float) -> None:
        """θ_k ← m θ_k + (1 - m) θ_q for the encoder and projector parameters (buffers stay the target's own)."""
        q = [*self.encoder_q.parameters(), *self.projector_q.parameters()]
        k = [*self.encoder_k.parameters(), *self.projector_k.parameters()]
        torch._foreach_mul_(k, m)
        torch._foreach_add_(k, q, alpha=1.0 - m)

    @torch.no_grad()
    def features(self, x: torch.Tensor, which: str = "target", batch: int = 1024) -> torch.Tensor:
        """Clean-view features in eval mode (running BN statistics), (N, D): ``target`` P_k(g_k(x)),
        ``old`` o(x) or ``online`` P_q(g_q(x)). The module's train/eval mode is restored afterwards."""
        net = {"target": nn.Sequential(self.encoder_k, self.projector_k), "old": self.old,
               "online": nn.Sequential(self.encoder_q, self.projector_q)}[which]
        was = net.training
        net.eval()
        try:
            return torch.cat([net(x[i:i + batch]) for i in range(0, len(x), batch)])
        finally:
            net.train(was)
