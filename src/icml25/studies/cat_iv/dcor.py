"""Distance correlation: the V-statistic dCor of step 4 and the bias-corrected t-test of step 6 (spec "Method").

* V-statistic (Székely, Rizzo & Bakirov 2007; R ``energy::dcor``): double-centred distance matrices A, B;
  dCov²(x, y) = mean(A∘B); dCor = √(dCov²(x,y) / √(dCov²(x,x) dCov²(y,y))), 0 if the denominator is 0.
* Bias-corrected (Székely & Rizzo 2013): U-centred matrices Ã, B̃;
  ⟨Ã,B̃⟩ = Σ_{k≠l} Ã_kl B̃_kl / (n(n−3)); R* = ⟨Ã,B̃⟩ / √(⟨Ã,Ã⟩⟨B̃,B̃⟩);
  with M = n(n−3)/2, T = √(M−1) R* / √(1−R*²) is compared with t_{M−1} (one-sided).

Two numerically equivalent paths: :func:`distance_correlation` builds the centred n×n matrices literally for
n ≤ :data:`DIRECT_MAX_N` (O(n²) memory); :func:`dcor_matrix` (and :func:`distance_correlation` above that size)
accumulates the sufficient sums Σ a_kl b_kl, the row sums a_k· and the total a·· over row chunks (O(n·chunk)
memory, still O(n²) time), using the exact identities

    mean(A∘B)        = Σab/n² + a··b··/n⁴ − 2 Σ_k a_k· b_k· / n³
    n(n−3)⟨Ã,B̃⟩     = Σ_{k≠l} ab + a··b··/((n−1)(n−2)) − 2 Σ_k a_k· b_k· / (n−2).
"""
from __future__ import annotations

import numpy as np

DIRECT_MAX_N = 5000  #: largest n for which the literal n×n double-centring is used
CHUNK_BYTES = 4 * 2**20  #: memory budget of one row chunk of distance blocks (small chunks stay in cache)


def _as_2d(x: np.ndarray, name: str, allow_nan: bool = False) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise ValueError(f"{name}: expected shape (n,) or (n, d), got {x.shape}")
    if np.isinf(x).any() or (not allow_nan and np.isnan(x).any()):
        raise ValueError(f"{name}: contains {'inf' if allow_nan else 'NaN or inf'}")
    return x


def distance_matrix(x: np.ndarray) -> np.ndarray:
    """Euclidean distance matrix |x_k − x_l| of a sample; x: (n,) or (n, d) → (n, n)."""
    x = _as_2d(x, "x")
    if x.shape[1] == 1:
        return np.abs(x[:, 0][:, None] - x[:, 0][None, :])
    diff = x[:, None, :] - x[None, :, :]
    return np.sqrt(np.einsum("kld,kld->kl", diff, diff))


def double_centre(a: np.ndarray) -> np.ndarray:
    """A_kl = a_kl − ā_k· − ā_·l + ā·· for an (n, n) distance matrix."""
    return a - a.mean(axis=0, keepdims=True) - a.mean(axis=1, keepdims=True) + a.mean()


def u_centre(a: np.ndarray) -> np.ndarray:
    """U-centred matrix (Székely & Rizzo 2014, eq. 3); zero diagonal. Needs n > 3."""
    n = a.shape[0]
    if n <= 3:
        raise ValueError(f"bias-corrected dCor needs n > 3, got n = {n}")
    row = a.sum(axis=1)
    out = a - row[:, None] / (n - 2) - row[None, :] / (n - 2) + a.sum() / ((n - 1) * (n - 2))
    np.fill_diagonal(out, 0.0)
    return out


def _ratio(xy: float, xx: float, yy: float, *, sqrt: bool) -> float:
    denom = np.sqrt(xx * yy)
    if not denom > 0.0:
        return 0.0
    r = xy / denom
    return float(np.sqrt(max(r, 0.0))) if sqrt else float(np.clip(r, -1.0, 1.0))


