"""Stage CLI of the morphing_flow study: ``python -m icml25.studies.morphing_flow <stage> --help``."""
from __future__ import annotations

import sys

from icml25.core.cli import stage_main

from .config import Config


def main(argv: list[str] | None = None) -> int:
    """Run one stage (download, preprocess, train, evaluate, report)."""
    from .stages import STAGES

    return stage_main("morphing_flow", Config, STAGES, argv,
                      description="morphing_flow (Morphing-Flow for fat-tailed forecasting, ICML 2025): pipeline "
                                  "stages.")


if __name__ == "__main__":
    sys.exit(main())
