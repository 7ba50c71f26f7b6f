"""Backbones and the MoF forecaster (instance norm -> Flow (+ Morph) -> backbone -> Flow^{-1} -> de-norm).

Paper: "Slimming the Fat-Tail: Morphing-Flow for Adaptive Time Series Modeling", ICML 2025, Sec. 3 (the
pipeline) and Sec. 4 (Linear and patch-Mamba backbones). Backbones map z (B, C, L) -> z_hat (B, C, H).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from .method import Morph, SplineFlow, instance_norm, nll_finetune
from .normalizers import make_normalizer

#: Defaults of the forecaster's ``cfg`` (every key [R] except where the README says otherwise).
FORECASTER_DEFAULTS: dict[str, Any] = {
    "flow": True,               # False = RevIN only (the revin_linear baseline)
    "norm": "revin",            # revin | dishts | san | fan: the normalisation around the backbone without Flow
    "san_period": 12,           # san: slice length (divides L and H)
    "fan_top_k": 4,             # fan: frequencies removed before the backbone
    "norm_hidden": 64,          # san, fan: hidden width of their statistics / non-stationary-part MLPs
    "n_bins": 16,               # K
    "bound": 3.0,               # T
    "tails": "linear",          # linear | identity
    "spline": "linear",         # linear (piecewise linear) | rq (rational quadratic)
    "morph_mode": "ttt_layer",  # ttt_layer | nll_finetune | off
    "rank": 16,                 # d of Morph
    "inner_steps": 1,           # Morph test-time steps (1..5)
    "inner_lr": 0.1,            # Morph inner step size
    "mask_seed": 0,             # seed of Morph's fixed Bernoulli(0.5) mask
    "finetune_steps": 5,        # nll_finetune: Adam steps
    "finetune_lr": 1e-2,        # nll_finetune: Adam lr
    "finetune_rho": 1.0,        # nll_finetune: proximal weight
    "eps": 1e-5,                # instance-norm epsilon
    "moving_avg": 25,           # dlinear: kernel of the trend moving average
    "patch_len": 16,            # patch_mamba
    "patch_stride": 8,
    "d_model": 128,
    "n_layers": 2,
    "d_state": 16,
    "d_conv": 4,
    "expand": 2,
    "scan": "parallel",         # patch_mamba: parallel (log-depth) | sequential selective scan, same values
}


def forecaster_cfg(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """``cfg`` merged over :data:`FORECASTER_DEFAULTS`; an unknown key raises naming it."""
    out = dict(FORECASTER_DEFAULTS)
    if cfg:
        unknown = set(cfg) - set(out)
        if unknown:
            raise KeyError(f"MoFForecaster cfg: unknown key(s) {sorted(unknown)}; expected a subset of {sorted(out)}")
        out.update(cfg)
    if out["morph_mode"] not in ("ttt_layer", "nll_finetune", "off"):
        raise ValueError(f"MoFForecaster cfg: morph_mode must be ttt_layer | nll_finetune | off, got {out['morph_mode']!r}")
    if out["norm"] not in ("revin", "dishts", "san", "fan"):
        raise ValueError(f"MoFForecaster cfg: norm must be revin | dishts | san | fan, got {out['norm']!r}")
    if out["norm"] != "revin" and out["flow"]:
        raise ValueError(f"MoFForecaster cfg: norm {out['norm']!r} replaces instance norm and needs flow=False")
    return out


# ------------------------------------------------------------------------------------------- backbones


class LinearBackbone(nn.Module):
    """One Linear(L -> H) shared by every channel."""

    def __init__(self, seq_len: int, pred_len: int) -> None:
        super().__init__()
        self.proj = nn.Linear(seq_len, pred_len)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.proj(z)


class DLinearBackbone(nn.Module):
    """DLinear (Zeng et al. 2023): moving-average trend + remainder, one shared Linear(L -> H) each."""

    def __init__(self, seq_len: int, pred_len: int, kernel: int = 25) -> None:
        super().__init__()
        self.kernel = kernel
        self.trend = nn.Linear(seq_len, pred_len)
        self.season = nn.Linear(seq_len, pred_len)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        B, C, L = z.shape
        front = z[..., :1].expand(B, C, (self.kernel - 1) // 2)
        back = z[..., -1:].expand(B, C, self.kernel // 2)
        padded = torch.cat([front, z, back], dim=-1).reshape(B * C, 1, -1)
        trend = F.avg_pool1d(padded, self.kernel, stride=1).reshape(B, C, L)
        return self.trend(trend) + self.season(z - trend)


def _discretise(u, delta, A, Bm):
    """Zero-order-hold A and Euler B of Mamba (Gu & Dao 2023, Sec. 3.2 / Alg. 2): dA = exp(delta A) and
    dBu = delta u B, both (N, Dm, T, S)."""
    dA = torch.exp(delta.unsqueeze(-1) * A[None, :, None, :])
    dBu = (delta * u).unsqueeze(-1) * Bm.transpose(1, 2)[:, None]
    return dA, dBu


def selective_scan_sequential(u, delta, A, Bm, Cm, D):
    """Mamba's selective scan as the plain recurrence, one time step at a time (the reference):
    h_t = exp(delta_t A) h_{t-1} + delta_t u_t B_t, y_t = <C_t, h_t> + D u_t, h_{-1} = 0.
    u, delta: (N, Dm, T); A: (Dm, S) (negative); Bm, Cm: (N, S, T); D: (Dm,). Returns y (N, Dm, T)."""
    dA, dBu = _discretise(u, delta, A, Bm)
    h = torch.zeros(u.shape[0], u.shape[1], A.shape[1], dtype=u.dtype, device=u.device)
    ys = []
    for t in range(u.shape[-1]):
        h = dA[:, :, t] * h + dBu[:, :, t]
        ys.append((h * Cm[:, None, :, t]).sum(-1))
    return torch.stack(ys, dim=-1) + u * D[None, :, None]


def selective_scan(u, delta, A, Bm, Cm, D):
    """Mamba's selective scan, vectorised over time with a log-depth (Hillis-Steele) inclusive scan of the affine
    maps h -> a_t h + b_t: after the step with offset k every t holds the composition of the maps t-2k+1 .. t,
    (a_t, b_t) <- (a_t a_{t-k}, a_t b_{t-k} + b_t) for t >= k. ceil(log2 T) steps of elementwise work on
    (N, Dm, T, S) tensors, no Python loop over time; products of the decays a = exp(delta A) in (0, 1] never
    overflow. Equals :func:`selective_scan_sequential` up to rounding (tested to 1e-6 relative in float32, 1e-12 in
    float64). Shapes as :func:`selective_scan_sequential`. Plain PyTorch (CPU and CUDA alike; no ``mamba_ssm``)."""
    a, b = _discretise(u, delta, A, Bm)
    T, k = u.shape[-1], 1
    while k < T:
        b = torch.cat([b[:, :, :k], a[:, :, k:] * b[:, :, :-k] + b[:, :, k:]], dim=2)
        a = torch.cat([a[:, :, :k], a[:, :, k:] * a[:, :, :-k]], dim=2)
        k *= 2
    return (b * Cm.transpose(1, 2)[:, None]).sum(-1) + u * D[None, :, None]


SCANS = {"parallel": selective_scan, "sequential": selective_scan_sequential}


class MambaBlock(nn.Module):
    """One Mamba block (Gu & Dao 2023, Fig. 3: in-proj, causal depthwise conv, SiLU, input-dependent delta/B/C,
    selective SSM, SiLU gate, out-proj) with a pre-norm residual; (N, T, d_model) -> (N, T, d_model). Written in
    plain PyTorch: ``scan`` picks :func:`selective_scan` (``parallel``) or :func:`selective_scan_sequential`."""

    def __init__(self, d_model: int, d_state: int = 16, d_conv: int = 4, expand: int = 2,
                 scan: str = "parallel") -> None:
        super().__init__()
        if scan not in SCANS:
            raise ValueError(f"MambaBlock: scan must be one of {sorted(SCANS)}, got {scan!r}")
        self.scan = SCANS[scan]
        d_inner = expand * d_model
        self.dt_rank = math.ceil(d_model / 16)
        self.norm = nn.LayerNorm(d_model)
        self.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
        self.conv = nn.Conv1d(d_inner, d_inner, d_conv, groups=d_inner, padding=d_conv - 1)
        self.x_proj = nn.Linear(d_inner, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, d_inner)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)).repeat(d_inner, 1))
        self.D = nn.Parameter(torch.ones(d_inner))
        self.out_proj = nn.Linear(d_inner, d_model, bias=False)
        self.d_state = d_state

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (N, T, d_model)
        T = h.shape[1]
        x, gate = self.in_proj(self.norm(h)).chunk(2, dim=-1)
        x = F.silu(self.conv(x.transpose(1, 2))[..., :T])                   # (N, d_inner, T)
        dbc = self.x_proj(x.transpose(1, 2))
        dt, Bm, Cm = dbc.split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        delta = F.softplus(self.dt_proj(dt)).transpose(1, 2)                # (N, d_inner, T)
        A = -torch.exp(self.A_log)
        y = self.scan(x, delta, A, Bm.transpose(1, 2).contiguous(), Cm.transpose(1, 2).contiguous(), self.D)
        y = y.transpose(1, 2) * F.silu(gate)
        return h + self.out_proj(y)


class PatchMambaBackbone(nn.Module):
    """Patch-based Mamba [R] (paper scale): channel-independent patches (length 16, stride 8, end padded by
    repeating the last value, as PatchTST), Linear patch embedding + positional embedding, ``n_layers`` Mamba
    blocks, flatten head Linear(n_patches * d_model -> H)."""

    def __init__(self, seq_len: int, pred_len: int, patch_len: int = 16, stride: int = 8, d_model: int = 128,
                 n_layers: int = 2, d_state: int = 16, d_conv: int = 4, expand: int = 2,
                 scan: str = "parallel") -> None:
        super().__init__()
        self.patch_len, self.stride = patch_len, stride
        self.n_patches = (seq_len - patch_len) // stride + 2
        self.embed = nn.Linear(patch_len, d_model)
        self.pos = nn.Parameter(torch.zeros(self.n_patches, d_model))
        self.blocks = nn.ModuleList(MambaBlock(d_model, d_state, d_conv, expand, scan) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(self.n_patches * d_model, pred_len)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        B, C, L = z.shape
        padded = torch.cat([z, z[..., -1:].expand(B, C, self.stride)], dim=-1)
        patches = padded.unfold(-1, self.patch_len, self.stride).reshape(B * C, self.n_patches, self.patch_len)
        h = self.embed(patches) + self.pos
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h).reshape(B * C, -1)).reshape(B, C, -1)


def make_backbone(name: str, seq_len: int, pred_len: int, cfg: Mapping[str, Any] | None = None) -> nn.Module:
    """``linear`` | ``dlinear`` | ``patch_mamba`` backbone mapping (B, C, L) -> (B, C, H)."""
    c = forecaster_cfg(cfg)
    if name == "linear":
        return LinearBackbone(seq_len, pred_len)
    if name == "dlinear":
        return DLinearBackbone(seq_len, pred_len, c["moving_avg"])
    if name == "patch_mamba":
        return PatchMambaBackbone(seq_len, pred_len, c["patch_len"], c["patch_stride"], c["d_model"], c["n_layers"],
                                  c["d_state"], c["d_conv"], c["expand"], c["scan"])
    raise ValueError(f"unknown backbone {name!r}; expected linear | dlinear | patch_mamba")


# ------------------------------------------------------------------------------------------ forecaster


class MoFForecaster(nn.Module):
    """x (B, L, C) -> y_hat (B, H, C): x~ = instance norm; z = Flow_m(x~) with m from Morph on Flow_0(x~);
    z_hat = backbone(z); y_hat = mu + sigma Flow_m^{-1}(z_hat) (Sec. 3, steps 1-5).

    ``backbone``: a name (``linear`` | ``dlinear`` | ``patch_mamba``) or a module (B, C, L) -> (B, C, H).
    ``cfg``: keys of :data:`FORECASTER_DEFAULTS` (``flow=False`` is the RevIN baseline)."""

    def __init__(self, backbone: str | nn.Module, n_channels: int, seq_len: int, pred_len: int,
                 cfg: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.cfg = forecaster_cfg(cfg)
        c = self.cfg
        self.n_channels, self.seq_len, self.pred_len = n_channels, seq_len, pred_len
        self.backbone = make_backbone(backbone, seq_len, pred_len, c) if isinstance(backbone, str) else backbone
        self.flow = SplineFlow(n_channels, c["n_bins"], c["bound"], c["tails"], c["spline"]) if c["flow"] else None
        use_morph = c["flow"] and c["morph_mode"] == "ttt_layer"
        self.morph = Morph(n_channels, seq_len, c["rank"], c["inner_steps"], c["inner_lr"], c["mask_seed"]) \
            if use_morph else None
        self.norm = None if c["norm"] == "revin" else make_normalizer(c["norm"], n_channels, seq_len, pred_len, c)

    def parts(self, x: torch.Tensor) -> dict[str, torch.Tensor | None]:
        """Every intermediate of one forward pass: ``x_norm`` (B, C, L), ``z`` (backbone input, B, C, L),
        ``logdet`` (B, C, L; zeros without Flow), ``mod`` (B, 2) or None, ``z_hat`` (B, C, H), ``y_hat`` (B, H, C);
        with a Dish-TS / SAN / FAN wrapper (``norm``), ``x_norm`` = ``z`` is its output and ``norm_state`` its state
        (for :meth:`aux_loss`)."""
        if x.dim() != 3 or x.shape[1] != self.seq_len or x.shape[2] != self.n_channels:
            raise ValueError(f"MoFForecaster: expected x of shape (B, {self.seq_len}, {self.n_channels}), "
                             f"got {tuple(x.shape)}")
        if self.norm is not None:
            z, state = self.norm.normalize(x.transpose(1, 2))
            z_hat = self.backbone(z)
            y_hat = self.norm.denormalize(z_hat, state).transpose(1, 2)
            return {"x_norm": z, "z": z, "logdet": torch.zeros_like(z), "mod": None, "z_hat": z_hat, "y_hat": y_hat,
                    "norm_state": state}
        xn, mu, sd = instance_norm(x.transpose(1, 2), self.cfg["eps"])
        mod = None
        if self.flow is None:
            z, logdet = xn, torch.zeros_like(xn)
        elif self.cfg["morph_mode"] == "nll_finetune":
            a, b = nll_finetune(self.flow, xn, self.cfg["finetune_steps"], self.cfg["finetune_lr"],
                                self.cfg["finetune_rho"])
            z, logdet = self.flow.transform(xn, a, b)
        else:
            if self.morph is not None:
                mod = self.morph(self.flow(xn, None)[0])
            z, logdet = self.flow(xn, mod)
        z_hat = self.backbone(z)
        if self.flow is None:
            y = z_hat
        elif self.cfg["morph_mode"] == "nll_finetune":
            y = self.flow.transform(z_hat, a, b, inverse=True)[0]
        else:
            y = self.flow.inverse(z_hat, mod)
        y_hat = (mu + sd * y).transpose(1, 2)
        return {"x_norm": xn, "z": z, "logdet": logdet, "mod": mod, "z_hat": z_hat, "y_hat": y_hat}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """y_hat (B, H, C) from x (B, L, C)."""
        return self.parts(x)["y_hat"]

    def aux_loss(self, parts: Mapping[str, Any], y: torch.Tensor) -> torch.Tensor:
        """The normalisation wrapper's own training term for targets y (B, H, C); 0 without one."""
        if self.norm is None:
            return torch.zeros((), dtype=y.dtype, device=y.device)
        return self.norm.aux_loss(parts["norm_state"], y.transpose(1, 2))