def distance_correlation(x: np.ndarray, y: np.ndarray, bias_corrected: bool = False) -> float:
    """dCor of two samples with the same n (rows paired); x, y: (n,) or (n, d).

    ``bias_corrected=False``: the V-statistic dCor ∈ [0, 1] (R ``energy::dcor``).
    ``bias_corrected=True``: R* ∈ [−1, 1] of Székely & Rizzo (2013) (R ``energy::bcdcor``).
    Rows with a NaN in x or y are dropped (pairwise complete cases).
    """
    x, y = _as_2d(x, "x", allow_nan=True), _as_2d(y, "y", allow_nan=True)
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must have the same number of rows, got {x.shape[0]} and {y.shape[0]}")
    keep = ~(np.isnan(x).any(axis=1) | np.isnan(y).any(axis=1))
    x, y = x[keep], y[keep]
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"distance correlation needs at least 2 complete rows, got {n}")
    if n > DIRECT_MAX_N:
        if x.shape[1] != 1 or y.shape[1] != 1:
            raise ValueError(f"n = {n} > {DIRECT_MAX_N}: the chunked path supports univariate samples only")
        return float(dcor_matrix(x, y, bias_corrected=bias_corrected)[0, 0])
    a, b = distance_matrix(x), distance_matrix(y)
    if bias_corrected:
        ua, ub = u_centre(a), u_centre(b)
        scale = n * (n - 3)
        return _ratio((ua * ub).sum() / scale, (ua * ua).sum() / scale, (ub * ub).sum() / scale, sqrt=False)
    ca, cb = double_centre(a), double_centre(b)
    return _ratio((ca * cb).mean(), (ca * ca).mean(), (cb * cb).mean(), sqrt=True)


