"""Stage CLI of the ntk_dfl study: ``python -m icml25.studies.ntk_dfl <stage> --help``."""
from __future__ import annotations

import sys

from icml25.core.cli import stage_main

from .config import Config


def main(argv: list[str] | None = None) -> int:
    """Run one stage (prepare, preprocess, train, evaluate, report)."""
    from .stages import STAGES

    return stage_main("ntk_dfl", Config, STAGES, argv,
                      description="ntk_dfl (NTK-DFL, decentralized FL with neural tangent kernels, ICML 2025): "
                                  "pipeline stages.")


if __name__ == "__main__":
    sys.exit(main())
