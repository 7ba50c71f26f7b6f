"""Seeding: one call makes Python, NumPy and (if loaded) torch deterministic for a seed."""
from __future__ import annotations

import os
import random
import sys

import numpy as np


def seed_everything(seed: int, deterministic_torch: bool = True) -> np.random.Generator:
    """Seed ``random``, NumPy's legacy global state and torch (only if already imported); return a PCG64 generator.

    With ``deterministic_torch`` torch uses deterministic algorithms, so identical seeds give identical metrics
    on CPU (warn-only there, as before). In a deterministic CUDA job (:func:`icml25.core.device.setup_job`) they
    are strict: an op without a deterministic kernel raises instead of silently varying between runs. torch is not
    imported here, so studies without it pay nothing.
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
        if deterministic_torch:
            from .device import strict_determinism

            torch.use_deterministic_algorithms(True, warn_only=not strict_determinism())
    return np.random.Generator(np.random.PCG64(seed))
