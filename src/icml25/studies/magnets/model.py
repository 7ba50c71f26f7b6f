"""The width-nested bidirectional transformer of MaGNeTS (Goyal et al., ICML 2025, "Masked Generative Nested
Transformers with Decode Time Scaling", arXiv:2502.00382, Sec. 3.1 "Nested models" and 3.3 "KV caching").

One set of weights holds every sub-model: the sub-model of width fraction ``f`` uses the first ``d = f·D``
channels of every tensor (embeddings, LayerNorm affines, ``W_q, W_k, W_v, W_o[:d, :d]`` = the first ``f·H`` heads
of size ``D/H``, ``W_1[:4d, :d]``, ``W_2[:d, :4d]``, ``W_out[:, :d]``), so the sub-models add no parameters [R: the
nesting axis is width; the paper nests sub-models, the axis is our reconstruction].

Rows of the sequence: row 0 is the class token, rows 1..N the token positions 0..N-1. ``[MASK] = vocab``.
Decoding (no autograd) writes attention as explicit matmuls so ``torch.utils.flop_counter`` sees every
multiply–add the analytic count (:func:`.method.count_flops`) counts; training (autograd on, no cache) uses the
fused ``scaled_dot_product_attention`` kernel, the same math to float32 rounding (tested).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class KVCache:
    """Keys and values of every layer for all N+1 rows at one width: ``k[l], v[l]`` are (B, N+1, d)."""

    width: float
    k: list[torch.Tensor]
    v: list[torch.Tensor]

    def resized(self, width: float, dim: int) -> "KVCache":
        """The ``pad`` rule [R] for a width change without refresh: keep the stale entries, zero-pad the new
        channels (wider) or drop channels (narrower). ``dim`` = full model width D."""
        d = _dim_of(width, dim)

        def fit(x: torch.Tensor) -> torch.Tensor:
            if x.shape[-1] >= d:
                return x[..., :d].clone()
            return F.pad(x, (0, d - x.shape[-1]))

        return KVCache(width, [fit(x) for x in self.k], [fit(x) for x in self.v])


def _dim_of(width: float, dim: int) -> int:
    d = width * dim
    if abs(d - round(d)) > 1e-9 or round(d) < 1:
        raise ValueError(f"width fraction {width} of dim {dim} is not a whole number of channels")
    return int(round(d))


class Block(nn.Module):
    """Pre-LN transformer block: x + Attn(LN1 x), then + MLP(LN2 x) (GELU)."""

    def __init__(self, dim: int, mlp_ratio: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp_ratio * dim)
        self.fc2 = nn.Linear(mlp_ratio * dim, dim)


def _ln(ln: nn.LayerNorm, x: torch.Tensor, d: int) -> torch.Tensor:
    return F.layer_norm(x, (d,), ln.weight[:d], ln.bias[:d], ln.eps)


def _lin(lin: nn.Linear, x: torch.Tensor, n_out: int, n_in: int) -> torch.Tensor:
    return F.linear(x, lin.weight[:n_out, :n_in], lin.bias[:n_out])


class NestedMaskedTransformer(nn.Module):
    """Class-conditional bidirectional masked-token transformer whose width-``f`` sub-models share weights.

    Args: ``vocab`` K codes (``[MASK]`` = K), ``n_classes`` class-token embeddings, ``seq_len`` N positions,
    ``dim`` D, ``depth`` L blocks, ``heads`` H (head size D/H at every width), ``mlp_ratio`` (MLP width
    ``mlp_ratio·d``), ``widths`` the allowed width fractions (each ``f·H`` a whole number of heads; must hold 1).
    """

    def __init__(self, vocab: int = 64, n_classes: int = 10, seq_len: int = 49, dim: int = 64, depth: int = 3,
                 heads: int = 4, mlp_ratio: int = 4, widths: Sequence[float] = (0.25, 0.5, 1.0)) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} must be a multiple of heads {heads}")
        widths = tuple(float(w) for w in widths)
        if not widths or max(widths) != 1.0 or min(widths) <= 0:
            raise ValueError(f"widths {widths}: fractions in (0, 1] that include 1.0")
        for w in widths:
            if abs(w * heads - round(w * heads)) > 1e-9 or round(w * heads) < 1:
                raise ValueError(f"width {w} x {heads} heads is not a whole number of heads")
        self.vocab, self.n_classes, self.seq_len = vocab, n_classes, seq_len
        self.dim, self.depth, self.heads, self.mlp_ratio, self.widths = dim, depth, heads, mlp_ratio, widths
        self.head_dim = dim // heads
        self.mask_id = vocab
        self.tok_emb = nn.Embedding(vocab + 1, dim)
        self.cls_emb = nn.Embedding(n_classes, dim)
        self.pos_emb = nn.Parameter(torch.zeros(seq_len + 1, dim))
        self.blocks = nn.ModuleList(Block(dim, mlp_ratio) for _ in range(depth))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)
        self._init()

    def _init(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    # -- widths ---------------------------------------------------------------------------------------------
    def width_dim(self, width_fraction: float) -> int:
        """Channels d = f·D of the sub-model; ``width_fraction`` must be one of ``widths``."""
        if not any(abs(width_fraction - w) < 1e-12 for w in self.widths):
            raise ValueError(f"width_fraction {width_fraction} not in widths {self.widths}")
        return _dim_of(width_fraction, self.dim)

    def new_cache(self, batch: int, width_fraction: float) -> KVCache:
        """An empty (zero) cache for ``batch`` samples at one width."""
        d = self.width_dim(width_fraction)
        z = [self.pos_emb.new_zeros(batch, self.seq_len + 1, d) for _ in range(self.depth)]
        return KVCache(width_fraction, z, [t.clone() for t in z])

    # -- compute --------------------------------------------------------------------------------------------
    def embed(self, tokens: torch.Tensor, class_ids: torch.Tensor, d: int) -> torch.Tensor:
        """Input rows (B, N+1, d): class token at row 0, token embeddings after it, plus positions."""
        x = torch.cat([self.cls_emb.weight[class_ids, :d].unsqueeze(1), self.tok_emb.weight[tokens, :d]], 1)
        return x + self.pos_emb[:, :d]

    def run_rows(self, tokens: torch.Tensor, class_ids: torch.Tensor, width_fraction: float,
                 rows: torch.Tensor | None = None, n_out: int | None = None,
                 cache: KVCache | None = None) -> torch.Tensor:
        """Process the rows ``rows`` (B, n_q) (indices 0..N; None = all N+1 rows, class row last) and return the
        logits (B, n_out, K) of the first ``n_out`` of them (None: all rows except the class row, which needs
        ``rows=None``).

        With ``cache`` (at this width), the K/V of ``rows`` are written into it and the queries attend to all
        N+1 cached rows, so rows outside ``rows`` contribute their stored (possibly stale) K/V. Without a cache,
        ``rows`` must cover every row and attention runs over the rows themselves.
        """
        B, N = tokens.shape
        if N != self.seq_len:
            raise ValueError(f"tokens: expected {self.seq_len} positions, got {N}")
        d = self.width_dim(width_fraction)
        h, hd = d // self.head_dim, self.head_dim
        if rows is None:
            rows = torch.cat([torch.arange(1, N + 1, device=tokens.device),
                              torch.zeros(1, dtype=torch.long, device=tokens.device)]).expand(B, -1)
            n_out = N if n_out is None else n_out
        elif n_out is None:
            raise ValueError("run_rows: n_out is required with explicit rows")
        if cache is not None and cache.width != width_fraction:
            raise ValueError(f"cache width {cache.width} differs from width_fraction {width_fraction}")
        if cache is None and rows.shape[1] != N + 1:
            raise ValueError("run_rows: without a cache every row must be recomputed")
        x = self.embed(tokens, class_ids, d).gather(1, rows.unsqueeze(-1).expand(-1, -1, d))
        idx = rows.unsqueeze(-1).expand(-1, -1, d)
        n_q = rows.shape[1]
        for layer, blk in enumerate(self.blocks):
            a = _ln(blk.ln1, x, d)
            q, k, v = _lin(blk.q, a, d, d), _lin(blk.k, a, d, d), _lin(blk.v, a, d, d)
            if cache is not None:
                if torch.is_grad_enabled():
                    cache.k[layer] = cache.k[layer].scatter(1, idx, k)
                    cache.v[layer] = cache.v[layer].scatter(1, idx, v)
                else:  # decoding: write the rows in place (the same values, no copy of the whole cache)
                    cache.k[layer].scatter_(1, idx, k)
                    cache.v[layer].scatter_(1, idx, v)
                k, v = cache.k[layer], cache.v[layer]
            qh = q.view(B, n_q, h, hd).transpose(1, 2)
            kh = k.reshape(B, -1, h, hd).transpose(1, 2)
            vh = v.reshape(B, -1, h, hd).transpose(1, 2)
            if cache is None and torch.is_grad_enabled():
                # training: the fused kernel (same math, ~1/3 less time for forward + backward on CPU)
                o = F.scaled_dot_product_attention(qh, kh, vh).transpose(1, 2).reshape(B, n_q, d)
            else:  # decoding: explicit matmuls, which FlopCounterMode counts (check 4c)
                att = torch.softmax(torch.matmul(qh, kh.transpose(-1, -2)) / math.sqrt(hd), dim=-1)
                o = torch.matmul(att, vh).transpose(1, 2).reshape(B, n_q, d)
            x = x + _lin(blk.o, o, d, d)
            m = _ln(blk.ln2, x, d)
            x = x + _lin(blk.fc2, F.gelu(_lin(blk.fc1, m, self.mlp_ratio * d, d)), d, self.mlp_ratio * d)
        out = _ln(self.ln_f, x[:, :n_out], d)
        return _lin(self.head, out, self.vocab, d)

    def forward(self, tokens: torch.Tensor, class_ids: torch.Tensor, width_fraction: float) -> torch.Tensor:
        """tokens LongTensor (B, N) in 0..K (K = [MASK]), class_ids LongTensor (B,), ``width_fraction`` in
        ``widths`` -> logits (B, N, K) of the width-f sub-model (one full pass, no cache)."""
        return self.run_rows(tokens, class_ids, width_fraction)


def sliced_standalone(model: NestedMaskedTransformer, width_fraction: float) -> NestedMaskedTransformer:
    """A standalone model of width d = f·D (f·H heads) holding copies of the sliced weights (mechanism check (a)):
    its full-width forward must equal ``model.forward(..., width_fraction)``."""
    d = model.width_dim(width_fraction)
    small = NestedMaskedTransformer(model.vocab, model.n_classes, model.seq_len, d, model.depth,
                                    d // model.head_dim, model.mlp_ratio, (1.0,)).to(device=model.pos_emb.device,
                                                                      dtype=model.pos_emb.dtype)
    big = dict(model.state_dict())
    with torch.no_grad():
        for name, p in small.state_dict().items():
            src = big[name]
            p.copy_(src[tuple(slice(0, s) for s in p.shape)])
    return small


class PlainTransformer(nn.Module):
    """The non-nested reference: the same embeddings and head around ``torch.nn.TransformerEncoderLayer``
    (pre-LN, GELU, no dropout), holding a copy of a nested model's full weights (mechanism check (a), f = 1)."""

    def __init__(self, model: NestedMaskedTransformer) -> None:
        super().__init__()
        D = model.dim
        self.tok_emb, self.cls_emb = nn.Embedding(model.vocab + 1, D), nn.Embedding(model.n_classes, D)
        self.pos_emb = nn.Parameter(torch.zeros(model.seq_len + 1, D))
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(D, model.heads, model.mlp_ratio * D, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True) for _ in range(model.depth))
        self.ln_f, self.head = nn.LayerNorm(D), nn.Linear(D, model.vocab)
        self.to(device=model.pos_emb.device, dtype=model.pos_emb.dtype)
        with torch.no_grad():
            for name in ("tok_emb", "cls_emb", "ln_f", "head"):
                getattr(self, name).load_state_dict(getattr(model, name).state_dict())
            self.pos_emb.copy_(model.pos_emb)
            for lay, blk in zip(self.layers, model.blocks):
                lay.self_attn.in_proj_weight.copy_(torch.cat([blk.q.weight, blk.k.weight, blk.v.weight]))
                lay.self_attn.in_proj_bias.copy_(torch.cat([blk.q.bias, blk.k.bias, blk.v.bias]))
                lay.self_attn.out_proj.load_state_dict(blk.o.state_dict())
                lay.norm1.load_state_dict(blk.ln1.state_dict())
                lay.norm2.load_state_dict(blk.ln2.state_dict())
                lay.linear1.load_state_dict(blk.fc1.state_dict())
                lay.linear2.load_state_dict(blk.fc2.state_dict())

    def forward(self, tokens: torch.Tensor, class_ids: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.cls_emb(class_ids).unsqueeze(1), self.tok_emb(tokens)], 1) + self.pos_emb
        for lay in self.layers:
            x = lay(x)
        return self.head(self.ln_f(x[:, 1:]))
