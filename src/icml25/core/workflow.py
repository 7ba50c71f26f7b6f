"""Helpers behind ``workflow/rules/common.smk``: study config resolution and the environment jobs inherit.

Kept in Python (not in the .smk) so they are unit-testable and the Snakefiles stay declarative.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .config import build, load_yaml, merge_scale, to_dict, validate_schema


def resolve_study(slug: str, config_cls: type, global_config: Mapping[str, Any], root: str | Path = ".") -> dict:
    """The merged study config (yaml common keys + ``scale`` + ``overrides.<slug>`` + global ``seeds``),
    validated by the study's JSON schema and dataclass; errors name the key. Returns plain data."""
    root = Path(root)
    raw = load_yaml(root / "config" / "studies" / f"{slug}.yaml")
    validate_schema(raw, root / "workflow" / "schemas" / f"{slug}.schema.yaml", what=f"config/studies/{slug}.yaml")
    merged = merge_scale(raw, global_config["scale"], (global_config.get("overrides") or {}).get(slug))
    if global_config.get("seeds") is not None:
        merged["seeds"] = list(global_config["seeds"])
    return to_dict(build(config_cls, merged, path=slug))


def seed_chunks(seeds: Sequence[int], per_job: int | None) -> dict[int, list[int]]:
    """Split seeds into train jobs of ``per_job`` seeds (None: one job with all): ``{chunk index: seeds}``."""
    per = per_job or len(seeds)
    return {i: list(seeds[k:k + per]) for i, k in enumerate(range(0, len(seeds), per))}


def export_job_env(results: str | Path, tracking_uri: str | None, src: str | Path | None) -> str:
    """Set the environment every job inherits: ``MLFLOW_TRACKING_URI`` (env > config > local SQLite) and
    ``PYTHONPATH`` including ``src`` (so jobs in a conda env holding only the dependencies find the package).
    Returns the tracking URI."""
    from .tracking import resolve_tracking_uri

    uri = resolve_tracking_uri(results, tracking_uri)
    os.environ["MLFLOW_TRACKING_URI"] = uri
    if src is not None and Path(src).is_dir():
        src = str(Path(src).resolve())
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if src not in paths:
            os.environ["PYTHONPATH"] = os.pathsep.join([src, *paths])
    return uri
