"""ResNet-50 detector of the paper scale (spec "Detector": "Paper scale: ResNet-50 on 256x256 random crops of r/s"
[R]; the paper's backbone is not public, ResNet-50 is the design's choice).

:class:`ResNet50` is the ResNet-50 of He et al. (2016) in the "v1.5" form (stride on the 3x3 convolution of each
bottleneck): stem 7x7/2 conv + BN + ReLU + 3x3/2 max-pool, bottleneck stages of [3, 4, 6, 3] blocks with
``width * (1, 2, 4, 8)`` inner channels and 4x expansion, global average pool, one linear logit. At ``width=64``
it is exactly torchvision's ``resnet50(num_classes=1)`` (same module names, shapes and initialisation scheme:
Kaiming-normal fan-out convolutions, BN weight 1 / bias 0), 23,510,081 parameters, so ImageNet weights load into it
by name. The rehearsal runs the same class (same depth, blocks and strides) at a reduced ``width``. Trained from
scratch [R] (pretraining is an open question of the spec; no weights are downloaded here).

Input (B, in_ch, H, W) float32 -> (B,) logits; any H, W >= 32 (the global pool makes it size-agnostic).
"""
from __future__ import annotations

import torch
from torch import nn

BLOCKS = (3, 4, 6, 3)  #: bottleneck blocks per stage (ResNet-50)
EXPANSION = 4


class Bottleneck(nn.Module):
    """1x1 (in -> w), 3x3 stride s (w -> w), 1x1 (w -> 4w), BN after each, ReLU; identity or 1x1/s projection."""

    def __init__(self, cin: int, planes: int, stride: int = 1):
        super().__init__()
        cout = planes * EXPANSION
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))
                           if stride != 1 or cin != cout else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + idt)


class ResNet50(nn.Module):
    """ResNet-50 (see module docstring) with ``width`` stem channels (64 = the standard network) and one logit."""

    def __init__(self, in_ch: int = 3, width: int = 64):
        super().__init__()
        if width < 1:
            raise ValueError(f"ResNet50: width must be >= 1, got {width}")
        self.conv1 = nn.Conv2d(in_ch, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        cin = width
        for i, (n, stride) in enumerate(zip(BLOCKS, (1, 2, 2, 2)), 1):
            planes = width * 2 ** (i - 1)
            blocks = []
            for j in range(n):
                blocks.append(Bottleneck(cin, planes, stride if j == 0 else 1))
                cin = planes * EXPANSION
            setattr(self, f"layer{i}", nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, 1)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1)).squeeze(1)
