"""The generative recommender: a small T5-style encoder-decoder and beam search (paper §3.4, §4.1).

The paper uses ``transformers.T5ForConditionalGeneration``. ``backend="torch"`` [R] (default here) is a pre-norm
T5-style model in plain torch (RMSNorm, bias-free attention with d_kv per head, ReLU feed-forward) with learned
absolute positions instead of T5's relative position bias, of the same sizes (d_model, d_ff, heads, d_kv, layers),
because importing ``transformers`` costs ~6 CPU-s per job on this machine; ``backend="t5"`` builds the T5 model
from a config (no pretrained weights) when ``transformers`` is installed (extra ``action_piece-paper``). Both
expose ``encode(src, src_pad) -> memory`` and ``step_logits(memory, src_pad, tgt_in) -> (N, T, V)``; decoding
starts from PAD (T5's decoder start token).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

IGNORE = -100


class _Attn(nn.Module):
    """Multi-head attention without biases (T5 style): heads x d_kv, q/k/v/o projections."""

    def __init__(self, d_model: int, n_heads: int, d_kv: int):
        super().__init__()
        self.h, self.dk = n_heads, d_kv
        self.q = nn.Linear(d_model, n_heads * d_kv, bias=False)
        self.kv = nn.Linear(d_model, 2 * n_heads * d_kv, bias=False)
        self.o = nn.Linear(n_heads * d_kv, d_model, bias=False)

    def keys(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, S, d) -> K, V (N, h, S, d_kv)."""
        N, S, _ = x.shape
        k, v = self.kv(x).view(N, S, 2, self.h, self.dk).permute(2, 0, 3, 1, 4)
        return k, v

    def forward(self, x: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor | None = None,
                causal: bool = False, group: int = 1) -> torch.Tensor:
        """``group`` > 1 (cross-attention in beam search): rows of x come in groups of ``group`` beams sharing one
        memory row of ``kv``/``mask``; their queries are stacked instead of repeating the memory."""
        N, T, _ = x.shape
        q = self.q(x).view(N, T, self.h, self.dk).transpose(1, 2)  # (N, h, T, dk)
        if group > 1:
            G = N // group
            q = q.reshape(G, group, self.h, T, self.dk).transpose(1, 2).reshape(G, self.h, group * T, self.dk)
        y = nn.functional.scaled_dot_product_attention(q, kv[0], kv[1], attn_mask=mask, is_causal=causal)
        if group > 1:
            y = y.reshape(G, self.h, group, T, self.dk).transpose(1, 2).reshape(N, self.h, T, self.dk)
        return self.o(y.transpose(1, 2).reshape(N, T, self.h * self.dk))


class _Block(nn.Module):
    def __init__(self, d_model: int, d_ff: int, n_heads: int, d_kv: int, dropout: float, cross: bool):
        super().__init__()
        self.n1, self.att = nn.RMSNorm(d_model), _Attn(d_model, n_heads, d_kv)
        self.cross = cross
        if cross:
            self.n2, self.xatt = nn.RMSNorm(d_model), _Attn(d_model, n_heads, d_kv)
        self.n3 = nn.RMSNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff, bias=False), nn.ReLU(), nn.Dropout(dropout),
                                nn.Linear(d_ff, d_model, bias=False))
        self.drop = nn.Dropout(dropout)

    def forward(self, x, self_mask=None, causal=False, mem_kv=None, mem_mask=None, group=1):
        h = self.n1(x)
        x = x + self.drop(self.att(h, self.att.keys(h), self_mask, causal))
        if self.cross:
            x = x + self.drop(self.xatt(self.n2(x), mem_kv, mem_mask, group=group))
        return x + self.drop(self.ff(self.n3(x)))


