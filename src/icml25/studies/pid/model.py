"""The tiny detector and the autoencoder "generators" [R] (no official code; sizes from the study design).

* :class:`TinyDetector` — four 3x3 conv layers 3→32→64→64→128 with BN + ReLU, stride 2 from the second layer on,
  global average pool, Linear → 1 logit (≈ 130k parameters). Input (B, in_ch, H, W) float32 -> (B,) logits.
* :func:`make_autoencoder` — encoder 3→32 (stride 2) → 64 (stride 2) → 8 (latent H/4 x W/4 x 8), and one of three
  decoders that mirror it: ``tconv`` (transposed convolutions, generator A), ``nearest`` (nearest upsample + conv,
  B) or ``bilinear`` (bilinear upsample + conv, C). Input/output (B, 3, H, W) in [0, 1] (sigmoid output).
"""
from __future__ import annotations

from typing import Literal

import torch
from torch import nn

DECODERS = ("tconv", "nearest", "bilinear")


class TinyDetector(nn.Module):
    def __init__(self, in_ch: int = 3):
        super().__init__()
        chans, layers = (in_ch, 32, 64, 64, 128), []
        for i in range(4):
            layers += [nn.Conv2d(chans[i], chans[i + 1], 3, stride=1 if i == 0 else 2, padding=1, bias=False),
                       nn.BatchNorm2d(chans[i + 1]), nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(128, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).mean(dim=(2, 3))).squeeze(1)


def _up(decoder: str, cin: int, cout: int) -> list[nn.Module]:
    if decoder == "tconv":
        return [nn.ConvTranspose2d(cin, cout, 4, stride=2, padding=1)]
    return [nn.Upsample(scale_factor=2, mode=decoder, **({"align_corners": False} if decoder == "bilinear" else {})),
            nn.Conv2d(cin, cout, 3, padding=1)]


def make_autoencoder(decoder: Literal["tconv", "nearest", "bilinear"]) -> nn.Module:
    """A conv autoencoder with the given decoder type (see module docstring); H, W must be multiples of 4."""
    if decoder not in DECODERS:
        raise ValueError(f"decoder {decoder!r} unknown; choose one of {DECODERS}")
    encoder = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(inplace=True),
                            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(inplace=True),
                            nn.Conv2d(64, 8, 3, padding=1))
    dec = nn.Sequential(nn.Conv2d(8, 64, 3, padding=1), nn.ReLU(inplace=True),
                        *_up(decoder, 64, 32), nn.ReLU(inplace=True),
                        *_up(decoder, 32, 32), nn.ReLU(inplace=True),
                        nn.Conv2d(32, 3, 3, padding=1), nn.Sigmoid())
    return nn.Sequential(encoder, dec)
