"""Samplers of the construction (clean draws and the three oblivious strategies), per-trial seeding and the
trial table's parquet reader/writer.

Everything is simulated: there is no remote data and nothing to checksum. Random numbers: numpy PCG64. The
pipeline draws the trials of a cell together (:mod:`.batch`) from one generator per cell seeded from
(seed, adversary, c, η, m) (:func:`cell_rng`); the per-trial reference path seeds one generator per trial from
(seed, adversary, c, η, m, trial) (:func:`trial_rng`), so any reference trial can be recomputed alone.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .model import N, P0, LazySet, Sample

TRUTHS = ("p0", "qA")
#: Oblivious strategies (``kind`` of :func:`oblivious_sample`); the arm names are ``obl_<kind>``.
OBLIVIOUS_KINDS = ("decoy", "code_flood", "point_flood")
#: Every adversary arm, in a fixed order (its index enters the per-trial seed).
ADVERSARIES = ("none", "adaptive", "obl_decoy", "obl_code_flood", "obl_point_flood")


def _seeded(key: list[int], names: str) -> np.random.Generator:
    if min(key) < 0:
        raise ValueError(f"{names} must be non-negative, got {key}")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(key)))


def _arm_index(adversary: str) -> int:
    if adversary not in ADVERSARIES:
        raise ValueError(f"adversary must be one of {ADVERSARIES}, got {adversary!r}")
    return ADVERSARIES.index(adversary)


def trial_rng(seed: int, adversary: str, c: float, eta: float, m: int, trial: int) -> np.random.Generator:
    """The PCG64 generator of one reference trial, from (seed, adversary, c, η, m, trial).

    c and η enter as integers in units of 1e-9 so that 0.1 and 0.1000000000001 seed the same trial.
    """
    key = [int(seed), _arm_index(adversary), round(c * 1e9), round(eta * 1e9), int(m), int(trial)]
    return _seeded(key, "seed, c, eta, m and trial")


#: Domain tag of the per-cell generators (keeps their seed keys apart from the per-trial ones).
_CELL_TAG = 0xCE11


def cell_rng(seed: int, adversary: str, c: float, eta: float, m: int) -> np.random.Generator:
    """The PCG64 generator of all trials of one cell (the vectorised path), from (seed, adversary, c, η, m);
    c and η in units of 1e-9 as in :func:`trial_rng`."""
    key = [_CELL_TAG, int(seed), _arm_index(adversary), round(c * 1e9), round(eta * 1e9), int(m)]
    return _seeded(key, "seed, c, eta and m")


def uniform_points(n: int, rng: np.random.Generator) -> np.ndarray:
    """n i.i.d. points of Unif[0, N), uint64, shape (n,)."""
    return rng.integers(0, N, size=n, dtype=np.uint64)


def new_set(rng: np.random.Generator, n_members: int = 0) -> tuple[LazySet, np.ndarray]:
    """A fresh uniform K-set with ``n_members`` members revealed; returns the set and those members (uint64).

    Fresh members are uniform on [0, N): a member drawn twice (probability ≤ n²/K) is ignored, which is the
    "member collisions" term of the construction's Le Cam bound.
    """
    sid = int(rng.integers(1, N))
    members = uniform_points(n_members, rng)
    return LazySet(sid, frozenset(members.tolist())), members


def _check(truth: str, m: int, c: float) -> None:
    if truth not in TRUTHS:
        raise ValueError(f"truth must be one of {TRUTHS}, got {truth!r}")
    if int(m) != m or m < 0:
        raise ValueError(f"m must be a non-negative integer, got {m!r}")
    if not 0.0 <= c <= 1.0:
        raise ValueError(f"c must lie in [0, 1], got {c!r}")


def draw_sample(truth: str, m: int, c: float, rng: np.random.Generator) -> Sample:
    """m i.i.d. draws from p₀ (``truth="p0"``) or from q_A for a fresh uniform lazy set A (``truth="qA"``).

    p₀: a ~ Bin(m, c) copies of ⟨0⟩ and m − a uniform points of [0, N).
    q_A: b ~ Bin(m, c) copies of ⟨A⟩ and m − b uniform members of A (revealed as drawn); A is ``true_set``.
    """
    _check(truth, m, c)
    m = int(m)
    if truth == "p0":
        a = int(rng.binomial(m, c))
        return Sample("p0", c, a, {}, uniform_points(m - a, rng), {}, None)
    b = int(rng.binomial(m, c))
    A, members = new_set(rng, m - b)
    return Sample("qA", c, 0, {A.id: b} if b else {}, members, {A.id: A}, A)


def oblivious_sample(truth: str, m: int, c: float, eta: float, kind: str, rng: np.random.Generator) -> Sample:
    """m i.i.d. draws from (1−η)·p + η·q, q fixed before sampling by an oblivious additive adversary.

    ``kind`` (``decoy``, ``code_flood``, ``point_flood``; an ``obl_`` prefix is accepted) and the truth choose q;
    A′ is an independent fresh uniform K-set:

    ======== ============== ==================
    kind     truth p₀       truth q_A
    ======== ============== ==================
    decoy      q_{A′}          p₀
    code_flood δ⟨A′⟩           δ⟨0⟩
    point_flood Unif(A′)       Unif[0, N)
    ======== ============== ==================

    The number of adversarial draws is Bin(m, η); points are shuffled.
    """
    _check(truth, m, c)
    kind = kind.removeprefix("obl_")
    if kind not in OBLIVIOUS_KINDS:
        raise ValueError(f"kind must be one of {OBLIVIOUS_KINDS}, got {kind!r}")
    if not 0.0 <= eta <= 1.0:
        raise ValueError(f"eta must lie in [0, 1], got {eta!r}")
    n_q = int(rng.binomial(int(m), eta))
    clean = draw_sample(truth, int(m) - n_q, c, rng)
    n_zero, codes, sets = clean.n_zero, dict(clean.codes), dict(clean.sets)
    extra = np.empty(0, dtype=np.uint64)
    if truth == "p0":
        if kind == "decoy":
            k = int(rng.binomial(n_q, c))
            decoy, extra = new_set(rng, n_q - k)
            if k:
                codes[decoy.id] = k
        elif kind == "code_flood":
            decoy, _ = new_set(rng, 0)
            if n_q:
                codes[decoy.id] = n_q
        else:
            decoy, extra = new_set(rng, n_q)
        sets[decoy.id] = decoy
    else:
        if kind == "decoy":
            k = int(rng.binomial(n_q, c))
            n_zero += k
            extra = uniform_points(n_q - k, rng)
        elif kind == "code_flood":
            n_zero += n_q
        else:
            extra = uniform_points(n_q, rng)
    points = rng.permutation(np.concatenate([clean.points, extra]))
    return Sample(truth, c, n_zero, codes, points, sets, clean.true_set)


# --- the trial table -----------------------------------------------------------------------------------------

#: Columns of the trial table (one row per trial), in order.
TRIAL_COLUMNS: tuple[str, ...] = (
    "adversary", "seed", "c", "eta_over_c", "eta", "m", "budget", "trial", "truth",
    "n_zero", "n_code_a", "n_points", "in_a_frac", "a", "b", "inserted", "aborted",
    "decoder_out", "decoder_err", "decoder_fail", "robust_out", "robust_err", "robust_fail",
)


def write_trials(trials: pd.DataFrame, path: str | Path) -> Path:
    """Write the trial table atomically as parquet (pyarrow, no pandas index); same table ⇒ same bytes."""
    from icml25.core.io import atomic_path

    missing = [c for c in TRIAL_COLUMNS if c not in trials.columns]
    if missing:
        raise ValueError(f"trial table lacks columns {missing}")
    with atomic_path(path) as tmp:
        trials.loc[:, list(TRIAL_COLUMNS)].to_parquet(tmp, engine="pyarrow", index=False)
    return Path(path)


def read_trials(path: str | Path, required: Sequence[str] = TRIAL_COLUMNS) -> pd.DataFrame:
    """Read a trial table, failing with the file and the missing column names if it is not one."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"trial table {path} does not exist")
    try:
        df = pd.read_parquet(path, engine="pyarrow")
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise ValueError(f"{path}: not a readable parquet file ({exc})") from exc
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}")
    return df


__all__ = ["draw_sample", "oblivious_sample", "trial_rng", "cell_rng", "new_set", "uniform_points", "write_trials",
           "read_trials", "ADVERSARIES", "OBLIVIOUS_KINDS", "TRUTHS", "TRIAL_COLUMNS", "P0"]
