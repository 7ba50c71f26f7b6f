"""ntk_dfl — NTK-DFL: Enhancing Decentralized Federated Learning in Heterogeneous Settings via Neural Tangent
Kernel (Thompson, Yue, Wong, Dai; ICML 2025, PMLR 267; https://arxiv.org/abs/2410.01922).

Public API, re-exported lazily (PEP 562) so that importing the package (which the Snakefile does) imports neither
torch nor networkx:

* :func:`empirical_ntk` — per-sample Jacobians (N, C, P) via ``torch.func.vmap(jacrev)`` in chunks, and H = J̃J̃ᵀ/C
* :func:`evolve_function` — linearised cross-entropy dynamics of the outputs (dopri5, RK4 or Euler), (t_max+1, N, C)
* :func:`evolve_weights` — the weights after t evolution steps (P,)
* :func:`ntk_dfl_round` — one synchronous NTK-DFL round for all clients (averaging, kernel, evolution, t*)
* :func:`dirichlet_partition` — label-skewed client shards (shared: :mod:`icml25.core.datasets`)
"""
from __future__ import annotations

import importlib
from typing import Any

PAPER = {"title": "NTK-DFL: Enhancing Decentralized Federated Learning in Heterogeneous Settings via Neural Tangent "
                  "Kernel", "ref": "Thompson, Yue, Wong, Dai; ICML 2025, PMLR 267; https://arxiv.org/abs/2410.01922"}

_EXPORTS = {
    "empirical_ntk": "method",
    "evolve_function": "method",
    "evolve_weights": "method",
    "ntk_dfl_round": "method",
    "dirichlet_partition": "data",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
