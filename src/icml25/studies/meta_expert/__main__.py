"""Stage CLI of the meta_expert study: ``python -m icml25.studies.meta_expert <stage> --help``."""
from __future__ import annotations

import sys

from icml25.core.cli import stage_main

from .config import Config


def main(argv: list[str] | None = None) -> int:
    """Run one stage (download, preprocess, train, evaluate, report)."""
    from .stages import STAGES

    return stage_main("meta_expert", Config, STAGES, argv,
                      description="meta_expert (Meta-Expert for long-tailed semi-supervised learning, ICML 2025): "
                                  "pipeline stages.")


if __name__ == "__main__":
    sys.exit(main())
