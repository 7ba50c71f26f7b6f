"""The paper's image classifiers (Sec. 5: "VGG-11 and ResNet-20 trained on MNIST and CIFAR-10") and their training.

* ResNet-20: He et al. (2016), Sec. 4.2, the CIFAR network: a 3x3 conv with ``width`` (16) channels, three stages of
  three basic blocks with width, 2 width, 4 width channels (stride 2 at the start of stages 2 and 3, option-A
  shortcuts: identity, subsampled and zero-padded in channels), global average pooling, a linear layer.
* VGG-11: Simonyan & Zisserman (2015), configuration A (8 conv layers 64-M-128-M-256-256-M-512-512-M-512-512-M),
  with batch norm after each conv and, for 32 x 32 inputs, a single linear classifier on the 512 pooled features
  [R] (the usual CIFAR-size head; the paper does not say which head). ``width`` scales the channels (64 = paper).

Training [R] (the paper gives no schedule): SGD with momentum 0.9, weight decay, a cosine learning rate per step,
cross-entropy; CIFAR-10 with random 4-pixel-padded crops and horizontal flips. Inputs are normalised per channel
with the training set's mean and std; MNIST is zero-padded to 32 x 32 [R] so that both datasets have a 4 x 4 grid
of 8 x 8 regions (the paper's variables). Shapes: x (B, C, 32, 32) float32, logits (B, 10).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

VGG11_CFG = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


class _Block(nn.Module):
    """Basic residual block with an option-A shortcut (He et al. 2016, Sec. 4.2)."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.stride, self.pad = stride, c_out - c_in

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        short = x[:, :, ::self.stride, ::self.stride] if self.stride > 1 else x
        if self.pad:
            short = F.pad(short, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
        return F.relu(out + short)


class ResNet20(nn.Module):
    """ResNet-20 for 32 x 32 inputs: 1 + 3 x 3 x 2 + 1 = 20 weighted layers."""

    def __init__(self, in_channels: int = 3, classes: int = 10, width: int = 16, blocks: int = 3) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU())
        layers, c = [], width
        for stage, c_out in enumerate((width, 2 * width, 4 * width)):
            for b in range(blocks):
                layers.append(_Block(c, c_out, 2 if (stage > 0 and b == 0) else 1))
                c = c_out
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(c, classes)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.layers(self.stem(x)).mean(dim=(2, 3)))


class VGG11(nn.Module):
    """VGG-11 (configuration A) with batch norm, for 32 x 32 inputs; channels scaled by ``width / 64``."""

    def __init__(self, in_channels: int = 3, classes: int = 10, width: int = 64) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c = in_channels
        for v in VGG11_CFG:
            if v == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                c_out = max(1, int(v) * width // 64)
                layers += [nn.Conv2d(c, c_out, 3, 1, 1), nn.BatchNorm2d(c_out), nn.ReLU()]
                c = c_out
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x).flatten(1))


ARCHS = {"resnet20": ResNet20, "vgg11": VGG11}


def build(arch: str, in_channels: int, width: int) -> nn.Module:
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {sorted(ARCHS)}, got {arch!r}")
    return ARCHS[arch](in_channels=in_channels, width=width)


def to_32(x: np.ndarray) -> np.ndarray:
    """uint8 images (N, H, W) or (N, C, H, W) -> float32 (N, C, 32, 32) in [0, 1]; 28 x 28 zero-padded by 2."""
    x = np.asarray(x)
    if x.ndim == 3:
        x = x[:, None]
    if x.shape[-2:] == (28, 28):
        x = np.pad(x, ((0, 0), (0, 0), (2, 2), (2, 2)))
    if x.shape[-2:] != (32, 32):
        raise ValueError(f"images must be 28 x 28 or 32 x 32, got {x.shape[-2:]}")
    return x.astype(np.float32) / 255.0


def channel_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and std of float images (N, C, H, W) -> (C,), (C,); std floored at 1e-6."""
    return x.mean(axis=(0, 2, 3)), np.maximum(x.std(axis=(0, 2, 3)), 1e-6)


def _augment(xb: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Random 4-pixel-padded 32 x 32 crops and horizontal flips (CIFAR), drawn from ``gen`` (on the CPU)."""
    b = xb.shape[0]
    padded = F.pad(xb, (4, 4, 4, 4))
    dx = torch.randint(0, 9, (b,), generator=gen).tolist()
    dy = torch.randint(0, 9, (b,), generator=gen).tolist()
    flip = torch.rand(b, generator=gen) < 0.5
    out = torch.stack([padded[k, :, dy[k]:dy[k] + 32, dx[k]:dx[k] + 32] for k in range(b)])
    out[flip.to(out.device)] = out[flip.to(out.device)].flip(-1)
    return out


