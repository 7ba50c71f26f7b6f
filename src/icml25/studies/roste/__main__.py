"""Stage CLI of the roste study: ``python -m icml25.studies.roste <stage> --help``."""
from __future__ import annotations

import sys

from icml25.core.cli import stage_main

from .config import Config


def main(argv: list[str] | None = None) -> int:
    """Run one stage (prepare, pretrain, preprocess, train, evaluate, report)."""
    from .stages import STAGES

    return stage_main("roste", Config, STAGES, argv,
                      description="roste (RoSTE quantization-aware SFT with adaptive rotations, ICML 2025): pipeline "
                                  "stages. pretrain/preprocess take --set alpha=<value>.")


if __name__ == "__main__":
    sys.exit(main())
