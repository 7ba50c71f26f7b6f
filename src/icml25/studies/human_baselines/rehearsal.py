"""Miniature workbook for the paper-scale rehearsal of human_baselines (``icml25.core.rehearsal``).

The real file is the authors' ``lit_review_data.xlsx`` (kevinlwei/human-baselines at a pinned commit): sheet
``Final_Data``, dimension A1:DN85, the literature review's 115 studies in columns, the checklist items in rows, with
shared and inline strings, cached formulas, booleans and an error cell. The study's synthetic workbook
(:func:`~.synthetic.make_synthetic_workbook`) has exactly that layout and every one of those cell types with random
codes, written byte-identically for a seed; the rehearsal serves it under the real row's mirror path, so the paper
DAG downloads it, checks its (rehearsal) hash and parses it as the real file. The workbook is already small
(about 37 KB; the real file is 67 KB), so the miniature is full size; only its codes, hash and size differ.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

ROW = "lit_review_data"  #: the manifest row of the workbook
SEED = 7  #: seed of the rehearsal's workbook (not the offline default's 0, so the two are told apart)


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """Write the workbook at ``root / manifest[ROW].mirror_path``; return ``[ROW]``."""
    from icml25.core.io import atomic_path

    from .synthetic import make_synthetic_workbook

    path = Path(root) / manifest[ROW].mirror_path
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        make_synthetic_workbook(tmp, seed=SEED)
    return [ROW]
