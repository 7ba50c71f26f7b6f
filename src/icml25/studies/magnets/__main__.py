"""Stage CLI of the magnets study: ``python -m icml25.studies.magnets <stage> --help``."""
from __future__ import annotations

import sys

from icml25.core.cli import stage_main

from .config import Config


def main(argv: list[str] | None = None) -> int:
    """Run one stage (prepare, preprocess, train, evaluate, report)."""
    from .stages import STAGES

    return stage_main("magnets", Config, STAGES, argv,
                      description="magnets (nested transformers + KV caching for MaskGIT decoding, ICML 2025): "
                                  "pipeline stages.")


if __name__ == "__main__":
    sys.exit(main())
