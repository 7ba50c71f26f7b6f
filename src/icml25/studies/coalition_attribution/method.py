"""AND-OR interactions, the sparsity objective for gamma, and the coalition attributions of
"Towards Attributions of Input Variables in a Coalition" (Zheng, Deng & Zhang, ICML 2025, arXiv:2309.13411).

Games are float64 arrays ``values`` of shape (..., 2**n) with ``values[..., mask] = v(S)`` (see
:mod:`.transforms`). Leading axes batch several games; the public functions of the package take one game.

Section 2 / Eqs. 3-4 (AND-OR split): v_and(L) = v(L)/2 + gamma_L, v_or(L) = v(L)/2 - gamma_L,
  I_and = mu(v_and),  I_or(S) = -sum_{L subset S} (-1)^{|S|-|L|} v_or(N \\ L) = -mu(w), w[m] = v_or[full ^ m]
  for S != empty set, and I_or(empty) = v_or(empty) (the convention of the AND-OR reference code,
  sjtu-xai-lab/generalizable-interaction, harsanyi/and_or_harsanyi_utils.py `get_reward2Ior_mat`; the formula would
  give -v_or(N)). Then I_and(empty) + I_or(empty) = v(empty) and v(N) = sum_T I_and(T) + I_or(T).
gamma is chosen to minimise sum_T |I_and(T)| + |I_or(T)| (the sum includes T = empty set [R]).
Section 3 (attributions), with J(T) = I_and(T) + I_or(T):
  Thm 3.2  phi(i) = sum_{T ∋ i} J(T)/|T|  (Shapley);  Thm 3.3  B(i) = sum_{T ∋ i} J(T)/2^{|T|-1} (Banzhaf);
  Eq. 6    phi(S) = sum_{T ⊇ S} (|S|/|T|) J(T);
  Eqs. 7-9 the faithfulness metrics R, R' and Q (see :func:`faithfulness`).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .transforms import complement, mobius, mobius_matrix_sparse, mobius_transpose, n_players, popcount, \
    superset_sum

SOLVERS = ("lp", "adam")


# ------------------------------------------------------------------------------------------ AND-OR split
def _as_game(values: np.ndarray, name: str = "values") -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    if v.ndim < 1:
        raise ValueError(f"{name}: expected an array of 2**n game values, got a scalar")
    n_players(v.shape[-1])
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name}: game values must be finite")
    return v


def or_interactions(v_or: np.ndarray) -> np.ndarray:
    """I_or from the OR game v_or (Eq. 4), shape (..., 2**n) -> (..., 2**n): -mu(w), w[m] = v_or[full ^ m], on every
    non-empty T, and I_or(empty) = v_or(empty) (the reference convention, see the module docstring). Linear."""
    w = np.asarray(v_or, dtype=np.float64)
    i_or = -mobius(complement(w))
    i_or[..., 0] = w[..., 0]
    return i_or


def or_interactions_transpose(s: np.ndarray) -> np.ndarray:
    """The transpose of the linear map :func:`or_interactions` applied to s (for subgradients); (..., 2**n)."""
    s = np.asarray(s, dtype=np.float64)
    rest = s.copy()
    rest[..., 0] = 0.0
    out = -complement(mobius_transpose(rest))
    out[..., 0] += s[..., 0]
    return out


def interactions_from_gamma(values: np.ndarray, gamma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(I_and, I_or) of Eqs. 3-4 for a given gamma; shapes (..., 2**n) (gamma broadcasts against values)."""
    v = _as_game(values)
    g = np.broadcast_to(np.asarray(gamma, dtype=np.float64), v.shape)
    i_and = mobius(0.5 * v + g)
    i_or = or_interactions(0.5 * v - g)
    return i_and, i_or


