"""MaGNeTS decoding and training math (Goyal et al., ICML 2025, arXiv:2502.00382).

* MaskGIT parallel decoding (Chang et al., CVPR 2022, Sec. 3.2) with the cosine schedule: :func:`mask_counts`,
  :func:`decode`.
* Decode-time model scaling (MaGNeTS Sec. 3.2): a width fraction per iteration (``schedule``).
* KV caching across iterations (MaGNeTS Sec. 3.3) [R: the refresh rules are ours]: at iteration t only the rows
  A_t = U_t ∪ D_{t-1} (still masked + decoded at t-1) are recomputed; a full pass runs at t = 0 and, with
  ``on_width_change="refresh"``, whenever the width changes.
* Analytic FLOPs (:func:`count_flops`): per sample and iteration,
  F_t = L(24 n_q d² + 4 n_q n_kv d) + 2|U_t| d K, one multiply–add = 2 FLOPs.
* Joint training with online distillation (MaGNeTS Sec. 3.4) [R: the loss form]: :func:`nested_loss`.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
import torch.nn.functional as F

from .model import NestedMaskedTransformer, _dim_of

WidthChange = Literal["refresh", "pad"]


def mask_counts(N: int = 49, T: int = 8) -> list[int]:
    """|U_t| for t = 0..T-1 and the final 0: |U_0| = N, |U_{t+1}| = n_t = clip(⌊N cos(π(t+1)/2T)⌋, 1, |U_t|−1),
    n_{T−1} = 0. For N = 49, T = 8: [49, 48, 45, 40, 34, 27, 18, 9, 0]."""
    if not 1 <= T <= N:
        raise ValueError(f"T={T} must be in 1..N={N}")
    sizes = [N]
    for t in range(T):
        u = sizes[-1]
        n = 0 if t == T - 1 else min(max(math.floor(N * math.cos(math.pi * (t + 1) / (2 * T))), 1), u - 1)
        sizes.append(max(n, 0))
    return sizes


def step_flops(n_q: int, n_kv: int, d: int, depth: int, n_logits: int, K: int) -> int:
    """FLOPs of one iteration for one sample: L(24 n_q d² + 4 n_q n_kv d) + 2 n_logits d K (QKV, O, MLP; QKᵀ and
    AV; the logits of the masked rows)."""
    return depth * (24 * n_q * d * d + 4 * n_q * n_kv * d) + 2 * n_logits * d * K


def _check_schedule(schedule: Sequence[float], T: int) -> list[float]:
    schedule = [float(f) for f in schedule]
    if len(schedule) != T:
        raise ValueError(f"schedule has {len(schedule)} widths, expected T={T}")
    return schedule


def _full_pass(t: int, use_cache: bool, width: float, prev_width: float | None, on_width_change: str) -> bool:
    if on_width_change not in ("refresh", "pad"):
        raise ValueError(f"on_width_change must be 'refresh' or 'pad', got {on_width_change!r}")
    return (not use_cache) or t == 0 or (width != prev_width and on_width_change == "refresh")


def count_flops(schedule: Sequence[float], use_cache: bool, N: int = 49, dim: int = 64, depth: int = 3,
                K: int = 64, T: int = 8, *, on_width_change: WidthChange = "refresh") -> list[int]:
    """Closed-form FLOPs per sample of each decoding iteration (list of T ints); d = f_t·dim, n_kv = N+1,
    n_q = N+1 on full passes else |A_t| = |U_t| + |D_{t-1}| = |U_{t-1}|."""
    schedule = _check_schedule(schedule, T)
    sizes = mask_counts(N, T)
    out, prev = [], None
    for t, f in enumerate(schedule):
        d = _dim_of(f, dim)
        n_q = N + 1 if _full_pass(t, use_cache, f, prev, on_width_change) else sizes[t - 1]
        out.append(step_flops(n_q, N + 1, d, depth, sizes[t], K))
        prev = f
    return out


def _gumbel(shape: tuple[int, ...], generator: torch.Generator | None) -> torch.Tensor:
    u = torch.rand(shape, generator=generator, dtype=torch.float64,
                   device=generator.device if generator is not None else None).clamp_(1e-20, 1 - 1e-12)
    return -torch.log(-torch.log(u))


def decode_noise(B: int, N: int, K: int, T: int, generator: torch.Generator | None) -> list[tuple[torch.Tensor,
                                                                                             torch.Tensor]]:
    """Every random number of a T-iteration decoding of B samples, in :func:`decode_trace`'s draw order: per
    iteration (Gumbel (B, N, K) float64 for sampling, Gumbel (B, N) for the re-masking confidence). They depend on
    the generator only (not on the schedule or the cache), so arms that share a decoding seed can share them."""
    return [(_gumbel((B, N, K), generator), _gumbel((B, N), generator)) for _ in range(T)]


@torch.no_grad()
def decode_trace(model: NestedMaskedTransformer, class_ids: torch.Tensor, schedule: Sequence[float],
                 use_cache: bool, T: int = 8, choice_temperature: float = 4.5,
                 generator: torch.Generator | None = None, *, on_width_change: WidthChange = "refresh",
                 measure_flops: bool = False, noise: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> dict:
    """:func:`decode` with its internals: ``tokens`` (B, N), ``flops`` (analytic, per sample per step),
    ``measured_flops`` (per sample per step from ``torch.utils.flop_counter.FlopCounterMode`` when
    ``measure_flops``), ``logits`` (list of (B, |U_t|, K)), ``unknown`` (list of (B, N) bool masks U_t),
    ``rows`` (list of (B, n_q) recomputed rows), ``full`` (list of bools: full pass). ``noise``: the draws of
    :func:`decode_noise` for this ``generator``'s state, B and T, used instead of drawing them here (the same
    tokens, bit for bit)."""
    schedule = _check_schedule(schedule, T)
    model.eval()
    B, N, K = class_ids.shape[0], model.seq_len, model.vocab
    sizes = mask_counts(N, T)
    dev = class_ids.device  # the model's device; random numbers come from ``generator``'s device
    tokens = torch.full((B, N), model.mask_id, dtype=torch.long, device=dev)
    unknown = torch.ones(B, N, dtype=torch.bool, device=dev)
    decoded_prev = torch.zeros(B, 0, dtype=torch.long, device=dev)
    cache, prev = None, None
    trace = {"flops": [], "measured_flops": [], "logits": [], "unknown": [], "rows": [], "full": []}
    for t, f in enumerate(schedule):
        # Random numbers first, same shapes whatever the path: cache and no-cache draw identical streams.
        if noise is None:
            g_sample, g_choice = _gumbel((B, N, K), generator).to(dev), _gumbel((B, N), generator).to(dev)
        else:
            if noise[t][0].shape != (B, N, K) or len(noise) != T:
                raise ValueError(f"decode_trace: noise holds {len(noise)} draws of {tuple(noise[t][0].shape)}, "
                                 f"expected {T} of {(B, N, K)}")
            g_sample, g_choice = noise[t][0].to(dev), noise[t][1].to(dev)
        u = sizes[t]
        pos_u = unknown.nonzero()[:, 1].view(B, u)  # (B, u) still-masked positions, ascending
        full = _full_pass(t, use_cache, f, prev, on_width_change)
        if full:
            pos_k = (~unknown).nonzero()[:, 1].view(B, N - u)
            rows = torch.cat([pos_u + 1, pos_k + 1, torch.zeros(B, 1, dtype=torch.long, device=dev)], 1)
            cache = model.new_cache(B, f)
        else:
            if f != cache.width:
                cache = cache.resized(f, model.dim)
            rows = torch.cat([pos_u + 1, decoded_prev + 1], 1)
        d = model.width_dim(f)
        if measure_flops:
            from torch.utils.flop_counter import FlopCounterMode

            with FlopCounterMode(display=False) as counter:
                logits = model.run_rows(tokens, class_ids, f, rows, u, cache)
            trace["measured_flops"].append(counter.get_total_flops() / B)
        else:
            logits = model.run_rows(tokens, class_ids, f, rows, u, cache)
        trace["flops"].append(step_flops(rows.shape[1], N + 1, d, model.depth, u, K))
        trace["logits"].append(logits)
        trace["unknown"].append(unknown.clone())
        trace["rows"].append(rows)
        trace["full"].append(full)
        logp = torch.log_softmax(logits.double(), dim=-1)  # (B, u, K)
        y_hat = (logp + g_sample.gather(1, pos_u.unsqueeze(-1).expand(-1, -1, K))).argmax(-1)  # Gumbel-max
        kappa = logp.gather(-1, y_hat.unsqueeze(-1)).squeeze(-1) \
            + choice_temperature * (1.0 - (t + 1) / T) * g_choice.gather(1, pos_u)
        n_t = sizes[t + 1]
        order = kappa.argsort(dim=1, stable=True)  # lowest confidence first
        tokens = tokens.scatter(1, pos_u, y_hat)
        remask = pos_u.gather(1, order[:, :n_t])
        tokens = tokens.scatter(1, remask, model.mask_id)
        unknown = torch.zeros_like(unknown).scatter(1, remask, True)
        decoded_prev = pos_u.gather(1, order[:, n_t:])
        prev = f
    trace["tokens"] = tokens
    return trace


def decode(model: NestedMaskedTransformer, class_ids: torch.Tensor, schedule: Sequence[float], use_cache: bool,
           T: int = 8, choice_temperature: float = 4.5, generator: torch.Generator | None = None, *,
           on_width_change: WidthChange = "refresh") -> tuple[torch.Tensor, list[int]]:
    """MaskGIT decoding with a width per iteration (MaGNeTS Sec. 3.2–3.3).

    class_ids LongTensor (B,), ``schedule`` T width fractions (each in ``model.widths``), ``use_cache`` the KV
    cache. At iteration t: ŷ_i ~ softmax(logits_i) (Gumbel-max), κ_i = log p(ŷ_i) + τ(1 − (t+1)/T)·Gumbel_i,
    the n_t lowest-κ unknown positions are re-masked (:func:`mask_counts`), known tokens never change.
    Random numbers are drawn in the same order with and without the cache.
    Returns (tokens LongTensor (B, N) in 0..K-1, FLOPs per sample of each iteration (list of T ints)).
    """
    tr = decode_trace(model, class_ids, schedule, use_cache, T, choice_temperature, generator,
                      on_width_change=on_width_change)
    return tr["tokens"], tr["flops"]


def random_mask(tokens: torch.Tensor, mask_id: int, generator: torch.Generator | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """MaskGIT training mask [R: MaskGIT convention]: per sample ⌈γN⌉ random positions with γ = cos(πu/2),
    u ~ U(0, 1). Returns (masked input (B, N), mask (B, N) bool)."""
    B, N = tokens.shape
    u = torch.rand(B, generator=generator)
    n_mask = torch.ceil(torch.cos(math.pi * u / 2) * N).clamp(1, N).long()
    rank = torch.rand(B, N, generator=generator).argsort(1).argsort(1)
    mask = rank < n_mask.unsqueeze(1)
    return tokens.masked_fill(mask, mask_id), mask


def nested_loss(model: NestedMaskedTransformer, tokens: torch.Tensor, class_ids: torch.Tensor,
                generator: torch.Generator | None = None, *, lambda_ce: float = 1.0, lambda_kd: float = 1.0,
                label_smoothing: float = 0.1) -> tuple[torch.Tensor, dict[str, float]]:
    """One batch, one mask, every width: L = CE(p_1) + Σ_{f<1}[λ_ce CE(p_f) + λ_kd KL(sg(p_1) ‖ p_f)] over the
    masked positions (CE with label smoothing). Returns (loss, {"ce_f<f>", "kd_f<f>"} floats)."""
    inp, mask = random_mask(tokens, model.mask_id, generator)
    dev = model.pos_emb.device  # masks come from ``generator``'s device (CPU in the study), the model may be on a GPU
    inp, mask, tokens, class_ids = inp.to(dev), mask.to(dev), tokens.to(dev), class_ids.to(dev)
    target = tokens[mask]
    full = model(inp, class_ids, 1.0)[mask]
    loss = F.cross_entropy(full, target, label_smoothing=label_smoothing)
    parts = {"ce_f1": float(loss.detach())}
    teacher = torch.log_softmax(full.detach(), -1)
    for f in sorted(w for w in model.widths if w < 1.0):
        lf = model(inp, class_ids, f)[mask]
        ce = F.cross_entropy(lf, target, label_smoothing=label_smoothing)
        kd = F.kl_div(torch.log_softmax(lf, -1), teacher, log_target=True, reduction="batchmean")
        loss = loss + lambda_ce * ce + lambda_kd * kd
        parts[f"ce_f{f:g}"], parts[f"kd_f{f:g}"] = float(ce.detach()), float(kd.detach())
    return loss, parts
