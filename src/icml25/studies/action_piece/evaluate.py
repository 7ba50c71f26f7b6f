"""Pure verdict functions of the action_piece study (thresholds from the study's claims; see the README).

Claims 1-3 use per-seed paired effects e_s (the seed is the independent unit: it draws the initialisation, the
data order and the SPR segmentations; the world and the vocabulary are fixed) and the Student-t interval over
seeds (:func:`icml25.core.claims.summarize`); claim 4 is an exact check (a violation is a bug)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from icml25.core.claims import mde, sign_flip_test, summarize


def decide_paired(a: Sequence[float], b: Sequence[float], *, floor: float = 0.0, relative: bool = False
                  ) -> tuple[bool, bool, dict[str, Any]]:
    """Per-seed effect e_s = a_s - b_s (``relative``: a_s / b_s - 1) and its 95% Student-t interval over seeds.

    Reproduced: CI low > 0 and mean e >= ``floor`` (the paper's smallest effect); not reproduced: CI high <
    ``floor`` (the effect is credibly smaller than the paper's; with floor 0: credibly negative); else
    inconclusive. Fewer than 2 seeds: inconclusive (no interval). Also returns the exact one-sided sign-flip p
    (mean e > 0) and the minimum detectable effect at this n (:func:`icml25.core.claims.mde`)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        raise ValueError(f"decide_paired: unequal lengths {a.size} and {b.size}")
    if a.size == 0:
        return False, False, {"d": [], "mean_d": None, "n": 0, "floor": floor, "relative": relative}
    if relative and (b <= 0).any():
        raise ValueError("decide_paired: a relative effect needs positive baseline values")
    e = a / b - 1.0 if relative else a - b
    s = summarize(e, unit="seeds")
    st = {"d": e.tolist(), "mean_d": s["mean"], "ci_low": s["ci_low"], "ci_high": s["ci_high"], "sd": s["std"],
          "n": s["n"], "ci_method": s["ci_method"], "floor": floor, "relative": relative,
          "mde": mde(e.size, s["std"]), "p_sign_flip_greater": sign_flip_test(e, alternative="greater")}
    if e.size < 2:
        return False, False, st
    return bool(s["ci_low"] > 0 and s["mean"] >= floor), bool(s["ci_high"] < floor), st


def decide_headline(ndcg_actionpiece: Sequence[float], ndcg_fixed: Sequence[float], floor: float = 0.06):
    """Claim 1: (iv) actionpiece vs (i) fixed_tokens, relative test NDCG@10 gain per seed, floor = the paper's
    smallest reported gain (+6%). A seed whose baseline NDCG@10 is 0 (an untrained learner; the rehearsal found
    it) leaves the relative gain undefined: inconclusive, with the per-seed values kept and the reason named."""
    b = np.asarray(ndcg_fixed, float)
    if b.size and (b <= 0).any():
        return False, False, {"d": [], "mean_d": None, "n": 0, "floor": floor, "relative": True,
                              "undefined": "fixed-token NDCG@10 is 0 on some seed: the relative gain is undefined",
                              "actionpiece": [float(v) for v in ndcg_actionpiece], "fixed": b.tolist()}
    return decide_paired(ndcg_actionpiece, ndcg_fixed, floor=floor, relative=True)


def decide_ablation(ndcg_actionpiece: Sequence[float], ndcg_naive: Sequence[float]):
    """Claim 2: (iv) actionpiece vs (ii) naive_seg, NDCG@10 difference per seed (floor 0)."""
    return decide_paired(ndcg_actionpiece, ndcg_naive)


def decide_utilisation(util_spr: Sequence[float], util_naive: Sequence[float]):
    """Claim 3: merge-token utilisation on test inputs, SPR (q=1) vs naive segmentation, same rule (floor 0)."""
    return decide_paired(util_spr, util_naive)


def chance_ndcg10(n_items: int) -> float:
    """Expected NDCG@10 of a uniformly random ranking of ``n_items`` items with one relevant item:
    Σ_{r=1..min(10,n)} 1/log2(r+1) / n."""
    if n_items < 1:
        raise ValueError(f"chance_ndcg10: n_items must be >= 1, got {n_items}")
    r = np.arange(1, min(10, n_items) + 1)
    return float(np.sum(1.0 / np.log2(r + 1)) / n_items)


def decide_mechanism(checks: Sequence[Mapping[str, Any]], spr_multiset_ok: bool, mass_ok: bool
                     ) -> tuple[bool, dict[str, Any]]:
    """Check 4: every checked merge has heap weight == brute-force weight and the heap pair == the brute-force
    argmax (ties: smallest pair); SPR encodings expand to the input multiset; the mass identity holds."""
    bad = [c["merge"] for c in checks if c["heap_weight"] != c["brute_weight"] or
           list(c["heap_pair"]) != list(c["brute_pair"]) or c["heap_weight"] != c["brute_max"]]
    holds = bool(checks) and not bad and bool(spr_multiset_ok) and bool(mass_ok)
    return holds, {"merges_checked": len(checks), "mismatched_merges": bad, "spr_multiset_ok": bool(spr_multiset_ok),
                   "mass_identity_ok": bool(mass_ok)}
