"""Networks of the lfss study (Sec. 3.1 of the paper, BYOL/ProPos-style).

Online encoder g_q + projector P_q, predictor p; target g_k, P_k = EMA of the online pair; "old" network o = a
frozen copy of (g_k, P_k) taken at every epoch boundary. Encoders (``model.backbone``):

* ``small_cnn`` -- the small digit CNN of the offline scales [R]: blocks of 3x3 conv (padding 1), BatchNorm, ReLU,
  2x2 max-pool, then global average pooling (``channels[-1]``-d features).
* ``resnet18`` / ``resnet34`` / ``resnet50`` -- the paper's backbones (ResNet-18 for CIFAR-10/20 and STL-10,
  ResNet-34/50 for the ImageNet subsets; He et al., *Deep Residual Learning for Image Recognition*, CVPR 2016),
  written here in plain torch, without the classification layer (512-d features for 18/34, 2048-d for 50). Stem
  ``cifar``: one 3x3 stride-1 convolution and no max-pool (the usual form for 32 and 96 px inputs); stem
  ``imagenet``: 7x7 stride-2 convolution and 3x3 stride-2 max-pool. Which stem the paper used for the ImageNet
  subsets is not stated [R: ``model.stem``].

Heads are Linear-BN-ReLU-Linear (hidden h, output D).
"""
from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from torch import nn


def max_pool_2x2(x: torch.Tensor) -> torch.Tensor:
    """2x2 stride-2 max-pool (floor mode) of ``x (..., H, W)`` as three element-wise maxima of strided views: the
    same floats as ``torch.max_pool2d(x, 2)`` (a max is exact), ~7x faster on CPU for the small digit maps. No
    indices are recorded, so it serves only passes without a gradient (NaN propagates as in ``max_pool2d``)."""
    h, w = x.shape[-2] // 2 * 2, x.shape[-1] // 2 * 2
    return torch.maximum(torch.maximum(x[..., 0:h:2, 0:w:2], x[..., 0:h:2, 1:w:2]),
                         torch.maximum(x[..., 1:h:2, 0:w:2], x[..., 1:h:2, 1:w:2]))