def sgd_cosine(model: nn.Module, settings: Mapping[str, Any], steps: int
               ) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """The training's optimizer [R]: SGD (momentum 0.9, ``settings`` lr and weight_decay) with a cosine learning
    rate per step over ``steps`` steps."""
    opt = torch.optim.SGD(model.parameters(), lr=settings["lr"], momentum=0.9,
                          weight_decay=settings["weight_decay"])
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))


def classifier_step(model: nn.Module, opt: torch.optim.Optimizer, sched: Any, xb: torch.Tensor,
                    yb: torch.Tensor) -> torch.Tensor:
    """One training step: cross-entropy of ``model(xb)`` (B, C, 32, 32) against ``yb`` (B,), backward, optimizer
    and scheduler step. Returns the (detached) mean loss."""
    loss = F.cross_entropy(model(xb), yb)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    sched.step()
    return loss.detach()


def train_classifier(model: nn.Module, x: np.ndarray, y: np.ndarray, settings: Mapping[str, Any], seed: int,
                     device: str = "cpu", log=None) -> dict[str, Any]:
    """Train on normalised images x (N, C, 32, 32) float32, labels y (N,) with SGD (momentum 0.9) and a cosine
    learning rate per step; ``settings``: epochs, batch_size, lr, weight_decay, augment. Returns the loss curve
    (mean loss per epoch)."""
    gen = torch.Generator().manual_seed(seed)
    model.to(device).train()
    n, bs = len(x), int(settings["batch_size"])
    opt, sched = sgd_cosine(model, settings, max(1, settings["epochs"] * math.ceil(n / bs)))
    xt, yt = torch.from_numpy(x), torch.from_numpy(np.asarray(y, dtype=np.int64))
    curve = []
    for epoch in range(settings["epochs"]):
        perm = torch.randperm(n, generator=gen)
        total = 0.0
        for k in range(0, n, bs):
            idx = perm[k:k + bs]
            xb = xt[idx]
            if settings["augment"]:
                xb = _augment(xb, gen)
            loss = classifier_step(model, opt, sched, xb.to(device), yt[idx].to(device))
            total += float(loss) * len(idx)
        curve.append(total / n)
        if log is not None:
            log(epoch, curve[-1])
    model.eval()
    return {"loss_curve": curve}


@torch.no_grad()
def predict_logits(model: nn.Module, x: np.ndarray, device: str = "cpu", batch_size: int = 512) -> np.ndarray:
    """Logits (N, classes) float64 of normalised images x (N, C, 32, 32)."""
    model.eval()
    out = [model(torch.from_numpy(np.ascontiguousarray(x[k:k + batch_size])).to(device)).double().cpu().numpy()
           for k in range(0, len(x), batch_size)]
    return np.concatenate(out) if out else np.zeros((0, 10))


def region_masks(regions: list[int], grid: int = 4, size: int = 8) -> np.ndarray:
    """(len(regions), 32, 32) bool: region r of the ``grid`` x ``grid`` grid of ``size`` x ``size`` patches,
    numbered row-major (region r covers rows 8 (r // 4) .. +8, columns 8 (r % 4) .. +8)."""
    out = np.zeros((len(regions), grid * size, grid * size), dtype=bool)
    for k, r in enumerate(regions):
        i, j = divmod(int(r), grid)
        out[k, i * size:(i + 1) * size, j * size:(j + 1) * size] = True
    return out


def masked_images(x: np.ndarray, regions: list[int], baseline: float = 0.0) -> np.ndarray:
    """The 2**n masked copies of one normalised image x (C, 32, 32) for the variables ``regions`` (n of them):
    copy ``mask`` keeps region k iff bit k of ``mask`` is set, the absent regions are set to ``baseline`` (0 = the
    training mean after normalisation [R]) and every other region keeps its value. -> (2**n, C, 32, 32)."""
    n = len(regions)
    pix = region_masks(regions)                                            # (n, 32, 32)
    bits = (np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1       # (2**n, n)
    absent = ((1 - bits)[:, :, None, None] * pix[None]).any(axis=1)       # (2**n, 32, 32)
    out = np.repeat(x[None], 2 ** n, axis=0)
    out[np.broadcast_to(absent[:, None], out.shape)] = baseline
    return out
