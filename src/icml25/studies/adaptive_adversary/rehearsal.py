"""The paper-scale rehearsal of adaptive_adversary (``icml25.core.rehearsal``).

This study downloads nothing at any scale: its data are the simulated trials of our own construction (the paper is
pure theory). So there are no miniature files to write; the rehearsal runs the paper DAG — one train job per
adversary and seed (``seeds_per_job: 1``), the paper's resources, evaluate and report through claims.json — on a
reduced grid (``config/rehearsal/adaptive_adversary.yaml``: the cells the claims read, few trials).
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def write_miniatures(root: Path, manifest: Mapping[str, Any]) -> list[str]:
    """No manifest rows: the study generates its data (see the module docstring)."""
    return []
