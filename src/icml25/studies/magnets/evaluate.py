"""Evaluation of the magnets study: Fréchet distance on evaluator features, the decoding arms, the mechanism checks
and the pure verdict functions of every claim (thresholds of the study specification; see README.md)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: Decoding arms: (schedule builder, use_cache). ``magnets_schedule`` is the [R] default schedule.
ARMS = ("full_nocache", "full_cache", "small_all", "magnets", "magnets_nocache", "magnets_reversed", "mid_all")
BASELINE = "full_nocache"

# Claim thresholds (ours, from the study specification).
FLOPS_RATIO_MAX = 0.40
RHO_MEAN_MAX, RHO_EACH_MAX, RHO_NOT_REPRODUCED = 1.15, 1.30, 1.30
SLICE_TOL, CACHE_TOL, FLOPS_REL_TOL = 1e-6, 1e-5, 0.01


def arm_schedule(arm: str, magnets_schedule: Sequence[float], T: int) -> tuple[list[float], bool]:
    """(width per iteration, use_cache) of a decoding arm; ``magnets_schedule`` has T widths."""
    s = [float(f) for f in magnets_schedule]
    if len(s) != T:
        raise ValueError(f"magnets_schedule has {len(s)} widths, expected T={T}")
    table = {"full_nocache": ([1.0] * T, False), "full_cache": ([1.0] * T, True),
             "small_all": ([min(s)] * T, True), "magnets": (s, True), "magnets_nocache": (s, False),
             "magnets_reversed": (s[::-1], True), "mid_all": ([sorted(set(s))[len(set(s)) // 2]] * T, False)}
    if arm not in table:
        raise ValueError(f"unknown decoding arm {arm!r}; known: {ARMS}")
    return table[arm]


def frechet_distance(feat_a: np.ndarray, feat_b: np.ndarray) -> float:
    """Fréchet distance between Gaussians fitted to two feature sets (n, p):
    ‖μ_a − μ_b‖² + Tr(Σ_a + Σ_b − 2 (Σ_a Σ_b)^{1/2}) (``scipy.linalg.sqrtm``, real part; clipped at 0)."""
    from scipy.linalg import sqrtm

    a, b = np.asarray(feat_a, dtype=np.float64), np.asarray(feat_b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or min(len(a), len(b)) < 2:
        raise ValueError(f"frechet_distance: need two (n>=2, p) arrays with equal p, got {a.shape}, {b.shape}")
    mu_a, mu_b = a.mean(0), b.mean(0)
    s_a, s_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    covmean = sqrtm(s_a @ s_b)
    covmean = np.real(covmean)
    fd = float(((mu_a - mu_b) ** 2).sum() + np.trace(s_a) + np.trace(s_b) - 2.0 * np.trace(covmean))
    return max(fd, 0.0)


# --- verdict functions (pure) ---------------------------------------------------------------------------------
def decide_compute(ratio: float, counter_matches: Sequence[bool]) -> tuple[bool, bool, dict]:
    """Claim 1: FLOPs(magnets)/FLOPs(full_nocache) ≤ 0.40 and decode's counter equals the closed form on every
    seed. Deterministic: reproduced or not reproduced, never inconclusive (the evidence rules may still gate it)."""
    matches = [bool(m) for m in counter_matches]
    ok = bool(ratio <= FLOPS_RATIO_MAX) and bool(matches) and all(matches)
    return ok, not ok, {"flops_ratio": float(ratio), "speedup": float(1.0 / ratio) if ratio > 0 else None,
                        "counter_matches_closed_form": all(matches) if matches else None,
                        "n_seeds": len(matches)}


def decide_quality(rho: Sequence[float]) -> tuple[bool, bool, dict]:
    """Claim 2: ρ_s = FD(magnets)/FD(full_nocache) per seed. Reproduced: mean ρ ≤ 1.15 and every ρ_s ≤ 1.30;
    not reproduced: mean ρ > 1.30; otherwise inconclusive."""
    r = np.asarray(rho, dtype=float)
    if r.size == 0 or np.isnan(r).any():
        return False, False, {"rho": r.tolist(), "mean_rho": None}
    mean = float(r.mean())
    rep = mean <= RHO_MEAN_MAX and bool((r <= RHO_EACH_MAX).all())
    return rep, (not rep) and mean > RHO_NOT_REPRODUCED, {"rho": r.tolist(), "mean_rho": mean,
                                                          "max_rho": float(r.max())}


def decide_sanity(fd_magnets: Sequence[float], fd_small: Sequence[float]) -> tuple[bool, bool, dict]:
    """Claim 3: FD(magnets) < FD(small_all) on every seed (reproduced), else not reproduced."""
    a, b = np.asarray(fd_magnets, dtype=float), np.asarray(fd_small, dtype=float)
    if a.shape != b.shape or a.size == 0:
        raise ValueError(f"decide_sanity: per-seed arrays of equal non-zero length needed, got {a.shape}, {b.shape}")
    wins = a < b
    return bool(wins.all()), not bool(wins.all()), {"seeds_magnets_better": int(wins.sum()), "n_seeds": int(a.size),
                                                    "fd_magnets": a.tolist(), "fd_small_all": b.tolist()}


def decide_prediction(fd: Mapping[str, Sequence[float]]) -> dict:
    """Claim 5 (reported only, no verdict): per comparison arm, the seeds on which magnets has the lower FD."""
    out = {}
    m = np.asarray(fd["magnets"], dtype=float)
    for other in ("magnets_reversed", "mid_all"):
        if other in fd:
            o = np.asarray(fd[other], dtype=float)
            out[f"seeds_magnets_beats_{other}"] = int((m < o).sum())
            out[f"mean_fd_{other}"] = float(o.mean())
    out["mean_fd_magnets"], out["n_seeds"] = float(m.mean()), int(m.size)
    return out


def decide_slicing(max_diff_standalone: float, max_diff_plain: float) -> tuple[bool, dict]:
    """Check 4(a): sub-model = standalone sliced model (≤ 1e-6) and f = 1 = the plain model (≤ 1e-6)."""
    holds = bool(max_diff_standalone <= SLICE_TOL and max_diff_plain <= SLICE_TOL)
    return holds, {"max_abs_diff_standalone": float(max_diff_standalone),
                   "max_abs_diff_plain": float(max_diff_plain), "tol": SLICE_TOL}


def decide_cache(max_diff_logits: float, tokens_equal: bool) -> tuple[bool, dict]:
    """Check 4(b): with every row recomputed, cache logits = no-cache logits (≤ 1e-5) and decoded tokens equal."""
    holds = bool(max_diff_logits <= CACHE_TOL and tokens_equal)
    return holds, {"max_abs_diff_logits": float(max_diff_logits), "tokens_equal": bool(tokens_equal),
                   "tol": CACHE_TOL}


def decide_flop_counter(analytic: Sequence[float], measured: Sequence[float]) -> tuple[bool, dict]:
    """Check 4(c): every per-step analytic count within 1% of ``FlopCounterMode``'s."""
    a, m = np.asarray(analytic, dtype=float), np.asarray(measured, dtype=float)
    if a.shape != m.shape or a.size == 0 or (m <= 0).any():
        return False, {"max_rel_err": None, "n_steps": int(a.size)}
    rel = np.abs(a - m) / m
    return bool((rel <= FLOPS_REL_TOL).all()), {"max_rel_err": float(rel.max()), "n_steps": int(a.size),
                                               "tol": FLOPS_REL_TOL}
