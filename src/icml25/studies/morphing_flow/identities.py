"""Claim 1 measured on a trained forecaster: the Flow identities (inverse, monotonicity, log-det, zero logits) and
the m = 1 bitwise equality of Morph (paper Sec. 3.1-3.2; the tolerances are those of :mod:`.evaluate`).

This module needs torch; :mod:`.evaluate` (the verdicts) does not.
"""
from __future__ import annotations

import copy
from typing import Any

import torch

from .evaluate import C1_GRID
from .method import Morph, SplineFlow
from .model import MoFForecaster


def flow_identities(model: MoFForecaster, x: torch.Tensor | None = None, n_grid: int = 4001) -> dict[str, Any]:
    """The claim-1 quantities of a trained forecaster with a Flow.

    On the float64 copy of its Flow, over x in [-50, 50] (``n_grid`` points per channel, tails included) and for
    the unmodulated Flow and, if the model has Morph and test windows ``x`` (B, L, C) are given, the Morph
    modulations of those windows: ``inverse_err`` max |Flow^-1(Flow(x)) - x|, ``monotone`` (strictly increasing on
    the grid), ``logdet_err`` max |logdet - log dz/dx (autograd)|. ``zero_identity_err``: max |z - x| + max |logdet|
    of a zero-logit Flow of the same family (exactly 0 for the identity). ``m1_bitwise``: with Morph's G = 0
    (m = 1), the model's forecasts on ``x`` equal, bit for bit, those of the same weights without Morph."""
    if model.flow is None:
        raise ValueError("flow_identities: the model has no Flow (revin_linear)")
    flow = copy.deepcopy(model.flow).double()
    C = flow.n_channels
    grid = torch.linspace(-C1_GRID, C1_GRID, n_grid, dtype=torch.float64)
    mods: list[torch.Tensor | None] = [None]
    if x is not None and model.morph is not None:
        with torch.no_grad():
            mods.append(model.parts(x)["mod"].double())
    inv_err, logdet_err, monotone = 0.0, 0.0, True
    for mod in mods:
        B = 1 if mod is None else mod.shape[0]
        g = grid.expand(B, C, -1).contiguous().requires_grad_(True)
        z, logdet = flow(g, mod)
        dz, = torch.autograd.grad(z.sum(), g)
        with torch.no_grad():
            inv_err = max(inv_err, float((flow.inverse(z, mod) - g).abs().max()))
            logdet_err = max(logdet_err, float((logdet - torch.log(dz)).abs().max()))
            monotone = monotone and bool((z.diff(dim=-1) > 0).all())
    fresh = SplineFlow(C, flow.n_bins, flow.bound, flow.tails, flow.spline).double()
    with torch.no_grad():
        g = grid.expand(1, C, -1).contiguous()
        z0, ld0 = fresh(g)
        zero_err = float((z0 - g).abs().max() + ld0.abs().max())
    out = {"inverse_err": inv_err, "logdet_err": logdet_err, "monotone": monotone, "zero_identity_err": zero_err}
    if x is not None:
        out["m1_bitwise"] = morph_one_bitwise(model, x)
    return out


@torch.no_grad()
def morph_one_bitwise(model: MoFForecaster, x: torch.Tensor) -> bool:
    """True iff the model with a Morph whose G = 0 (so m = 1) forecasts ``x`` bit for bit like the same Flow and
    backbone with Morph off (a model without Morph gets a freshly initialised one)."""
    with_morph, without = copy.deepcopy(model), copy.deepcopy(model)
    if with_morph.morph is None:
        c = with_morph.cfg
        with_morph.morph = Morph(model.n_channels, model.seq_len, c["rank"], c["inner_steps"], c["inner_lr"],
                                 c["mask_seed"])
    with_morph.cfg = {**with_morph.cfg, "morph_mode": "ttt_layer"}
    with_morph.morph.G.zero_()
    without.morph = None
    without.cfg = {**without.cfg, "morph_mode": "off"}
    with_morph.eval(), without.eval()
    return bool(torch.equal(with_morph(x), without(x)))
