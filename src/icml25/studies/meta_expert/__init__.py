"""meta_expert — A Square Peg in a Square Hole: Meta-Expert for Long-Tailed Semi-Supervised Learning (Yaxin Hou,
Yuheng Jia; ICML 2025, PMLR 267:23960, https://proceedings.mlr.press/v267/; official code
https://github.com/yaxinhou/Meta-Expert). The study README describes what is implemented and reconstructed.

Public API (torch tensors), re-exported lazily so that importing the package (which the Snakefile does to read
:mod:`.config`) does not import torch:

* :func:`adjust_logits` — z + τ·log π̂
* :func:`interval_of` — head / medium / tail label of each class (0, 1, 2)
* :class:`MembershipEstimator` — multi-depth feature fusion + dynamic expert assignment → (o, w)
* :func:`aggregate` — the experts mixed by per-sample weights (test or train mode)
* :func:`long_tail_counts` — per-class counts of an exponential long tail
"""
from __future__ import annotations

import importlib
from typing import Any

PAPER = {"title": "A Square Peg in a Square Hole: Meta-Expert for Long-Tailed Semi-Supervised Learning",
         "ref": "Hou, Jia; ICML 2025, PMLR 267:23960; code https://github.com/yaxinhou/Meta-Expert"}

_EXPORTS = {
    "adjust_logits": "method",
    "interval_of": "method",
    "MembershipEstimator": "method",
    "aggregate": "method",
    "long_tail_counts": "method",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
