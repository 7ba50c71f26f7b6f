"""The tiny seed decoder M (spec "Instruction world": 2 layers, d=64, 4 heads, context 24, ~70k parameters),
batched sampling with a key/value cache, and summed response log-probabilities (for π_ref and π_θ in DPO).

Sampling is batched on the tensor side: all sequences of a batch share one prompt length (prompts are grouped by
length), so one forward call per new token serves the whole batch; there is no Python loop over prompts.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from .data import BOS, CHAR_TO_ID, EOS, PAD, VOCAB_SIZE


class Block(nn.Module):
    """Pre-LN transformer block: causal self-attention + GELU MLP."""

    def __init__(self, d: int, heads: int, mlp_ratio: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, mlp_ratio * d), nn.GELU(), nn.Linear(mlp_ratio * d, d))

    def forward(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """x (B, T, d); cache (k, v) each (B, H, T_past, d/H). With a cache, the T new positions follow it."""
        B, T, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (t.view(B, T, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        # without a cache: causal; with a cache and one new token: attend to everything before it
        causal = cache is None
        if cache is not None and T > 1:
            raise ValueError("Block: with a cache, feed one token at a time")
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, d))
        x = x + self.mlp(self.ln2(x))
        return x, (k, v)


class Decoder(nn.Module):
    """GPT-style decoder over the world's 24-token vocabulary; the output head is tied to the embedding."""

    def __init__(self, n_layer: int = 2, d_model: int = 64, n_head: int = 4, context: int = 24,
                 mlp_ratio: int = 2) -> None:
        super().__init__()
        self.context = context
        self.tok = nn.Embedding(VOCAB_SIZE, d_model)
        self.pos = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head, mlp_ratio) for _ in range(n_layer))
        self.ln = nn.LayerNorm(d_model)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor, caches: list | None = None, start: int = 0
                ) -> tuple[torch.Tensor, list]:
        """Logits (B, T, V) of token ids ``idx`` (B, T) at positions ``start..start+T-1``; returns new caches."""
        T = idx.shape[1]
        if start + T > self.context:
            raise ValueError(f"Decoder: positions up to {start + T} exceed the context {self.context}")
        x = self.tok(idx) + self.pos(torch.arange(start, start + T, device=idx.device))
        new = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, None if caches is None else caches[i])
            new.append(kv)
        return self.ln(x) @ self.tok.weight.T, new


