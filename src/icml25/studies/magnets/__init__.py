"""magnets — *Masked Generative Nested Transformers with Decode Time Scaling* (Goyal et al., ICML 2025;
arXiv:2502.00382).

Public API (re-exported lazily so importing the package, as Snakemake does, never imports torch):

* :class:`NestedMaskedTransformer` ``(vocab=64, n_classes=10, seq_len=49, dim=64, depth=3, heads=4, mlp_ratio=4,
  widths=(0.25, 0.5, 1.0))``; ``.forward(tokens, class_ids, width_fraction) -> logits (B, 49, K)``
* :func:`decode` ``(model, class_ids, schedule, use_cache, T=8, choice_temperature=4.5, generator=None)
  -> (tokens (B, 49), flops_per_step)``
* :func:`count_flops` ``(schedule, use_cache, N=49, dim=64, depth=3, K=64, T=8) -> list[int]``
"""
from __future__ import annotations

import importlib
from typing import Any

#: The paper (claims.json, MLflow).
PAPER = {"title": "Masked Generative Nested Transformers with Decode Time Scaling",
         "ref": "Goyal et al.; ICML 2025; https://arxiv.org/abs/2502.00382"}

_EXPORTS = {"NestedMaskedTransformer": "model", "decode": "method", "count_flops": "method"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
