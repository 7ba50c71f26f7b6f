"""Claims: the ``claims.json`` format every study's evaluate stage writes, and the statistics behind verdicts.

A claim records the statement, whose claim it is (``paper`` or ``ours``), which data the verdict rests on, the
metric per arm (mean and bootstrap CI over seeds), the test and threshold in words, the computed statistic and
the verdict. Verdicts come only from :func:`verdict` applied to computed booleans; there is no way to write one
by hand through this module.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .io import read_json, write_json

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)

CLAIMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["study", "scale", "data_source", "claims"],
    "properties": {
        "study": {"type": "string"},
        "scale": {"enum": ["smoke", "default", "paper"]},
        "data_source": {"type": "string"},
        "config_hash": {"type": "string"},
        "claims": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "statement", "source", "data", "metrics", "test", "threshold", "statistic",
                             "verdict"],
                "properties": {
                    "id": {"type": "string", "minLength": 1},
                    "statement": {"type": "string", "minLength": 1},
                    "source": {"enum": ["paper", "ours"]},
                    "data": {"type": "string"},
                    "metrics": {"type": "object", "additionalProperties": {
                        "type": "object", "required": ["mean"],
                        "properties": {"mean": {"type": ["number", "null"]}}}},
                    "test": {"type": "string"},
                    "threshold": {"type": "string"},
                    "statistic": {},
                    "verdict": {"enum": list(VERDICTS)},
                    "note": {"type": "string"},
                },
            },
        },
    },
}


def verdict(reproduced: bool, not_reproduced: bool = False) -> str:
    """Map computed test outcomes to a verdict; ``reproduced`` wins only if ``not_reproduced`` is False."""
    if reproduced and not not_reproduced:
        return REPRODUCED
    if not_reproduced:
        return NOT_REPRODUCED
    return INCONCLUSIVE


def bootstrap_ci(values: Sequence[float] | np.ndarray, *, n_resamples: int = 2000, level: float = 0.95,
                 seed: int = 0, statistic=np.mean) -> tuple[float, float]:
    """Percentile bootstrap CI of ``statistic`` over a 1-D sample (e.g. one value per seed).

    Deterministic for a given ``seed``. A sample of size 1 gives a degenerate (point) interval; NaNs raise.
    """
    x = np.asarray(values, dtype=float).ravel()
    if x.size == 0:
        raise ValueError("bootstrap_ci: empty sample")
    if np.isnan(x).any():
        raise ValueError("bootstrap_ci: sample contains NaN")
    rng = np.random.Generator(np.random.PCG64(seed))
    idx = rng.integers(0, x.size, size=(n_resamples, x.size))
    stats = statistic(x[idx], axis=1)
    alpha = (1.0 - level) / 2.0
    return float(np.quantile(stats, alpha)), float(np.quantile(stats, 1.0 - alpha))


def summarize(values: Sequence[float] | np.ndarray, **kwargs: Any) -> dict[str, float]:
    """``{mean, ci_low, ci_high, std, n}`` of a per-seed sample, CI by :func:`bootstrap_ci`."""
    x = np.asarray(values, dtype=float).ravel()
    low, high = bootstrap_ci(x, **kwargs)
    return {"mean": float(x.mean()), "ci_low": low, "ci_high": high,
            "std": float(x.std(ddof=1)) if x.size > 1 else 0.0, "n": int(x.size)}


def paired_differences(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> np.ndarray:
    """``a - b`` for per-seed paired samples; lengths must match (same seeds in the same order)."""
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired_differences: unequal lengths {a.size} and {b.size}")
    return a - b


@dataclass
class Claim:
    """One claim's computed outcome; see :data:`CLAIMS_SCHEMA`."""

    id: str
    statement: str
    source: Literal["paper", "ours"]
    data: str
    test: str
    threshold: str
    verdict: str
    statistic: Any = None
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    note: str = ""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim {self.id}: verdict must be one of {VERDICTS}, got {self.verdict!r}")


def write_claims(path: str | Path, *, study: str, scale: str, data_source: str, claims: Sequence[Claim],
                 config_hash: str = "") -> dict[str, Any]:
    """Validate and atomically write ``claims.json``; return the document."""
    doc = {"study": study, "scale": scale, "data_source": data_source, "config_hash": config_hash,
           "claims": [_clean(asdict(c)) for c in claims]}
    validate_claims(doc)
    write_json(path, doc)
    return doc


def load_claims(path: str | Path) -> dict[str, Any]:
    """Read and validate a ``claims.json``."""
    doc = read_json(path)
    validate_claims(doc, where=str(path))
    return doc


def validate_claims(doc: Mapping[str, Any], where: str = "claims") -> None:
    """Raise ValueError naming the path of the first schema violation."""
    import jsonschema

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(CLAIMS_SCHEMA).iter_errors(doc))
    if error is not None:
        loc = ".".join(str(p) for p in error.absolute_path) or "<root>"
        raise ValueError(f"{where}: {loc}: {error.message}")


def _clean(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, np.generic):
        return _clean(obj.item())
    if isinstance(obj, np.ndarray):
        return _clean(obj.tolist())
    if isinstance(obj, Mapping):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj
