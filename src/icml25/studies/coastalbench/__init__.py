"""coastalbench — CoastalBench: a decade-long high-resolution dataset to emulate coastal processes (ICML 2025;
code and data: https://github.com/spatialdatasciencegroup/CoastalBench). The study README describes what is
implemented and reconstructed.

Public API: ``open_roms``, ``open_preview``, ``zlevels``, ``normalisation_stats``,
``CoastalViT``, ``persistence``, ``Climatology``; plus ``HisWriter`` (the ROMS writer) and ``write_shard``.
Names are imported lazily (PEP 562) so that importing ``icml25.studies.coastalbench.config`` (Snakemake's parse)
pulls in neither torch nor xarray.
"""
from __future__ import annotations

import importlib
from typing import Any

PAPER = {"title": "CoastalBench: A Decade-Long High-Resolution Dataset to Emulate Complex Coastal Processes",
         "ref": "ICML 2025; https://github.com/spatialdatasciencegroup/CoastalBench"}  # shown in claims.json / claims.md

_EXPORTS = {
    "open_roms": "roms", "zlevels": "roms", "HisWriter": "roms", "RomsFormatError": "roms",
    "validate_files": "roms", "open_preview": "preview",
    "normalisation_stats": "stats", "write_shard": "stats", "merge_moments": "stats",
    "CoastalViT": "model", "persistence": "model", "Climatology": "model", "masked_mse": "model",
    "simulate": "simulator", "s_levels": "scoord", "stretching": "scoord",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
