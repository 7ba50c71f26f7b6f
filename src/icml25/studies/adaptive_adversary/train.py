"""The "train" unit of this study: simulate every trial of one adversary arm and one seed over the grid.

Nothing is fitted; a trial draws a clean (or obliviously corrupted) sample, lets the adversary act, runs both
learners and records one row (columns :data:`.data.TRIAL_COLUMNS`).
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from .data import ADVERSARIES, TRIAL_COLUMNS, TRUTHS, draw_sample, oblivious_sample, trial_rng
from .method import LEARNERS, attack, budget, learn
from .model import K, P0, Sample


def grid(settings: Mapping[str, Any], adversary: str) -> Iterator[tuple[float, float, float, int]]:
    """Cells (c, η/c, η, m) of one adversary: η = (η/c)·c for every ratio with η ≤ ``eta_max``. The ``none`` arm
    does not depend on η and runs once per (c, m), recorded with η = 0."""
    ratios = [0.0] if adversary == "none" else list(settings["eta_over_c"])
    for c in settings["c"]:
        for ratio in ratios:
            eta = round(float(ratio) * float(c), 12)
            if eta > float(settings["eta_max"]) + 1e-12:
                continue
            for m in settings["m"]:
                yield float(c), float(ratio), eta, int(m)


def _outcome(h, sample: Sample) -> str:
    """'p0', 'A' (the trial's set) or 'other' (any other set)."""
    if h == P0:
        return "p0"
    A = sample.trial_set()
    return "A" if A is not None and h == A.id else "other"


def simulate_trial(adversary: str, c: float, eta: float, m: int, budget_: int, seed: int, trial: int,
                   ratio: float = math.nan, k: int = K) -> dict[str, Any]:
    """One trial: truth p₀ or q_A with probability ½ each, the adversary's sample, both learners. Returns a row
    of the trial table (errors are exact total variation for sets of size ``k``; failure = error > ½)."""
    rng = trial_rng(seed, adversary, c, eta, m, trial)
    truth = TRUTHS[int(rng.integers(2))]
    a = b = -1
    inserted, aborted = 0, False
    if adversary in ("none", "adaptive"):
        sample = draw_sample(truth, m, c, rng)
        if adversary == "adaptive":
            res = attack(sample, budget_, c, rng)
            sample, inserted, aborted, a, b = res.sample, res.inserted, res.aborted, res.a, res.b
    elif adversary.startswith("obl_"):
        sample = oblivious_sample(truth, m, c, eta, adversary, rng)
    else:
        raise ValueError(f"adversary must be one of {ADVERSARIES}, got {adversary!r}")
    A = sample.trial_set()
    n_points = sample.n_points
    row: dict[str, Any] = {
        "adversary": adversary, "seed": int(seed), "c": c, "eta_over_c": ratio, "eta": eta, "m": int(m),
        "budget": int(budget_), "trial": int(trial), "truth": truth,
        "n_zero": sample.n_zero,
        "n_code_a": sample.codes.get(A.id, 0) if A is not None else 0,
        "n_points": n_points,
        "in_a_frac": A.count_in(sample.points) / n_points if (A is not None and n_points) else math.nan,
        "a": a, "b": b, "inserted": inserted, "aborted": aborted,
    }
    for learner in LEARNERS:
        h, err = learn(sample, learner, k)
        row[f"{learner}_out"] = _outcome(h, sample)
        row[f"{learner}_err"] = err
        row[f"{learner}_fail"] = err > 0.5
    return row


def simulate(settings: Mapping[str, Any], adversary: str, seed: int) -> pd.DataFrame:
    """All trials of one adversary and one seed over the grid of ``settings`` (keys ``c``, ``eta_over_c``,
    ``eta_max``, ``m``, ``trials``, ``budget_rule``, ``K``); one row per trial, columns :data:`TRIAL_COLUMNS`."""
    rows = []
    rule = settings.get("budget_rule", "floor_eta_m")
    k = int(settings.get("K", K))
    for c, ratio, eta, m in grid(settings, adversary):
        b = budget(eta, m, rule)
        for t in range(int(settings["trials"])):
            rows.append(simulate_trial(adversary, c, eta, m, b, seed, t, ratio, k))
    df = pd.DataFrame(rows, columns=list(TRIAL_COLUMNS))
    return df.astype({"n_zero": np.int64, "n_code_a": np.int64, "n_points": np.int64, "a": np.int64,
                      "b": np.int64, "inserted": np.int64, "aborted": bool, "decoder_fail": bool,
                      "robust_fail": bool, "in_a_frac": np.float64})
