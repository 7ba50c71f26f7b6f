"""The monomial toy of Sec. 5 / Table 4 (Zheng, Deng & Zhang, ICML 2025): target functions, their games and the
F / P / U coalitions. The design is the paper's; every detail below is a reconstruction [R] (keys in config.py).

f(x) = sum_{k=1..m} w_k prod_{j in T_k} x_j on x in {0,1}^n with distinct supports T_k; m ~ U{m_min..m_max},
|T_k| ~ U{order_min..order_max} with a uniformly drawn support, |w_k| ~ U(w_min, w_max) with a random sign.
The explained input is x = 1^n with baseline 0, so v(S) = f(1_S): the game is f on the input whose bits are the mask.

Coalition types (candidates: all S with size_min <= |S| <= size_max), a monomial T_k "covers" S if T_k ⊇ S and
"partially covers" it if ∅ ≠ T_k ∩ S ≠ S:
* F (purely faithful): some cover and no partial cover;  * P (partially faithful): both;
* U (purely unfaithful): no cover and some partial cover.  Others (no overlap at all) have no type.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

TYPES = ("F", "P", "U")


def all_inputs(n: int) -> np.ndarray:
    """(2**n, n) float64 binary inputs with row ``mask`` = 1_S: X[mask, j] = bit j of mask."""
    m = np.arange(2 ** n)
    return ((m[:, None] >> np.arange(n)[None, :]) & 1).astype(np.float64)


def support_mask(support: Sequence[int]) -> int:
    return int(sum(1 << int(j) for j in support))


def generate_functions(seed: int, n: int, n_functions: int, m_range: Sequence[int] = (3, 6),
                       order_range: Sequence[int] = (2, 5), weight_range: Sequence[float] = (0.5, 2.0)
                       ) -> list[dict[str, Any]]:
    """``n_functions`` random sums of monomials, drawn one after the other from ``numpy.random.default_rng(seed)``
    (PCG64), so the first k functions do not depend on ``n_functions``. Each is a JSON-ready dict
    ``{"supports": [[j, ...], ...] (sorted), "weights": [w_k, ...]}``."""
    lo, hi = int(order_range[0]), int(order_range[1])
    if not 1 <= lo <= hi <= n:
        raise ValueError(f"order_range {tuple(order_range)} must satisfy 1 <= min <= max <= n = {n}")
    if not 1 <= int(m_range[0]) <= int(m_range[1]):
        raise ValueError(f"m_range {tuple(m_range)} must satisfy 1 <= min <= max")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_functions):
        m = int(rng.integers(m_range[0], m_range[1] + 1))
        supports: list[list[int]] = []
        while len(supports) < m:
            order = int(rng.integers(lo, hi + 1))
            t = sorted(int(j) for j in rng.choice(n, size=order, replace=False))
            if t not in supports:
                supports.append(t)
        mags = rng.uniform(weight_range[0], weight_range[1], size=m)
        signs = rng.choice([-1.0, 1.0], size=m)
        out.append({"supports": supports, "weights": [float(w) for w in mags * signs]})
    return out


def validate_function(fn: Mapping[str, Any], n: int, where: str = "function") -> None:
    """Raise ValueError naming the key if ``fn`` is not a valid toy function over n variables."""
    for key in ("supports", "weights"):
        if key not in fn:
            raise ValueError(f"{where}: missing key {key!r}")
    sup, w = fn["supports"], fn["weights"]
    if len(sup) != len(w) or not sup:
        raise ValueError(f"{where}: 'supports' and 'weights' must be non-empty lists of equal length "
                         f"(got {len(sup)} and {len(w)})")
    masks = []
    for k, t in enumerate(sup):
        if not t or any(not (0 <= int(j) < n) for j in t) or len(set(t)) != len(t):
            raise ValueError(f"{where}: supports[{k}] = {t} must be distinct indices in 0..{n - 1}")
        masks.append(support_mask(t))
    if len(set(masks)) != len(masks):
        raise ValueError(f"{where}: 'supports' must be distinct")
    if not np.all(np.isfinite(np.asarray(w, dtype=float))):
        raise ValueError(f"{where}: 'weights' must be finite")


def function_values(fn: Mapping[str, Any], x: np.ndarray) -> np.ndarray:
    """f(x) for inputs x (B, n) -> (B,) float64."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros(x.shape[0])
    for t, w in zip(fn["supports"], fn["weights"]):
        out += float(w) * np.prod(x[:, list(t)], axis=1)
    return out


def oracle_game(fn: Mapping[str, Any], n: int) -> np.ndarray:
    """v(S) = f(1_S) for every mask, (2**n,)."""
    return function_values(fn, all_inputs(n))


def coalition_type(supports: Sequence[Sequence[int]], mask: int) -> str | None:
    """'F', 'P', 'U' or None for coalition ``mask`` given the monomials' supports (see module docstring)."""
    cover = partial = False
    for t in supports:
        inter = support_mask(t) & mask
        if inter == mask:
            cover = True
        elif inter:
            partial = True
    if cover:
        return "P" if partial else "F"
    return "U" if partial else None


def sample_coalitions(fn: Mapping[str, Any], n: int, rng: np.random.Generator, size_range: Sequence[int] = (2, 4),
                      per_type: int = 5) -> list[dict[str, Any]]:
    """At most ``per_type`` coalitions of each type, drawn without replacement from all candidates with
    size_min <= |S| <= size_max; sorted by (type, mask). Records ``{"mask": int, "type": str}``."""
    masks = np.arange(1, 2 ** n)
    sizes = np.bitwise_count(masks)
    cands = masks[(sizes >= size_range[0]) & (sizes <= size_range[1])]
    by_type: dict[str, list[int]] = {t: [] for t in TYPES}
    for m in cands:
        c = coalition_type(fn["supports"], int(m))
        if c is not None:
            by_type[c].append(int(m))
    out = []
    for c in TYPES:
        pool = by_type[c]
        take = sorted(rng.choice(pool, size=min(per_type, len(pool)), replace=False).tolist()) if pool else []
        out += [{"mask": int(m), "type": c} for m in take]
    return out
