"""CoastalViT: a ClimaX-like Vision Transformer emulator and the baselines (spec "Emulator [R]", "Arms").

Pad to a multiple of the patch size p, conv patch embedding + learned 2-D position embedding + an MLP embedding
of the lead time (hours) added to every token, L pre-LN transformer blocks (MHSA + MLP x4), a linear head to
p^2 C_out per token, unpatchify and crop. The network predicts the increment S(t0 + lead) - S(t0).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    """Pre-LN transformer block: x + MHSA(LN x), then x + MLP(LN x) with a 4x hidden width."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class CoastalViT(nn.Module):
    """ViT emulator. ``forward(x: (B, C_in, H, W), lead_h: (B,)) -> (B, C_out, H, W)`` (the increment)."""

    def __init__(self, in_ch: int, out_ch: int, img_hw: tuple[int, int], patch: int = 8, dim: int = 96,
                 depth: int = 4, heads: int = 4) -> None:
        super().__init__()
        self.in_ch, self.out_ch, self.patch = in_ch, out_ch, patch
        self.img_hw = tuple(img_hw)
        self.grid = (-(-img_hw[0] // patch), -(-img_hw[1] // patch))  # tokens per axis after padding
        self.embed = nn.Conv2d(in_ch, dim, kernel_size=patch, stride=patch)
        self.pos = nn.Parameter(torch.zeros(1, self.grid[0] * self.grid[1], dim))
        nn.init.trunc_normal_(self.pos, std=0.02)
        self.lead = nn.Sequential(nn.Linear(1, dim), nn.GELU(), nn.Linear(dim, dim))
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, patch * patch * out_ch)

    def forward(self, x: torch.Tensor, lead_h: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        if c != self.in_ch or (h, w) != self.img_hw:
            raise ValueError(f"CoastalViT: expected (B, {self.in_ch}, {self.img_hw[0]}, {self.img_hw[1]}), "
                             f"got {tuple(x.shape)}")
        p = self.patch
        gh, gw = self.grid
        x = F.pad(x, (0, gw * p - w, 0, gh * p - h))
        # conv patch embedding computed as patchify + matmul with the conv's weights (same map; oneDNN's
        # stride-p convolution is ~20x slower on CPU for this shape)
        patches = x.reshape(b, c, gh, p, gw, p).permute(0, 2, 4, 1, 3, 5).reshape(b, gh * gw, c * p * p)
        tok = F.linear(patches, self.embed.weight.reshape(self.embed.out_channels, -1), self.embed.bias)
        tok = tok + self.pos + self.lead(lead_h.reshape(b, 1).to(tok.dtype) / 24.0)[:, None, :]
        for blk in self.blocks:
            tok = blk(tok)
        out = self.head(self.norm(tok))  # (B, gh*gw, p*p*C_out)
        out = out.reshape(b, gh, gw, p, p, self.out_ch).permute(0, 5, 1, 3, 2, 4)
        return out.reshape(b, self.out_ch, gh * p, gw * p)[:, :, :h, :w]


def masked_mse(pred: torch.Tensor, target: torch.Tensor, wet: torch.Tensor) -> torch.Tensor:
    """MSE over wet cells only. pred/target (B, C, H, W); wet (H, W) or (B, 1, H, W) of 0/1."""
    wet = wet.to(pred.dtype)
    while wet.dim() < pred.dim():
        wet = wet.unsqueeze(0)
    diff2 = (pred - target) ** 2 * wet
    return diff2.sum() / (wet.expand_as(pred).sum().clamp_min(1.0))


def persistence(state0):
    """Persistence forecast: S(t0 + lead) = S(t0) (works for NumPy arrays and tensors)."""
    return state0.clone() if isinstance(state0, torch.Tensor) else np.array(state0, copy=True)


class Climatology:
    """Per-cell mean of the training period for the same slot of the day (e.g. half-hour) [R].

    ``fit(states (T, C, H, W), times (T,) seconds)``; ``predict(times) -> (len(times), C, H, W)``.
    """

    def __init__(self, slot_seconds: int = 1800) -> None:
        self.slot_seconds = int(slot_seconds)
        self.mean: np.ndarray | None = None

    def _slots(self, times) -> np.ndarray:
        return (np.asarray(times, dtype=np.int64) % 86400) // self.slot_seconds

    def fit(self, states: np.ndarray, times) -> Climatology:
        states = np.asarray(states)
        slots = self._slots(times)
        n = 86400 // self.slot_seconds
        total = np.zeros((n,) + states.shape[1:], np.float64)
        count = np.zeros(n)
        for k in range(states.shape[0]):
            total[slots[k]] += states[k]
            count[slots[k]] += 1
        if (count == 0).any():
            missing = np.flatnonzero(count == 0).tolist()
            raise ValueError(f"Climatology.fit: no training data for slot(s) {missing}")
        self.mean = (total / count[:, None, None, None]).astype(np.float32)
        return self

    def predict(self, times) -> np.ndarray:
        if self.mean is None:
            raise RuntimeError("Climatology.predict before fit")
        return self.mean[self._slots(times)]
