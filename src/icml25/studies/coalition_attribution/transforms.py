"""Subset transforms on bitmask-indexed arrays (Zheng, Deng & Zhang, ICML 2025, Eqs. 3-4).

Convention: variables N = {0..n-1}; a subset S is the bitmask sum_{i in S} 2**i; an array ``a`` of length 2**n on
the LAST axis holds ``a[..., mask] = a(S)``. Leading axes are batch axes (e.g. one row per game). Every transform is
O(n 2**n) per row: for bit i the array is viewed as (..., 2**(n-i-1), 2, 2**i), so ``[..., 1, :]`` are the masks
with bit i set and ``[..., 0, :]`` the same masks without it.

* :func:`mobius`   mu(a)[S] = sum_{L subset S} (-1)^{|S|-|L|} a[L]        (the AND interaction transform)
* :func:`zeta`     z(a)[S]  = sum_{L subset S} a[L]                        (inverse of mobius)
* :func:`mobius_transpose` = mu^T, used for subgradients of |mu(a)|
* :func:`superset_sum`     s(a)[S] = sum_{T superset S} a[T]
"""
from __future__ import annotations

import numpy as np


def n_players(length: int) -> int:
    """n such that ``length == 2**n`` (n >= 1); ValueError otherwise."""
    length = int(length)
    if length < 2 or length & (length - 1):
        raise ValueError(f"a game needs 2**n values (n >= 1) indexed by bitmask; got length {length}, "
                         "which is not a power of two >= 2")
    return length.bit_length() - 1


def popcount(masks: np.ndarray | int) -> np.ndarray:
    """|S| for each bitmask (int64)."""
    return np.bitwise_count(np.asarray(masks, dtype=np.int64)).astype(np.int64)


def _butterfly(a: np.ndarray, kind: str) -> np.ndarray:
    a = np.array(a, dtype=np.float64, copy=True)
    n = n_players(a.shape[-1])
    lead = a.shape[:-1]
    for i in range(n):
        v = a.reshape(*lead, 2 ** (n - i - 1), 2, 2 ** i)
        if kind == "mobius":
            v[..., 1, :] -= v[..., 0, :]
        elif kind == "zeta":
            v[..., 1, :] += v[..., 0, :]
        elif kind == "mobius_t":
            v[..., 0, :] -= v[..., 1, :]
        else:  # superset sum
            v[..., 0, :] += v[..., 1, :]
    return a


def mobius(a: np.ndarray) -> np.ndarray:
    """Möbius transform over subsets, shape (..., 2**n) -> (..., 2**n); a new array."""
    return _butterfly(a, "mobius")


def zeta(a: np.ndarray) -> np.ndarray:
    """Subset-sum (zeta) transform, the inverse of :func:`mobius`; shape (..., 2**n)."""
    return _butterfly(a, "zeta")


def mobius_transpose(a: np.ndarray) -> np.ndarray:
    """mu^T a: (mu^T a)[L] = sum_{S superset L} (-1)^{|S|-|L|} a[S]; shape (..., 2**n)."""
    return _butterfly(a, "mobius_t")


def superset_sum(a: np.ndarray) -> np.ndarray:
    """s[S] = sum_{T superset S} a[T]; shape (..., 2**n)."""
    return _butterfly(a, "superset")


def complement(a: np.ndarray) -> np.ndarray:
    """b[m] = a[full ^ m] (full = 2**n - 1): reversing the last axis, since full ^ m = full - m."""
    return np.asarray(a)[..., ::-1]


def mobius_matrix_dense(n: int) -> np.ndarray:
    """The naive (2**n, 2**n) Möbius matrix M[S, L] = (-1)^{|S|-|L|} 1[L subset S], built entry by entry from
    bitmasks (independent of the butterfly; for tests and the speed benchmark)."""
    m = np.arange(2 ** n)
    sub = (m[None, :] & m[:, None]) == m[None, :]
    sign = np.where((popcount(m)[:, None] - popcount(m)[None, :]) % 2 == 0, 1.0, -1.0)
    return np.where(sub, sign, 0.0)


def mobius_matrix_sparse(n: int):
    """Sparse CSR Möbius matrix, the n-fold Kronecker power of [[1, 0], [-1, 1]] (3**n non-zeros)."""
    from scipy import sparse

    base = sparse.csr_matrix(np.array([[1.0, 0.0], [-1.0, 1.0]]))
    out = sparse.csr_matrix(np.ones((1, 1)))
    for _ in range(n):
        out = sparse.kron(base, out, format="csr")
    return out
