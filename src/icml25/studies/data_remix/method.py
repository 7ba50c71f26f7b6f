"""The math of Data Remixing (Ma, Chen & Deng, ICML 2025, arXiv 2506.11550, §3.2–3.3 and the released code [V]).

* Decoupling + hard-sample filtering (§3.2): each training sample is scored per modality by the confidence of
  that modality's unimodal head, KL(p_m ‖ uniform) = Σ_c p_{m,c} log₂(C·p_{m,c}); the sample goes to the
  modality on which the model is *least* confident (smaller KL). Each sample lands in exactly one subset, so the
  training set is not expanded.
* Batch-level reassembly (§3.3): unimodal batches, all visual batches first, then all audio batches; in a batch
  of modality m the other modality's features are zeroed after its encoder, so the other encoder, its unimodal
  head and its block of the fusion weight receive an exactly-zero gradient (no cross-modal interference).
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from torch import nn

MODES = ("av", "a", "v")
PROB_CLIP = 1e-9


def kl_to_uniform(probs) -> np.ndarray:
    """KL divergence (bits) of each row of ``probs`` (N, C) to the uniform distribution over C classes.

    Σ_c p_c log₂(C·p_c) with p clipped to [1e-9, 1] first (as released [V]); 0 for a uniform row, log₂ C for a
    one-hot row (up to the clip). The terms of a row are summed in ascending order, so the score depends on the
    multiset of probabilities only: two heads that are equally confident up to a relabelling of the classes (e.g.
    one-hot on different classes) get bit-identical scores, an exact tie, which :func:`assign_modalities` sends to
    the visual subset as the paper and the released code intend (issue 32: summed in class order, one-hot heads on
    different classes differed by 1 ulp and 12 of the 36 pairs at C = 6 went to audio; the released float32 code
    has the same artefact on 8 of them). Returns (N,) float64.
    """
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] < 1:
        raise ValueError(f"kl_to_uniform: probs must be (N, C), got shape {p.shape}")
    if not np.all(np.isfinite(p)):
        raise ValueError("kl_to_uniform: probs contain NaN or inf")
    p = np.clip(p, PROB_CLIP, 1.0)
    return np.sort(p * np.log2(p.shape[1] * p), axis=1).sum(axis=1)


def assign_modalities(probs_a, probs_v) -> np.ndarray:
    """Routing of §3.2: True = audio subset D_a (KL_a < KL_v), False = visual subset D_v (ties go to D_v).

    probs_a, probs_v: (N, C) softmax outputs of the audio and visual unimodal heads. Returns (N,) bool.
    """
    kl_a, kl_v = kl_to_uniform(probs_a), kl_to_uniform(probs_v)
    if kl_a.shape != kl_v.shape:
        raise ValueError(f"assign_modalities: probs_a and probs_v differ in rows ({kl_a.size} vs {kl_v.size})")
    return kl_a < kl_v


def remix_batches(assign, batch_size: int, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """Reassembled batches (§3.3): every shuffled batch of D_v ("v"), then every shuffled batch of D_a ("a").

    assign: (N,) bool from :func:`assign_modalities`. Each index of range(N) appears exactly once; every batch
    has ≤ batch_size indices; an empty subset contributes no batch. The visual subset is shuffled first.
    """
    assign = np.asarray(assign)
    if assign.ndim != 1 or assign.dtype != bool:
        raise ValueError(f"remix_batches: assign must be a 1-D bool array, got {assign.dtype} {assign.shape}")
    if int(batch_size) < 1:
        raise ValueError(f"remix_batches: batch_size={batch_size} must be ≥ 1")
    out: list[tuple[str, np.ndarray]] = []
    for mode, members in (("v", ~assign), ("a", assign)):
        idx = rng.permutation(np.flatnonzero(members))
        out += [(mode, idx[i:i + batch_size]) for i in range(0, idx.size, batch_size)]
    return out


def _zeroed(x: torch.Tensor) -> torch.Tensor:
    # masked_fill keeps the encoder in the graph (it runs, as released) and passes back an exact-zero gradient
    return x.masked_fill(torch.ones_like(x, dtype=torch.bool), 0.0)


def masked_forward(model: nn.Module, x_a: torch.Tensor, x_v: torch.Tensor, mode: str = "av"):
    """Forward pass of the fusion model with modality masking (§3.3).

    mode "av": a = E_a(x_a), v = E_v(x_v); "a": an audio batch, v ← 0 after the visual encoder; "v": a visual
    batch, a ← 0. Returns (fused_logits h([a; v]), logits_a h_a(a), logits_v h_v(v)), each (B, C).
    ``model`` needs ``enc_a``, ``enc_v``, ``head``, ``head_a``, ``head_v`` (see :class:`..model.FusionNet`).
    """
    if mode not in MODES:
        raise ValueError(f"masked_forward: mode={mode!r} not in {MODES}")
    a = model.enc_a(x_a)
    v = model.enc_v(x_v)
    if mode == "a":
        v = _zeroed(v)
    elif mode == "v":
        a = _zeroed(a)
    return model.head(torch.cat([a, v], dim=1)), model.head_a(a), model.head_v(v)


def masked_grad_blocks(model: nn.Module, mode: str) -> Iterator[tuple[str, torch.Tensor | None]]:
    """(name, gradient) of every block that a ``mode`` batch must leave untouched (claim 2).

    mode "a": the visual encoder, the visual head and the fusion columns W_v = head.weight[:, F:]; mode "v":
    the audio counterparts (W_a = head.weight[:, :F]). A ``None`` gradient is yielded as ``None``.
    """
    if mode not in ("a", "v"):
        raise ValueError(f"masked_grad_blocks: mode={mode!r} must be 'a' or 'v'")
    other = "v" if mode == "a" else "a"
    for prefix in (f"enc_{other}", f"head_{other}"):
        for name, p in getattr(model, prefix).named_parameters():
            yield f"{prefix}.{name}", p.grad
    F = model.feat
    g = model.head.weight.grad
    cols = slice(F, 2 * F) if other == "v" else slice(0, F)
    yield f"head.weight[:, {cols.start}:{cols.stop}]", None if g is None else g[:, cols]


def masked_grad_max(model: nn.Module, mode: str) -> float:
    """max |gradient| over :func:`masked_grad_blocks` (a ``None`` gradient counts as 0); 0.0 = isolated."""
    vals = [float(g.abs().max()) for _, g in masked_grad_blocks(model, mode) if g is not None and g.numel()]
    return max(vals, default=0.0)


def logit_grad_cosine(fused_a: torch.Tensor, fused_v: torch.Tensor, y: torch.Tensor) -> float:
    """Cosine of ∂CE/∂(fused logits) from an audio-only and a visual-only forward of the same batch (diagnostic).

    ∂CE/∂z = softmax(z) − onehot(y) per row; both (B, C) are flattened. +1: the modalities push the shared
    fusion output the same way; < 0: they clash.
    """
    onehot = torch.nn.functional.one_hot(y, fused_a.shape[1]).to(fused_a.dtype)
    ga = (fused_a.softmax(1) - onehot).flatten()
    gv = (fused_v.softmax(1) - onehot).flatten()
    den = float(ga.norm() * gv.norm())
    return float(ga @ gv) / den if den > 0 else float("nan")
