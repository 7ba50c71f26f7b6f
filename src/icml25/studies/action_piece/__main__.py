"""Stage CLI of the action_piece study: ``python -m icml25.studies.action_piece <stage> --help``."""
from __future__ import annotations

import sys

from icml25.core.cli import stage_main

from .config import Config


def main(argv: list[str] | None = None) -> int:
    """Run one stage (prepare, preprocess, train, evaluate, report)."""
    from .stages import STAGES

    return stage_main("action_piece", Config, STAGES, argv,
                      description="action_piece (ActionPiece contextual action tokenization, ICML 2025): pipeline "
                                  "stages. preprocess takes --set dataset=world|movielens.")


if __name__ == "__main__":
    sys.exit(main())
