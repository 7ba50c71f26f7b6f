"""lfss — Learning from Sample Stability for Deep Clustering (Li, Jia, Liu, Hou, ICML 2025).

Public API, re-exported lazily (PEP 562) so that importing the package imports neither torch nor scikit-learn:

* :func:`kmeans_cosine` — cosine k-means (k-means++ init, best of n_init starts) -> (labels, centers)
* :func:`hungarian_align` — relabel cluster ids to agree best with reference labels
* :func:`stability_scores` — per-sample stability and the pseudo-labels (-1 = unstable)
* :func:`sample_stability_loss`, :func:`prototype_loss` — the two LFSS loss terms (torch)
* :func:`cluster_metrics` — (ACC, NMI, ARI)
"""
from __future__ import annotations

import importlib
from typing import Any

PAPER = {"title": "Learning from Sample Stability for Deep Clustering",
         "ref": "Li, Jia, Liu, Hou; ICML 2025 (PMLR 267); code https://github.com/LZX-001/LFSS"}

_EXPORTS = {
    "kmeans_cosine": "method",
    "hungarian_align": "method",
    "stability_scores": "method",
    "sample_stability_loss": "method",
    "prototype_loss": "method",
    "cluster_metrics": "evaluate",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
