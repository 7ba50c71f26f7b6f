"""Stage CLI of the pid study: ``python -m icml25.studies.pid <stage> --help``."""
from __future__ import annotations

import sys

from icml25.core.cli import stage_main

from .config import Config


def main(argv: list[str] | None = None) -> int:
    """Run one stage (download, unpack [paper scale], preprocess, train, evaluate, report)."""
    from .stages import STAGES

    return stage_main("pid", Config, STAGES, argv,
                      description="pid (PiD: pixelwise decomposition residuals for AI-generated image detection, "
                                  "ICML 2025): pipeline stages.")


if __name__ == "__main__":
    sys.exit(main())
