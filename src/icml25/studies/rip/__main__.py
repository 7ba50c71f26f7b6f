"""Stage CLI of the rip study: ``python -m icml25.studies.rip <stage> --help``."""
from __future__ import annotations

import sys

from icml25.core.cli import stage_main

from .config import Config


def main(argv: list[str] | None = None) -> int:
    """Run one stage (prepare, download, preprocess, train, evaluate)."""
    from .stages import STAGES

    return stage_main("rip", Config, STAGES, argv,
                      description="rip (R.I.P. prompt filtering by preference-pair scores, ICML 2025): pipeline "
                                  "stages. Stage options: --set threads=N (torch threads).")


if __name__ == "__main__":
    sys.exit(main())
