"""Stage CLI of the coalition_attribution study: ``python -m icml25.studies.coalition_attribution <stage> --help``."""
from __future__ import annotations

import sys

from icml25.core.cli import stage_main

from .config import Config


def main(argv: list[str] | None = None) -> int:
    """Run one stage (download, preprocess, train, train_real, evaluate, report)."""
    from .stages import STAGES

    return stage_main("coalition_attribution", Config, STAGES, argv,
                      description="coalition_attribution (AND-OR interactions and coalition faithfulness, "
                                  "ICML 2025): pipeline stages.")


if __name__ == "__main__":
    sys.exit(main())
