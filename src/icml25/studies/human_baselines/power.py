"""Underpowering simulator — OUR illustration [R], not a computation of the paper (spec "Underpowering simulator").

Could the reviewed baselines detect a δ-point human–AI accuracy gap? Each of B baseliners answers m distinct
items with difficulty d ~ N(μ_d, σ_d²); baseliner ability θ_b ~ N(0, σ_θ²); P(human correct) = σ(θ_b − d). The
AI answers the same items with P = σ(θ_AI − d), θ_AI chosen by bisection so that the population accuracy gap
(AI − human) equals δ. The test is a two-sided paired t-test (df = B − 1, level α) on the per-baseliner mean
differences D_b = mean_j(AI_bj − H_bj); optionally a cluster bootstrap over baseliners. Power = rejection rate
over R replicates; B ≤ 1 has power 0 (no variance estimate).

Common random numbers: four independent streams (ability, difficulty, human uniforms, AI uniforms) are drawn
baseliner by baseliner, so a study with B' > B shares its first B baseliners with the smaller one, and every δ
reuses the same draws (the AI's correctness is monotone in θ_AI draw by draw).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.special import expit, stdtr

CALIBRATION_DRAWS = 20_000
CALIBRATION_SEED = 12345
_CHUNK_ELEMS = 2_000_000  # baseliner chunk size × R × m bound (memory: a few arrays of this many float64)


@lru_cache(maxsize=256)
def calibrate_ai_ability(delta: float, sd_ability: float = 1.0, sd_difficulty: float = 1.5,
                         mean_difficulty: float = -1.2, draws: int = CALIBRATION_DRAWS,
                         seed: int = CALIBRATION_SEED) -> float:
    """θ_AI such that E_d[σ(θ_AI − d)] − E_{θ,d}[σ(θ − d)] = δ, by bisection on [−30, 30] over ``draws``
    Monte-Carlo draws of (θ, d) with ``seed`` (spec: 2·10⁴ draws, seed 12345). δ is an accuracy gap in [−1, 1]."""
    rng = np.random.Generator(np.random.PCG64(seed))
    theta = rng.normal(0.0, sd_ability, draws)
    d = rng.normal(mean_difficulty, sd_difficulty, draws)
    human = float(expit(theta - d).mean())
    target = human + delta
    lo, hi = -30.0, 30.0
    if not expit(lo - d).mean() < target < expit(hi - d).mean():
        raise ValueError(f"delta={delta}: target AI accuracy {target:.4f} unreachable (human accuracy {human:.4f})")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if expit(mid - d).mean() < target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return 0.5 * (lo + hi)


def _streams(seed: int) -> list[np.random.Generator]:
    """Four independent generators: ability, difficulty, human uniforms, AI uniforms."""
    return [np.random.Generator(np.random.PCG64(s)) for s in np.random.SeedSequence(seed).spawn(4)]


def simulate_differences(n_baselines: int, items_per_baseliner: int, deltas: tuple[float, ...], n_reps: int,
                         sd_ability: float = 1.0, sd_difficulty: float = 1.5, mean_difficulty: float = -1.2,
                         seed: int = 0) -> np.ndarray:
    """Per-baseliner mean differences D (AI − human accuracy), shape (len(deltas), n_reps, B), float64."""
    B, m, R = int(n_baselines), int(items_per_baseliner), int(n_reps)
    if B < 0 or m < 1 or R < 1:
        raise ValueError(f"need B >= 0, m >= 1, n_reps >= 1; got B={B}, m={m}, n_reps={R}")
    theta_ai = np.array([calibrate_ai_ability(float(d), sd_ability, sd_difficulty, mean_difficulty) for d in deltas])
    g_theta, g_d, g_h, g_ai = _streams(seed)
    out = np.empty((len(deltas), R, B))
    chunk = max(1, _CHUNK_ELEMS // (R * m))
    for start in range(0, B, chunk):
        k = min(chunk, B - start)
        theta = g_theta.normal(0.0, sd_ability, (k, R, 1))
        d = g_d.normal(mean_difficulty, sd_difficulty, (k, R, m))
        human = (g_h.random((k, R, m)) < expit(theta - d)).mean(axis=2)  # (k, R)
        u_ai = g_ai.random((k, R, m))
        for i, t_ai in enumerate(theta_ai):
            ai = (u_ai < expit(t_ai - d)).mean(axis=2)
            out[i, :, start:start + k] = (ai - human).T
    return out


def paired_t_reject(diffs: np.ndarray, alpha: float = 0.05) -> np.ndarray:
    """Two-sided one-sample t-test of mean(D) = 0 along the last axis (df = B − 1); boolean rejections.

    B ≤ 1 never rejects. Zero variance rejects iff the mean is non-zero (|t| = ∞)."""
    B = diffs.shape[-1]
    if B <= 1:
        return np.zeros(diffs.shape[:-1], dtype=bool)
    mean = diffs.mean(axis=-1)
    sd = diffs.std(axis=-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(sd > 0, mean / (sd / np.sqrt(B)), np.where(mean != 0, np.inf, 0.0))
    p = 2.0 * stdtr(B - 1, -np.abs(t))  # two-sided p-value of Student's t with B - 1 df
    return p < alpha


def bootstrap_reject(diffs: np.ndarray, alpha: float = 0.05, n_resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """Cluster bootstrap over baseliners: reject if the percentile (1 − α) CI of mean(D) excludes 0.

    ``diffs``: (..., B). B ≤ 1 never rejects."""
    B = diffs.shape[-1]
    flat = diffs.reshape(-1, B)
    if B <= 1:
        return np.zeros(diffs.shape[:-1], dtype=bool)
    rng = np.random.Generator(np.random.PCG64(seed))
    out = np.empty(flat.shape[0], dtype=bool)
    for i, row in enumerate(flat):
        idx = rng.integers(0, B, size=(n_resamples, B))
        means = row[idx].mean(axis=1)
        lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
        out[i] = lo > 0 or hi < 0
    return out.reshape(diffs.shape[:-1])


def power_grid(n_baseliners: int, items_per_baseliner: int, deltas: tuple[float, ...], n_reps: int = 200,
               sd_ability: float = 1.0, sd_difficulty: float = 1.5, mean_difficulty: float = -1.2,
               alpha: float = 0.05, seed: int = 0, test: str = "t", bootstrap_resamples: int = 1000) -> np.ndarray:
    """Power at every δ of ``deltas`` (common random numbers), shape (len(deltas),). ``test``: "t" or "bootstrap"."""
    if test not in ("t", "bootstrap"):
        raise ValueError(f"test must be 't' or 'bootstrap', got {test!r}")
    if int(n_baseliners) <= 1:
        return np.zeros(len(deltas))
    diffs = simulate_differences(n_baseliners, items_per_baseliner, deltas, n_reps, sd_ability, sd_difficulty,
                                 mean_difficulty, seed)
    if test == "t":
        rejected = paired_t_reject(diffs, alpha)
    else:
        rejected = bootstrap_reject(diffs, alpha, bootstrap_resamples, seed)
    return rejected.mean(axis=1)


def simulate_power(n_baseliners: int, items_per_baseliner: int, delta: float, n_reps: int = 200,
                   sd_ability: float = 1.0, sd_difficulty: float = 1.5, mean_difficulty: float = -1.2,
                   alpha: float = 0.05, seed: int = 0) -> float:
    """Power of the paired t-test to detect a human–AI accuracy gap ``delta`` (0.05 = 5 points) with
    ``n_baseliners`` baseliners answering ``items_per_baseliner`` items each, over ``n_reps`` replicates.

    Our illustration [R]; at δ = 0 this is the type-I error rate. B ≤ 1 ⇒ 0."""
    return float(power_grid(n_baseliners, items_per_baseliner, (float(delta),), n_reps, sd_ability, sd_difficulty,
                            mean_difficulty, alpha, seed)[0])
