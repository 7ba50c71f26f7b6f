"""The "train" unit of this study: simulate every trial of one adversary arm and one seed over the grid.

Nothing is fitted; a trial draws a clean (or obliviously corrupted) sample, lets the adversary act, runs both
learners and records one row (columns :data:`.data.TRIAL_COLUMNS`).

:func:`simulate` (the pipeline's path) draws the trials of each cell together as arrays of counts
(:mod:`.batch`, one generator per cell): its cost does not grow with m. :func:`simulate_reference` runs the
per-trial objects (:func:`simulate_trial`: materialised samples, :func:`.method.attack`, :func:`.method.learn`;
one generator per trial); it is the test oracle of the vectorised path and the baseline of
``benchmarks/adaptive_adversary_trials.py``. Both write the same columns with the same dtypes and the same law;
their random streams differ.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from .batch import draw_cell, in_a_fraction, learner_outcomes
from .data import ADVERSARIES, TRIAL_COLUMNS, TRUTHS, cell_rng, draw_sample, oblivious_sample, trial_rng
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


#: dtypes of the integer, float and bool columns of the trial table (the string columns are left to pandas).
_DTYPES = {"seed": np.int64, "c": np.float64, "eta_over_c": np.float64, "eta": np.float64, "m": np.int64,
           "budget": np.int64, "trial": np.int64, "n_zero": np.int64, "n_code_a": np.int64, "n_points": np.int64,
           "in_a_frac": np.float64, "a": np.int64, "b": np.int64, "inserted": np.int64, "aborted": bool,
           "decoder_err": np.float64, "decoder_fail": bool, "robust_err": np.float64, "robust_fail": bool}
_TRUTH = np.array(TRUTHS, dtype=object)          # index 0 = p0, 1 = qA
_OUT = np.array([P0, "A"], dtype=object)         # learner outcome: index 1 = the trial's set A


def simulate_cell(adversary: str, c: float, eta: float, m: int, budget_: int, seed: int, trials: int,
                  ratio: float = math.nan, k: int = K) -> dict[str, np.ndarray]:
    """Every trial of one cell, vectorised (:func:`.batch.draw_cell` with :func:`.data.cell_rng`): the columns of
    the trial table as arrays of length ``trials`` (string columns as object arrays)."""
    if adversary not in ADVERSARIES:
        raise ValueError(f"adversary must be one of {ADVERSARIES}, got {adversary!r}")
    t = int(trials)
    counts = draw_cell(adversary, c, eta, m, budget_, t, cell_rng(seed, adversary, c, eta, m))
    cols: dict[str, np.ndarray] = {
        "adversary": np.full(t, adversary, dtype=object), "seed": np.full(t, int(seed), dtype=np.int64),
        "c": np.full(t, c), "eta_over_c": np.full(t, ratio, dtype=np.float64), "eta": np.full(t, eta),
        "m": np.full(t, int(m), dtype=np.int64), "budget": np.full(t, int(budget_), dtype=np.int64),
        "trial": np.arange(t, dtype=np.int64), "truth": _TRUTH[counts.truth_qa.astype(np.intp)],
        "n_zero": counts.n_zero, "n_code_a": counts.n_code_a, "n_points": counts.n_points,
        "in_a_frac": in_a_fraction(counts), "a": counts.a, "b": counts.b, "inserted": counts.inserted,
        "aborted": counts.aborted,
    }
    for learner, (says_a, err) in learner_outcomes(counts, c, k).items():
        cols[f"{learner}_out"] = _OUT[says_a.astype(np.intp)]
        cols[f"{learner}_err"] = err
        cols[f"{learner}_fail"] = err > 0.5
    return cols


def _frame(columns: dict[str, list[np.ndarray]] | dict[str, np.ndarray]) -> pd.DataFrame:
    df = pd.DataFrame({name: columns[name] for name in TRIAL_COLUMNS}, columns=list(TRIAL_COLUMNS))
    return df.astype(_DTYPES)


def simulate(settings: Mapping[str, Any], adversary: str, seed: int) -> pd.DataFrame:
    """All trials of one adversary and one seed over the grid of ``settings`` (keys ``c``, ``eta_over_c``,
    ``eta_max``, ``m``, ``trials``, ``budget_rule``, ``K``), vectorised per cell; one row per trial, columns
    :data:`TRIAL_COLUMNS`, cells in :func:`grid` order and trials 0..T−1 within a cell."""
    rule = settings.get("budget_rule", "floor_eta_m")
    k = int(settings.get("K", K))
    parts = [simulate_cell(adversary, c, eta, m, budget(eta, m, rule), seed, int(settings["trials"]), ratio, k)
             for c, ratio, eta, m in grid(settings, adversary)]
    if not parts:
        return _frame({name: np.empty(0, dtype=_DTYPES.get(name, object)) for name in TRIAL_COLUMNS})
    return _frame({name: np.concatenate([p[name] for p in parts]) for name in TRIAL_COLUMNS})


def simulate_reference(settings: Mapping[str, Any], adversary: str, seed: int) -> pd.DataFrame:
    """The per-trial reference of :func:`simulate` (same settings, columns and dtypes; one :func:`simulate_trial`
    per trial, hence another random stream): a loop over materialised samples, O(m) Python work per trial."""
    rows = []
    rule = settings.get("budget_rule", "floor_eta_m")
    k = int(settings.get("K", K))
    for c, ratio, eta, m in grid(settings, adversary):
        b = budget(eta, m, rule)
        for t in range(int(settings["trials"])):
            rows.append(simulate_trial(adversary, c, eta, m, b, seed, t, ratio, k))
    df = pd.DataFrame(rows, columns=list(TRIAL_COLUMNS))
    return df.astype(_DTYPES)
