"""Normalisation wrappers the paper compares MoF with at paper scale: Dish-TS, SAN and FAN (arms ``dishts_linear``,
``san_linear``, ``fan_linear``; the RevIN baseline is :func:`.method.instance_norm`).

Each wrapper replaces instance normalisation around a backbone: ``normalize(x (B, C, L)) -> (z (B, C, L), state)``,
the backbone maps z to z_hat (B, C, H), ``denormalize(z_hat, state) -> y_hat (B, C, H)``, and
``aux_loss(state, y (B, C, H))`` is the wrapper's own training term (added to the forecast MSE; 0 for Dish-TS).
All three are written from the method descriptions of their papers, with the details the MoF paper does not give
(sizes, activations, joint rather than two-stage training) marked [R] in ``config.py``:

* Dish-TS: Fan et al., "Dish-TS: A General Paradigm for Alleviating Distribution Shift in Time Series Forecasting",
  AAAI 2023, https://arxiv.org/abs/2302.14829 (Sec. 4: the dual CoNet).
* SAN: Liu et al., "Adaptive Normalization for Non-stationary Time Series Forecasting: A Temporal Slice
  Perspective", NeurIPS 2023 (Sec. 3: slice normalisation and the statistics prediction module).
* FAN: Ye et al., "Frequency Adaptive Normalization For Non-stationary Time Series Forecasting", NeurIPS 2024,
  https://arxiv.org/abs/2409.20371 (Sec. 3: top-K frequency removal and prediction of the removed part).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

State = dict[str, torch.Tensor]


class DishTS(nn.Module):
    """Dish-TS: a backcast and a forecast CoNet read the lookback window. Per channel, a linear map over time
    gives the levels phi_b, phi_f = GELU(x W_c) (W_c in R^{L x 2}); the scales are xi = mean_t (x_t - phi)^2. The
    backbone sees z = gamma (x - phi_b) / sqrt(xi_b + eps) + beta and its output is mapped back by
    y = (z_hat - beta) / gamma * sqrt(xi_f + eps) + phi_f. gamma = 1, beta = 0 initially; W ~ U(0, 1) / L."""

    def __init__(self, n_channels: int, seq_len: int, eps: float = 1e-8) -> None:
        super().__init__()
        self.coef = nn.Parameter(torch.rand(n_channels, seq_len, 2) / seq_len)
        self.gamma = nn.Parameter(torch.ones(n_channels, 1))
        self.beta = nn.Parameter(torch.zeros(n_channels, 1))
        self.eps = eps

    def normalize(self, x: torch.Tensor) -> tuple[torch.Tensor, State]:
        phi = F.gelu(torch.einsum("bcl,cld->bcd", x, self.coef))             # (B, C, 2)
        phi_b, phi_f = phi[..., :1], phi[..., 1:]
        xi_b = (x - phi_b).square().mean(-1, keepdim=True)
        xi_f = (x - phi_f).square().mean(-1, keepdim=True)
        z = self.gamma * (x - phi_b) / torch.sqrt(xi_b + self.eps) + self.beta
        return z, {"phi_f": phi_f, "xi_f": xi_f}

    def denormalize(self, z_hat: torch.Tensor, state: State) -> torch.Tensor:
        return (z_hat - self.beta) / self.gamma * torch.sqrt(state["xi_f"] + self.eps) + state["phi_f"]

    def aux_loss(self, state: State, y: torch.Tensor) -> torch.Tensor:
        return torch.zeros((), dtype=y.dtype, device=y.device)


def slice_stats(x: torch.Tensor, period: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and population sd of non-overlapping slices of length ``period`` along the last axis:
    x (B, C, n * period) -> (mean, sd), each (B, C, n)."""
    B, C, T = x.shape
    if T % period:
        raise ValueError(f"SAN: length {T} is not a multiple of the slice length {period} (model.san_period)")
    s = x.reshape(B, C, T // period, period)
    return s.mean(-1), s.std(-1, unbiased=False)


class SAN(nn.Module):
    """SAN: each slice of ``period`` steps of the lookback is normalised by its own mean and sd; a statistics
    prediction module forecasts the future slices' means and sds from the lookback's, and the backbone output is
    de-normalised slice by slice with them. The module (per channel-shared MLPs over the slice axis):
    mu_hat = MLP_mu(mu - mean(mu)) + mean(mu), sd_hat = softplus(MLP_sd(sd)). Its loss, MSE of the predicted
    against the true future slice statistics, is added to the forecast loss (joint training [R]; the paper trains
    the module first)."""

    def __init__(self, seq_len: int, pred_len: int, period: int = 12, hidden: int = 64, eps: float = 1e-5) -> None:
        super().__init__()
        if seq_len % period or pred_len % period:
            raise ValueError(f"SAN: lookback {seq_len} and horizon {pred_len} must be multiples of the slice length "
                             f"{period} (model.san_period)")
        n_in, n_out = seq_len // period, pred_len // period
        self.period, self.eps = period, eps
        self.mean_mlp = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, n_out))
        self.sd_mlp = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, n_out))

    def normalize(self, x: torch.Tensor) -> tuple[torch.Tensor, State]:
        mu, sd = slice_stats(x, self.period)                                  # (B, C, n_in)
        rep = lambda t: t.repeat_interleave(self.period, dim=-1)              # noqa: E731
        z = (x - rep(mu)) / (rep(sd) + self.eps)
        level = mu.mean(-1, keepdim=True)
        mu_hat = self.mean_mlp(mu - level) + level
        sd_hat = F.softplus(self.sd_mlp(sd))
        return z, {"mu_hat": mu_hat, "sd_hat": sd_hat}

    def denormalize(self, z_hat: torch.Tensor, state: State) -> torch.Tensor:
        rep = lambda t: t.repeat_interleave(self.period, dim=-1)              # noqa: E731
        return z_hat * (rep(state["sd_hat"]) + self.eps) + rep(state["mu_hat"])

    def aux_loss(self, state: State, y: torch.Tensor) -> torch.Tensor:
        mu, sd = slice_stats(y, self.period)
        return F.mse_loss(state["mu_hat"], mu) + F.mse_loss(state["sd_hat"], sd)


