"""The MoF-style method: instance normalisation, the per-channel monotone spline *Flow*, the test-time-trained
*Morph* module, and (re-exported from :mod:`.evaluate`, where it is numpy only) the excess kurtosis the study
measures.

Paper: "Slimming the Fat-Tail: Morphing-Flow for Adaptive Time Series Modeling", ICML 2025 (Sec. 3, "Flow" and
"Morph"). No official code exists, so every detail below is a labelled reconstruction [R] (see README.md).

Shapes: B batch, C channels, L time steps of a window, K spline bins, d Morph rank.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from .evaluate import excess_kurtosis  # noqa: F401  (numpy only; defined there so that preprocess needs no torch)

MIN_BIN = 1e-3   # delta: smallest bin width/height as a fraction of 2T / K-ish (w = 2T(delta + (1 - K delta) softmax))
MIN_DERIV = 1e-3  # smallest knot derivative of the rational-quadratic spline


def instance_norm(x: torch.Tensor, eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """RevIN without affine parameters [R]: per window and channel, x~ = (x - mu) / (sigma + eps) over the last
    axis. ``x``: (B, C, L); returns (x~, mu, sigma + eps) with mu, sigma of shape (B, C, 1) (population sd)."""
    mu = x.mean(dim=-1, keepdim=True)
    sd = x.std(dim=-1, keepdim=True, unbiased=False) + eps
    return (x - mu) / sd, mu, sd


def _gather(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """table (C, K) or (B, C, K), idx (B, C, L) -> table[..., idx] of shape (B, C, L)."""
    if table.dim() == 2:
        table = table.unsqueeze(0).expand(idx.shape[0], -1, -1)
    return torch.gather(table, -1, idx)


def _search(knots: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Bin index in 0..K-1 of every entry of x (B, C, L) given the K+1 knots (C or B, C, K+1): the number of
    interior knots <= x (``searchsorted(..., right=True)``), so entries left (right) of the range fall into the
    first (last) bin. The index carries no gradient; the knots enter the output through :func:`_gather`."""
    inner = knots[..., 1:-1].detach()
    if inner.dim() == 2:  # shared knots: one row per (window, channel), as searchsorted wants matching batch dims
        inner = inner.unsqueeze(0).expand(x.shape[0], -1, -1)
    return torch.searchsorted(inner.contiguous(), x.detach().contiguous(), right=True)


