"""RIP's core math (spec "Method"): best-vs-worst pairs, the three metrics, the quantile filter, and the
selection of every arm. Pure functions on NumPy arrays and pandas frames; no torch.

* m1 = r(y_l | x), the rejected response's reward;
* m2 = len(y_l) in characters [R: the paper's unit is unstated; thresholds near 1,900 imply characters];
* m3 = r(y_w | x) − r(y_l | x), the reward gap.

RIP keeps a prompt iff m1 ≥ τ1, m2 ≥ τ2 and m3 ≤ τ3, τ_k the q_k-quantile of m_k over the pool (linear
interpolation; the paper's best setting is q = 0.5 for all three, Sec. 4 / Table 2).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

PAIR_METRIC_COLUMNS = ("rejected_reward", "rejected_length", "reward_gap")
SINGLE_METRIC_ARMS = {"m1_only": "q_rejected_reward", "m2_only": "q_rejected_length", "m3_only": "q_gap"}


def build_pairs(prompt_ids: np.ndarray, prompts: list[str], responses: list[list[str]],
                rewards: np.ndarray) -> pd.DataFrame:
    """Best-vs-worst preference pairs of P prompts with N scored responses each.

    Args: ``prompt_ids`` (P,) int64; ``prompts`` P strings; ``responses`` P lists of N strings; ``rewards``
    (P, N) float64. y_w = argmax r with the lowest index on ties, y_l = argmin r with the highest index on ties
    [R], so y_w ≠ y_l whenever N ≥ 2 (even if all rewards tie).

    Returns the pair table without ``ref_logp_*`` and ``quality``: ``prompt_id, prompt, responses, rewards,
    chosen, rejected, chosen_reward, rejected_reward, reward_gap, chosen_length, rejected_length``.
    """
    ids = np.asarray(prompt_ids)
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError(f"build_pairs: rewards must be (P, N), got shape {r.shape}")
    P, N = r.shape
    if ids.shape != (P,) or len(prompts) != P or len(responses) != P:
        raise ValueError(f"build_pairs: prompt_ids {ids.shape}, prompts {len(prompts)}, responses "
                         f"{len(responses)} must all have P={P} rows")
    if any(len(row) != N for row in responses):
        raise ValueError(f"build_pairs: every responses row must have N={N} entries (the rewards' width)")
    if np.isnan(r).any():
        raise ValueError("build_pairs: rewards contain NaN")
    w = r.argmax(axis=1)  # first maximum: lowest index on ties
    l = N - 1 - r[:, ::-1].argmin(axis=1)  # last minimum: highest index on ties
    rows = np.arange(P)
    chosen = [responses[i][w[i]] for i in range(P)]
    rejected = [responses[i][l[i]] for i in range(P)]
    df = pd.DataFrame({
        "prompt_id": ids.astype(np.int64),
        "prompt": list(prompts),
        "responses": [list(map(str, row)) for row in responses],
        "rewards": [list(map(float, row)) for row in r],
        "chosen": chosen,
        "rejected": rejected,
        "chosen_reward": r[rows, w],
        "rejected_reward": r[rows, l],
    })
    df["reward_gap"] = df["chosen_reward"] - df["rejected_reward"]
    df["chosen_length"] = np.array([len(s) for s in chosen], dtype=np.int64)
    df["rejected_length"] = np.array([len(s) for s in rejected], dtype=np.int64)
    return df


def rip_filter(scores: pd.DataFrame, q_rejected_reward: float | None = 0.5, q_rejected_length: float | None = 0.5,
               q_gap: float | None = 0.5) -> pd.Series:
    """RIP's keep mask (bool Series on ``scores.index``).

    τ = ``scores[col].quantile(q)`` (linear interpolation, NaN skipped); keep iff rejected_reward ≥ τ1 and
    rejected_length ≥ τ2 and reward_gap ≤ τ3. ``q=None`` disables a criterion; a NaN metric gives False for
    an enabled criterion. Reads exactly the three columns; a missing one raises ``KeyError`` naming it.
    """
    for col in PAIR_METRIC_COLUMNS:
        if col not in scores.columns:
            raise KeyError(f"rip_filter: column {col!r} missing (needs {list(PAIR_METRIC_COLUMNS)})")
    mask = pd.Series(True, index=scores.index)
    for col, q, keep_high in (("rejected_reward", q_rejected_reward, True),
                              ("rejected_length", q_rejected_length, True),
                              ("reward_gap", q_gap, False)):
        if q is None:
            continue
        if not 0 <= q <= 1:
            raise ValueError(f"rip_filter: quantile for {col} must be in [0, 1] or None, got {q}")
        x = scores[col].astype("float64")
        tau = x.quantile(q)
        mask &= (x >= tau) if keep_high else (x <= tau)  # NaN compares False
    return mask.astype(bool)


def token_jaccard(a: str, b: str) -> float:
    """Jaccard similarity of the token (character) sets of two strings; two empty strings give 1 [R]."""
    sa, sb = set(a), set(b)
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def arm_mask(pairs: pd.DataFrame, arm: str, *, seed: int, q: tuple[float | None, float | None, float | None]
             = (0.5, 0.5, 0.5)) -> np.ndarray:
    """Rows (bool, (P,)) an arm trains on (spec "Arms and baselines").

    none: all; rip: :func:`rip_filter` at ``q``; m1_only/m2_only/m3_only: one criterion at its q; 
    random_same_size: |rip| rows uniformly at random, seeded by the DPO ``seed``; jaccard: the top-|rip| rows by
    token Jaccard(chosen, rejected), ties broken by row order [R].
    """
    n = len(pairs)
    rip = rip_filter(pairs, *q).to_numpy()
    if arm == "none":
        return np.ones(n, dtype=bool)
    if arm == "rip":
        return rip
    if arm in SINGLE_METRIC_ARMS:
        kw = {"q_rejected_reward": None, "q_rejected_length": None, "q_gap": None}
        key = SINGLE_METRIC_ARMS[arm]
        kw[key] = dict(zip(("q_rejected_reward", "q_rejected_length", "q_gap"), q))[key]
        return rip_filter(pairs, **kw).to_numpy()
    size = int(rip.sum())
    mask = np.zeros(n, dtype=bool)
    if arm == "random_same_size":
        rng = np.random.default_rng([seed, 7])
        mask[rng.choice(n, size=size, replace=False)] = True
        return mask
    if arm == "jaccard":
        jac = np.array([token_jaccard(c, r) for c, r in zip(pairs["chosen"], pairs["rejected"])])
        mask[np.argsort(-jac, kind="stable")[:size]] = True
        return mask
    raise ValueError(f"arm_mask: unknown arm {arm!r}")


def low_quality_share(quality: Sequence[str | None], mask: np.ndarray | None = None) -> float:
    """Share of non-clean prompts among the rows of ``mask`` (all rows if None); NaN if quality is unknown."""
    q = pd.Series(list(quality), dtype="object")
    if mask is not None:
        q = q[np.asarray(mask, dtype=bool)]
    if len(q) == 0 or q.isna().any():
        return float("nan")
    return float((q != "clean").mean())
