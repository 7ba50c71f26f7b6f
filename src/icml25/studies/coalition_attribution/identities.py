"""The paper's theorems as numerical identities (claim 2; Zheng, Deng & Zhang, ICML 2025, Sec. 3).

Each identity is evaluated on both sides by routes that share no code: the left sides use the raw game values
(brute-force Shapley Eq. 2 and Banzhaf Eq. 5, the universal-matching sum built from dense subset/overlap
indicator matrices) or dense sums over (S, T) pairs; the right sides use the fast transforms of :mod:`.method`.
All functions are batched: games of shape (G, 2**n).

Identities (J(T) = I_and(T) + I_or(T)):
* universal matching: v(S) = v(∅) + sum_{∅≠T⊆S} I_and(T) + sum_{T∩S≠∅} I_or(T), for every S (any gamma);
* Thm 3.2: Shapley (Eq. 2) == sum_{T∋i} J(T)/|T|;  Thm 3.3: Banzhaf (Eq. 5) == sum_{T∋i} J(T)/2^{|T|-1};
* Cor 3.7: phi({i}) (Eq. 6) == phi(i);
* Thm 3.4: sum_{i∈S} phi(i) == phi(S) + sum_{T: ∅≠T∩S≠S} (|T∩S|/|T|) J(T), every S ≠ ∅;
* Thm 3.6: phi(i) == phi(S)/|S| + sum_{T⊉S, T∋i} J(T)/|T|, every S ≠ ∅ and i ∈ S;
* Cor 3.8: v(N) − v(∅) == phi(S) + sum_{i∉S} phi(i) + conflict(S), every S ≠ ∅.
"""
from __future__ import annotations

from math import factorial

import numpy as np

from .method import banzhaf_from_interactions, coalition_attributions_all, shapley_from_interactions
from .transforms import n_players, popcount

IDENTITIES = ("universal_matching", "thm3_2_shapley", "thm3_3_banzhaf", "cor3_7", "thm3_4", "thm3_6", "cor3_8")


def shapley_brute_force(values: np.ndarray) -> np.ndarray:
    """Eq. 2: phi(i) = sum_{S ⊆ N\\{i}} |S|!(n−|S|−1)!/n! [v(S ∪ {i}) − v(S)]. (..., 2**n) -> (..., n)."""
    v = np.asarray(values, dtype=np.float64)
    n = n_players(v.shape[-1])
    masks = np.arange(2 ** n)
    weight = np.array([factorial(k) * factorial(n - k - 1) / factorial(n) for k in range(n)])
    out = []
    for i in range(n):
        s = masks[(masks >> i & 1) == 0]
        out.append(((v[..., s | (1 << i)] - v[..., s]) * weight[popcount(s)]).sum(-1))
    return np.stack(out, axis=-1)


def banzhaf_brute_force(values: np.ndarray) -> np.ndarray:
    """Eq. 5: B(i) = 2^{−(n−1)} sum_{S ⊆ N\\{i}} [v(S ∪ {i}) − v(S)]. (..., 2**n) -> (..., n)."""
    v = np.asarray(values, dtype=np.float64)
    n = n_players(v.shape[-1])
    masks = np.arange(2 ** n)
    out = []
    for i in range(n):
        s = masks[(masks >> i & 1) == 0]
        out.append((v[..., s | (1 << i)] - v[..., s]).sum(-1) / 2 ** (n - 1))
    return np.stack(out, axis=-1)


def universal_matching(values_empty: np.ndarray, i_and: np.ndarray, i_or: np.ndarray) -> np.ndarray:
    """Right side of universal matching for every S from dense indicator matrices (O(4**n)); (..., 2**n)."""
    n = n_players(np.shape(i_and)[-1])
    m = np.arange(2 ** n)
    subset = ((m[None, :] & m[:, None]) == m[None, :]) & (m[None, :] != 0)  # [S, T]: ∅ ≠ T ⊆ S
    touch = (m[None, :] & m[:, None]) != 0                                   # [S, T]: T ∩ S ≠ ∅
    return (np.asarray(values_empty)[..., None] + np.asarray(i_and) @ subset.T.astype(float)
            + np.asarray(i_or) @ touch.T.astype(float))


def conflict_terms(i_and: np.ndarray, i_or: np.ndarray) -> np.ndarray:
    """Thm 3.4's conflict term for every S: sum_{T: ∅≠T∩S≠S} (|T∩S|/|T|) J(T), dense O(4**n); (..., 2**n)."""
    n = n_players(np.shape(i_and)[-1])
    m = np.arange(2 ** n)
    inter = m[:, None] & m[None, :]                                          # [S, T]
    size_t = np.maximum(popcount(m), 1)[None, :]
    w = np.where((inter != 0) & (inter != m[:, None]), popcount(inter) / size_t, 0.0)
    return (np.asarray(i_and) + np.asarray(i_or)) @ w.T


def identity_errors(values: np.ndarray, i_and: np.ndarray, i_or: np.ndarray) -> dict[str, np.ndarray]:
    """Max absolute error of each identity per game. values, i_and, i_or: (G, 2**n) -> {name: (G,)}."""
    v = np.atleast_2d(np.asarray(values, dtype=np.float64))
    a = np.atleast_2d(np.asarray(i_and, dtype=np.float64))
    o = np.atleast_2d(np.asarray(i_or, dtype=np.float64))
    n = n_players(v.shape[-1])
    m = np.arange(2 ** n)
    j = a + o
    phi = shapley_from_interactions(a, o)                                    # (G, n)
    phi_s = coalition_attributions_all(a, o)                                 # (G, 2**n)
    conflict = conflict_terms(a, o)
    member = ((m[:, None] >> np.arange(n)[None, :]) & 1).astype(float)      # [S, i]
    nonempty = m != 0
    err = {
        "universal_matching": np.abs(universal_matching(v[:, 0], a, o) - v).max(-1),
        "thm3_2_shapley": np.abs(shapley_brute_force(v) - phi).max(-1),
        "thm3_3_banzhaf": np.abs(banzhaf_brute_force(v) - banzhaf_from_interactions(a, o)).max(-1),
        "cor3_7": np.abs(phi_s[:, 1 << np.arange(n)] - phi).max(-1),
        "thm3_4": np.abs(phi @ member.T - phi_s - conflict)[:, nonempty].max(-1),
        "cor3_8": np.abs((v[:, -1] - v[:, 0])[:, None]
                         - (phi_s + phi @ (1 - member).T + conflict))[:, nonempty].max(-1),
    }
    # Thm 3.6: U_{i,S̄} by a dense sum over T for each i
    size = np.where(m == 0, np.inf, popcount(m).astype(float))
    worst = np.zeros(v.shape[0])
    for i in range(n):
        s_i = m[(m >> i & 1) == 1]                                           # coalitions holding i
        t_i = (m >> i & 1) == 1
        not_sup = ((s_i[:, None] & m[None, :]) != s_i[:, None]) & t_i[None, :]   # [S, T]: T ⊉ S, T ∋ i
        u_out = (j / size) @ not_sup.T.astype(float)                         # (G, |s_i|)
        u_in = phi_s[:, s_i] / popcount(s_i)
        worst = np.maximum(worst, np.abs(phi[:, [i]] - u_in - u_out).max(-1))
    err["thm3_6"] = worst
    return {k: err[k] for k in IDENTITIES}
