"""human_baselines — Position: Human Baselines in Model Evaluations Need Rigor and Transparency (With
Recommendations & Reporting Checklist) (Wei, Paskov, Dev, Byun, Reuel, Roberts-Gaal, Calcott, Coxon, Deshpande;
ICML 2025, https://arxiv.org/abs/2506.13776). The study README describes what is implemented and reconstructed.
Data: https://github.com/kevinlwei/human-baselines, CC BY-NC-SA 4.0.

Public API, re-exported lazily so that importing the package (which the Snakefile does to read :mod:`.config`)
stays cheap:

* :func:`read_workbook` — the sheet's cached values, rows 1..85 × columns A..DN (stdlib xlsx reader)
* :func:`normalize_answer` — a cell → "Yes", "No" or "Unknown" by the Table III rule
* :func:`table_iii` — Table III (16 items × {all, model_card} × counts and percentages)
* :func:`make_synthetic_workbook` — the offline workbook with the same schema; returns the planted counts
* :func:`simulate_power` — our underpowering simulator (paired t-test power) [R]
* :func:`score_checklist` — score a new study's filled-in checklist (also ``python -m …human_baselines.checklist``)
"""
from __future__ import annotations

import importlib
from typing import Any

PAPER = {"title": "Position: Human Baselines in Model Evaluations Need Rigor and Transparency (With Recommendations & Reporting Checklist)",
         "ref": "Wei et al.; ICML 2025, arXiv:2506.13776"}  # shown in claims.json / claims.md

_EXPORTS = {
    "read_workbook": "workbook",
    "check_schema": "workbook",
    "WorkbookSchemaError": "workbook",
    "normalize_answer": "table",
    "table_iii": "table",
    "long_table": "table",
    "rigor_scores": "table",
    "ITEMS": "table",
    "make_synthetic_workbook": "synthetic",
    "simulate_power": "power",
    "score_checklist": "checklist",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
