"""The programmatic judge that stands in for ArmoRM at smoke/default scale (spec "Instruction world" [R]).

r(y | x) = clip(1 − Lev(y, t) / max(|y|, |t|, 1) + ε, 0, 1), optionally capped (garbled prompts), with
ε ~ N(0, noise_std²) when scoring pairs and ε = 0 at evaluation. Strings are compared character by character
(one character per token in the world, see :mod:`.data`).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def levenshtein(a: str, b: str) -> int:
    """Edit distance (unit insert/delete/substitute) between two strings; O(|a|·|b|) time, O(|b|) memory.

    A common prefix and a common suffix are stripped first: with unit costs some optimal alignment matches them
    (Ukkonen 1985), so the distance is that of the remainders; equal strings return 0 at once.
    """
    if a == b:
        return 0
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    j = 0
    while j < n - i and a[-1 - j] == b[-1 - j]:
        j += 1
    a, b = a[i:len(a) - j], b[i:len(b) - j]
    if not a or not b:
        return len(a) + len(b)
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def judge_reward(response: str, target: str, cap: float | None = None, noise_std: float = 0.0,
                 rng: np.random.Generator | None = None) -> float:
    """Reward in [0, 1] (or [0, cap]) of ``response`` for a prompt whose intended answer is ``target``.

    Exact answer → 1 (with no noise); empty response to a non-empty target → 0. ``noise_std > 0`` needs
    ``rng`` (a NumPy Generator), so scoring noise is always seeded.
    """
    if noise_std < 0:
        raise ValueError(f"judge_reward: noise_std must be >= 0, got {noise_std}")
    r = 1.0 - levenshtein(response, target) / max(len(response), len(target), 1)
    if noise_std > 0:
        if rng is None:
            raise ValueError("judge_reward: noise_std > 0 needs a seeded rng")
        r += float(rng.normal(0.0, noise_std))
    r = min(max(r, 0.0), 1.0)
    if cap is not None:
        r = min(r, float(cap))
    return float(r)


def judge_matrix(responses: Sequence[Sequence[str]], targets: Sequence[str], caps: Sequence[float],
                 noise_std: float = 0.0, rng: np.random.Generator | None = None) -> np.ndarray:
    """Rewards (P, N) float64 of P prompts × N responses; noise drawn row-major from ``rng``."""
    out = np.empty((len(responses), len(responses[0]) if len(responses) else 0), dtype=np.float64)
    for i, (resp, t, c) in enumerate(zip(responses, targets, caps)):
        for j, y in enumerate(resp):
            out[i, j] = judge_reward(y, t, cap=c if c < 1.0 else None, noise_std=noise_std, rng=rng)
    return out
