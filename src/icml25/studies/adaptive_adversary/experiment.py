"""One arm × seed of the study end to end, in memory: the trial table, the per-cell summary and the curves
(failure rate against the sample size m, the study's "steps")."""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pandas as pd

from .data import ADVERSARIES
from .evaluate import cell_table
from .train import simulate


def run(settings: Mapping[str, Any], arm: str, seed: int) -> dict[str, Any]:
    """Simulate every trial of adversary ``arm`` for ``seed`` over the grid of ``settings``.

    Returns ``{"trials": DataFrame (one row per trial), "cells": DataFrame (cell_table), "curves": {learner:
    DataFrame of fail_rate and mean_err per (c, η/c, m)}, "seconds": float, "trials_per_second": float}``.
    """
    if arm not in ADVERSARIES:
        raise ValueError(f"arm must be one of {ADVERSARIES}, got {arm!r}")
    t0 = time.perf_counter()
    trials = simulate(settings, arm, seed)
    seconds = time.perf_counter() - t0
    cells = cell_table(trials)
    curves = {learner: g.loc[:, ["c", "eta_over_c", "m", "fail_rate", "mean_err"]].reset_index(drop=True)
              for learner, g in cells.groupby("learner")}
    return {"trials": trials, "cells": cells, "curves": curves, "seconds": seconds,
            "trials_per_second": len(trials) / seconds if seconds > 0 else float("inf")}


def run_all(settings: Mapping[str, Any], seeds=None) -> dict[str, Any]:
    """Every arm of ``settings["arms"]`` × seed: concatenated trial and cell tables and total seconds."""
    seeds = list(settings["seeds"] if seeds is None else seeds)
    outs = [run(settings, arm, s) for arm in settings["arms"] for s in seeds]
    return {"trials": pd.concat([o["trials"] for o in outs], ignore_index=True),
            "cells": pd.concat([o["cells"] for o in outs], ignore_index=True),
            "seconds": sum(o["seconds"] for o in outs)}
