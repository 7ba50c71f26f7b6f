"""Metrics and verdicts of the morphing_flow study: the Flow identities measured on a trained model, the paired
bootstrap, and one pure verdict function per claim (thresholds are the study's constants below).

* :func:`check_flow_identities` - claim 1 (mechanism, deterministic; a check).
* :func:`verdict_tail_slimming` - claim 2: kurtosis of the backbone inputs, ``mof_flow`` vs ``revin_linear``.
* :func:`verdict_accuracy` - claim 3: relative test-MSE change, ``mof_linear`` vs ``revin_linear``.
* :func:`verdict_morph` - claim 4: ``mof_linear`` vs ``mof_flow`` in the forced high-variance segment.

Claim verdicts return ``(reproduced, not_reproduced, statistic)``; neither flag set means inconclusive.
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from .method import Morph, SplineFlow
from .model import MoFForecaster

# claim 1
C1_INVERSE_TOL = 1e-10     # max |Flow^-1(Flow(x)) - x| in float64 over x in [-50, 50]
C1_LOGDET_TOL = 1e-8       # max |logdet - log(autograd dz/dx)|
C1_GRID = 50.0             # identities are checked on [-C1_GRID, C1_GRID] (tails included)
# claim 2
C2_MIN_REDUCTION = 0.185   # reproduced: relative kurtosis reduction >= 18.5 % for every seed (paper's lower bound)
# claims 3-4
BOOT_LEVEL = 0.95          # two-sided percentile bootstrap interval
C4_MAX_UPPER = 0.01        # claim 4 reproduced needs the CI upper bound of the relative change < +1 %


def _arr(name: str, values: Any) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64).reshape(-1)
    if a.size == 0:
        raise ValueError(f"verdict: {name} is empty")
    return a


def _paired(name_a: str, a: Any, name_b: str, b: Any) -> tuple[np.ndarray, np.ndarray]:
    a, b = _arr(name_a, a), _arr(name_b, b)
    if a.shape != b.shape:
        raise ValueError(f"verdict: paired arrays {name_a} ({a.size}) and {name_b} ({b.size}) differ in length")
    return a, b


# ----------------------------------------------------------------------------------- claim 1: identities


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


def check_flow_identities(inverse_err: Any, logdet_err: Any, monotone: Any, zero_identity_err: Any,
                          m1_bitwise: Any) -> tuple[bool, dict[str, Any]]:
    """Claim 1. One entry per trained Flow (arm x seed): holds iff every inverse error <= 1e-10, every log-det
    error <= 1e-8, every Flow strictly monotone, every zero-logit Flow exactly the identity (error 0) and every
    m = 1 model bitwise equal to its Flow-only twin (NaN fails)."""
    inv, ld, zero = _arr("inverse_err", inverse_err), _arr("logdet_err", logdet_err), _arr("zero_identity_err",
                                                                                            zero_identity_err)
    mono = np.asarray(monotone, dtype=bool).reshape(-1)
    bit = np.asarray(m1_bitwise, dtype=bool).reshape(-1)
    if not (len(inv) == len(ld) == len(zero) == len(mono) == len(bit)):
        raise ValueError("check_flow_identities: per-flow arrays differ in length")
    parts = {"inverse": bool(np.all(inv <= C1_INVERSE_TOL)), "logdet": bool(np.all(ld <= C1_LOGDET_TOL)),
             "monotone": bool(mono.all()), "zero_identity": bool(np.all(zero == 0.0)), "m1_bitwise": bool(bit.all())}
    holds = all(parts.values())
    stat = {"n": int(len(inv)), "max_inverse_err": float(np.max(inv)), "max_logdet_err": float(np.max(ld)),
            "max_zero_identity_err": float(np.max(zero)), "n_monotone": int(mono.sum()), "n_m1_bitwise": int(bit.sum()),
            "conditions": parts, "thresholds": {"inverse": C1_INVERSE_TOL, "logdet": C1_LOGDET_TOL}}
    return holds, stat


# ------------------------------------------------------------------------------------ claim 2: kurtosis


def verdict_tail_slimming(kurt_flow: Any, kurt_revin: Any) -> tuple[bool, bool, dict[str, Any]]:
    """Claim 2. Per seed: mean per-channel excess kurtosis of the backbone inputs on test windows, ``mof_flow``
    (after Flow) and ``revin_linear`` (after RevIN); reduction = 1 - k_flow / k_revin. Reproduced: reduction
    >= 18.5 % for every seed. Not reproduced: mean reduction <= 0. Otherwise inconclusive (also when some baseline
    kurtosis is not positive, so that a relative reduction is undefined)."""
    kf, kr = _paired("kurt_flow", kurt_flow, "kurt_revin", kurt_revin)
    stat: dict[str, Any] = {"n": int(len(kf)), "kurt_flow": kf.tolist(), "kurt_revin": kr.tolist(),
                            "threshold": C2_MIN_REDUCTION}
    if not (np.all(np.isfinite(kf)) and np.all(np.isfinite(kr)) and np.all(kr > 0)):
        stat.update(reduction=None, mean_reduction=None, reason="baseline kurtosis not positive or non-finite")
        return False, False, stat
    red = (kr - kf) / kr
    stat.update(reduction=red.tolist(), mean_reduction=float(red.mean()), min_reduction=float(red.min()))
    reproduced = bool(np.all(red >= C2_MIN_REDUCTION))
    not_reproduced = bool(red.mean() <= 0.0)
    return reproduced, not_reproduced and not reproduced, stat


# --------------------------------------------------------------------------- claims 3-4: paired bootstrap


def paired_bootstrap(mse_a: Any, mse_b: Any, n_boot: int = 2000, seed: int = 0, level: float = BOOT_LEVEL,
                     chunk: int = 250) -> dict[str, float]:
    """Paired percentile bootstrap over windows of the relative change mean(a) / mean(b) - 1 (a, b: per-window
    MSEs of two arms on the same windows, pooled over seeds). Returns ``rel_change`` (point), ``lo``, ``hi`` (the
    ``level`` interval), ``mean_diff`` = mean(a - b) and ``n``. Resamples come from ``default_rng(seed)``."""
    a, b = _paired("mse_a", mse_a, "mse_b", mse_b)
    rng = np.random.default_rng(seed)
    stats = []
    for start in range(0, n_boot, chunk):
        idx = rng.integers(0, len(a), size=(min(chunk, n_boot - start), len(a)))
        stats.append(a[idx].mean(axis=1) / b[idx].mean(axis=1) - 1.0)
    boots = np.concatenate(stats)
    q = (1.0 - level) / 2
    return {"rel_change": float(a.mean() / b.mean() - 1.0), "lo": float(np.quantile(boots, q)),
            "hi": float(np.quantile(boots, 1 - q)), "mean_diff": float((a - b).mean()), "n": int(len(a)),
            "n_boot": int(n_boot)}


def verdict_accuracy(mse_mof: Any, mse_revin: Any, n_boot: int = 2000, seed: int = 0) -> tuple[bool, bool, dict]:
    """Claim 3 (per dataset). Per-window test MSEs of ``mof_linear`` and ``revin_linear`` on the same windows,
    pooled over seeds. Reproduced: the 95 % CI of the relative MSE change lies entirely below 0. Not reproduced:
    entirely above 0. Otherwise inconclusive."""
    stat = paired_bootstrap(mse_mof, mse_revin, n_boot, seed)
    return bool(stat["hi"] < 0.0), bool(stat["lo"] > 0.0), stat


def verdict_morph(mse_morph: Any, mse_flow: Any, n_boot: int = 2000, seed: int = 0) -> tuple[bool, bool, dict]:
    """Claim 4. Per-window MSEs of ``mof_linear`` (Flow + Morph) and ``mof_flow`` (Flow only) on the windows of the
    forced high-variance segment, pooled over seeds. Reproduced: mean paired difference <= 0 and the CI upper bound
    of the relative change < +1 %. Not reproduced: CI lower bound > 0. Otherwise inconclusive."""
    stat = paired_bootstrap(mse_morph, mse_flow, n_boot, seed)
    reproduced = stat["mean_diff"] <= 0.0 and stat["hi"] < C4_MAX_UPPER
    not_reproduced = stat["lo"] > 0.0
    stat["threshold_hi"] = C4_MAX_UPPER
    return bool(reproduced), bool(not_reproduced and not reproduced), stat
