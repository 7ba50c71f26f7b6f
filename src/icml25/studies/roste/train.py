"""Pretraining of the tiny decoder and (quantization-aware) supervised fine-tuning (paper §3, §4, Algorithm 1).

Every SFT arm trains the same *deployed* parameter dict (outlier vector and RMSNorm gains folded, the arm's merged
rotations applied) with AdamW and a cosine schedule: ``fp_sft`` in full precision, the QAT arms (``ste``,
``ste_rot_all``, ``roste``) with the fake-quantized forward and straight-through gradients on the latent rotated
weights. The loss is the cross-entropy on the output tokens (the top-k answer and EOS).
"""
from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from .method import QuantConfig, quant_error
from .model import LINEARS, Model, ModelConfig, decoder_forward


def _cosine(opt: torch.optim.Optimizer, steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 0.5 * (1 + math.cos(math.pi * min(k, steps) / steps)))


def _batches(n: int, steps: int, batch: int, seed: int):
    """Indices of ``steps`` minibatches: reshuffled epochs by a generator seeded with ``seed``."""
    g = torch.Generator().manual_seed(int(seed))
    perm, pos = torch.randperm(n, generator=g), 0
    for _ in range(steps):
        if pos + batch > n:
            perm, pos = torch.randperm(n, generator=g), 0
        yield perm[pos:pos + batch]
        pos += batch


def channel_max(model: Model, tokens: Tensor) -> Tensor:
    """Per-channel max |activation| (d,) of the residual stream's RMSNorm outputs (block inputs) over ``tokens``."""
    rec: dict[str, Tensor] = {}
    with torch.no_grad():
        decoder_forward(model.params(), tokens, model.cfg, record=rec)
    acts = [v for k, v in rec.items() if k.startswith(("attn_in", "mlp_in"))]
    return torch.stack([a.abs().amax(dim=(0, 1)) for a in acts]).amax(0)


def pretrain(cfg: ModelConfig, sequences: Tensor, steps: int, batch: int, lr: float, seed: int = 0,
             weight_decay: float = 0.0) -> tuple[Model, list[float]]:
    """Next-token pretraining on ``sequences`` (N, T); returns the model and the per-step loss (nats/token)."""
    torch.manual_seed(int(seed))
    model = Model(cfg, seed=seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    sched = _cosine(opt, steps)
    losses = []
    for idx in _batches(sequences.shape[0], steps, batch, seed):
        x = sequences[idx]
        logits = model(x[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    return model, losses


def output_loss(logits: Tensor, tokens: Tensor, out_start: int) -> Tensor:
    """Mean cross-entropy of the output tokens ``tokens[:, out_start:]`` predicted by ``logits`` (B, T, V)."""
    pred = logits[:, out_start - 1:-1]
    return torch.nn.functional.cross_entropy(pred.reshape(-1, pred.shape[-1]), tokens[:, out_start:].reshape(-1))


def weight_error(params: Mapping[str, Tensor], cfg: ModelConfig, qcfg: QuantConfig) -> float:
    """``E(W)``: summed weight quantization error ``Σ ||Q_w(W) - W||_F^2`` of every block linear (paper Fig. 4)."""
    bits = qcfg.w_bits if qcfg.w_bits is not None else 4
    return sum(quant_error(params[f"l{i}_{n}"].detach().T, bits, qcfg.symmetric, None, qcfg.clip)
               for i in range(cfg.n_layers) for n in LINEARS)


def sft(params: Mapping[str, Tensor], online: Mapping[str, Tensor | None], cfg: ModelConfig, train_tokens: Tensor,
        out_start: int, qcfg: QuantConfig | None, steps: int, batch: int, lr: float, seed: int,
        weight_decay: float = 0.0, e_every: int = 50, e_qcfg: QuantConfig | None = None) -> dict[str, Any]:
    """Fine-tune a deployed parameter dict on ``train_tokens`` (N, T).

    ``qcfg=None``: full precision; else the fake-quantized forward with STE. Returns ``{"params": trained dict,
    "loss": per-step loss, "e_w": [(step, E(W))] every ``e_every`` steps (under ``e_qcfg``), "seconds"}``.
    """
    torch.manual_seed(int(seed))
    p = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    opt = torch.optim.AdamW(list(p.values()), lr=lr, weight_decay=weight_decay)
    sched = _cosine(opt, steps)
    eq = e_qcfg or qcfg or QuantConfig()
    losses, e_w = [], []
    t0 = time.perf_counter()
    for step, idx in enumerate(_batches(train_tokens.shape[0], steps, batch, seed)):
        if e_every and step % e_every == 0:
            e_w.append((step, weight_error(p, cfg, eq)))
        x = train_tokens[idx]
        loss = output_loss(decoder_forward(p, x, cfg, qcfg, online), x, out_start)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    if e_every:
        e_w.append((steps, weight_error(p, cfg, eq)))
    return {"params": {k: v.detach() for k, v in p.items()}, "loss": losses, "e_w": e_w,
            "seconds": time.perf_counter() - t0}
