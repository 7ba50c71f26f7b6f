"""The MaskGIT VQGAN image tokenizer in torch (Chang et al., "MaskGIT: Masked Generative Image Transformer", CVPR
2022, Sec. 3 and App. A; the tokenizer MaGNeTS uses for ImageNet-256, MaGNeTS Sec. 4), and the converter from the
published Flax checkpoint (``maskgit-public/checkpoints/tokenizer_imagenet256_checkpoint``, read by
:mod:`.flaxmsgpack`, never by an unrestricted pickle).

Architecture (our reading of the checkpoint's parameter tree, 256 px → 16×16 tokens, 1024 codes of dim 256):

* encoder: ``Conv_0`` 3×3 (3 → F, no bias); for each level i of ``channel_multipliers`` (1, 1, 2, 2, 4):
  ``num_res_blocks`` ResBlocks to F·m_i channels, then 2×2 average pooling except after the last level; then
  ``num_res_blocks`` more ResBlocks; ``GroupNorm_0``, swish, ``Conv_1`` 1×1 (→ ``embedding_dim``, bias).
* decoder: ``Conv_0`` 3×3 (``embedding_dim`` → F·m_last, bias); ``num_res_blocks`` ResBlocks; for each level from
  the last to the first: ``num_res_blocks`` ResBlocks to F·m_i, then (not at level 0) nearest ×2 upsampling and a
  3×3 conv with bias; ``GroupNorm_0``, swish, 3×3 conv to RGB.
* ResBlock(x): h = Conv_1(swish(GN_1(Conv_0(swish(GN_0(x)))))) (3×3 convs, no bias); when the channel count
  changes the checkpoint's block adds ``Conv_2`` 1×1 **applied to h** (a 1×1 kernel of shape (C_out, C_out), as in
  the published checkpoint: the input x is then not carried), else it adds x.
* quantizer: nearest code of ``codebook`` (K, embedding_dim) by squared Euclidean distance; token order row-major.
* GroupNorm: 32 groups, eps 1e-6 (Flax defaults); convs 'SAME' padding. Pixels in [0, 1] [R: as the public torch
  port of this checkpoint feeds it (``ToTensor``, decodings clamped to [0, 1])].

Module and parameter names mirror the Flax tree (``encoder.ResBlock_4.Conv_2``), so the converter is a rename:
``kernel`` (kh, kw, in, out) → ``weight`` (out, in, kh, kw); GroupNorm ``scale`` → ``weight``.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .flaxmsgpack import CheckpointError, flatten


@dataclass(frozen=True)
class VQGANConfig:
    """Sizes of the tokenizer (defaults: the published ImageNet-256 checkpoint)."""

    filters: int = 128
    channel_multipliers: tuple[int, ...] = (1, 1, 2, 2, 4)
    num_res_blocks: int = 2
    embedding_dim: int = 256
    codebook_size: int = 1024
    groups: int = 32

    @property
    def downsample(self) -> int:
        """Pixels per token side (16 for five levels)."""
        return 2 ** (len(self.channel_multipliers) - 1)


class ResBlock(nn.Module):
    """The checkpoint's residual block (see the module docstring for the 1×1 ``Conv_2`` quirk)."""

    def __init__(self, c_in: int, c_out: int, groups: int) -> None:
        super().__init__()
        self.GroupNorm_0 = nn.GroupNorm(groups, c_in, eps=1e-6)
        self.Conv_0 = nn.Conv2d(c_in, c_out, 3, padding=1, bias=False)
        self.GroupNorm_1 = nn.GroupNorm(groups, c_out, eps=1e-6)
        self.Conv_1 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.Conv_2 = nn.Conv2d(c_out, c_out, 1, bias=False) if c_in != c_out else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.Conv_0(F.silu(self.GroupNorm_0(x)))
        h = self.Conv_1(F.silu(self.GroupNorm_1(h)))
        return h + (self.Conv_2(h) if self.Conv_2 is not None else x)


