"""Seeding: one call makes Python, NumPy and (if loaded) torch deterministic for a seed."""
from __future__ import annotations

import os
import random
import sys

import numpy as np


def seed_everything(seed: int, deterministic_torch: bool = True) -> np.random.Generator:
    """Seed ``random``, NumPy's legacy global state and torch (only if already imported); return a PCG64 generator.

    With ``deterministic_torch`` torch uses deterministic algorithms, so identical seeds give identical metrics
    on CPU. torch is not imported here, so studies without it pay nothing.
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
        if deterministic_torch:
            torch.use_deterministic_algorithms(True, warn_only=True)
    return np.random.Generator(np.random.PCG64(seed))
