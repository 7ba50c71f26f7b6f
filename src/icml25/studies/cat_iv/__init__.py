"""cat_iv — Data-Driven Selection of Instrumental Variables for Additive Nonlinear, Constant Effects Models
(Guo, Xie, Zeng, Zhang, Geng; ICML 2025, PMLR 267:21163–21183,
https://proceedings.mlr.press/v267/guo25q.html). The study README describes what is implemented and reconstructed.

Public API (float64 arrays; rows with NaN dropped), re-exported lazily so that importing the package (which the
Snakefile does to read :mod:`.config`) stays cheap:

* :func:`select_valid_ivs` — CAT selection, known K or the unknown-K t-test rule
* :func:`cat_pairwise_scores` — the score matrix s_ij = dCor(A_i, Z_j) + dCor(A_j, Z_i)
* :func:`auxiliary_residuals` — A_j = Y − ĥ_j(X)
* :func:`distance_correlation` — V-statistic or bias-corrected dCor
* :func:`generate_case1` — the paper's synthetic generator
"""
from __future__ import annotations

import importlib
from typing import Any

PAPER = {"title": "Data-Driven Selection of Instrumental Variables for Additive Nonlinear, Constant Effects Models",
         "ref": "Guo, Xie, Zeng, Zhang, Geng; ICML 2025, PMLR 267:21163-21183"}  # shown in claims.json / claims.md

_EXPORTS = {
    "select_valid_ivs": "method",
    "cat_pairwise_scores": "method",
    "auxiliary_residuals": "method",
    "distance_correlation": "dcor",
    "generate_case1": "data",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
