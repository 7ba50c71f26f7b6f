"""unisoma — Unisoma: A Unified Transformer-based Solver for Multi-Solid Systems (ICML 2025,
PMLR 267; official code https://github.com/therontau0054/Unisoma). The study README describes
what is implemented and reconstructed.

Public API, re-exported lazily so that importing the package (which the Snakefile does to read :mod:`.config`)
does not import torch:

* :class:`Unisoma` ``(cfg: UnisomaConfig).forward(loads, rigids, deformables, edges=None) -> list[Tensor]``
* :class:`UnisomaConfig` (default-scale architecture; ``n_loads``, ``n_rigids``, ``n_deformables``)
* :class:`SliceBlock` ``(dim, n_slices, use_edge=False)(f, edges=None) -> (tokens, weights)``
* :func:`allocate` ``(items, proj) -> Tensor``; :func:`knn_edges` ``(pos, k=3) -> (length, index)``
* :func:`relative_l2` ``(pred, target) -> Tensor``
* :func:`load_pickle_restricted` ``(path, schema="bilateral_stamping") -> list[dict[str, ndarray]]``
"""
from __future__ import annotations

import importlib
from typing import Any

PAPER = {"title": "Unisoma: A Unified Transformer-based Solver for Multi-Solid Systems",
         "ref": "ICML 2025 (PMLR 267); official code https://github.com/therontau0054/Unisoma"}

_EXPORTS = {
    "Unisoma": "model",
    "UnisomaConfig": "model",
    "SliceBlock": "model",
    "allocate": "model",
    "knn_edges": "model",
    "relative_l2": "model",
    "load_pickle_restricted": "data",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