class MaxPool2x2(nn.Module):
    """``nn.MaxPool2d(2)`` (kernel 2, stride 2, floor mode) with the same outputs and gradients: ``max_pool2d``
    itself when a gradient is recorded (its backward routes to the first maximum of each window), else the faster
    :func:`max_pool_2x2` (the target, old-network and feature passes, under ``no_grad``). No parameters or buffers,
    so state dicts are those of ``nn.MaxPool2d``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and x.requires_grad:
            return nn.functional.max_pool2d(x, 2)
        return max_pool_2x2(x)


def small_cnn(channels: Sequence[int] = (16, 32), in_channels: int = 1) -> nn.Sequential:
    """The [R] encoder: per width c a block conv3x3(c)-BN-ReLU-maxpool2; then global average pool -> (B, c_last).
    The max-pool is :class:`MaxPool2x2` (``nn.MaxPool2d(2)``'s numbers, computed faster)."""
    layers: list[nn.Module] = []
    c_in = in_channels
    for c in channels:
        layers += [nn.Conv2d(c_in, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True),
                   MaxPool2x2()]
        c_in = c
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with BatchNorm; identity shortcut, or 1x1 conv + BN when the shape changes."""

    expansion = 1

    def __init__(self, c_in: int, c: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.shortcut = _shortcut(c_in, c * self.expansion, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride), 1x1 expand (x4), each with BatchNorm; projection shortcut when the
    shape changes."""

    expansion = 4

    def __init__(self, c_in: int, c: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.conv3 = nn.Conv2d(c, c * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c * self.expansion)
        self.shortcut = _shortcut(c_in, c * self.expansion, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = torch.relu(self.bn2(self.conv2(out)))
        return torch.relu(self.bn3(self.conv3(out)) + self.shortcut(x))


def _shortcut(c_in: int, c_out: int, stride: int) -> nn.Module:
    if stride == 1 and c_in == c_out:
        return nn.Identity()
    return nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))


#: Block type and blocks per stage of each ResNet (He et al. 2016, Table 1).
RESNETS: dict[str, tuple[type[nn.Module], tuple[int, int, int, int]]] = {
    "resnet18": (BasicBlock, (2, 2, 2, 2)), "resnet34": (BasicBlock, (3, 4, 6, 3)),
    "resnet50": (Bottleneck, (3, 4, 6, 3))}


def scaled(channels: int, width: float) -> int:
    """``channels`` x ``width`` rounded, at least 1 (``model.width`` 1 = the paper's ResNet; the rehearsal runs the
    same class at a fraction of the width on CPU)."""
    if not width > 0:
        raise ValueError(f"lfss: model.width must be positive, got {width}")
    return max(1, int(round(channels * width)))


def resnet(name: str = "resnet18", in_channels: int = 3, stem: str = "cifar", width: float = 1.0) -> nn.Sequential:
    """ResNet encoder without the classifier: ``(B, in_channels, H, W) -> (B, 512)`` (18, 34) or ``(B, 2048)``
    (50) after global average pooling. ``stem``: ``cifar`` (3x3 conv, stride 1, no max-pool; for 32/96 px inputs)
    or ``imagenet`` (7x7 conv stride 2 + 3x3 max-pool stride 2). Convolutions start from Kaiming-normal weights
    (fan-out, ReLU gain), BatchNorm from weight 1 and bias 0. ``width`` scales every stage's channels (64, 128,
    256, 512) x width; the feature width is then :func:`resnet_features`."""
    if name not in RESNETS:
        raise ValueError(f"lfss: unknown ResNet {name!r}; known: {sorted(RESNETS)}")
    block, depths = RESNETS[name]
    c0 = scaled(64, width)
    if stem == "cifar":
        layers: list[nn.Module] = [nn.Conv2d(in_channels, c0, 3, 1, 1, bias=False), nn.BatchNorm2d(c0),
                                   nn.ReLU(inplace=True)]
    elif stem == "imagenet":
        layers = [nn.Conv2d(in_channels, c0, 7, 2, 3, bias=False), nn.BatchNorm2d(c0), nn.ReLU(inplace=True),
                  nn.MaxPool2d(3, 2, 1)]
    else:
        raise ValueError(f"lfss: model.stem must be cifar or imagenet, got {stem!r}")
    c_in = c0
    for i, (planes, depth) in enumerate(zip((64, 128, 256, 512), depths)):
        for j in range(depth):
            layers.append(block(c_in, scaled(planes, width), 2 if (i > 0 and j == 0) else 1))
            c_in = scaled(planes, width) * block.expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
    net = nn.Sequential(*layers)
    for m in net.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    return net


def resnet_features(name: str, width: float = 1.0) -> int:
    """Feature width of :func:`resnet`: 512 (18, 34) or 2048 (50) at width 1."""
    return scaled(512, width) * RESNETS[name][0].expansion


def encoder(backbone: str = "small_cnn", channels: Sequence[int] = (16, 32), in_channels: int = 1,
            stem: str = "cifar", width: float = 1.0) -> tuple[nn.Module, int]:
    """The encoder g named by ``model.backbone`` and its feature width (``width``: ResNet channel multiplier)."""
    if backbone == "small_cnn":
        return small_cnn(channels, in_channels), int(channels[-1])
    net = resnet(backbone, in_channels, stem, width)
    return net, resnet_features(backbone, width)


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

    def __init__(self, channels: Sequence[int] = (16, 32), hidden: int = 256, dim: int = 64, in_channels: int = 1,
                 backbone: str = "small_cnn", stem: str = "cifar", resnet_width: float = 1.0):
        super().__init__()
        self.encoder_q, width = encoder(backbone, channels, in_channels, stem, resnet_width)
        self.projector_q = mlp_head(width, hidden, dim)
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