class Encoder(nn.Module):
    def __init__(self, cfg: VQGANConfig) -> None:
        super().__init__()
        F_, mult, R = cfg.filters, cfg.channel_multipliers, cfg.num_res_blocks
        self.Conv_0 = nn.Conv2d(3, F_, 3, padding=1, bias=False)
        self.plan: list[tuple[str, int]] = []  # (block name | "pool", -)
        c, k = F_, 0
        for i, m in enumerate(mult):
            for _ in range(R):
                setattr(self, f"ResBlock_{k}", ResBlock(c, F_ * m, cfg.groups))
                self.plan.append((f"ResBlock_{k}", 0))
                c, k = F_ * m, k + 1
            if i < len(mult) - 1:
                self.plan.append(("pool", 0))
        for _ in range(R):
            setattr(self, f"ResBlock_{k}", ResBlock(c, c, cfg.groups))
            self.plan.append((f"ResBlock_{k}", 0))
            k += 1
        self.GroupNorm_0 = nn.GroupNorm(cfg.groups, c, eps=1e-6)
        self.Conv_1 = nn.Conv2d(c, cfg.embedding_dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.Conv_0(x)
        for name, _ in self.plan:
            x = F.avg_pool2d(x, 2) if name == "pool" else getattr(self, name)(x)
        return self.Conv_1(F.silu(self.GroupNorm_0(x)))


class Decoder(nn.Module):
    def __init__(self, cfg: VQGANConfig) -> None:
        super().__init__()
        F_, mult, R = cfg.filters, cfg.channel_multipliers, cfg.num_res_blocks
        c = F_ * mult[-1]
        self.Conv_0 = nn.Conv2d(cfg.embedding_dim, c, 3, padding=1)
        self.plan: list[str] = []
        k, conv = 0, 1
        for _ in range(R):
            setattr(self, f"ResBlock_{k}", ResBlock(c, c, cfg.groups))
            self.plan.append(f"ResBlock_{k}")
            k += 1
        for i in reversed(range(len(mult))):
            for _ in range(R):
                setattr(self, f"ResBlock_{k}", ResBlock(c, F_ * mult[i], cfg.groups))
                self.plan.append(f"ResBlock_{k}")
                c, k = F_ * mult[i], k + 1
            if i > 0:
                setattr(self, f"Conv_{conv}", nn.Conv2d(c, c, 3, padding=1))
                self.plan += ["up", f"Conv_{conv}"]
                conv += 1
        self.GroupNorm_0 = nn.GroupNorm(cfg.groups, c, eps=1e-6)
        setattr(self, f"Conv_{conv}", nn.Conv2d(c, 3, 3, padding=1))
        self.out_conv = f"Conv_{conv}"

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = self.Conv_0(z)
        for name in self.plan:
            x = F.interpolate(x, scale_factor=2, mode="nearest") if name == "up" else getattr(self, name)(x)
        return getattr(self, self.out_conv)(F.silu(self.GroupNorm_0(x)))


class Quantizer(nn.Module):
    def __init__(self, cfg: VQGANConfig) -> None:
        super().__init__()
        self.codebook = nn.Parameter(torch.zeros(cfg.codebook_size, cfg.embedding_dim))

    def indices(self, z: torch.Tensor) -> torch.Tensor:
        """z (B, C, h, w) → nearest code ids (B, h, w) (squared Euclidean; ties → lowest id)."""
        flat = z.permute(0, 2, 3, 1).reshape(-1, z.shape[1])
        d2 = (flat.pow(2).sum(1, keepdim=True) - 2 * flat @ self.codebook.t()
              + self.codebook.pow(2).sum(1)[None])
        return d2.argmin(1).view(z.shape[0], z.shape[2], z.shape[3])


class VQGAN(nn.Module):
    """Tokenizer: :meth:`encode` images (B, 3, H, W) in [0, 1] → tokens (B, (H/16)·(W/16)) int64 row-major;
    :meth:`decode` tokens → images (B, 3, H, W) clipped to [0, 1]."""

    def __init__(self, cfg: VQGANConfig = VQGANConfig()) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder, self.decoder, self.quantizer = Encoder(cfg), Decoder(cfg), Quantizer(cfg)

    @torch.no_grad()
    def encode(self, images: torch.Tensor) -> torch.Tensor:
        ids = self.quantizer.indices(self.encoder(images))
        return ids.flatten(1)

    @torch.no_grad()
    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        B, N = tokens.shape
        side = int(round(N ** 0.5))
        if side * side != N:
            raise ValueError(f"decode: {N} tokens are not a square grid")
        z = self.quantizer.codebook[tokens].view(B, side, side, -1).permute(0, 3, 1, 2)
        return self.decoder(z).clamp(0.0, 1.0)


def convert_flax(tree: Mapping, cfg: VQGANConfig, name: str = "checkpoint") -> dict[str, torch.Tensor]:
    """The torch state dict of :class:`VQGAN` (``cfg``) from a restored Flax tree (``{"params": {...}}`` or the
    params themselves). Every torch parameter must have its Flax counterpart with the transposed shape and every
    Flax parameter must be used; otherwise :class:`CheckpointError` names the keys and shapes."""
    params = tree.get("params", tree) if isinstance(tree, Mapping) else None
    if not isinstance(params, Mapping) or not {"encoder", "decoder", "quantizer"} <= set(params):
        raise CheckpointError(f"{name}: no params.encoder/decoder/quantizer (top keys: "
                              f"{sorted(tree)[:8] if isinstance(tree, Mapping) else type(tree).__name__})")
    flat = flatten({k: params[k] for k in ("encoder", "decoder", "quantizer")})
    model = VQGAN(cfg)
    out, used, problems = {}, set(), []
    for key, p in model.state_dict().items():
        parent, leaf = key.rsplit(".", 1)
        is_norm = parent.rsplit(".", 1)[-1].startswith("GroupNorm_")
        fkey = f"{parent}.{'scale' if is_norm and leaf == 'weight' else 'kernel' if leaf == 'weight' else leaf}"
        if key == "quantizer.codebook":
            fkey = key
        if fkey not in flat:
            problems.append(f"missing {fkey} (for {key} {tuple(p.shape)})")
            continue
        arr = np.asarray(flat[fkey], dtype=np.float32)
        if arr.ndim == 4:
            arr = arr.transpose(3, 2, 0, 1)  # (kh, kw, in, out) -> (out, in, kh, kw)
        if tuple(arr.shape) != tuple(p.shape):
            problems.append(f"{fkey}: shape {tuple(flat[fkey].shape)} does not fit {key} {tuple(p.shape)}")
            continue
        out[key] = torch.from_numpy(np.ascontiguousarray(arr))
        used.add(fkey)
    extra = sorted(set(flat) - used)
    if extra:
        problems.append(f"unused checkpoint parameters {extra[:6]}{' ...' if len(extra) > 6 else ''}")
    if problems:
        raise CheckpointError(f"{name}: does not match the VQGAN of {cfg}: " + "; ".join(problems[:8]))
    return out


def to_flax(state: Mapping[str, torch.Tensor]) -> dict:
    """Inverse of :func:`convert_flax` (``{"params": nested tree}``, float32 numpy): the rehearsal writes its
    miniature checkpoint with it."""
    tree: dict = {}
    for key, t in state.items():
        parent, leaf = key.rsplit(".", 1)
        arr = t.detach().cpu().numpy().astype(np.float32)
        if key != "quantizer.codebook":
            if leaf == "weight" and arr.ndim == 4:
                leaf, arr = "kernel", arr.transpose(2, 3, 1, 0)
            elif leaf == "weight":
                leaf = "scale"
        node = tree
        for part in parent.split("."):
            node = node.setdefault(part, {})
        node[leaf] = np.ascontiguousarray(arr)
    return {"params": tree}


def config_from(section: Mapping, codebook_size: int) -> VQGANConfig:
    """:class:`VQGANConfig` from the ``paper.vqgan`` config section and ``tokenizer.K``."""
    return VQGANConfig(filters=int(section["filters"]),
                       channel_multipliers=tuple(int(m) for m in section["channel_multipliers"]),
                       num_res_blocks=int(section["num_res_blocks"]), embedding_dim=int(section["embedding_dim"]),
                       codebook_size=int(codebook_size), groups=int(section["groups"]))
