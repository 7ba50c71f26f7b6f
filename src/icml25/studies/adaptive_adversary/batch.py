"""All trials of one grid cell as numpy arrays: the construction's law at the level of the counts.

The per-trial objects of :mod:`.data` and :mod:`.method` materialise the m points of every sample (uint64 arrays
and Python sets), which costs O(m) Python work per trial. Every quantity the study records is, however, a
function of a handful of counts per trial, because in our construction [R] a sample holds at most one set code
(the truth's A, the adaptive adversary's A or an oblivious decoy A′) and every non-code point is either a
revealed member of that set or a uniform point of [0, 2⁶²):

* ``n_zero``   #⟨0⟩,
* ``n_code_a`` #⟨A⟩ (A the trial's set),
* ``n_points`` the number of non-code points,
* ``n_in_a``   how many of them are revealed members of A,
* ``has_set``  whether the sample names a set at all (clean p₀ and aborted attacks on p₀ do not).

Both learners are functions of these counts (:func:`learner_outcomes`): ``decoder`` outputs q_A iff
#⟨A⟩ > #⟨0⟩ (⟨0⟩ wins ties), ``robust`` outputs q_A iff #⟨A⟩ > 0 and n_in_a/n_points > ½; every error is 0 or
d_TV(p₀, q_A) = 1 − (1−c)K/2⁶². :func:`draw_cell` draws the counts of T trials with the same law as the
per-trial samplers (binomial draws only; see each arm below), so a cell costs O(T) vectorised work whatever m is.

The one approximation relative to the per-trial path: a uniform point of [0, 2⁶²) that happens to equal a
revealed member of a decoy set (probability ≤ m²/2⁶² per trial, below 3·10⁻⁹ at m = 10⁵) counts as outside the
set here and inside it there. The lazy-set convention of the construction already counts unrevealed points as
outside.

Construction: our own illustration of the separation in Lechner, Bie & Kamath, *On the Learnability of
Distribution Classes with Adaptive Adversaries*, ICML 2025 (arXiv:2509.05137); not the paper's proof.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .data import OBLIVIOUS_KINDS
from .model import K, tv_p0_qa


@dataclass(frozen=True)
class CellCounts:
    """The counts of T trials of one cell (every array has shape (T,); int64 unless stated).

    ``truth_qa`` (bool) is True for truth q_A; ``a``, ``b`` are the ⟨0⟩ and ⟨A⟩ counts the adaptive attack works
    with (−1 for other arms); ``inserted`` the adversary's insertions; ``aborted`` (bool) whether it gave up.
    """

    truth_qa: np.ndarray
    n_zero: np.ndarray
    n_code_a: np.ndarray
    n_points: np.ndarray
    n_in_a: np.ndarray
    has_set: np.ndarray
    a: np.ndarray
    b: np.ndarray
    inserted: np.ndarray
    aborted: np.ndarray


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def draw_cell(adversary: str, c: float, eta: float, m: int, budget_: int, trials: int,
              rng: np.random.Generator) -> CellCounts:
    """Draw the counts of ``trials`` independent trials of one cell (truth p₀ or q_A with probability ½ each).

    Random numbers, in this order: the truths (``rng.integers(2)``, 1 = q_A), then per arm

    * ``none``: the clean code count x ~ Bin(m, c) (#⟨0⟩ under p₀, #⟨A⟩ under q_A); every other element is a
      uniform point (p₀) or a member of A (q_A).
    * ``adaptive`` (budget B = ``budget_``): x as above, then the adversary's draw y ~ Bin(m, c); (a, b) = (x, y)
      under p₀ and (y, x) under q_A. Abort iff max(a, b) > B (sample unchanged). Else the sample holds a ⟨0⟩, b ⟨A⟩
      and m − min(a, b) members of A; insertions max(a, b) (see :func:`.method.attack`).
    * ``obl_<kind>``: n_q ~ Bin(m, η) adversarial draws, the clean code count x ~ Bin(m − n_q, c) of the m − n_q
      clean draws, and for ``decoy`` k ~ Bin(n_q, c) codes among the adversarial draws (see
      :func:`.data.oblivious_sample`).
    """
    t = int(trials)
    m = int(m)
    truth_qa = rng.integers(2, size=t).astype(bool)
    zeros = np.zeros(t, dtype=np.int64)
    minus = np.full(t, -1, dtype=np.int64)
    if adversary == "none":
        x = _i64(rng.binomial(m, c, size=t))
        n_zero = np.where(truth_qa, 0, x)
        n_code_a = np.where(truth_qa, x, 0)
        n_points = m - x
        n_in_a = np.where(truth_qa, n_points, 0)
        return CellCounts(truth_qa, n_zero, n_code_a, n_points, n_in_a, truth_qa.copy(), minus, minus.copy(),
                          zeros, np.zeros(t, dtype=bool))
    if adversary == "adaptive":
        x = _i64(rng.binomial(m, c, size=t))
        y = _i64(rng.binomial(m, c, size=t))
        a = np.where(truth_qa, y, x)
        b = np.where(truth_qa, x, y)
        aborted = np.maximum(a, b) > int(budget_)
        ok = ~aborted
        # not aborted: a ⟨0⟩, b ⟨A⟩, m − min(a, b) members of A (both truths)
        # aborted: the clean sample: p₀ → x ⟨0⟩ and m − x uniform points, no set; q_A → x ⟨A⟩, m − x members
        n_zero = np.where(ok, a, np.where(truth_qa, 0, x))
        n_code_a = np.where(ok, b, np.where(truth_qa, x, 0))
        n_points = np.where(ok, m - np.minimum(a, b), m - x)
        has_set = ok | truth_qa
        n_in_a = np.where(has_set, n_points, 0)
        inserted = np.where(ok, np.maximum(a, b), 0)
        return CellCounts(truth_qa, n_zero, n_code_a, n_points, n_in_a, has_set, a, b, inserted, aborted)
    kind = adversary.removeprefix("obl_")
    if not adversary.startswith("obl_") or kind not in OBLIVIOUS_KINDS:
        raise ValueError(f"adversary must be none, adaptive or obl_<{'|'.join(OBLIVIOUS_KINDS)}>, "
                         f"got {adversary!r}")
    n_q = _i64(rng.binomial(m, eta, size=t))
    x = _i64(rng.binomial(m - n_q, c))           # clean codes among the m − n_q clean draws
    clean_pts = m - n_q - x                      # clean non-code points (uniform under p₀, members of A under q_A)
    if kind == "decoy":
        k = _i64(rng.binomial(n_q, c))           # codes among the adversarial draws (⟨A′⟩ under p₀, ⟨0⟩ under q_A)
        # p₀: q = q_{A′}: k ⟨A′⟩ and n_q − k members of A′;  q_A: q = p₀: k ⟨0⟩ and n_q − k uniform points
        n_zero = np.where(truth_qa, k, x)
        n_code_a = np.where(truth_qa, x, k)
        n_points = clean_pts + n_q - k
        n_in_a = np.where(truth_qa, clean_pts, n_q - k)
    elif kind == "code_flood":
        # p₀: q = δ⟨A′⟩ (A′ has no revealed member);  q_A: q = δ⟨0⟩
        n_zero = np.where(truth_qa, n_q, x)
        n_code_a = np.where(truth_qa, x, n_q)
        n_points = clean_pts
        n_in_a = np.where(truth_qa, clean_pts, 0)
    else:  # point_flood. p₀: q = Unif(A′) (no code);  q_A: q = Unif[0, 2⁶²)
        n_zero = np.where(truth_qa, 0, x)
        n_code_a = np.where(truth_qa, x, 0)
        n_points = clean_pts + n_q
        n_in_a = np.where(truth_qa, clean_pts, n_q)
    return CellCounts(truth_qa, _i64(n_zero), _i64(n_code_a), _i64(n_points), _i64(n_in_a),
                      np.ones(t, dtype=bool), minus, minus.copy(), zeros, np.zeros(t, dtype=bool))


def learner_outcomes(counts: CellCounts, c: float, k: int = K) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Both learners on every trial of a cell: {learner: (outputs q_A? (bool, (T,)), exact d_TV errors (T,))}.

    ``decoder``: q_A iff #⟨A⟩ > #⟨0⟩. ``robust``: q_A iff #⟨A⟩ > 0 and 2·n_in_a > n_points (share of the non-code
    points inside A above ½; the only candidate set is A). The error is 0 when the output is the truth and
    d_TV(p₀, q_A) = 1 − (1−c)k/2⁶² otherwise (a sample never names a second set).
    """
    tv = tv_p0_qa(c, k)
    out = {"decoder": counts.n_code_a > counts.n_zero,
           "robust": (counts.n_code_a > 0) & (2 * counts.n_in_a > counts.n_points)}
    return {name: (says_a, np.where(says_a != counts.truth_qa, tv, 0.0)) for name, says_a in out.items()}


def in_a_fraction(counts: CellCounts) -> np.ndarray:
    """Share of the non-code points inside the trial's set A, float64 (T,); NaN without a set or without points."""
    frac = np.full(counts.n_points.shape, np.nan)
    ok = counts.has_set & (counts.n_points > 0)
    frac[ok] = counts.n_in_a[ok] / counts.n_points[ok]
    return frac


__all__ = ["CellCounts", "draw_cell", "learner_outcomes", "in_a_fraction"]