def _chunked_sums(u: np.ndarray, chunk_bytes: int = CHUNK_BYTES) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sufficient sums of the distance matrices of the m columns of u (n, m).

    Returns (cross (m, m): Σ_kl a_i,kl a_j,kl, rows (m, n): row sums a_i,k·, totals (m,): a_i,··).
    """
    n, m = u.shape
    chunk = int(max(1, min(n, chunk_bytes // max(1, 8 * m * n))))
    cross = np.zeros((m, m))
    rows = np.empty((m, n))
    cols = u.T  # (m, n)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        block = np.abs(cols[:, start:stop, None] - cols[:, None, :])  # (m, c, n)
        rows[:, start:stop] = block.sum(axis=2)
        flat = block.reshape(m, -1)
        cross += flat @ flat.T
    return cross, rows, rows.sum(axis=1)


def _centred_inner(cross: np.ndarray, rows: np.ndarray, totals: np.ndarray, n: int,
                   bias_corrected: bool) -> np.ndarray:
    """(m, m) matrix of mean(A_i∘A_j) (V) or ⟨Ã_i, Ã_j⟩ (U) from the sufficient sums."""
    rr = rows @ rows.T
    tt = np.outer(totals, totals)
    if bias_corrected:
        return (cross + tt / ((n - 1) * (n - 2)) - 2.0 * rr / (n - 2)) / (n * (n - 3))
    return cross / n**2 + tt / n**4 - 2.0 * rr / n**3


def dcor_matrices(x: np.ndarray, y: np.ndarray, chunk_bytes: int = CHUNK_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """Both (V-statistic, bias-corrected) dCor matrices of :func:`dcor_matrix` from one pass over the data."""
    x, y = _as_2d(x, "x"), _as_2d(y, "y")
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must have the same number of rows, got {x.shape[0]} and {y.shape[0]}")
    if x.shape[0] <= 3:
        raise ValueError(f"bias-corrected dCor needs n > 3, got n = {x.shape[0]}")
    sums = _chunked_sums(np.hstack([x, y]), chunk_bytes)
    return tuple(_normalise(_centred_inner(*sums, x.shape[0], bc), x.shape[1], bc) for bc in (False, True))


def dcor_matrix(x: np.ndarray, y: np.ndarray, bias_corrected: bool = False,
                chunk_bytes: int = CHUNK_BYTES) -> np.ndarray:
    """D[i, j] = dCor(x[:, i], y[:, j]) for univariate columns; x: (n, p), y: (n, q) → (p, q).

    Vectorised over all pairs with row chunks of the distance blocks (memory ≈ ``chunk_bytes``), so it
    serves every n (the O(n²)-memory literal path is :func:`distance_correlation`).
    """
    x, y = _as_2d(x, "x"), _as_2d(y, "y")
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must have the same number of rows, got {x.shape[0]} and {y.shape[0]}")
    n, p = x.shape
    if bias_corrected and n <= 3:
        raise ValueError(f"bias-corrected dCor needs n > 3, got n = {n}")
    inner = _centred_inner(*_chunked_sums(np.hstack([x, y]), chunk_bytes), n, bias_corrected)
    return _normalise(inner, p, bias_corrected)


def _normalise(inner: np.ndarray, p: int, bias_corrected: bool) -> np.ndarray:
    """dCor (or R*) of the first p against the remaining variables from their centred inner products."""
    diag = np.diag(inner)
    xy = inner[:p, p:]
    denom = np.sqrt(np.outer(diag[:p], diag[p:]))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(denom > 0.0, xy / np.where(denom > 0.0, denom, 1.0), 0.0)
    return np.clip(r, -1.0, 1.0) if bias_corrected else np.sqrt(np.clip(r, 0.0, None))


def dcor_t_pvalue(r_star: np.ndarray | float, n: int) -> np.ndarray | float:
    """One-sided p-value of the bias-corrected dCor t-test (Székely & Rizzo 2013) for R* at sample size n.

    M = n(n−3)/2, T = √(M−1) R*/√(1−R*²), p = P(t_{M−1} > T). R* = 1 gives p = 0.
    """
    from scipy import stats  # lazy: keeps the stage CLI's start-up short

    if n <= 3:
        raise ValueError(f"dCor t-test needs n > 3, got n = {n}")
    r = np.asarray(r_star, dtype=float)
    dof = n * (n - 3) / 2.0 - 1.0
    with np.errstate(divide="ignore"):
        t = np.sqrt(dof) * r / np.sqrt(np.clip(1.0 - r * r, 0.0, None))
    p = stats.t.sf(t, dof)
    return float(p) if np.ndim(p) == 0 else p


def dcor_permutation_pvalues(x: np.ndarray, y: np.ndarray, permutations: int = 399,
                             seed: int = 0) -> np.ndarray:
    """P[i, j]: permutation p-value of dCor(x[:, i], y[:, j]) against independence; x: (n, p), y: (n, q) → (p, q).

    The calibrated alternative to :func:`dcor_t_pvalue` for univariate samples (the t approximation of
    Székely & Rizzo 2013 is a high-dimensional one and is miscalibrated on 1-D samples). The statistic is
    dCov²(x_i, y_j) = mean(A_i∘B_j) of double-centred distance matrices, which orders permutations like dCor
    (permuting y leaves dVar(y) unchanged). One permutation π of the rows of y serves every pair;
    p = (1 + #{b : dCov²(x_i, y_j∘π_b) ≥ dCov²(x_i, y_j)}) / (B + 1), so the smallest p is 1/(B + 1).
    Memory: (p + q) n² doubles (n = 1000, p = q = 5: 80 MB). ``seed`` fixes the permutations.
    """
    x, y = _as_2d(x, "x"), _as_2d(y, "y")
    n = x.shape[0]
    if y.shape[0] != n:
        raise ValueError(f"x and y must have the same number of rows, got {n} and {y.shape[0]}")
    if permutations < 1:
        raise ValueError(f"permutations: must be >= 1, got {permutations}")
    a = np.stack([double_centre(distance_matrix(x[:, i])) for i in range(x.shape[1])]).reshape(x.shape[1], -1)
    b = np.stack([double_centre(distance_matrix(y[:, j])) for j in range(y.shape[1])])
    observed = a @ b.reshape(y.shape[1], -1).T
    tol = 1e-12 * np.abs(observed) + 1e-300
    exceed = np.zeros_like(observed)
    flat = b.reshape(y.shape[1], -1)
    rng = np.random.Generator(np.random.PCG64(seed))
    for _ in range(permutations):
        perm = rng.permutation(n)
        bp = np.take(flat, (perm[:, None] * n + perm[None, :]).ravel(), axis=1)  # B[π, π], one gather
        exceed += (a @ bp.T) >= observed - tol
    return (1.0 + exceed) / (permutations + 1.0)