def l1_objective(values: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    """sum_T |I_and(T)| + |I_or(T)| for each game (shape values.shape[:-1])."""
    i_and, i_or = interactions_from_gamma(values, gamma)
    return np.abs(i_and).sum(-1) + np.abs(i_or).sum(-1)


def solve_gamma_lp(values: np.ndarray) -> np.ndarray:
    """The exact minimiser of :func:`l1_objective` for one game, as a linear programme [R]:
    variables (gamma, t, s), minimise sum t + sum s s.t. |I_and(gamma)| <= t, |I_or(gamma)| <= s elementwise;
    both are affine in gamma, I_and = mu(v/2) + M gamma and I_or = O(v/2) - O gamma, with M the sparse Möbius
    matrix and O the matrix of :func:`or_interactions` (-M P on the rows T != empty, P the complement
    permutation; row empty = e_empty). Solved by scipy's HiGHS. Returns gamma, shape (2**n,)."""
    from scipy import sparse
    from scipy.optimize import linprog

    v = _as_game(values)
    if v.ndim != 1:
        raise ValueError(f"solve_gamma_lp takes one game of shape (2**n,), got {v.shape}")
    n = n_players(v.size)
    size = v.size
    m = mobius_matrix_sparse(n)
    mp = m[:, ::-1].tolil()  # -O: on rows T != empty M P (column m of M P is column full ^ m of M)
    mp[0, :] = 0.0
    mp[0, 0] = -1.0          # row empty: I_or(empty) = v_or(empty) = v(empty)/2 - gamma_empty
    mp = mp.tocsr()
    b_and = mobius(0.5 * v)
    b_or = or_interactions(0.5 * v)
    eye = sparse.identity(size, format="csr")
    zero = sparse.csr_matrix((size, size))
    a_ub = sparse.vstack([
        sparse.hstack([m, -eye, zero]), sparse.hstack([-m, -eye, zero]),
        sparse.hstack([mp, zero, -eye]), sparse.hstack([-mp, zero, -eye]),
    ], format="csr")
    b_ub = np.concatenate([-b_and, b_and, -b_or, b_or])
    c = np.concatenate([np.zeros(size), np.ones(2 * size)])
    bounds = [(None, None)] * size + [(0, None)] * (2 * size)
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0:
        raise RuntimeError(f"gamma LP failed (n={n}): {res.message}")
    return np.asarray(res.x[:size], dtype=np.float64)


def solve_gamma_adam(values: np.ndarray, *, steps: int = 5000, lr_scale: float = 0.01, beta1: float = 0.9,
                     beta2: float = 0.999, eps: float = 1e-8) -> np.ndarray:
    """The Adam ablation [R]: subgradient descent on :func:`l1_objective` from gamma_0 = 0, learning rate
    ``lr_scale * std(v)`` decayed linearly to 0 over ``steps``, the best iterate (lowest objective) kept.
    The subgradient is M^T sign(I_and) - O^T sign(I_or) (O: :func:`or_interactions`).
    Batched: values (..., 2**n) -> gamma (..., 2**n)."""
    v = _as_game(values)
    lr0 = lr_scale * v.std(axis=-1, keepdims=True)
    g = np.zeros_like(v)
    m1 = np.zeros_like(v)
    m2 = np.zeros_like(v)
    best = g.copy()
    best_obj = l1_objective(v, g)
    b_and = mobius(0.5 * v)
    b_or = or_interactions(0.5 * v)
    for t in range(1, steps + 1):
        # I_and = b_and + M g; I_or = b_or - O g
        i_and = b_and + mobius(g)
        i_or = b_or - or_interactions(g)
        obj = np.abs(i_and).sum(-1) + np.abs(i_or).sum(-1)
        better = obj < best_obj
        best[better] = g[better]
        best_obj = np.where(better, obj, best_obj)
        grad = mobius_transpose(np.sign(i_and)) - or_interactions_transpose(np.sign(i_or))
        m1 = beta1 * m1 + (1 - beta1) * grad
        m2 = beta2 * m2 + (1 - beta2) * grad ** 2
        step = lr0 * (1.0 - (t - 1) / steps)
        g = g - step * (m1 / (1 - beta1 ** t)) / (np.sqrt(m2 / (1 - beta2 ** t)) + eps)
    obj = l1_objective(v, g)
    better = obj < best_obj
    best[better] = g[better]
    return best


def solve_gamma(values: np.ndarray, solver: str = "lp", **options: Any) -> np.ndarray:
    """gamma minimising the sparsity objective; ``solver`` is ``lp`` (exact, one game at a time) or ``adam``."""
    v = _as_game(values)
    if solver == "lp":
        if options:
            raise ValueError(f"solver 'lp' takes no options, got {sorted(options)}")
        flat = v.reshape(-1, v.shape[-1])
        return np.stack([solve_gamma_lp(row) for row in flat]).reshape(v.shape)
    if solver == "adam":
        return solve_gamma_adam(v, **options)
    raise ValueError(f"unknown gamma solver {solver!r}; expected one of {SOLVERS}")


def and_or_interactions(values: np.ndarray, gamma: np.ndarray | None = None, solver: str = "lp",
                        return_gamma: bool = False):
    """AND and OR interactions of a game (Eqs. 3-4).

    values: (2**n,) float64, ``values[mask] = v(S)``. gamma: (2**n,) or None (learned by the sparsity objective with
    ``solver`` 'lp' or 'adam'). Returns ``(i_and, i_or)``, each (2**n,), plus gamma if ``return_gamma``.
    ValueError if the length is not a power of two (>= 2) or gamma's shape differs."""
    v = _as_game(values)
    if v.ndim != 1:
        raise ValueError(f"values: expected shape (2**n,), got {v.shape}")
    if gamma is None:
        g = solve_gamma(v, solver)
    else:
        g = np.asarray(gamma, dtype=np.float64)
        if g.shape != v.shape:
            raise ValueError(f"gamma: expected shape {v.shape}, got {g.shape}")
    i_and, i_or = interactions_from_gamma(v, g)
    return (i_and, i_or, g) if return_gamma else (i_and, i_or)


# ------------------------------------------------------------------------------------------ attributions
def _pair(i_and: np.ndarray, i_or: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    a = np.asarray(i_and, dtype=np.float64)
    o = np.asarray(i_or, dtype=np.float64)
    if a.shape != o.shape or a.ndim < 1:
        raise ValueError(f"i_and and i_or must have the same shape (..., 2**n); got {a.shape} and {o.shape}")
    return a, o, n_players(a.shape[-1])


def _check_mask(mask: int, n: int) -> int:
    mask = int(mask)
    if mask <= 0 or mask >= 2 ** n:
        raise ValueError(f"coalition_mask must be a non-empty subset of {n} variables (1 <= mask < {2 ** n}); "
                         f"got {mask}")
    return mask


def _sizes(n: int) -> np.ndarray:
    """|T| for T = 0..2**n-1 as float, with |empty| set to inf so that 1/|T| is 0 there (empty T holds no i)."""
    s = popcount(np.arange(2 ** n)).astype(np.float64)
    s[0] = np.inf
    return s


def shapley_from_interactions(i_and: np.ndarray, i_or: np.ndarray) -> np.ndarray:
    """Thm 3.2: phi(i) = sum_{T ∋ i} (I_and(T) + I_or(T)) / |T|. Shapes (..., 2**n) -> (..., n)."""
    a, o, n = _pair(i_and, i_or)
    member = ((np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1).astype(np.float64)
    return ((a + o) / _sizes(n)) @ member


def banzhaf_from_interactions(i_and: np.ndarray, i_or: np.ndarray) -> np.ndarray:
    """Thm 3.3: B(i) = sum_{T ∋ i} (I_and(T) + I_or(T)) / 2^{|T|-1}. Shapes (..., 2**n) -> (..., n)."""
    a, o, n = _pair(i_and, i_or)
    member = ((np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1).astype(np.float64)
    return ((a + o) / 2.0 ** (popcount(np.arange(2 ** n)) - 1)) @ member


def coalition_attributions_all(i_and: np.ndarray, i_or: np.ndarray) -> np.ndarray:
    """Eq. 6 for every coalition at once: phi(S) = |S| * sum_{T ⊇ S} J(T)/|T| (phi(empty) = 0).
    Shapes (..., 2**n) -> (..., 2**n); O(n 2**n) via the superset-sum transform."""
    a, o, n = _pair(i_and, i_or)
    return popcount(np.arange(2 ** n)) * superset_sum((a + o) / _sizes(n))


def coalition_attribution(i_and: np.ndarray, i_or: np.ndarray, coalition_mask: int) -> float:
    """Eq. 6: the attribution of coalition S, phi(S) = sum_{T ⊇ S} (|S|/|T|) (I_and(T) + I_or(T)).
    i_and, i_or: (2**n,); coalition_mask != 0. A one-bit mask gives the Shapley value phi(i) (Cor. 3.7)."""
    a, o, n = _pair(i_and, i_or)
    if a.ndim != 1:
        raise ValueError(f"i_and, i_or: expected shape (2**n,), got {a.shape}")
    s = _check_mask(coalition_mask, n)
    t = np.arange(2 ** n)
    sup = (t & s) == s
    return float(popcount(s) * np.sum((a + o)[sup] / _sizes(n)[sup]))


#: Default relative tolerance of :func:`faithfulness`: a ratio whose denominator is at most this times the game's
#: total interaction strength sum_T (|I_and(T)| + |I_or(T)|) is undefined (NaN) [R].
ZERO_TOL = 1e-9


def _ratio(num: float, den: float, tol: float = 0.0) -> float:
    """num/den, NaN when den <= tol (den >= num >= 0 by construction for every metric here): a ratio of rounding
    noise (a variable in no interaction has sums of ~1e-16) is undefined, not a number between 0 and 1."""
    return float("nan") if den <= tol else float(num / den)


def faithfulness(i_and: np.ndarray, i_or: np.ndarray, coalition_mask: int,
                 zero_tol: float = ZERO_TOL) -> dict[str, Any]:
    """Faithfulness of coalition S (Eqs. 7-9), with a_T = |I_and(T)| + |I_or(T)| and J(T) = I_and(T) + I_or(T):

    * R(i)  = |U_{i,S}| / (|U_{i,S}| + |U_{i,S̄}|), U_{i,S} = phi(S)/|S|, U_{i,S̄} = sum_{T ⊉ S, T ∋ i} J(T)/|T|;
    * R'(i) = [sum_{T ⊇ S} a_T/|T|] / [sum_{T ∋ i} a_T/|T|];
    * Q(S)  = [sum_{T ⊇ S} (|S|/|T|) a_T] / [sum_{T ∩ S ≠ ∅} (|T ∩ S|/|T|) a_T].

    Returns ``dict(R, R_prime, Q, R_per_var, R_prime_per_var)``: R and R_prime are the means over i in S of the
    per-variable values (ascending bit order, arrays of shape (|S|,)) ignoring NaN entries (a mean is NaN only when
    every entry is). A ratio is NaN when its denominator is <= ``zero_tol`` * sum_T a_T (0/0 up to rounding; with
    ``zero_tol`` = 0 only an exact 0/0 is NaN) [R]."""
    if not zero_tol >= 0:
        raise ValueError(f"zero_tol must be >= 0, got {zero_tol}")
    a, o, n = _pair(i_and, i_or)
    if a.ndim != 1:
        raise ValueError(f"i_and, i_or: expected shape (2**n,), got {a.shape}")
    s = _check_mask(coalition_mask, n)
    t = np.arange(2 ** n)
    size = popcount(t).astype(np.float64)
    inv = 1.0 / _sizes(n)
    j = a + o
    strength = np.abs(a) + np.abs(o)
    tol = float(zero_tol) * float(strength.sum())
    k = int(popcount(s))
    sup = (t & s) == s
    phi_s = float(k * np.sum(j[sup] * inv[sup]))
    u_in = phi_s / k
    num_rp = float(np.sum(strength[sup] * inv[sup]))
    members = [i for i in range(n) if s >> i & 1]
    r, rp = [], []
    for i in members:
        has_i = (t >> i & 1).astype(bool)
        u_out = float(np.sum(j[has_i & ~sup] * inv[has_i & ~sup]))
        r.append(_ratio(abs(u_in), abs(u_in) + abs(u_out), tol))
        rp.append(_ratio(num_rp, float(np.sum(strength[has_i] * inv[has_i])), tol))
    overlap = popcount(t & s).astype(np.float64)
    q_num = float(np.sum((k / size[sup]) * strength[sup]))
    touch = overlap > 0
    q_den = float(np.sum(overlap[touch] / size[touch] * strength[touch]))
    r_arr, rp_arr = np.asarray(r), np.asarray(rp)
    return {"R": _nanmean(r_arr), "R_prime": _nanmean(rp_arr), "Q": _ratio(q_num, q_den, tol),
            "R_per_var": r_arr, "R_prime_per_var": rp_arr}


def _nanmean(x: np.ndarray) -> float:
    finite = x[~np.isnan(x)]
    return float(finite.mean()) if finite.size else math.nan
