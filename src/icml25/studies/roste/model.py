"""The tiny Llama-style decoder [R], its rotation folding and the fake-quantized forward (paper §3, §4.1).

The model (RMSNorm, RoPE, SwiGLU, no biases; d=64, 2 layers, 4 heads × 16, d_ff=128, vocabulary 64, context 48,
~0.1M parameters) stands in for the paper's Pythia/Qwen/Llama models. Outlier channels are built in: a fixed,
non-trainable vector multiplies embedding channels ``outlier_channels`` by ``alpha`` (RMSNorm gains could not do
it, since folding them into the next linear layer cancels them).

Linear weights are stored as ``W`` of shape ``(in, out)`` (``y = x W``). A parameter dict ``p`` holds::

    emb (V, d)   l{i}_wq, l{i}_wk, l{i}_wv, l{i}_wo (d, d)   l{i}_wg, l{i}_wu (d, d_ff)   l{i}_wd (d_ff, d)
    lm_head (d, V)   optional: scale (d,) outlier vector, gains l{i}_ga, l{i}_gm, gf (d,)

:func:`fold` turns the model's dict into a *deployed* dict: the outlier vector is folded into ``emb``, the RMSNorm
gains into the next linears, and the merged rotations are applied (paper Fig. 2):

* R1 (d×d): ``emb R1``; ``R1^T W`` for q/k/v/gate/up and the lm_head; ``W R1`` for o and down;
* R2 (head_dim, per layer): O input rows ``R2^T W_o[h, :]`` merged; on the V side ``W_v`` is quantized unrotated
  and each head's V output is rotated online, ``V_h R2``, before the V cache quantizer (the official code,
  ``QuantLinear_R_v``; merging ``R2`` into ``W_v`` would quantize a different weight);
* R3 (head_dim, per layer): online on Q and K after RoPE (the K cache is stored rotated);
* R4 (d_ff, per layer): ``R4^T W_down`` merged, ``x R4`` online before down_proj.

In full precision every configuration computes the same function (RMSNorm commutes with an orthogonal R1).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import torch
from torch import Tensor, nn

from .method import QuantConfig, hadamard_signs, quantize, random_hadamard, rotate, signed_hadamard, slot_seed

LINEARS = ("wq", "wk", "wv", "wo", "wg", "wu", "wd")


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of the tiny decoder (defaults = the default scale) and its outlier injection [R]."""

    vocab: int = 64
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 128
    context: int = 48
    alpha: float = 30.0
    outlier_channels: tuple[int, ...] = field(default=(3, 17))
    rope_base: float = 10000.0
    norm_eps: float = 1e-5
    init_std: float = 0.02

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"ModelConfig: d_model {self.d_model} not divisible by n_heads {self.n_heads}")
        for name in ("d_model", "head_dim", "d_ff"):
            v = getattr(self, name)
            if v & (v - 1):
                raise ValueError(f"ModelConfig.{name}: {v} must be a power of 2 (Hadamard rotations)")
        if any(not 0 <= c < self.d_model for c in self.outlier_channels):
            raise ValueError(f"ModelConfig.outlier_channels: {self.outlier_channels} outside [0, {self.d_model})")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def slots(self) -> list[str]:
        """The searched rotation slots ``r2.{l}, r3.{l}, r4.{l}`` in order."""
        return [f"r{k}.{l}" for l in range(self.n_layers) for k in (2, 3, 4)]


class Model(nn.Module):
    """Tiny Llama-style decoder; ``Model()`` builds the default-scale model. ``forward(tokens (B, T)) -> logits
    (B, T, V)`` in full precision; :func:`fake_quant_forward` gives the quantized, rotated forward."""

    def __init__(self, cfg: ModelConfig | None = None, seed: int = 0) -> None:
        super().__init__()
        self.cfg = cfg = cfg or ModelConfig()
        g = torch.Generator().manual_seed(int(seed))
        d, f, v = cfg.d_model, cfg.d_ff, cfg.vocab

        def w(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape, generator=g) * cfg.init_std)

        p: dict[str, nn.Parameter] = {"emb": w(v, d)}
        for i in range(cfg.n_layers):
            p.update({f"l{i}_wq": w(d, d), f"l{i}_wk": w(d, d), f"l{i}_wv": w(d, d), f"l{i}_wo": w(d, d),
                      f"l{i}_wg": w(d, f), f"l{i}_wu": w(d, f), f"l{i}_wd": w(f, d),
                      f"l{i}_ga": nn.Parameter(torch.ones(d)), f"l{i}_gm": nn.Parameter(torch.ones(d))})
        p["gf"] = nn.Parameter(torch.ones(d))
        p["lm_head"] = w(d, v)
        self.p = nn.ParameterDict(p)
        scale = torch.ones(d)
        scale[list(cfg.outlier_channels)] = cfg.alpha
        self.register_buffer("scale", scale)

    def params(self) -> dict[str, Tensor]:
        """The parameter dict (with the outlier vector ``scale``) that :func:`decoder_forward` takes."""
        return {**dict(self.p.items()), "scale": self.scale}

    def forward(self, tokens: Tensor) -> Tensor:
        return decoder_forward(self.params(), tokens, self.cfg)


