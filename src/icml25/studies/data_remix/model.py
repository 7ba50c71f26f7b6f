"""The two-encoder late-fusion classifier of Data Remixing (paper §3 / the released model [V]).

Encoders E_a, E_v map each modality to a feature vector (F); the fusion head is one linear layer on the
concatenation, h([a; v]) = W[a; v] + b with W = [W_a | W_v] (W: (C, 2F)); the unimodal heads h_a, h_v are linear
F → C. At the offline scales the encoders are MLPs d → hidden → F with ReLU after both layers (the released
ResNet-18 features are post-ReLU averages, hence non-negative; the MLP keeps that property) [R].
"""
from __future__ import annotations

import torch
from torch import nn


def mlp_encoder(d_in: int, hidden: int = 128, feat: int = 64) -> nn.Sequential:
    """MLP encoder d_in → hidden → feat, ReLU after each layer. (B, d_in) → (B, feat)."""
    return nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, feat), nn.ReLU())


class FusionNet(nn.Module):
    """Late-fusion classifier with unimodal heads; the defaults build the synth-AV model (d_a = d_v = 32, C = 6).

    Attributes: ``enc_a``, ``enc_v`` (encoders, (B, d) → (B, feat)), ``head`` (Linear(2·feat, C), the fusion head
    whose weight columns [:feat] are W_a and [feat:] are W_v), ``head_a``, ``head_v`` (Linear(feat, C)).
    ``forward(x_a, x_v, mode)`` is :func:`..method.masked_forward`.
    """

    def __init__(self, d_a: int = 32, d_v: int = 32, n_classes: int = 6, hidden: int = 128, feat: int = 64,
                 enc_a: nn.Module | None = None, enc_v: nn.Module | None = None):
        super().__init__()
        self.feat = int(feat)
        self.n_classes = int(n_classes)
        self.enc_a = enc_a if enc_a is not None else mlp_encoder(d_a, hidden, feat)
        self.enc_v = enc_v if enc_v is not None else mlp_encoder(d_v, hidden, feat)
        self.head = nn.Linear(2 * self.feat, self.n_classes)
        self.head_a = nn.Linear(self.feat, self.n_classes)
        self.head_v = nn.Linear(self.feat, self.n_classes)

    def forward(self, x_a: torch.Tensor, x_v: torch.Tensor, mode: str = "av"):
        from .method import masked_forward

        return masked_forward(self, x_a, x_v, mode)

    @torch.no_grad()
    def features(self, x_a: torch.Tensor, x_v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Frozen encoder features (a, v), each (B, feat), in the model's current mode (call ``eval()`` first)."""
        return self.enc_a(x_a), self.enc_v(x_v)


# --------------------------------------------------------------------------------------------- paper scale [V]


class _BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.down = None if stride == 1 and c_in == c_out else nn.Sequential(
            nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + (x if self.down is None else self.down(x)))


RESNET_INITS = ("official", "torch")


def init_resnet_official(module: nn.Module) -> nn.Module:
    """The released ResNet-18's initialisation [V] (in place; returns ``module``): every Conv2d weight
    ~ N(0, 2/fan_out), fan_out = out_channels·k_h·k_w (Kaiming normal, fan_out mode, ReLU gain); every BatchNorm /
    GroupNorm weight ~ N(1, 0.02²) and bias 0. Linear layers keep PyTorch's default. Draws from torch's global
    generator, in ``module.modules()`` order."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
            nn.init.normal_(m.weight, mean=1.0, std=0.02)
            nn.init.zeros_(m.bias)
    return module


IMAGENET_MEAN = (0.485, 0.456, 0.406)  #: the released frame normalisation [V]
IMAGENET_STD = (0.229, 0.224, 0.225)


class ResNet18Encoder(nn.Module):
    """ResNet-18 trunk trained from scratch, globally average-pooled to 8·width features (paper scale [V]).

    ``in_channels`` = 1 for the audio log-spectrogram, given as (B, 1, H, W) or (B, H, W) (the stored
    spectrograms; a channel axis is added); 3 for video frames given as (B, T, 3, H, W), which are encoded frame by
    frame and averaged over frames and space (the released 3-D average pooling). Frames stored as uint8 are scaled
    to [0, 1] and normalised with the ImageNet mean / std inside the encoder (the released transform [V]).
    ``width`` = 64 is ResNet-18 (stages 64, 128, 256, 512); the rehearsal shrinks it.
    ``init``: "official" (:func:`init_resnet_official`, the released code [V]) or "torch" (PyTorch's defaults).
    Output (B, 8·width), non-negative.
    """

    def __init__(self, in_channels: int = 1, init: str = "official", width: int = 64):
        if init not in RESNET_INITS:
            raise ValueError(f"ResNet18Encoder: init must be one of {RESNET_INITS}, got {init!r}")
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        layers, c = [], width
        for mult, stride in ((1, 1), (2, 2), (4, 2), (8, 2)):
            layers += [_BasicBlock(c, width * mult, stride), _BasicBlock(width * mult, width * mult, 1)]
            c = width * mult
        self.layers = nn.Sequential(*layers)
        self.out_features = c
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)
        if init == "official":
            init_resnet_official(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 3:  # (B, H, W) spectrogram
            x = x.unsqueeze(1)
        frames = x.dim() == 5
        if frames:
            B, T = x.shape[:2]
            x = x.flatten(0, 1)
        if x.dtype == torch.uint8:
            x = (x.float() / 255.0 - self.mean) / self.std
        h = self.layers(self.stem(x)).mean(dim=(2, 3))  # (B·T, 8·width)
        return h.view(B, T, -1).mean(1) if frames else h


def resnet18_fusion(n_classes: int, init: str = "official", width: int = 64) -> FusionNet:
    """The paper-scale model: audio ResNet-18 (1 channel) and visual ResNet-18 (3 channels, frames), F = 8·width
    (512 for ResNet-18); ``init`` of the encoders (``train.resnet_init``): "official" [V] or "torch"."""
    return FusionNet(n_classes=n_classes, feat=8 * width, enc_a=ResNet18Encoder(1, init, width),
                     enc_v=ResNet18Encoder(3, init, width))
