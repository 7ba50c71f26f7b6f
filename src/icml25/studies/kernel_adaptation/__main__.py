"""Stage CLI of the kernel_adaptation study: ``python -m icml25.studies.kernel_adaptation <stage> --help``."""
from __future__ import annotations

import sys

from icml25.core.cli import stage_main

from .config import Config


def main(argv: list[str] | None = None) -> int:
    """Run one stage (download, preprocess, train, evaluate, report)."""
    from .stages import STAGES

    return stage_main("kernel_adaptation", Config, STAGES, argv,
                      description="kernel_adaptation (multi-scale adaptive feature learning, ICML 2025): pipeline "
                                  "stages.")


if __name__ == "__main__":
    sys.exit(main())
