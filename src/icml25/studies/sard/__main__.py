"""Stage CLI of the sard study: ``python -m icml25.studies.sard <stage> --help``."""
from __future__ import annotations

import sys

from icml25.core.cli import stage_main

from .config import Config


def main(argv: list[str] | None = None) -> int:
    """Run one stage (download, preprocess, train, evaluate, report)."""
    from .stages import STAGES

    return stage_main("sard", Config, STAGES, argv,
                      description="sard (adversarially robust two-stage learning to defer, ICML 2025): stages.")


if __name__ == "__main__":
    sys.exit(main())
