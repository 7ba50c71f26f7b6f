"""Stage CLI of the human_baselines study: ``python -m icml25.studies.human_baselines <stage> --help``.

The checklist-scoring command is separate: ``python -m icml25.studies.human_baselines.checklist --help``."""
from __future__ import annotations

import sys

from icml25.core.cli import stage_main

from .config import Config


def main(argv: list[str] | None = None) -> int:
    """Run one stage (download, preprocess, train, evaluate, report)."""
    from .stages import STAGES

    return stage_main("human_baselines", Config, STAGES, argv,
                      description="human_baselines (human baselines in model evaluations, ICML 2025): pipeline "
                                  "stages.")


if __name__ == "__main__":
    sys.exit(main())
