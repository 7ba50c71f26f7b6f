"""Stage CLI of the adaptive_adversary study: ``python -m icml25.studies.adaptive_adversary <stage> --help``."""
from __future__ import annotations

import sys

from icml25.core.cli import stage_main

from .config import Config


def main(argv: list[str] | None = None) -> int:
    """Run one stage (prepare, preprocess, train, evaluate, report)."""
    from .stages import STAGES

    return stage_main("adaptive_adversary", Config, STAGES, argv,
                      description="adaptive_adversary (own illustration of adaptive vs oblivious adversaries, "
                                  "ICML 2025): pipeline stages.")


if __name__ == "__main__":
    sys.exit(main())
