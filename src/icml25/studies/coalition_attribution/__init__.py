"""coalition_attribution — "Towards Attributions of Input Variables in a Coalition" (Zheng, Deng & Zhang,
ICML 2025, PMLR 267; arXiv:2309.13411).

Public API (numpy float64; a subset S of N = {0..n-1} is the bitmask sum_{i in S} 2**i and a game is an array of
length 2**n with ``values[mask] = v(S)``), re-exported lazily (PEP 562) so importing the package imports neither
scipy nor torch:

* :func:`and_or_interactions` — AND and OR interactions (Eqs. 3-4), gamma given or learned (LP or Adam)
* :func:`coalition_attribution` — the attribution phi(S) of a coalition (Eq. 6)
* :func:`faithfulness` — the faithfulness metrics R, R', Q of a coalition (Eqs. 7-9)
* :func:`shapley_from_interactions` — per-variable Shapley values from the interactions (Thm 3.2)
"""
from __future__ import annotations

import importlib
from typing import Any

from pathlib import Path

#: The paper (claims.json, MLflow).
PAPER = {"title": "Towards Attributions of Input Variables in a Coalition",
         "ref": "Zheng, Deng, Zhang; ICML 2025, PMLR 267:78115-78138; https://arxiv.org/abs/2309.13411"}
#: Remote files of the paper-scale real-data experiments (name, url, sha256 or UNPINNED, size, licence, mirror).
MANIFEST = Path(__file__).with_name("manifest.csv")

_EXPORTS = {
    "and_or_interactions": "method",
    "coalition_attribution": "method",
    "faithfulness": "method",
    "shapley_from_interactions": "method",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
