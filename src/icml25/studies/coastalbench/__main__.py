"""Stage CLI of the coastalbench study: ``python -m icml25.studies.coastalbench <stage> --help``."""
import sys

from icml25.core.cli import stage_main

from .config import Config


def _stage(name):
    def run(stage, tracking):
        from . import stages

        return getattr(stages, name)(stage, tracking)

    return run


STAGES = {name: _stage(name) for name in ("download", "preprocess", "stats_reduce", "shard", "train", "evaluate",
                                          "report")}

if __name__ == "__main__":
    sys.exit(stage_main("coastalbench", Config, STAGES,
                        description="CoastalBench (ICML 2025): mini-ROMS, ROMS ingestion, ViT emulator, claims."))
