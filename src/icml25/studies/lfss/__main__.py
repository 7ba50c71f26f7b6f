"""Stage CLI of the lfss study: ``python -m icml25.studies.lfss <stage> --help``."""
from __future__ import annotations

import sys

from icml25.core.cli import stage_main

from .config import Config


def main(argv: list[str] | None = None) -> int:
    """Run one stage (download, preprocess, train, evaluate, report)."""
    from .stages import STAGES

    return stage_main("lfss", Config, STAGES, argv,
                      description="lfss (Learning from Sample Stability for deep clustering, ICML 2025): pipeline "
                                  "stages.")


if __name__ == "__main__":
    sys.exit(main())
