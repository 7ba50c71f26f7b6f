"""The distribution class of the study: our own "self-describing code" construction [R].

This is NOT the separating class of Lechner, Bie & Kamath, *On the Learnability of Distribution Classes with
Adaptive Adversaries* (ICML 2025, arXiv:2509.05137); the paper has no experiments. It is an illustration of the
paper's statement (adaptive additive learnability is strictly stronger than oblivious additive learnability).

Domain: the points [0, 2**62) (``N = 2**62``) plus *codes*. The code ⟨0⟩ names p₀, the code ⟨A⟩ names the
K-subset A of the points (``K = 2**40``).

* p₀  = (1−c)·Unif[0, N) + c·δ⟨0⟩
* q_A = (1−c)·Unif(A) + c·δ⟨A⟩, for every K-subset A.

Total variation (exact): d_TV(p₀, q_A) = 1 − (1−c)K/N; d_TV(q_A, q_B) = 1 − (1−c)|A∩B|/K for A ≠ B.

Sets are *lazy*: a set only stores the members that were ever revealed (drawn or inserted); a point that was not
revealed as a member counts as outside. This is exact up to an error of at most K/N = 2**-22 per point.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import numpy as np

#: Size of the point domain [0, N).
N: int = 2**62
#: Size of every set A of the class.
K: int = 2**40

#: A learner's output: ``"p0"`` or the id of a set A (meaning q_A).
Hypothesis = Union[str, int]
P0 = "p0"


@dataclass(frozen=True, eq=False)
class LazySet:
    """A uniformly random K-subset A of [0, N), of which only the revealed members are stored.

    ``id`` is the name carried by the code ⟨A⟩; ``members`` the revealed members (Python ints < N). Two LazySet
    objects with the same ``id`` denote the same set (an attack copies a set to reveal more members without
    mutating its input).
    """

    id: int
    members: frozenset[int] = field(default_factory=frozenset)

    def with_members(self, new: np.ndarray | list[int]) -> "LazySet":
        """A copy of this set with the extra revealed members ``new`` (uint64 array or ints)."""
        extra = new.tolist() if isinstance(new, np.ndarray) else list(new)
        return LazySet(self.id, self.members.union(extra))

    def count_in(self, points: np.ndarray) -> int:
        """How many of ``points`` (uint64, shape (n,)) are revealed members of this set."""
        if not self.members or points.size == 0:
            return 0
        return sum(map(self.members.__contains__, points.tolist()))


@dataclass(frozen=True, eq=False)
class Sample:
    """A sample of the class as a multiset (order carries no information once shuffled).

    Attributes:
        truth: ``"p0"`` or ``"qA"``, the distribution the clean draws came from.
        c: the code mass of the class (both learners' error is measured with it).
        n_zero: number of copies of the code ⟨0⟩.
        codes: {set id: number of copies of ⟨A⟩} for every set code present (counts > 0 only).
        points: uint64 array, shape (n_points,), the non-code points in random order.
        sets: the codebook {set id: LazySet}: every set that a code of this sample names, plus the set the
            trial is about (the truth's A, an adversary's A or an oblivious decoy A′) even if its code is absent.
        true_set: the truth's set A when ``truth == "qA"``, else None.

    Treat as immutable: every function of this study returns new samples.
    """

    truth: str
    c: float
    n_zero: int
    codes: dict[int, int]
    points: np.ndarray
    sets: dict[int, LazySet]
    true_set: LazySet | None = None

    @property
    def size(self) -> int:
        """Total number of elements (codes and points)."""
        return self.n_zero + sum(self.codes.values()) + int(self.points.size)

    @property
    def n_points(self) -> int:
        return int(self.points.size)

    def trial_set(self) -> LazySet | None:
        """The set A the trial is about: the truth's set, else the only set in the codebook (adversary's A or an
        oblivious decoy A′), else None."""
        if self.true_set is not None:
            return self.sets.get(self.true_set.id, self.true_set)
        if len(self.sets) == 1:
            return next(iter(self.sets.values()))
        return None


def tv_p0_qa(c: float, k: int = K) -> float:
    """d_TV(p₀, q_A) = 1 − (1−c)·K/N (codes disjoint: c; points: (1−c)(1 − K/N))."""
    return 1.0 - (1.0 - c) * k / N


def tv_distance(x: Hypothesis | LazySet, y: Hypothesis | LazySet, c: float,
                sets: dict[int, LazySet] | None = None, k: int = K) -> float:
    """Exact total variation between two members of the class.

    Args:
        x, y: ``"p0"``, a LazySet, or a set id (looked up in ``sets``).
        c: code mass. sets: codebook for ids. k: set size K.
    Returns:
        0 if equal; 1 − (1−c)K/N between p₀ and any q_A; 1 − (1−c)|A∩B|/K between q_A ≠ q_B, with |A∩B| the
        number of *revealed* common members (lazy convention).
    """
    x, y = _resolve(x, sets), _resolve(y, sets)
    if x == P0 and y == P0:
        return 0.0
    if x == P0 or y == P0:
        return tv_p0_qa(c, k)
    if x.id == y.id:
        return 0.0
    common = len(x.members & y.members)
    return 1.0 - (1.0 - c) * common / k


def _resolve(h: Hypothesis | LazySet, sets: dict[int, LazySet] | None) -> str | LazySet:
    if isinstance(h, LazySet):
        return h
    if isinstance(h, str):
        if h != P0:
            raise ValueError(f"hypothesis must be 'p0', a set id or a LazySet, got {h!r}")
        return P0
    if sets is None or int(h) not in sets:
        raise KeyError(f"set id {h} is not in the codebook")
    return sets[int(h)]