class SplineFlow(nn.Module):
    """Monotone per-channel spline on [-T, T] (the paper's *Flow*, Sec. 3.1; family, K, T and tails are [R]).

    Piecewise linear (default): logits a_c, b_c in R^K give bin widths w = 2T(delta + (1 - K delta) softmax(a)) and
    heights h likewise from b; knots x_0 = y_0 = -T, x_k = x_{k-1} + w_k, y_k = y_{k-1} + h_k (x_K = y_K = T
    exactly); slope s_k = h_k / w_k. On bin k, z = y_{k-1} + s_k (x - x_{k-1}), written as
    z = x + (y_{k-1} - x_{k-1}) + (s_k - 1)(x - x_{k-1}) so that zero logits give the identity bit for bit.
    Tails |x| > T: ``linear`` continues the boundary bins' lines, ``identity`` has slope 1 (extremes preserved).
    ``spline="rq"``: rational-quadratic spline (Durkan et al. 2019) with K + 1 knot derivatives
    d = delta' + (1 - delta') softplus(c + log(e - 1)) (1 at c = 0); linear tails use the boundary derivatives,
    identity tails fix them to 1.

    Morph modulation ``mod`` (B, 2) scales the logits per instance: a <- m_1 a, b <- m_2 b.
    """

    def __init__(self, n_channels: int, n_bins: int = 16, bound: float = 3.0, tails: str = "linear",
                 spline: str = "linear") -> None:
        super().__init__()
        if tails not in ("linear", "identity"):
            raise ValueError(f"SplineFlow: tails must be 'linear' or 'identity', got {tails!r}")
        if spline not in ("linear", "rq"):
            raise ValueError(f"SplineFlow: spline must be 'linear' or 'rq', got {spline!r}")
        if n_bins < 2 or bound <= 0:
            raise ValueError(f"SplineFlow: need n_bins >= 2 and bound > 0, got {n_bins}, {bound}")
        self.n_channels, self.n_bins, self.bound, self.tails, self.spline = n_channels, n_bins, float(bound), tails, spline
        self.a = nn.Parameter(torch.zeros(n_channels, n_bins))
        self.b = nn.Parameter(torch.zeros(n_channels, n_bins))
        self.c = nn.Parameter(torch.zeros(n_channels, n_bins + 1)) if spline == "rq" else None

    # -------------------------------------------------------------------------------- parameters → knots

    def logits(self, mod: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(a, b): (C, K) without modulation, (B, C, K) with ``mod`` (B, 2)."""
        if mod is None:
            return self.a, self.b
        return mod[:, 0, None, None] * self.a, mod[:, 1, None, None] * self.b

    def knots(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(knots (..., K+1), bin sizes (..., K)) of one coordinate from its logits (..., K)."""
        K, T = self.n_bins, self.bound
        w = 2 * T * (MIN_BIN + (1 - K * MIN_BIN) * torch.softmax(logits, dim=-1))
        inner = -T + torch.cumsum(w, dim=-1)[..., :-1]
        edge = torch.full_like(w[..., :1], T)
        return torch.cat([-edge, inner, edge], dim=-1), w

    def derivatives(self) -> torch.Tensor:
        """Knot derivatives (C, K+1) of the rational-quadratic spline (boundary ones 1 with identity tails)."""
        d = MIN_DERIV + (1 - MIN_DERIV) * F.softplus(self.c + math.log(math.e - 1))
        if self.tails == "identity":
            ones = torch.ones_like(d[:, :1])
            d = torch.cat([ones, d[:, 1:-1], ones], dim=-1)
        return d

    # --------------------------------------------------------------------------------------- transforms

    def forward(self, x: torch.Tensor, mod: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """z = Flow(x) and log|dz/dx| elementwise; x (B, C, L), mod (B, 2) or None; both outputs (B, C, L)."""
        return self.transform(x, *self.logits(mod))

    def inverse(self, z: torch.Tensor, mod: torch.Tensor | None = None) -> torch.Tensor:
        """x = Flow^{-1}(z) with the same (modulated) parameters; z (B, C, L)."""
        return self.transform(z, *self.logits(mod), inverse=True)[0]

    def transform(self, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, inverse: bool = False
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """The spline with explicit logits a, b of shape (C, K) or (B, C, K); returns (output, log|d out/d in|)."""
        xk, w = self.knots(a)
        yk, h = self.knots(b)
        if self.spline == "rq":
            out, logdet = self._rq(x, xk, yk, w, h, inverse)
        else:
            out, logdet = self._linear(x, xk, yk, h / w, inverse)
        if self.tails == "identity":
            outside = x.abs() > self.bound
            out = torch.where(outside, x, out)
            logdet = torch.where(outside, torch.zeros_like(logdet), logdet)
        return out, logdet

    @staticmethod
    def _linear(x, xk, yk, slope, inverse):
        if inverse:
            xk, yk, slope = yk, xk, 1.0 / slope
        idx = _search(xk, x)
        x_lo, y_lo, s = _gather(xk[..., :-1], idx), _gather(yk[..., :-1], idx), _gather(slope, idx)
        out = x + (y_lo - x_lo) + (s - 1) * (x - x_lo)
        return out, torch.log(s)

    def _rq(self, x, xk, yk, w, h, inverse):
        d = self.derivatives()
        if xk.dim() == 3:
            d = d.unsqueeze(0).expand(xk.shape[0], -1, -1)
        idx = _search(yk if inverse else xk, x)
        x_lo, y_lo = _gather(xk[..., :-1], idx), _gather(yk[..., :-1], idx)
        wk, hk = _gather(w, idx), _gather(h, idx)
        d0, d1 = _gather(d[..., :-1], idx), _gather(d[..., 1:], idx)
        s = hk / wk
        T = self.bound
        if inverse:
            dz = x - y_lo
            a_ = hk * (s - d0) + dz * (d1 + d0 - 2 * s)
            b_ = hk * d0 - dz * (d1 + d0 - 2 * s)
            c_ = -s * dz
            xi = (2 * c_) / (-b_ - torch.sqrt((b_ ** 2 - 4 * a_ * c_).clamp_min(0)))
            out = x_lo + xi * wk
        else:
            xi = (x - x_lo) / wk
        one = xi * (1 - xi)
        den = s + (d1 + d0 - 2 * s) * one
        deriv = s ** 2 * (d1 * xi ** 2 + 2 * s * one + d0 * (1 - xi) ** 2) / den ** 2
        logdet = torch.log(deriv)
        if not inverse:
            out = y_lo + hk * (s * xi ** 2 + d0 * one) / den
        # linear tails with the boundary derivatives (slope 1 when tails="identity", handled by the caller)
        dl, dr = d[..., :1], d[..., -1:]  # (C or B, C, 1): broadcast over L
        left, right = x < -T, x > T
        if inverse:
            out = torch.where(left, -T + (x + T) / dl, torch.where(right, T + (x - T) / dr, out))
            logdet = torch.where(left, -torch.log(dl), torch.where(right, -torch.log(dr), -logdet))
        else:
            out = torch.where(left, -T + dl * (x + T), torch.where(right, T + dr * (x - T), out))
            logdet = torch.where(left, torch.log(dl), torch.where(right, torch.log(dr), logdet))
        return out, logdet


class Morph(nn.Module):
    """Test-time-trained modulation of the Flow parameters (the paper's *Morph*, Sec. 3.2; details [R]).

    u = vec(Flow_0(x~)) in R^{CL}; q = theta_q u, k = theta_k u in R^d; a fixed Bernoulli(0.5) mask M; the inner
    weight starts at a learned W_0 (identity at initialisation) and takes ``inner_steps`` gradient steps of size
    ``inner_lr`` on l(W) = ||W (M * q) - k||^2 / d, per instance and with the analytic gradient
    (2/d)(W (M q) - k)(M q)^T, so the outer loss differentiates through the unrolled steps. The modulation is
    m = 1 + tanh(G W* q) in (0, 2)^2 with G zero-initialised (m = 1 exactly at initialisation).
    """

    def __init__(self, n_channels: int, seq_len: int, rank: int = 16, inner_steps: int = 1, inner_lr: float = 0.1,
                 mask_seed: int = 0) -> None:
        super().__init__()
        if not 1 <= inner_steps <= 5:
            raise ValueError(f"Morph: inner_steps must be in 1..5, got {inner_steps}")
        self.rank, self.inner_steps, self.inner_lr = rank, inner_steps, float(inner_lr)
        self.theta_q = nn.Linear(n_channels * seq_len, rank, bias=False)
        self.theta_k = nn.Linear(n_channels * seq_len, rank, bias=False)
        self.W0 = nn.Parameter(torch.eye(rank))
        self.G = nn.Parameter(torch.zeros(2, rank))
        gen = torch.Generator().manual_seed(mask_seed)
        self.register_buffer("mask", torch.bernoulli(torch.full((rank,), 0.5), generator=gen))

    def inner_loss(self, W: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """l(W) per instance: W (B, d, d), q, k (B, d) -> (B,)."""
        r = (W @ (self.mask * q).unsqueeze(-1)).squeeze(-1) - k
        return (r ** 2).sum(-1) / self.rank

    def adapt(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(W*, q): the inner weights after the test-time steps (B, d, d) and the queries (B, d)."""
        u = z.reshape(z.shape[0], -1)
        q, k = self.theta_q(u), self.theta_k(u)
        qm = (self.mask * q).unsqueeze(-1)  # (B, d, 1)
        W = self.W0.expand(z.shape[0], -1, -1)
        for _ in range(self.inner_steps):
            resid = W @ qm - k.unsqueeze(-1)
            W = W - self.inner_lr * (2.0 / self.rank) * resid @ qm.transpose(-1, -2)
        return W, q

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """Modulation m (B, 2) from z = Flow_0(x~) of shape (B, C, L)."""
        W, q = self.adapt(z)
        return 1 + torch.tanh((W @ q.unsqueeze(-1)).squeeze(-1) @ self.G.T)


def gaussian_nll(z: torch.Tensor, logdet: torch.Tensor) -> torch.Tensor:
    """Gaussianisation loss mean(z^2 / 2 - log|dz/dx~|) over every entry (constant log(2 pi)/2 dropped)."""
    return (0.5 * z ** 2 - logdet).mean()


def nll_finetune(flow: SplineFlow, x: torch.Tensor, steps: int = 5, lr: float = 1e-2, rho: float = 1.0
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Morph alternative ``nll_finetune`` [R]: per instance, copy the Flow logits and take ``steps`` Adam steps on
    the window's Gaussianisation NLL + rho ||theta' - theta||^2 (episodic: every call starts from theta). Returns
    per-instance logits (a', b') of shape (B, C, K). The steps run on detached copies; the result is
    theta + (theta' - theta) with the update detached (first-order), so the outer loss still trains theta.
    Instances are independent: the loss is a sum over instances and Adam acts elementwise."""
    B = x.shape[0]
    a0, b0 = flow.a.detach(), flow.b.detach()
    a = a0.expand(B, -1, -1).clone().requires_grad_(True)
    b = b0.expand(B, -1, -1).clone().requires_grad_(True)
    opt = torch.optim.Adam([a, b], lr=lr)
    xd = x.detach()
    with torch.enable_grad():
        for _ in range(steps):
            opt.zero_grad()
            z, logdet = flow.transform(xd, a, b)
            per = (0.5 * z ** 2 - logdet).mean(dim=(1, 2))
            reg = ((a - a0) ** 2).sum(dim=(1, 2)) + ((b - b0) ** 2).sum(dim=(1, 2))
            a.grad, b.grad = torch.autograd.grad((per + rho * reg).sum(), [a, b])  # leaves flow.c's grad alone
            opt.step()
    return flow.a + (a.detach() - a0), flow.b + (b.detach() - b0)
