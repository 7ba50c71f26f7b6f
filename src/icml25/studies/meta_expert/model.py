"""The network: a backbone with four feature taps — the paper's WRN-28-2 (USB's ``wrn_28_2``, §4.1 of the paper)
or a small CNN (the offline stand-in [R]) —, K linear experts on the last pooled feature (optionally with
head/medium/tail BN branches), and, for Meta-Expert, the membership estimator.

Small CNN (default widths (8, 8, 16, 32)): stem 1→ch0 (3×3 conv–BN–ReLU, a 2×2 max-pool when ``stem_pool``),
then three stages ch_{j−1}→ch_j (3×3 conv–BN–ReLU–2×2 max-pool). f_j = global average of tap j (B, ch_j):
f_0 after the stem, f_1..f_3 after the stages; the experts read f_3 (or its BN branches).
WideResNet: see :class:`WideResNet` (taps 16, 16w, 32w, 64w channels at 32, 32, 16, 8 px for a 32-px input).
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

    def taps(self, x: Tensor) -> tuple[list[Tensor], Tensor]:
        """(four feature maps, the map the H/M/T BN branches normalise: the last tap itself)."""
        maps = self(x)
        return maps, maps[-1]

    @staticmethod
    def branch(bn: nn.Module, pre: Tensor) -> Tensor:
        return bn(pre)


_BN_MOMENTUM = 0.001  # USB's WideResNet: BatchNorm2d(momentum=0.001)


class _WideBlock(nn.Module):
    """Pre-activation basic block of USB's WideResNet: BN–LReLU(0.1)–conv3×3(stride)–BN–LReLU–conv3×3 plus the
    input; when the width or stride changes, a 1×1 conv shortcut (on the activated input only in the very first
    block, ``activate_before_residual``)."""

    def __init__(self, c_in: int, c_out: int, stride: int, activate_before_residual: bool = False):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(c_in, momentum=_BN_MOMENTUM)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out, momentum=_BN_MOMENTUM)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.act = nn.LeakyReLU(0.1, inplace=False)
        self.equal = c_in == c_out and stride == 1
        self.shortcut = None if self.equal else nn.Conv2d(c_in, c_out, 1, stride, 0, bias=False)
        self.abr = activate_before_residual

    def forward(self, x: Tensor) -> Tensor:
        if self.equal:
            return x + self.conv2(self.act(self.bn2(self.conv1(self.act(self.bn1(x))))))
        if self.abr:  # the first block of the first group convolves (and shortcuts) the activated input
            x = self.act(self.bn1(x))
        # other width/stride changes read the raw input in both paths (USB's block leaves bn1 unused there)
        return self.shortcut(x) + self.conv2(self.act(self.bn2(self.conv1(x))))


class WideResNet(nn.Module):
    """WRN-``depth``-``widen`` of USB (the paper's backbone, ``wrn_28_2``): conv3×3 3→16, three groups of
    n = (depth − 4)/6 blocks with widths 16w, 32w, 64w (strides 1, 2, 2), then BN–LReLU(0.1). Taps: f₀ after the
    stem conv (16), f₁–f₂ after groups 1–2, f₃ after the final BN–LReLU (64w); the H/M/T BN branches replace that
    final BN (each followed by the LReLU). Init as USB: convs Kaiming-normal (fan_out, leaky_relu), BN 1/0."""

    def __init__(self, depth: int = 28, widen: int = 2, in_channels: int = 3):
        super().__init__()
        if (depth - 4) % 6:
            raise ValueError(f"WideResNet: depth must be 6n + 4, got {depth}")
        n = (depth - 4) // 6
        ch = (16, 16 * widen, 32 * widen, 64 * widen)
        self.widths = ch
        self.stem = nn.Conv2d(in_channels, ch[0], 3, 1, 1, bias=False)
        groups = []
        for g in range(3):
            blocks = [_WideBlock(ch[g] if i == 0 else ch[g + 1], ch[g + 1], (1 if g == 0 else 2) if i == 0 else 1,
                                 activate_before_residual=(g == 0 and i == 0)) for i in range(n)]
            groups.append(nn.Sequential(*blocks))
        self.groups = nn.ModuleList(groups)
        self.final_bn = nn.BatchNorm2d(ch[3], momentum=_BN_MOMENTUM)
        self.act = nn.LeakyReLU(0.1, inplace=False)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="leaky_relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def taps(self, x: Tensor) -> tuple[list[Tensor], Tensor]:
        maps = [self.stem(x)]
        for g in self.groups:
            maps.append(g(maps[-1]))
        pre = maps[-1]
        maps[-1] = self.act(self.final_bn(pre))
        return maps, pre

    def forward(self, x: Tensor) -> list[Tensor]:
        return self.taps(x)[0]

    def branch(self, bn: nn.Module, pre: Tensor) -> Tensor:
        return self.act(bn(pre))


class SSLNet(nn.Module):
    """Backbone + ``n_experts`` linear experts (+ the membership estimator when ``dea``).

    ``forward(x)`` returns a dict: ``feats`` (4 pooled features), ``logits`` (K, B, C) the experts' logits
    (mean over branches), ``branches`` (K, 3, B, C) per-branch logits (H, M, T; equal to ``logits`` repeated
    without ``bn_branches``), and with ``dea`` also ``o`` (B, 3) and ``w`` (B, 3) (needs ``log_prior``, ``taus``).
    """

    def __init__(self, num_classes: int = 10, widths: Sequence[int] = (8, 8, 16, 32), n_experts: int = 1, *,
                 stem_pool: bool = True, bn_branches: bool = False, dea: bool = False, fusion: bool = True,
                 cut1: int = 2, cut2: int = 4, dea_hidden: Sequence[int] = (128, 64), backbone: str = "small_cnn",
                 depth: int = 28, widen: int = 2):
        super().__init__()
        if dea and n_experts != N_EXPERTS:
            raise ValueError(f"SSLNet: the membership estimator needs {N_EXPERTS} experts, got {n_experts}")
        if backbone == "small_cnn":
            self.backbone: nn.Module = SmallCNN(widths, stem_pool)
        elif backbone == "wrn_28_2":
            self.backbone = WideResNet(depth, widen)
        else:
            raise ValueError(f"SSLNet: backbone must be small_cnn or wrn_28_2, got {backbone!r}")
        ch3 = self.backbone.widths[3]
        self.num_classes, self.n_experts, self.bn_branches = num_classes, n_experts, bn_branches
        self.experts = nn.ModuleList(nn.Linear(ch3, num_classes) for _ in range(n_experts))
        bn_kw = {} if backbone == "small_cnn" else {"momentum": _BN_MOMENTUM}
        self.branch_bns = nn.ModuleList(nn.BatchNorm2d(ch3, **bn_kw) for _ in range(3)) if bn_branches else None
        if backbone != "small_cnn":  # USB: linear layers Xavier-normal, bias 0
            for head in self.experts:
                nn.init.xavier_normal_(head.weight)
                nn.init.zeros_(head.bias)
        self.estimator = (MembershipEstimator(self.backbone.widths, num_classes, cut1, cut2, fusion=fusion,
                                              hidden=dea_hidden) if dea else None)

    def forward(self, x: Tensor, log_prior: Tensor | None = None, taus: Tensor | None = None) -> dict[str, Tensor]:
        maps, pre = self.backbone.taps(x)
        feats = [m.mean(dim=(2, 3)) for m in maps]
        if self.branch_bns is not None:  # H/M/T BN branches on the last map, each pooled and fed to every expert
            pooled = [self.backbone.branch(bn, pre).mean(dim=(2, 3)) for bn in self.branch_bns]
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


class EMAPairs:
    """The (EMA, model) parameter and buffer lists, collected once: walking the module tree for ``parameters()`` and
    ``buffers()`` every iteration cost more than the update itself. ``update(decay)`` is :func:`ema_update`."""

    def __init__(self, ema: nn.Module, model: nn.Module):
        self.pe, self.pm = list(ema.parameters()), [p.detach() for p in model.parameters()]
        self.be, self.bm = list(ema.buffers()), list(model.buffers())
        if len(self.pe) != len(self.pm) or len(self.be) != len(self.bm):
            raise ValueError("EMAPairs: the EMA and the model have different parameters or buffers")

    @torch.no_grad()
    def update(self, decay: float) -> None:
        """ema ← d·ema + (1−d)·θ per parameter; buffers (BN statistics) copied. The foreach ops apply the same
        per-tensor ``mul_`` / ``add_(alpha)`` / ``copy_`` as the loop of :func:`ema_update` (bitwise equal)."""
        torch._foreach_mul_(self.pe, decay)
        torch._foreach_add_(self.pe, self.pm, alpha=1.0 - decay)
        torch._foreach_copy_(self.be, self.bm)


@torch.no_grad()
def ema_update(ema: nn.Module, model: nn.Module, decay: float) -> None:
    """Exponential moving average of the parameters (ema ← d·ema + (1−d)·θ); buffers (BN statistics) copied."""
    for pe, pm in zip(ema.parameters(), model.parameters()):
        pe.mul_(decay).add_(pm.detach(), alpha=1.0 - decay)
    for be, bm in zip(ema.buffers(), model.buffers()):
        be.copy_(bm)
