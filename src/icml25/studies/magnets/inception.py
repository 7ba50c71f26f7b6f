"""The FID feature extractor: Inception-v3 as ported to torch for FID (the 2015-12-05 TensorFlow graph of Heusel
et al.'s FID code; weights ``pt_inception-2015-12-05-6726825d.pth`` of ``mseitzer/pytorch-fid``, a manifest row),
written here without torchvision (not a dependency of the project).

Features = the 2048-d pool3 activations: bilinear resize to 299×299 (align_corners False), x → 2x − 1, the stem
(``Conv2d_1a_3x3`` … ``Conv2d_4a_3x3`` with two 3×3/2 max-pools), ``Mixed_5b``–``Mixed_7c``, global average
pooling. The FID variants of the blocks: average pools exclude padding (``count_include_pad=False``) in the A, C
and first E blocks, and the last E block (``Mixed_7c``) pools its ``branch_pool`` with a 3×3 **max** pool. Each
conv is conv (no bias) → BatchNorm (eps 1e-3) → ReLU. Parameter names follow the checkpoint
(``Mixed_5b.branch1x1.conv.weight``, ``fc.weight`` of its 1008-way classifier, unused for FID).

``width_divisor`` divides every channel count (1 = the real network). Only the rehearsal uses a divisor > 1
(16: 128-d features, a ~1 MB weight file in the same container and key layout) [R: reduced feature net of the
rehearsal only].
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

N_CLASSES_FC = 1008  #: the TF graph's classifier outputs (kept so the checkpoint loads strictly)


class BasicConv2d(nn.Module):
    def __init__(self, c_in: int, c_out: int, **kw) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, bias=False, **kw)
        self.bn = nn.BatchNorm2d(c_out, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)))


def _avg(x: torch.Tensor) -> torch.Tensor:
    return F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)


class InceptionA(nn.Module):
    def __init__(self, c_in: int, pool: int, w: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(c_in, 64 // w, kernel_size=1)
        self.branch5x5_1 = BasicConv2d(c_in, 48 // w, kernel_size=1)
        self.branch5x5_2 = BasicConv2d(48 // w, 64 // w, kernel_size=5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(c_in, 64 // w, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(64 // w, 96 // w, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96 // w, 96 // w, kernel_size=3, padding=1)
        self.branch_pool = BasicConv2d(c_in, pool, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([self.branch1x1(x), self.branch5x5_2(self.branch5x5_1(x)), b3,
                          self.branch_pool(_avg(x))], 1)


class InceptionB(nn.Module):
    def __init__(self, c_in: int, w: int) -> None:
        super().__init__()
        self.branch3x3 = BasicConv2d(c_in, 384 // w, kernel_size=3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(c_in, 64 // w, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(64 // w, 96 // w, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96 // w, 96 // w, kernel_size=3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([self.branch3x3(x), b, F.max_pool2d(x, 3, stride=2)], 1)


class InceptionC(nn.Module):
    def __init__(self, c_in: int, c7: int, w: int) -> None:
        super().__init__()
        o = 192 // w
        self.branch1x1 = BasicConv2d(c_in, o, kernel_size=1)
        self.branch7x7_1 = BasicConv2d(c_in, c7, kernel_size=1)
        self.branch7x7_2 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7_3 = BasicConv2d(c7, o, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = BasicConv2d(c_in, c7, kernel_size=1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = BasicConv2d(c7, o, kernel_size=(1, 7), padding=(0, 3))
        self.branch_pool = BasicConv2d(c_in, o, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        d = x
        for i in range(1, 6):
            d = getattr(self, f"branch7x7dbl_{i}")(d)
        return torch.cat([self.branch1x1(x), b7, d, self.branch_pool(_avg(x))], 1)


class InceptionD(nn.Module):
    def __init__(self, c_in: int, w: int) -> None:
        super().__init__()
        self.branch3x3_1 = BasicConv2d(c_in, 192 // w, kernel_size=1)
        self.branch3x3_2 = BasicConv2d(192 // w, 320 // w, kernel_size=3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(c_in, 192 // w, kernel_size=1)
        self.branch7x7x3_2 = BasicConv2d(192 // w, 192 // w, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(192 // w, 192 // w, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(192 // w, 192 // w, kernel_size=3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b7 = x
        for i in range(1, 5):
            b7 = getattr(self, f"branch7x7x3_{i}")(b7)
        return torch.cat([self.branch3x3_2(self.branch3x3_1(x)), b7, F.max_pool2d(x, 3, stride=2)], 1)


class InceptionE(nn.Module):
    def __init__(self, c_in: int, w: int, max_pool: bool) -> None:
        super().__init__()
        self.max_pool = max_pool
        self.branch1x1 = BasicConv2d(c_in, 320 // w, kernel_size=1)
        self.branch3x3_1 = BasicConv2d(c_in, 384 // w, kernel_size=1)
        self.branch3x3_2a = BasicConv2d(384 // w, 384 // w, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(384 // w, 384 // w, kernel_size=(3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(c_in, 448 // w, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(448 // w, 384 // w, kernel_size=3, padding=1)
        self.branch3x3dbl_3a = BasicConv2d(384 // w, 384 // w, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(384 // w, 384 // w, kernel_size=(3, 1), padding=(1, 0))
        self.branch_pool = BasicConv2d(c_in, 192 // w, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.branch3x3_1(x)
        a = torch.cat([self.branch3x3_2a(a), self.branch3x3_2b(a)], 1)
        d = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        d = torch.cat([self.branch3x3dbl_3a(d), self.branch3x3dbl_3b(d)], 1)
        pooled = F.max_pool2d(x, 3, stride=1, padding=1) if self.max_pool else _avg(x)
        return torch.cat([self.branch1x1(x), a, d, self.branch_pool(pooled)], 1)


class FIDInceptionV3(nn.Module):
    """:meth:`features` images (B, 3, H, W) in [0, 1] → pool3 features (B, 2048 / width_divisor)."""

    def __init__(self, width_divisor: int = 1) -> None:
        super().__init__()
        w = int(width_divisor)
        if w < 1 or any(c % w for c in (32, 48, 80, 96, 160, 192, 288, 320, 384, 448, 768, 1280, 2048)):
            raise ValueError(f"width_divisor {width_divisor} must divide every Inception channel count (1..16)")
        self.width_divisor = w
        self.Conv2d_1a_3x3 = BasicConv2d(3, 32 // w, kernel_size=3, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(32 // w, 32 // w, kernel_size=3)
        self.Conv2d_2b_3x3 = BasicConv2d(32 // w, 64 // w, kernel_size=3, padding=1)
        self.Conv2d_3b_1x1 = BasicConv2d(64 // w, 80 // w, kernel_size=1)
        self.Conv2d_4a_3x3 = BasicConv2d(80 // w, 192 // w, kernel_size=3)
        self.Mixed_5b = InceptionA(192 // w, 32 // w, w)
        self.Mixed_5c = InceptionA(256 // w, 64 // w, w)
        self.Mixed_5d = InceptionA(288 // w, 64 // w, w)
        self.Mixed_6a = InceptionB(288 // w, w)
        self.Mixed_6b = InceptionC(768 // w, 128 // w, w)
        self.Mixed_6c = InceptionC(768 // w, 160 // w, w)
        self.Mixed_6d = InceptionC(768 // w, 160 // w, w)
        self.Mixed_6e = InceptionC(768 // w, 192 // w, w)
        self.Mixed_7a = InceptionD(768 // w, w)
        self.Mixed_7b = InceptionE(1280 // w, w, max_pool=False)
        self.Mixed_7c = InceptionE(2048 // w, w, max_pool=True)
        self.fc = nn.Linear(2048 // w, N_CLASSES_FC)

    @property
    def dim(self) -> int:
        return 2048 // self.width_divisor

    @torch.no_grad()
    def features(self, images: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(images, size=(299, 299), mode="bilinear", align_corners=False)
        x = 2.0 * x - 1.0
        x = self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x)))
        x = F.max_pool2d(x, 3, stride=2)
        x = F.max_pool2d(self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x)), 3, stride=2)
        for name in ("Mixed_5b", "Mixed_5c", "Mixed_5d", "Mixed_6a", "Mixed_6b", "Mixed_6c", "Mixed_6d", "Mixed_6e",
                     "Mixed_7a", "Mixed_7b", "Mixed_7c"):
            x = getattr(self, name)(x)
        return x.mean(dim=(2, 3))


def load_fid_inception(path: str | Path, width_divisor: int = 1, device: str | torch.device = "cpu"
                       ) -> FIDInceptionV3:
    """The network with the weights of ``path`` (a torch state dict, read with ``weights_only=True``; the caller
    verifies the file's hash first). Every parameter and buffer must be present with its shape, except
    BatchNorm's ``num_batches_tracked`` (absent from the published file); errors name the file and the keys."""
    net = FIDInceptionV3(width_divisor)
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict):
        raise ValueError(f"{path}: expected a state dict, got {type(state).__name__}")
    own = net.state_dict()
    missing = sorted(k for k in own if k not in state and not k.endswith("num_batches_tracked"))
    unexpected = sorted(k for k in state if k not in own)
    wrong = sorted(f"{k} {tuple(state[k].shape)} != {tuple(v.shape)}" for k, v in own.items()
                   if k in state and tuple(state[k].shape) != tuple(v.shape))
    if missing or unexpected or wrong:
        raise ValueError(f"{path}: not the FID Inception-v3 at width 1/{width_divisor}: missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]}, wrong shapes {wrong[:5]}")
    net.load_state_dict({k: v for k, v in state.items()}, strict=False)
    return net.to(device).eval()


@torch.no_grad()
def image_features(net: FIDInceptionV3, images: np.ndarray, batch: int, device: str | torch.device = "cpu"
                   ) -> np.ndarray:
    """Pool3 features (n, dim) float64 of uint8 images (n, H, W, 3)."""
    out = []
    for i in range(0, len(images), batch):
        x = torch.as_tensor(images[i:i + batch]).to(device).permute(0, 3, 1, 2).float() / 255.0
        out.append(net.features(x).double().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, net.dim))
