"""pid — PiD: Generalized AI-Generated Images Detection with Pixelwise Decomposition Residuals (ICML 2025).
The study README describes what is implemented and reconstructed.

Public API, re-exported lazily (PEP 562) so that importing the package does not import torch:

* :func:`colour_matrix` — (M, M⁻¹) of a colour space (``yuv601`` default)
* :func:`pid_residual` — r = x − M⁻¹(s·round(M x / s)) per pixel, NumPy (..., H, W, 3) or torch (B, 3, H, W)
* :func:`residual_bound` — (s/2)·Σ_j |M⁻¹_cj| per channel
* :func:`npr_residual` — x − up_nearest(x[::2, ::2])
* :class:`TinyDetector`, :func:`make_autoencoder` — the detector and the AE generators
"""
from __future__ import annotations

import importlib
from typing import Any

PAPER = {"title": "PiD: Generalized AI-Generated Images Detection with Pixelwise Decomposition Residuals",
         "ref": "ICML 2025"}

_EXPORTS = {
    "colour_matrix": "method",
    "pid_residual": "method",
    "residual_bound": "method",
    "npr_residual": "method",
    "TinyDetector": "model",
    "make_autoencoder": "model",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