def dominant_part(x: torch.Tensor, k: int) -> torch.Tensor:
    """The part of x (B, C, T) carried by its k largest-amplitude rfft frequencies (per window and channel, the DC
    term included): irfft of the spectrum with every other frequency zeroed. k >= T // 2 + 1 returns x."""
    spec = torch.fft.rfft(x, dim=-1)
    k = min(k, spec.shape[-1])
    idx = spec.abs().topk(k, dim=-1).indices
    mask = torch.zeros_like(spec.real).scatter_(-1, idx, 1.0)
    return torch.fft.irfft(spec * mask, n=x.shape[-1], dim=-1)


class FAN(nn.Module):
    """FAN: the top-K frequency components of each lookback window (its non-stationary part x_ns) are removed
    before the backbone, z = x - x_ns; an MLP over time predicts the future non-stationary part from
    (x_ns, x) and is added to the backbone output, y = z_hat + MLP([x_ns; x]). Its loss, the MSE of the predicted
    against the target window's own top-K part, is added to the forecast loss (joint training, as FAN)."""

    def __init__(self, seq_len: int, pred_len: int, top_k: int = 4, hidden: int = 64) -> None:
        super().__init__()
        self.top_k = top_k
        self.mlp = nn.Sequential(nn.Linear(2 * seq_len, hidden), nn.ReLU(), nn.Linear(hidden, pred_len))

    def normalize(self, x: torch.Tensor) -> tuple[torch.Tensor, State]:
        x_ns = dominant_part(x, self.top_k)
        return x - x_ns, {"ns_hat": self.mlp(torch.cat([x_ns, x], dim=-1))}

    def denormalize(self, z_hat: torch.Tensor, state: State) -> torch.Tensor:
        return z_hat + state["ns_hat"]

    def aux_loss(self, state: State, y: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(state["ns_hat"], dominant_part(y, self.top_k))


def make_normalizer(name: str, n_channels: int, seq_len: int, pred_len: int, cfg: dict[str, Any]) -> nn.Module:
    """``dishts`` | ``san`` | ``fan`` wrapper for a forecaster (``cfg``: ``san_period``, ``fan_top_k``,
    ``norm_hidden``)."""
    if name == "dishts":
        return DishTS(n_channels, seq_len)
    if name == "san":
        return SAN(seq_len, pred_len, cfg["san_period"], cfg["norm_hidden"])
    if name == "fan":
        return FAN(seq_len, pred_len, cfg["fan_top_k"], cfg["norm_hidden"])
    raise ValueError(f"unknown normaliser {name!r}; expected revin | dishts | san | fan")
