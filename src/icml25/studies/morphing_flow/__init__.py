"""morphing_flow — "Slimming the Fat-Tail: Morphing-Flow for Adaptive Time Series Modeling" (ICML 2025).

A MoF-style reconstruction (no official code exists; see README.md): an invertible per-channel monotone spline
(*Flow*) between instance normalisation and a forecasting backbone, with per-instance test-time modulation (*Morph*).

Public API, re-exported lazily (PEP 562) so that importing the package imports neither torch nor pandas:

* :class:`SplineFlow` — ``SplineFlow(n_channels, n_bins=16, bound=3.0, tails="linear")``; ``forward(x, mod)``
  returns ``(z, logdet)``, ``inverse(z, mod)`` returns x
* :class:`Morph` — ``Morph(n_channels, seq_len, rank=16, inner_steps=1, inner_lr=0.1)``; ``forward(z)`` returns the
  modulation (B, 2)
* :class:`MoFForecaster` — ``MoFForecaster(backbone, n_channels, seq_len, pred_len, cfg)``; (B, L, C) -> (B, H, C)
* :func:`excess_kurtosis` — Fisher excess kurtosis along an axis (numpy; defined in evaluate.py)
* :func:`make_fat_tailed_ett` — the fat-tailed ETT-format generator
"""
from __future__ import annotations

import importlib
from typing import Any

PAPER = {"title": "Slimming the Fat-Tail: Morphing-Flow for Adaptive Time Series Modeling",
         "ref": "ICML 2025 (PMLR 267); MoF-style reconstruction, no official code"}  # shown in claims.json / claims.md

_EXPORTS = {
    "SplineFlow": "method",
    "Morph": "method",
    "excess_kurtosis": "evaluate",
    "MoFForecaster": "model",
    "make_fat_tailed_ett": "data",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
