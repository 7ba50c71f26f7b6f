"""fedecado — FedECADO: A Dynamical System Model of Federated Learning (Agarwal, Joshi, Pileggi; ICML 2025,
PMLR 267:531). The method is implemented as a labelled reconstruction, FedECADO-R (see README.md).

Public API, re-exported lazily (PEP 562) so that importing the package imports neither torch nor scipy:

* :func:`quadratic_consensus` — the quadratic consensus problem with its closed-form optimum
* :func:`fixed_point_fedavg`, :func:`fixed_point_fednova` — closed-form fixed points of FedAvg / FedNova
* :func:`client_integrate` — a client's forward-Euler integration (fixed or LTE-controlled steps)
* :func:`central_update` — the server's synchronisation and adaptive backward-Euler update
* :func:`dirichlet_partition` — the Dirichlet label-skew partitioner (shared: :mod:`icml25.core.datasets`)
* :func:`mnist5k_split` — the per-class 400/100 split of MNIST-5k (shared: :mod:`icml25.core.datasets`)
"""
from __future__ import annotations

import importlib
from typing import Any

PAPER = {"title": "FedECADO: A Dynamical System Model of Federated Learning",
         "ref": "Agarwal, Joshi, Pileggi; ICML 2025, PMLR 267:531; implemented as the reconstruction FedECADO-R"}

_EXPORTS = {
    "quadratic_consensus": "data",
    "fixed_point_fedavg": "method",
    "fixed_point_fednova": "method",
    "client_integrate": "method",
    "central_update": "method",
    "dirichlet_partition": "data",
    "mnist5k_split": "data",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