class Seq2Seq(nn.Module):
    """Pre-norm T5-style encoder-decoder [R: learned absolute positions instead of T5's relative bias]:
    tokens (N, S) -> memory (N, S, d); decoder logits (N, T, n_tokens). Cross-attention keys/values are computed
    once per source (:meth:`memory_kv`), so beam search does not re-project the memory per beam and step."""

    def __init__(self, n_tokens: int, d_model: int = 64, d_ff: int = 256, n_heads: int = 4, n_enc: int = 2,
                 n_dec: int = 2, max_len: int = 128, dropout: float = 0.1, d_kv: int = 16):
        super().__init__()
        self.embed = nn.Embedding(n_tokens, d_model, padding_idx=0)
        self.pos_src = nn.Embedding(max_len, d_model)
        self.pos_tgt = nn.Embedding(16, d_model)
        self.enc = nn.ModuleList(_Block(d_model, d_ff, n_heads, d_kv, dropout, False) for _ in range(n_enc))
        self.dec = nn.ModuleList(_Block(d_model, d_ff, n_heads, d_kv, dropout, True) for _ in range(n_dec))
        self.n_enc, self.n_dec = nn.RMSNorm(d_model), nn.RMSNorm(d_model)
        self.head = nn.Linear(d_model, n_tokens, bias=False)
        self.drop = nn.Dropout(dropout)

    @staticmethod
    def _mask(src_pad: torch.Tensor) -> torch.Tensor:
        return (~src_pad)[:, None, None, :]  # True = attend

    def encode(self, src: torch.Tensor, src_pad: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(src.shape[1], device=src.device)
        x = self.drop(self.embed(src) + self.pos_src(pos))
        m = self._mask(src_pad)
        for blk in self.enc:
            x = blk(x, self_mask=m)
        return self.n_enc(x)

    def memory_kv(self, memory: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [blk.xatt.keys(memory) for blk in self.dec]

    def decode_kv(self, kvs, src_pad: torch.Tensor, tgt_in: torch.Tensor, group: int = 1,
                  last_only: bool = False) -> torch.Tensor:
        """Decoder logits (N, T, V) (``last_only``: (N, 1, V)); ``kvs``/``src_pad`` hold one row per ``group``
        decoder rows (beam search)."""
        pos = torch.arange(tgt_in.shape[1], device=tgt_in.device)
        x = self.drop(self.embed(tgt_in) + self.pos_tgt(pos))
        m = self._mask(src_pad)
        for blk, kv in zip(self.dec, kvs):
            x = blk(x, causal=True, mem_kv=kv, mem_mask=m, group=group)
        if last_only:
            x = x[:, -1:]
        return self.head(self.n_dec(x))

    def step_logits(self, memory: torch.Tensor, src_pad: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return self.decode_kv(self.memory_kv(memory), src_pad, tgt_in)


class T5Backend(nn.Module):
    """``transformers.T5ForConditionalGeneration`` from a config (the paper's model), same interface."""

    def __init__(self, n_tokens: int, d_model: int, d_ff: int, n_heads: int, n_enc: int, n_dec: int, d_kv: int,
                 dropout: float = 0.1):
        super().__init__()
        try:
            from transformers import T5Config, T5ForConditionalGeneration
        except ImportError as err:
            raise RuntimeError("model.backend 't5' needs transformers: pip install 'icml25[action_piece-paper]'"
                               ) from err
        cfg = T5Config(vocab_size=n_tokens, d_model=d_model, d_ff=d_ff, num_heads=n_heads, num_layers=n_enc,
                       num_decoder_layers=n_dec, d_kv=d_kv, dropout_rate=dropout, pad_token_id=0,
                       decoder_start_token_id=0, eos_token_id=n_tokens - 1, feed_forward_proj="relu")
        self.t5 = T5ForConditionalGeneration(cfg)

    def encode(self, src: torch.Tensor, src_pad: torch.Tensor) -> torch.Tensor:
        return self.t5.encoder(input_ids=src, attention_mask=(~src_pad).long()).last_hidden_state

    def step_logits(self, memory: torch.Tensor, src_pad: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        out = self.t5(encoder_outputs=(memory,), attention_mask=(~src_pad).long(), decoder_input_ids=tgt_in)
        return out.logits


def build_model(n_tokens: int, cfg: Mapping[str, Any], max_len: int) -> nn.Module:
    """``cfg``: backend, d_model, d_ff, n_heads, n_enc, n_dec, d_kv, dropout."""
    if cfg["backend"] == "t5":
        return T5Backend(n_tokens, cfg["d_model"], cfg["d_ff"], cfg["n_heads"], cfg["n_enc"], cfg["n_dec"],
                         cfg["d_kv"], cfg["dropout"])
    return Seq2Seq(n_tokens, cfg["d_model"], cfg["d_ff"], cfg["n_heads"], cfg["n_enc"], cfg["n_dec"], max_len,
                   cfg["dropout"], cfg["d_kv"])


def seq_loss(model: nn.Module, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """Token cross-entropy; ``tgt`` (N, m+1) holds targets + EOS, padded with -100; decoder input = [PAD] + tgt[:-1]."""
    src_pad = src == 0
    tgt_in = torch.cat([torch.zeros_like(tgt[:, :1]), tgt[:, :-1].clamp_min(0)], dim=1)
    logits = model.step_logits(model.encode(src, src_pad), src_pad, tgt_in)
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=IGNORE)


@torch.no_grad()
def beam_search(model: nn.Module, src: torch.Tensor, beams: int, steps: int, eos: int,
                allowed: int | None = None) -> torch.Tensor:
    """Beam search from PAD for ``steps`` steps: (N, S) -> token sequences (N, beams, steps), best first. A beam that
    emitted EOS is extended with PAD at no cost. ``allowed``: ids >= allowed (BOS) are never generated except EOS."""
    N = src.shape[0]
    src_pad = src == 0
    mem = model.encode(src, src_pad)
    cached = hasattr(model, "memory_kv")
    if cached:  # project the memory once per source and share it across that source's beams
        kvs = model.memory_kv(mem)
    else:
        mem = mem.repeat_interleave(beams, 0)
        pad = src_pad.repeat_interleave(beams, 0)
    dev = src.device
    seqs = torch.zeros(N * beams, 1, dtype=torch.long, device=dev)
    score = torch.full((N, beams), float("-inf"), device=dev)
    score[:, 0] = 0.0
    for t in range(steps):
        logits = (model.decode_kv(kvs, src_pad, seqs, group=beams, last_only=True) if cached
                  else model.step_logits(mem, pad, seqs))
        logp = logits[:, -1].log_softmax(-1)  # (N*B, V)
        V = logp.shape[-1]
        logp[:, 0] = float("-inf")  # never PAD
        if allowed is not None:
            keep_eos = logp[:, eos].clone()
            logp[:, allowed:] = float("-inf")
            logp[:, eos] = keep_eos
        done = (seqs[:, 1:] == eos).any(1) if t > 0 else torch.zeros(N * beams, dtype=torch.bool, device=dev)
        logp[done] = float("-inf")
        logp[done, 0] = 0.0
        cand = (score.reshape(-1, 1) + logp).reshape(N, beams * V)
        top, idx = cand.topk(beams, dim=1)
        parent, tok = idx // V, idx % V
        rows = (torch.arange(N, device=dev).unsqueeze(1) * beams + parent).reshape(-1)
        seqs = torch.cat([seqs[rows], tok.reshape(-1, 1)], dim=1)
        score = top
    return seqs[:, 1:].reshape(N, beams, steps).cpu()
