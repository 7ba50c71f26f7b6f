"""Pure verdict functions of the action_piece study (thresholds from the study's claims; see the README).

Claims 1-3 use per-seed paired differences d_s; claim 4 is an exact check (a violation is a bug)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from icml25.core.claims import bootstrap_ci


def decide_paired(a: Sequence[float], b: Sequence[float]) -> tuple[bool, bool, dict[str, Any]]:
    """d_s = a_s - b_s per seed. Reproduced: mean d > 0 and every d_s > 0; not reproduced: mean d <= 0; else
    inconclusive. Empty input: inconclusive."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        raise ValueError(f"decide_paired: unequal lengths {a.size} and {b.size}")
    if a.size == 0:
        return False, False, {"d": [], "mean_d": None}
    d = a - b
    mean = float(d.mean())
    return bool(mean > 0 and (d > 0).all()), bool(mean <= 0), {"d": d.tolist(), "mean_d": mean}


def decide_headline(ndcg_actionpiece: Sequence[float], ndcg_fixed: Sequence[float]):
    """Claim 1: (iv) actionpiece vs (i) fixed_tokens, test NDCG@10 per seed."""
    return decide_paired(ndcg_actionpiece, ndcg_fixed)


def decide_ablation(ndcg_actionpiece: Sequence[float], ndcg_naive: Sequence[float]):
    """Claim 2: (iv) actionpiece vs (ii) naive_seg."""
    return decide_paired(ndcg_actionpiece, ndcg_naive)


def decide_utilisation(util_spr: Sequence[float], util_naive: Sequence[float]):
    """Claim 3: merge-token utilisation on test inputs, SPR (q=1) vs naive segmentation, same rule."""
    return decide_paired(util_spr, util_naive)


def user_bootstrap_ci(ranks_a: np.ndarray, ranks_b: np.ndarray, n_resamples: int = 1000, seed: int = 0
                      ) -> tuple[float, float]:
    """95% CI of mean NDCG@10(a) - NDCG@10(b) resampling users (ranks: (seeds, users), 0 = absent)."""
    def nd(r):
        r = np.asarray(r)
        return np.where((r >= 1) & (r <= 10), 1.0 / np.log2(np.maximum(r, 1) + 1), 0.0)

    diff = (nd(ranks_a) - nd(ranks_b)).reshape(-1, np.asarray(ranks_a).shape[-1]).mean(0)
    return bootstrap_ci(diff, n_resamples=n_resamples, seed=seed)


def decide_mechanism(checks: Sequence[Mapping[str, Any]], spr_multiset_ok: bool, mass_ok: bool
                     ) -> tuple[bool, dict[str, Any]]:
    """Check 4: every checked merge has heap weight == brute-force weight and the heap pair == the brute-force
    argmax (ties: smallest pair); SPR encodings expand to the input multiset; the mass identity holds."""
    bad = [c["merge"] for c in checks if c["heap_weight"] != c["brute_weight"] or
           list(c["heap_pair"]) != list(c["brute_pair"]) or c["heap_weight"] != c["brute_max"]]
    holds = bool(checks) and not bad and bool(spr_multiset_ok) and bool(mass_ok)
    return holds, {"merges_checked": len(checks), "mismatched_merges": bad, "spr_multiset_ok": bool(spr_multiset_ok),
                   "mass_identity_ok": bool(mass_ok)}
