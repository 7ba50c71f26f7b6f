"""Emulator inputs, training and evaluation on the z-scored shards (spec "Emulator [R]", claims 2-4).

Input channels (33 at any N >= 3): the state at t0 (zeta; u, v, temp, salt at the bottom, mid and surface levels: 13),
the 8 forcings at t0 and at t0 + lead, a width-w band of zeta(t0 + lead) on the domain edges plus its indicator
(the boundary condition), mask_rho and h/max(h). Target: the 13-channel increment S(t0 + lead) - S(t0).
Everything is in z-score units of the shards; land is 0 and excluded from losses and metrics.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from .model import CoastalViT, masked_mse

FORCINGS = ("Pair", "Tair", "Qair", "rain", "swrad", "lwrad", "Uwind", "Vwind")
STATE_VARS = ("u", "v", "temp", "salt")


def state_channel_names(n_levels: int) -> list[str]:
    """The 13 state channels: zeta, then u, v, temp, salt at the bottom (0), mid (N//2) and surface (N-1).
    ``ValueError`` for N < 3 (the three levels would coincide and the model's 33 inputs would not match)."""
    if n_levels < 3:
        raise ValueError(f"coastalbench emulator: the 13 state channels need N >= 3 s-levels, the data have N = "
                         f"{n_levels} (sim.n_levels offline; the history files' s_rho on the paper path)")
    levels = sorted({0, n_levels // 2, n_levels - 1})
    return ["zeta"] + [f"{v}@{k}" for v in STATE_VARS for k in levels]


@dataclass
class Series:
    """A contiguous record of the selected channels: state (T, S, H, W) and forcing (T, 8, H, W), float16."""

    state: np.ndarray
    forcing: np.ndarray
    times: np.ndarray  # (T,) seconds since the reference date
    wet: np.ndarray  # (H, W) 0/1
    h_norm: np.ndarray  # (H, W) h / max(h)


def load_series(shards: Sequence, channels: Sequence[str], times: Sequence[np.ndarray], wet: np.ndarray,
                h: np.ndarray, n_levels: int, coarsen: int = 1) -> Series:
    """Concatenate day shards (T, C, H, W) keeping the state and forcing channels (memory-mapped reads)."""
    names = list(channels)
    missing = [c for c in [*state_channel_names(n_levels), *FORCINGS] if c not in names]
    if missing:
        raise ValueError(f"shards lack channel(s) {missing}")
    si = [names.index(c) for c in state_channel_names(n_levels)]
    fi = [names.index(c) for c in FORCINGS]
    st, fo = [], []
    for path in shards:
        arr = np.load(path, mmap_mode="r")
        st.append(np.asarray(arr[:, si]))
        fo.append(np.asarray(arr[:, fi]))
    state, forcing = np.concatenate(st), np.concatenate(fo)
    wet, hn = np.asarray(wet, float), np.asarray(h, float) / float(np.max(h))
    if coarsen > 1:
        state, forcing = _coarsen(state, coarsen), _coarsen(forcing, coarsen)
        wet, hn = (_coarsen(wet[None, None], coarsen)[0, 0] > 0.5).astype(float), _coarsen(hn[None, None],
                                                                                            coarsen)[0, 0]
    return Series(state, forcing, np.concatenate([np.asarray(t) for t in times]), wet, hn)


def _coarsen(x: np.ndarray, c: int) -> np.ndarray:
    t, k, h, w = x.shape
    h2, w2 = h // c * c, w // c * c
    return x[..., :h2, :w2].reshape(t, k, h2 // c, c, w2 // c, c).mean(axis=(3, 5)).astype(x.dtype)


def boundary_band(shape: tuple[int, int], width: int) -> np.ndarray:
    """1 within ``width`` cells of any domain edge [R] (the real grid's open boundaries are not documented)."""
    band = np.zeros(shape, np.float32)
    band[:width], band[-width:], band[:, :width], band[:, -width:] = 1, 1, 1, 1
    return band


def make_inputs(series: Series, t0: np.ndarray, steps: np.ndarray, *, width: int,
                no_boundary: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(x (B, 33, H, W), target increment (B, 13, H, W)) for start indices t0 and lead steps."""
    s0 = series.state[t0].astype(np.float32)
    s1 = series.state[t0 + steps].astype(np.float32)
    f0 = series.forcing[t0].astype(np.float32)
    f1 = series.forcing[t0 + steps].astype(np.float32)
    band = boundary_band(series.wet.shape, width) * series.wet
    b = len(t0)
    zb = s1[:, :1] * band
    ind = np.broadcast_to(band, (b, 1) + band.shape)
    if no_boundary:
        zb, ind = np.zeros_like(zb), np.zeros_like(ind)
    static = np.broadcast_to(np.stack([series.wet, series.h_norm]).astype(np.float32), (b, 2) + band.shape)
    x = np.concatenate([s0, f0, f1, zb, ind, static], axis=1).astype(np.float32, copy=False)
    return torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(s1 - s0)


IN_CH = 13 + 8 + 8 + 2 + 2
OUT_CH = 13


def lead_steps(lead_h: float, record_s: float) -> int:
    """Records per lead time (error if the lead is not a multiple of the output interval)."""
    steps = lead_h * 3600.0 / record_s
    if abs(steps - round(steps)) > 1e-9 or steps < 0:
        raise ValueError(f"lead {lead_h} h is not a multiple of the output interval {record_s} s")
    return int(round(steps))


def build_model(model_cfg, hw: tuple[int, int]) -> CoastalViT:
    return CoastalViT(IN_CH, OUT_CH, hw, patch=model_cfg.patch, dim=model_cfg.dim, depth=model_cfg.depth,
                      heads=model_cfg.heads)


def train_one(train: Series, val: Series | None, model_cfg, train_cfg, *, seed: int, no_boundary: bool,
              record_s: float, log=lambda k, v, s: None, device: str = "cpu") -> CoastalViT:
    """Train one CoastalViT: AdamW + cosine schedule, lead sampled uniformly from ``train_cfg.leads_h``."""
    from icml25.core.seed import seed_everything

    rng = seed_everything(seed)
    torch.manual_seed(seed)
    model = build_model(model_cfg, train.wet.shape).to(device)
    steps = np.array([lead_steps(h, record_s) for h in train_cfg.leads_h])
    n_t = len(train.state)
    t0_max = n_t - 1 - steps.max()
    if t0_max < 0:
        raise ValueError(f"training record of {n_t} steps is shorter than the longest lead")
    per_epoch = math.ceil((t0_max + 1) / train_cfg.batch_size)
    total = max(1, per_epoch * train_cfg.epochs)
    opt = torch.optim.AdamW(model.parameters(), lr=train_cfg.lr, weight_decay=train_cfg.weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total)
    wet = torch.from_numpy(train.wet.astype(np.float32)).to(device)
    for epoch in range(train_cfg.epochs):
        model.train()
        order = rng.permutation(t0_max + 1)
        losses = []
        for i in tqdm(range(per_epoch), desc=f"seed {seed} epoch {epoch}", mininterval=5.0):
            t0 = order[i * train_cfg.batch_size : (i + 1) * train_cfg.batch_size]
            k = steps[rng.integers(0, len(steps), size=len(t0))]
            x, y = make_inputs(train, t0, k, width=model_cfg.boundary_width, no_boundary=no_boundary)
            lead = torch.from_numpy((k * record_s / 3600.0).astype(np.float32))
            loss = masked_mse(model(x.to(device), lead.to(device)), y.to(device), wet)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
        log("train/loss", float(np.mean(losses)), epoch)
        if val is not None:
            log("val/rmse_norm", evaluate_rmse(model, val, train_cfg.leads_h, model_cfg, record_s=record_s,
                                               no_boundary=no_boundary, device=device)["mean"], epoch)
    return model


def start_indices(n_t: int, step: int, max_t0: int | None) -> np.ndarray:
    """Start indices t0 with t0 + step inside a record of n_t steps (evenly thinned to max_t0)."""
    t0 = np.arange(0, n_t - step)
    if max_t0 is not None and len(t0) > max_t0:
        t0 = t0[np.linspace(0, len(t0) - 1, max_t0).round().astype(int)]
    return t0


def squared_errors(pred: np.ndarray, truth: np.ndarray, wet: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Per-channel (sum of squared errors, sum of absolute errors, wet-cell count) over a batch."""
    w = wet.astype(bool)
    d = (pred - truth)[..., w]  # (B, C, n_wet)
    return (d.astype(np.float64) ** 2).sum(axis=(0, 2)), np.abs(d).sum(axis=(0, 2)), float(d.shape[0] * d.shape[2])


@torch.no_grad()
def predict(model: CoastalViT, series: Series, t0: np.ndarray, step: int, model_cfg, *, record_s: float,
            no_boundary: bool, batch: int = 64, device: str = "cpu") -> np.ndarray:
    """ViT forecasts of the 13 state channels at t0 + step (z units, land 0): (B, 13, H, W)."""
    model.eval()
    out = []
    for i in range(0, len(t0), batch):
        tt = t0[i : i + batch]
        k = np.full(len(tt), step)
        x, _ = make_inputs(series, tt, k, width=model_cfg.boundary_width, no_boundary=no_boundary)
        lead = torch.full((len(tt),), step * record_s / 3600.0)
        inc = model(x.to(device), lead.to(device)).cpu().numpy()
        out.append((series.state[tt].astype(np.float32) + inc) * series.wet)
    return np.concatenate(out)


def evaluate_rmse(model, series: Series, leads_h, model_cfg, *, record_s: float, no_boundary: bool,
                  max_t0: int | None = 64, device: str = "cpu") -> dict:
    """Mean wet-cell RMSE (z units) over the 13 channels and the given leads (validation)."""
    vals = []
    for lead in leads_h:
        step = lead_steps(lead, record_s)
        t0 = start_indices(len(series.state), step, max_t0)
        if len(t0) == 0:
            continue
        pred = predict(model, series, t0, step, model_cfg, record_s=record_s, no_boundary=no_boundary,
                       device=device)
        sse, _, n = squared_errors(pred, series.state[t0 + step].astype(np.float32), series.wet)
        vals.append(np.sqrt(sse / n).mean())
    return {"mean": float(np.mean(vals)) if vals else float("nan")}


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation (scipy)."""
    from scipy.stats import spearmanr

    return float(spearmanr(x, y).statistic)


def volume_residual(zeta0: np.ndarray, zeta1: np.ndarray, uvs: np.ndarray, h: np.ndarray, wet: np.ndarray,
                    dt_s: float, dx: float) -> float:
    """Mean |d zeta/dt + div(H u)| (m s-1) over interior wet cells (all 4 neighbours wet) [R].

    zeta0/zeta1: (B, H, W) physical m; uvs: (B, 2, H, W) depth-mean velocity estimate on rho points (m s-1),
    centred differences. Cells next to the river mouth are not excluded (its Q/A source is a single cell).
    """
    H = h[None] + zeta1
    fx, fy = H * uvs[:, 0], H * uvs[:, 1]
    div = np.zeros_like(zeta1)
    div[:, 1:-1, 1:-1] = ((fx[:, 1:-1, 2:] - fx[:, 1:-1, :-2]) + (fy[:, 2:, 1:-1] - fy[:, :-2, 1:-1])) / (2 * dx)
    inner = wet.astype(bool).copy()
    inner[1:-1, 1:-1] &= wet[2:, 1:-1].astype(bool) & wet[:-2, 1:-1].astype(bool) & wet[1:-1, 2:].astype(bool) \
        & wet[1:-1, :-2].astype(bool)
    inner[0], inner[-1], inner[:, 0], inner[:, -1] = False, False, False, False
    r = (zeta1 - zeta0) / dt_s + div
    return float(np.abs(r[:, inner]).mean())
