"""adaptive_adversary — *On the Learnability of Distribution Classes with Adaptive Adversaries* (Lechner, Bie,
Kamath; ICML 2025; arXiv:2509.05137).

The paper is pure theory. This study simulates our own illustrative construction of its separation (adaptive
additive learnability is strictly stronger than oblivious additive learnability), not the paper's proof.

Public API (re-exported lazily so importing the package stays cheap):

* :func:`draw_sample` ``(truth, m, c, rng) -> Sample``
* :func:`adaptive_attack` ``(sample, eta, c, rng) -> (Sample, insertions)``
* :func:`oblivious_sample` ``(truth, m, c, eta, kind, rng) -> Sample``
* :func:`learn` ``(sample, learner) -> (Hypothesis, d_TV to the truth)``
* :func:`le_cam_lower_bound` ``(m, c, eta, K=2**40) -> float``
"""
from __future__ import annotations

import importlib
from typing import Any

#: The paper (claims.json, MLflow).
PAPER = {"title": "On the Learnability of Distribution Classes with Adaptive Adversaries",
         "ref": "Lechner, Bie, Kamath; ICML 2025; https://arxiv.org/abs/2509.05137"}
#: Tags of every MLflow run of the study: its claims are about our own construction, not the paper's proof.
LABEL_TAGS = {"construction": "own_illustration", "paper_theorem_reproduced": "false"}

_EXPORTS = {
    "draw_sample": "data",
    "oblivious_sample": "data",
    "adaptive_attack": "method",
    "learn": "method",
    "le_cam_lower_bound": "method",
    "Sample": "model",
    "LazySet": "model",
    "Hypothesis": "model",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
