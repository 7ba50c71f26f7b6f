"""Helpers for ``workflow/rules/human_baselines.smk`` (kept in Python so the rules file stays declarative)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence


def model_paths(arms: Sequence[str], chunks: Mapping[int, Sequence[int]], models_dir: str,
                exclude: Sequence[str] = ()) -> list[str]:
    """Train outputs ``<models_dir>/<arm>/chunk<k>.csv``: chunk 0 only for the deterministic arms (table_iii,
    rigor_score), every seed chunk for power_sim; arms in ``exclude`` are left out."""
    out = []
    for arm in arms:
        if arm in exclude:
            continue
        ks = list(chunks) if arm == "power_sim" else [0]
        out += [f"{models_dir}/{arm}/chunk{k}.csv" for k in ks]
    return out


def seed_args(arm: str, chunk: str | int, chunks: Mapping[int, Sequence[int]]) -> str:
    """``--seeds …`` of a power_sim train job; "" for the deterministic arms."""
    if arm != "power_sim":
        return ""
    return "--seeds " + " ".join(map(str, chunks[int(chunk)]))
