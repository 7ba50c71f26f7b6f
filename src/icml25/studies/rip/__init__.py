"""rip — R.I.P.: Better Models by Survival of the Fittest Prompts (Yu et al., ICML 2025;
https://arxiv.org/abs/2501.18578). The study README describes what is implemented and reconstructed.

Public API, re-exported lazily (PEP 562) so that importing the package or :mod:`.config` (which the Snakefile
does) imports neither torch nor pandas:

* :func:`judge_reward` — the programmatic judge (offline stand-in for ArmoRM)
* :func:`build_pairs` — best-vs-worst pairs and the metrics m1 (rejected reward), m2 (rejected length), m3 (gap)
* :func:`rip_filter` — RIP's quantile filter
* :func:`dpo_loss` — the DPO loss and implicit rewards
* :func:`read_pairs`, :func:`write_pairs`, :func:`validate_pair_table` — the pair table (parquet)
"""
from __future__ import annotations

import importlib
from typing import Any

PAPER = {"title": "R.I.P.: Better Models by Survival of the Fittest Prompts",
         "ref": "Yu et al.; ICML 2025"}  # shown in claims.json / claims.md

_EXPORTS = {
    "judge_reward": "judge",
    "build_pairs": "method",
    "rip_filter": "method",
    "dpo_loss": "train",
    "read_pairs": "pairs",
    "write_pairs": "pairs",
    "validate_pair_table": "pairs",
    "PairTableError": "pairs",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
