"""kernel_adaptation — From Kernels to Features: A Multi-Scale Adaptive Theory of Feature Learning
(Rubin, Fischer, Lindner, Dahmen, Seroussi, Ringel, Krämer, Helias; ICML 2025, PMLR 267:52225–52257,
arXiv:2502.03210).

Public API (numpy float64; X (P,D), y (P,), X_test (P*,D)), re-exported lazily (PEP 562) so that importing the
package does not import torch or scipy:

* :func:`nngp_predictor` — the χ-invariant NNGP posterior mean
* :func:`rescaling_predictor` — the NNGP kernel rescaled by a given or fitted u
* :func:`adaptive_predictor` — the tree-level adaptive kernel, annealed from χ = 1
* :func:`langevin_sample` — Langevin ensembles of the linear two-layer network (torch, CPU or GPU)
* :func:`spike_ratio` — stretch of a kernel matrix along a direction
"""
from __future__ import annotations

import importlib
from typing import Any

from pathlib import Path

#: The paper (claims.json, MLflow).
PAPER = {"title": "From Kernels to Features: A Multi-Scale Adaptive Theory of Feature Learning",
         "ref": "Rubin, Fischer, Lindner, Dahmen, Seroussi, Ringel, Krämer, Helias; ICML 2025, PMLR 267:52225-52257; "
                "https://arxiv.org/abs/2502.03210"}
#: Remote files (paper scale: MNIST from OpenML).
MANIFEST = Path(__file__).with_name("manifest.csv")

_EXPORTS = {
    "nngp_predictor": "method",
    "rescaling_predictor": "method",
    "adaptive_predictor": "method",
    "spike_ratio": "method",
    "langevin_sample": "langevin",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