# ------------------------------------------------------------------------------------------------ forward


def rmsnorm(x: Tensor, eps: float) -> Tensor:
    """``x / sqrt(mean(x^2) + eps)`` over the last dimension (gain applied separately or folded)."""
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps)


@lru_cache(maxsize=64)
def _rope_tables(t: int, hd: int, base: float, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """cos and sin tables (1, t, 1, hd) of :func:`rope` (computed in float64, cast to ``dtype``)."""
    inv = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(dtype)[None, :, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(dtype)[None, :, None, :]
    return cos, sin


@lru_cache(maxsize=64)
def _signed_sin(t: int, hd: int, base: float, dtype: torch.dtype) -> Tensor:
    """The sin table of :func:`_rope_tables` with its first half negated (1, t, 1, hd)."""
    sin = _rope_tables(t, hd, base, dtype)[1]
    return torch.cat([-sin[..., : hd // 2], sin[..., hd // 2:]], -1)


def rope(x: Tensor, base: float) -> Tensor:
    """Rotary position embedding of ``x`` (B, T, H, hd), rotate-half convention:
    ``x cos + [-x2, x1] sin``, computed as ``x cos + [x2, x1] [-sin1, sin2]`` (one roll instead of a negation and
    a concatenation; ``(-a) b = a (-b)`` exactly, so the values and gradients are the same)."""
    t, hd = x.shape[1], x.shape[-1]
    cos, _ = _rope_tables(t, hd, float(base), x.dtype)
    return x * cos + x.roll(hd // 2, -1) * _signed_sin(t, hd, float(base), x.dtype)


@lru_cache(maxsize=64)
def _causal_bias(t: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """(t, t) additive causal mask: 0 on and below the diagonal, -inf above."""
    upper = torch.ones(t, t, dtype=torch.bool, device=device).triu(1)
    return torch.zeros(t, t, dtype=dtype, device=device).masked_fill(upper, float("-inf"))


def decoder_forward(p: Mapping[str, Tensor], tokens: Tensor, cfg: ModelConfig, qcfg: QuantConfig | None = None,
                    online: Mapping[str, Tensor | None] | None = None,
                    record: dict[str, Tensor] | None = None) -> Tensor:
    """Logits ``(B, T, V)`` of ``tokens`` (B, T) under parameters ``p`` (see the module docstring).

    ``qcfg`` fake-quantizes (with STE) every block linear's weight (per output channel) and input (per token), and
    K and V (per token and head); embedding, lm_head, norms and softmax stay full precision. ``online`` holds the
    signs of the online rotations ``r2.{l}`` (each head's V output, after the quantized W_v matmul), ``r3.{l}``
    (Q, K after RoPE) and ``r4.{l}`` (before down_proj), or None.
    ``record`` (if given) receives the block inputs before quantization: ``attn_in.{l}``, ``k.{l}``, ``v.{l}``
    (B, T, H, hd), ``o_in.{l}``, ``mlp_in.{l}``, ``down_in.{l}``.
    """
    if tokens.ndim != 2 or tokens.shape[1] > cfg.context:
        raise ValueError(f"tokens must be (B, T) with T <= {cfg.context}, got {tuple(tokens.shape)}")
    q = qcfg or QuantConfig(None, None, None)
    online = online or {}
    b, t = tokens.shape
    nh, hd = cfg.n_heads, cfg.head_dim

    def qa(x: Tensor) -> Tensor:
        return quantize(x, q.a_bits, q.symmetric, None, q.clip)

    def qkv(x: Tensor) -> Tensor:
        return quantize(x, q.kv_bits, q.symmetric, hd, q.clip)

    wq = quantized_weights(p, cfg, q) if q.w_bits is not None else p

    def lin(x: Tensor, name: str) -> Tensor:
        return x @ wq[name]

    def keep(name: str, x: Tensor) -> None:
        if record is not None:
            record[name] = x.detach()

    h = p["emb"][tokens]
    if "scale" in p:
        h = h * p["scale"]
    bias = _causal_bias(t, h.dtype, h.device)
    for i in range(cfg.n_layers):
        a = rmsnorm(h, cfg.norm_eps)
        if f"l{i}_ga" in p:
            a = a * p[f"l{i}_ga"]
        keep(f"attn_in.{i}", a)
        a = qa(a)
        qh = rope(lin(a, f"l{i}_wq").view(b, t, nh, hd), cfg.rope_base)
        kh = rope(lin(a, f"l{i}_wk").view(b, t, nh, hd), cfg.rope_base)
        vh = lin(a, f"l{i}_wv").view(b, t, nh, hd)
        r2 = online.get(f"r2.{i}")
        if r2 is not None:
            vh = rotate(vh, r2)
        r3 = online.get(f"r3.{i}")
        if r3 is not None:
            qh, kh = rotate(qh, r3), rotate(kh, r3)
        keep(f"k.{i}", kh)
        keep(f"v.{i}", vh)
        kh, vh = qkv(kh), qkv(vh)
        scores = torch.einsum("bqhd,bkhd->bhqk", qh, kh) / math.sqrt(hd)
        # + the -inf/0 bias: the values of masked_fill(-inf) (s + 0 = s); above the diagonal the softmax output is
        # exactly 0, so its gradient there is 0 too (masked_fill's backward zeroes it; the add passes it on)
        att = torch.softmax(scores + bias, dim=-1)
        o = torch.einsum("bhqk,bkhd->bqhd", att, vh).reshape(b, t, nh * hd)
        keep(f"o_in.{i}", o)
        h = h + lin(qa(o), f"l{i}_wo")
        m = rmsnorm(h, cfg.norm_eps)
        if f"l{i}_gm" in p:
            m = m * p[f"l{i}_gm"]
        keep(f"mlp_in.{i}", m)
        m = qa(m)
        f = torch.nn.functional.silu(lin(m, f"l{i}_wg")) * lin(m, f"l{i}_wu")
        r4 = online.get(f"r4.{i}")
        if r4 is not None:
            f = rotate(f, r4)
        keep(f"down_in.{i}", f)
        h = h + lin(qa(f), f"l{i}_wd")
    hn = rmsnorm(h, cfg.norm_eps)
    if "gf" in p:
        hn = hn * p["gf"]
    return hn @ p["lm_head"]


def quantized_weights(p: Mapping[str, Tensor], cfg: ModelConfig, q: QuantConfig) -> dict[str, Tensor]:
    """Every block linear ``W`` (in, out) fake-quantized per output channel (the rows of ``W^T``), with STE.

    Rows of equal length are quantized in one call (per-row quantization is independent of the other rows, so
    the values are those of one call per weight; one autograd node instead of fourteen). Returns ``{name: Q(W)}``
    for the ``l{i}_{linear}`` keys.
    """
    names = [f"l{i}_{n}" for i in range(cfg.n_layers) for n in LINEARS]
    groups: dict[int, list[str]] = {}
    for n in names:
        groups.setdefault(p[n].shape[0], []).append(n)
    out: dict[str, Tensor] = {}
    for members in groups.values():
        rows = [p[n].T for n in members]
        qrows = quantize(torch.cat(rows, 0), q.w_bits, q.symmetric, None, q.clip)
        for n, chunk in zip(members, torch.split(qrows, [r.shape[0] for r in rows], 0)):
            out[n] = chunk.T
    return out


# ------------------------------------------------------------------------------------------------ folding


def resolve_rotations(rotations: Mapping[str, bool] | str, cfg: ModelConfig) -> dict[str, bool]:
    """Choices ``{"r1": bool, "r2.0": bool, ...}`` from ``"none"`` (no rotation, R1 off), ``"all"`` (every slot
    H, R1 on) or a dict of the searched slots (R1 on unless the dict says ``"r1": False``)."""
    slots = cfg.slots()
    if isinstance(rotations, str):
        if rotations not in ("none", "all"):
            raise ValueError(f"rotations must be 'none', 'all' or a dict, got {rotations!r}")
        on = rotations == "all"
        return {"r1": on, **{s: on for s in slots}}
    missing = [s for s in slots if s not in rotations]
    unknown = [s for s in rotations if s not in slots and s != "r1"]
    if missing or unknown:
        raise ValueError(f"rotations: missing slots {missing}, unknown slots {unknown} (expected r1 and {slots})")
    return {"r1": bool(rotations.get("r1", True)), **{s: bool(rotations[s]) for s in slots}}


def rotation_signs(choices: Mapping[str, bool], cfg: ModelConfig, seed: int) -> dict[str, Tensor | None]:
    """Signs (float64) of each slot's ``R = diag(r) H / sqrt(d)`` where the choice is H, else None.

    R1's signs are random, seeded by ``(seed, "r1")``; R2-R4 carry no signs (``r = 1``: the official code's R2-R4
    are plain ``H / sqrt(d)``)."""
    dims = {"r1": cfg.d_model, "r2": cfg.head_dim, "r3": cfg.head_dim, "r4": cfg.d_ff}

    def signs(s: str) -> Tensor:
        d = dims[s.split(".")[0]]
        return hadamard_signs(d, slot_seed(seed, s)) if s == "r1" else torch.ones(d, dtype=torch.float64)

    return {s: signs(s) if on else None for s, on in choices.items()}


def _matrix(signs: Tensor) -> Tensor:
    return signed_hadamard(signs)


def fold(p: Mapping[str, Tensor], cfg: ModelConfig, signs: Mapping[str, Tensor | None]) -> tuple[dict[str, Tensor], dict[str, Tensor | None]]:
    """Deployed parameters and online rotations: outlier vector and RMSNorm gains folded, merged rotations applied.

    ``p`` is a model dict (with ``scale`` and gains) or an already folded one (neither). Returns
    ``(params, online)``; ``params`` has no gains or ``scale``, ``online`` maps ``r2.{l}`` (V output),
    ``r3.{l}``, ``r4.{l}`` to signs or None. Computed in float64 and cast back to ``p``'s dtype.
    """
    dt = p["emb"].dtype
    x = {k: v.detach().to(torch.float64) for k, v in p.items()}
    out: dict[str, Tensor] = {}
    emb = x["emb"] * x["scale"] if "scale" in x else x["emb"]
    ones = torch.ones(cfg.d_model, dtype=torch.float64)
    r1 = _matrix(signs["r1"]) if signs.get("r1") is not None else None
    out["emb"] = emb @ r1 if r1 is not None else emb
    lm = x.get("gf", ones)[:, None] * x["lm_head"]
    out["lm_head"] = r1.T @ lm if r1 is not None else lm
    nh, hd = cfg.n_heads, cfg.head_dim
    for i in range(cfg.n_layers):
        ga, gm = x.get(f"l{i}_ga", ones)[:, None], x.get(f"l{i}_gm", ones)[:, None]
        w = {n: x[f"l{i}_{n}"] for n in LINEARS}
        for n in ("wq", "wk", "wv"):
            w[n] = ga * w[n]
        for n in ("wg", "wu"):
            w[n] = gm * w[n]
        if r1 is not None:
            for n in ("wq", "wk", "wv", "wg", "wu"):
                w[n] = r1.T @ w[n]
            for n in ("wo", "wd"):
                w[n] = w[n] @ r1
        if signs.get(f"r2.{i}") is not None:
            r2 = _matrix(signs[f"r2.{i}"])  # W_v stays unrotated: V R2 is applied online (decoder_forward)
            w["wo"] = (r2.T @ w["wo"].reshape(nh, hd, -1)).reshape(nh * hd, -1)
        if signs.get(f"r4.{i}") is not None:
            w["wd"] = _matrix(signs[f"r4.{i}"]).T @ w["wd"]
        out.update({f"l{i}_{n}": v for n, v in w.items()})
    online = {f"r{k}.{i}": signs.get(f"r{k}.{i}") for i in range(cfg.n_layers) for k in (2, 3, 4)}
    return {k: v.to(dt) for k, v in out.items()}, online


def deploy(model: Model, rotations: Mapping[str, bool] | str, seed: int = 0,
           params: Mapping[str, Tensor] | None = None) -> tuple[dict[str, Tensor], dict[str, Tensor | None]]:
    """:func:`fold` of ``model`` (or of ``params``, a dict of the model's form) under a rotation choice."""
    choices = resolve_rotations(rotations, model.cfg)
    return fold(model.params() if params is None else params, model.cfg, rotation_signs(choices, model.cfg, seed))


def fake_quant_forward(model: Model, tokens: Tensor, rotations: Mapping[str, bool] | str, qcfg: QuantConfig,
                       seed: int = 0) -> Tensor:
    """Logits ``(B, T, V)`` of the deployed model: ``model`` folded under ``rotations`` (``"none"``, ``"all"`` or
    a dict of slot choices; Hadamard signs from ``seed``) and run with the W/A/KV quantizers of ``qcfg``."""
    params, online = deploy(model, rotations, seed)
    return decoder_forward(params, tokens, model.cfg, qcfg, online)


__all__ = ["ModelConfig", "Model", "decoder_forward", "fold", "deploy", "fake_quant_forward", "resolve_rotations",
           "rotation_signs", "random_hadamard"]