def build_model(cfg) -> Decoder:
    """A decoder from a :class:`~.config.ModelCfg`."""
    return Decoder(cfg.n_layer, cfg.d_model, cfg.n_head, cfg.context, cfg.mlp_ratio)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _top_p_sample(logits: torch.Tensor, temperature: float, top_p: float,
                  generator: torch.Generator | None) -> torch.Tensor:
    """One token per row from ``softmax(logits / T)`` restricted to the nucleus of mass ``top_p``; (B,)."""
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        outside = sorted_p.cumsum(dim=-1) - sorted_p > top_p  # tokens after the nucleus is full
        sorted_p = sorted_p.masked_fill(outside, 0.0)
        choice = torch.multinomial(sorted_p, 1, generator=generator)
        return order.gather(-1, choice).squeeze(-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate(model: Decoder, prompts: torch.Tensor, max_new_tokens: int, *, temperature: float = 0.0,
             top_p: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
    """Continue a batch of equal-length prompts (B, Lp) int64; returns (B, max_new_tokens) with PAD after EOS.

    ``temperature = 0`` is greedy decoding. BOS and PAD are never sampled [R]. One forward per new token for the
    whole batch (key/value cache), stopping early when every row has emitted EOS.
    """
    model.eval()
    B = prompts.shape[0]
    out = torch.full((B, max_new_tokens), PAD, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    logits, caches = model(prompts)
    pos = prompts.shape[1]
    for t in range(max_new_tokens):
        last = logits[:, -1, :].clone()
        last[:, PAD] = last[:, BOS] = -math.inf
        nxt = last.argmax(-1) if temperature == 0 else _top_p_sample(last, temperature, top_p, generator)
        nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
        out[:, t] = nxt
        done |= nxt == EOS
        if bool(done.all()) or t == max_new_tokens - 1:
            break
        logits, caches = model(nxt.unsqueeze(1), caches, start=pos)
        pos += 1
    return out


def group_by_length(prompts: Sequence[str]) -> dict[int, list[int]]:
    """Row indices of the prompts, grouped by length (so each group decodes as one tensor batch)."""
    groups: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        groups.setdefault(len(p), []).append(i)
    return groups


def encode_batch(texts: Sequence[str]) -> torch.Tensor:
    """(B, L) int64 of equal-length strings."""
    return torch.tensor([[CHAR_TO_ID[c] for c in t] for t in texts], dtype=torch.long)


def pack_sequences(prompts: Sequence[str], responses: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids (B, L) of ``prompt + response + EOS`` right-padded with PAD, and the float mask (B, L-1) of the
    positions whose *next* token is a response token or the final EOS (the tokens π scores).

    A response that hit the token limit without EOS is still scored as ending with EOS [R].
    """
    seqs = [[CHAR_TO_ID[c] for c in p] + [CHAR_TO_ID[c] for c in r] + [EOS] for p, r in zip(prompts, responses)]
    L = max(map(len, seqs))
    ids = torch.full((len(seqs), L), PAD, dtype=torch.long)
    mask = torch.zeros((len(seqs), L - 1))
    for i, (s, p) in enumerate(zip(seqs, prompts)):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, len(p) - 1: len(s) - 1] = 1.0
    return ids, mask


def sequence_logps(model: Decoder, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Summed log π(response tokens incl. EOS | prompt), (B,), for packed ``ids``/``mask`` (see
    :func:`pack_sequences`). Differentiable (used for π_θ in DPO)."""
    logits, _ = model(ids[:, :-1])
    logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return (logp * mask).sum(-1)


@torch.no_grad()
def batched_logps(model: Decoder, prompts: Sequence[str], responses: Sequence[str], batch: int = 4096
                  ) -> torch.Tensor:
    """:func:`sequence_logps` over many pairs in chunks, float64 (B,)."""
    model.eval()
    out = []
    for i in range(0, len(prompts), batch):
        ids, mask = pack_sequences(prompts[i:i + batch], responses[i:i + batch])
        out.append(sequence_logps(model, ids, mask).double())
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)


def sample_responses(model: Decoder, prompts: Sequence[str], n: int, max_new_tokens: int, *,
                     temperature: float, top_p: float, seed: int, batch_size: int = 8192,
                     progress: bool = False) -> list[list[str]]:
    """N sampled responses (strings, without EOS) per prompt; P × N. Deterministic in ``seed``.

    Prompts are grouped by length; each group's P_g × N sequences decode as tensor batches of ``batch_size``.
    """
    from tqdm import tqdm

    from .data import decode

    gen = torch.Generator().manual_seed(seed)
    out: list[list[str]] = [[] for _ in prompts]
    groups = sorted(group_by_length(prompts).items())
    bar = tqdm(total=len(prompts) * n, desc="sample", unit="seq", disable=not progress, mininterval=2.0)
    for _, rows in groups:
        enc = encode_batch([prompts[i] for i in rows]).repeat_interleave(n, dim=0)  # (P_g * N, L)
        owners = [i for i in rows for _ in range(n)]
        for s in range(0, enc.shape[0], batch_size):
            toks = generate(model, enc[s:s + batch_size], max_new_tokens, temperature=temperature, top_p=top_p,
                            generator=gen)
            for owner, row in zip(owners[s:s + batch_size], toks.tolist()):
                out[owner].append(decode(row))
            bar.update(toks.shape[0])
    bar.close()
    return out


def greedy_responses(model: Decoder, prompts: Sequence[str], max_new_tokens: int) -> list[str]:
    """Greedy output string of every prompt (batched per prompt length)."""
    from .data import decode

    out = [""] * len(prompts)
    for _, rows in group_by_length(prompts).items():
        toks = generate(model, encode_batch([prompts[i] for i in rows]), max_new_tokens)
        for i, row in zip(rows, toks.tolist()):
            out[i] = decode(row)
    return out


def save_state(model: nn.Module | dict, path) -> None:
    """Atomically ``torch.save`` a state dict (or a dict of state dicts)."""
    from icml25.core.io import atomic_path

    state = model.state_dict() if isinstance(model, nn.Module) else model
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_state(path) -> dict:
    """``torch.load(weights_only=True)``: tensors and plain containers only."""
    return torch.load(path, map_location="cpu", weights_only=True)
