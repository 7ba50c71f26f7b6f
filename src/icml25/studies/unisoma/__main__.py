"""Stage CLI of the unisoma study: ``python -m icml25.studies.unisoma <stage> --help``."""
from __future__ import annotations

import sys

from icml25.core.cli import stage_main

from .config import Config


def main(argv: list[str] | None = None) -> int:
    """Run one stage (download, preprocess, train, evaluate, report)."""
    from .stages import STAGES

    return stage_main("unisoma", Config, STAGES, argv,
                      description="unisoma (explicit transformer solver for multi-solid systems, ICML 2025): "
                                  "pipeline stages.")


if __name__ == "__main__":
    sys.exit(main())
