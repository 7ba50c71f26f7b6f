"""sard — Adversarial Robustness in Two-Stage Learning-to-Defer: Algorithms and Guarantees (Montreuil, Carlier, Ng,
Ooi; ICML 2025; arXiv:2502.01027). The losses and attacks are a labelled reconstruction (see README.md).

Public API, re-exported lazily (PEP 562) so that importing the package does not import torch:

* :func:`deferral_loss` — ℓ_def = c_{π(x)}, π = argmax of the rejector's scores (ties → lowest index)
* :func:`two_stage_surrogate` — Σ_j τ_j Φ(r, x, j): comp-sum (``rho=None``) or ρ-margin comp-sum (float ρ)
* :func:`pgd_attack` — ℓ∞ PGD maximising ``objective(model(x′))`` with random start, budget and box
* :func:`attack_objective` — the untargeted (expected cost) and targeted (log softmax_t) attack objectives
* :func:`sard_loss` — SARD's adversarial training loss on a batch
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "deferral_loss": "method",
    "two_stage_surrogate": "method",
    "pgd_attack": "method",
    "attack_objective": "method",
    "sard_loss": "method",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
