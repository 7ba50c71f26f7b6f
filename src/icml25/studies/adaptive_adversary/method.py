"""Adversaries, learners and closed forms of the construction.

Paper: Lechner, Bie & Kamath, *On the Learnability of Distribution Classes with Adaptive Adversaries*, ICML 2025
(arXiv:2509.05137). The paper's definitions (its §2, paraphrased): an *oblivious* additive adversary with budget η
replaces the sampling distribution p by (1−η)p + ηq, samples stay i.i.d.; an *adaptive* additive adversary sees
the drawn i.i.d. sample and inserts points into it. Its result: learnability against additive adaptive
adversaries implies it against additive oblivious ones, not conversely.

What follows is our own illustration [R] of such a separation (the paper's separating class and proof are not
implemented): budget B = ⌊ηm⌋ insertions [R], the adaptive attack that makes p₀-samples and q_A-samples
equal in law, two learners, and the closed forms of their failure rates and of Le Cam's two-point bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, logsumexp

from .data import new_set, uniform_points
from .model import K, N, P0, Hypothesis, Sample, tv_distance

LEARNERS = ("decoder", "robust")
#: Budget rules [R]: ``floor_eta_m`` B = ⌊ηm⌋ (default); ``fraction_of_output`` the largest B with B ≤ η(m + B),
#: i.e. η is a fraction of the corrupted sample: B = ⌊ηm/(1−η)⌋.
BUDGET_RULES = ("floor_eta_m", "fraction_of_output")
_EPS = 1e-9  # guards floor(η·m) against 0.29*100 = 28.999999999999996


def budget(eta: float, m: int, rule: str = "floor_eta_m") -> int:
    """Number of insertions an adaptive adversary of budget η may make into a sample of size m."""
    if not 0.0 <= eta < 1.0:
        raise ValueError(f"eta must lie in [0, 1), got {eta!r}")
    if rule == "floor_eta_m":
        return int(math.floor(eta * m + _EPS))
    if rule == "fraction_of_output":
        return int(math.floor(eta * m / (1.0 - eta) + _EPS))
    raise ValueError(f"budget rule must be one of {BUDGET_RULES}, got {rule!r}")


# --- the adaptive adversary ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Attack:
    """Outcome of one adaptive attack: the corrupted sample, insertions, whether it aborted, and (a, b): the
    numbers of ⟨0⟩ and ⟨A⟩ copies the corrupted sample is made to hold (one of them drawn by the adversary)."""

    sample: Sample
    inserted: int
    aborted: bool
    a: int
    b: int


def attack(sample: Sample, budget_: int, c: float, rng: np.random.Generator) -> Attack:
    """The adaptive additive attack with at most ``budget_`` insertions on a clean sample (never mutated).

    Truth p₀ (a = #⟨0⟩ in S): draw b ~ Bin(m, c); if max(a, b) > B abort; else A := the points of S plus fresh
    members, insert b copies of ⟨A⟩ and max(0, a − b) fresh members of A.
    Truth q_A (b = #⟨A⟩ in S): draw a ~ Bin(m, c); abort if max(a, b) > B; else insert a copies of ⟨0⟩ and
    max(0, b − a) fresh members of A.
    Either way the output holds a copies of ⟨0⟩, b of ⟨A⟩ (a, b i.i.d. Bin(m, c)) and m − min(a, b) uniform
    members of a uniform A: the two truths give the same law up to aborts and member collisions. Insertions:
    max(a, b). Points are shuffled.
    """
    m = sample.size
    if sample.truth == "p0":
        a = sample.n_zero
        b = int(rng.binomial(m, c))
        if max(a, b) > budget_:
            return Attack(sample, 0, True, a, b)
        A, fresh = new_set(rng, max(0, a - b))
        A = A.with_members(sample.points)
        codes = dict(sample.codes)
        if b:
            codes[A.id] = b
        points = rng.permutation(np.concatenate([sample.points, fresh]))
        out = Sample("p0", sample.c, a, codes, points, {**sample.sets, A.id: A}, None)
        return Attack(out, max(a, b), False, a, b)
    A = sample.true_set
    if A is None:
        raise ValueError("a q_A sample must carry its true_set")
    b = sample.codes.get(A.id, 0)
    a = int(rng.binomial(m, c))
    if max(a, b) > budget_:
        return Attack(sample, 0, True, a, b)
    fresh = uniform_points(max(0, b - a), rng)
    A2 = A.with_members(fresh)
    points = rng.permutation(np.concatenate([sample.points, fresh]))
    out = Sample("qA", sample.c, sample.n_zero + a, dict(sample.codes), points, {**sample.sets, A.id: A2}, A2)
    return Attack(out, max(a, b), False, a, b)


def adaptive_attack(sample: Sample, eta: float, c: float, rng: np.random.Generator) -> tuple[Sample, int]:
    """The adaptive attack with budget ⌊η·m⌋: (corrupted sample, insertions; 0 if aborted). See :func:`attack`."""
    res = attack(sample, budget(eta, sample.size), c, rng)
    return res.sample, res.inserted


# --- learners ----------------------------------------------------------------------------------------------------

def decoder(sample: Sample) -> Hypothesis:
    """The realizable learner: the distribution named by the most frequent code, p₀ if there is no code.

    Ties [R]: ⟨0⟩ wins, then the smaller set id.
    """
    best: Hypothesis = P0
    best_count = sample.n_zero
    for sid in sorted(sample.codes):
        if sample.codes[sid] > best_count:
            best, best_count = sid, sample.codes[sid]
    return best


def robust(sample: Sample) -> Hypothesis:
    """The robust learner: candidates p₀ and every q_A whose code ⟨A⟩ appears. Output the q_A with the largest
    fraction of non-code points inside A if that fraction exceeds ½ (ties: more code copies, then smaller id),
    else p₀. Invariant to the order of the points."""
    n = sample.n_points
    best, best_key = None, None
    for sid, count in sample.codes.items():
        if count <= 0:
            continue
        frac = sample.sets[sid].count_in(sample.points) / n if n else 0.0
        key = (frac, count, -sid)
        if best_key is None or key > best_key:
            best, best_key = sid, key
    if best is not None and best_key[0] > 0.5:
        return best
    return P0


def learn(sample: Sample, learner: str, k: int = K) -> tuple[Hypothesis, float]:
    """Run ``learner`` (``decoder`` or ``robust``) on ``sample``: (hypothesis, its exact d_TV to the truth for
    sets of size ``k``)."""
    if learner == "decoder":
        h = decoder(sample)
    elif learner == "robust":
        h = robust(sample)
    else:
        raise ValueError(f"learner must be one of {LEARNERS}, got {learner!r}")
    truth = P0 if sample.truth == "p0" else sample.trial_set()
    return h, tv_distance(h, truth, sample.c, sample.sets, k)


# --- closed forms ------------------------------------------------------------------------------------------------

def binom_cdf(k: int, m: int, c: float) -> float:
    """F(k) = P(Bin(m, c) ≤ k), summed in log space (exact for every m; no scipy.stats)."""
    if k < 0:
        return 0.0
    if k >= m or c == 0.0:
        return 1.0
    if c == 1.0:
        return 0.0
    j = np.arange(k + 1)
    logpmf = gammaln(m + 1) - gammaln(j + 1) - gammaln(m - j + 1) + j * math.log(c) + (m - j) * math.log1p(-c)
    return float(min(1.0, math.exp(logsumexp(logpmf))))


def abort_probability(m: int, c: float, budget_: int) -> float:
    """P(max(a, b) > B) = 1 − F(B)² for a, b i.i.d. Bin(m, c)."""
    return 1.0 - binom_cdf(budget_, m, c) ** 2


def robust_failure_rate(m: int, c: float, budget_: int) -> float:
    """Closed-form failure rate of ``robust`` under the adaptive attack, truths equiprobable:
    ½[F(B)² − F(B)F(0) + F(0)] (attacked p₀ trials with b > 0, and q_A trials without any ⟨A⟩)."""
    fb, f0 = binom_cdf(budget_, m, c), binom_cdf(0, m, c)
    return 0.5 * (fb * fb - fb * f0 + f0)


def le_cam_lower_bound(m: int, c: float, eta: float, K: int = K) -> float:  # noqa: N803 (the spec's name)
    """Le Cam's two-point bound on ½(err_p₀ + err_qA) for every learner under the adaptive attack:
    max(0, ½(1 − P_abort − m²/K)(1 − (1−c)K/2⁶²)), P_abort = 1 − F(⌊ηm⌋)², F the Bin(m, c) CDF."""
    p_abort = abort_probability(m, c, budget(eta, m))
    return max(0.0, 0.5 * (1.0 - p_abort - m * m / K) * (1.0 - (1.0 - c) * K / N))
