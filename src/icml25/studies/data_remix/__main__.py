"""Stage CLI of the data_remix study: ``python -m icml25.studies.data_remix <stage> --help``."""
from __future__ import annotations

import sys

from icml25.core.cli import stage_main

from .config import Config


def main(argv: list[str] | None = None) -> int:
    """Run one stage (download, preprocess, train, evaluate, report)."""
    from .stages import STAGES

    return stage_main("data_remix", Config, STAGES, argv,
                      description="data_remix (Data Remixing for multimodal learning, ICML 2025): pipeline stages.")


if __name__ == "__main__":
    sys.exit(main())
