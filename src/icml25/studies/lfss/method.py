"""LFSS's core math (Li, Jia, Liu, Hou, "Learning from Sample Stability for Deep Clustering", ICML 2025).

* :func:`kmeans_cosine` — spherical k-means (k-means++ init, best of ``n_init`` starts) used for pseudo-labels and
  evaluation (Sec. 3.3).
* :func:`hungarian_align` — relabels new cluster ids to agree best with the previous epoch's (Sec. 3.3).
* :func:`stability_scores` — per-sample stability s_i = cos(old_i, new_i) and the pseudo-labels with the
  least-stable δ-fraction marked -1 (Sec. 3.3, the released threshold rule: θ = ⌊δN⌋-th smallest s, flag s < θ).
* :func:`byol_loss`, :func:`sample_stability_loss`, :func:`prototype_loss` — the three terms of the objective
  (Sec. 3.1 base loss of BYOL/ProPos, Sec. 3.2 sample-level loss, Sec. 3.3 cluster-level loss).

NumPy for clustering, torch for the losses (torch is imported lazily so the NumPy half stays light).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy.optimize import linear_sum_assignment

if TYPE_CHECKING:  # pragma: no cover
    import torch


# ------------------------------------------------------------------------------------------------- clustering
def _unit_rows(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"expected a (N, D) array, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("features contain NaN or inf")
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(n, 1e-12)


def _cluster_sums(z: np.ndarray, labels: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``S (k, D)`` with ``S[j] = Σ_{i: labels_i = j} z_i``, added row by row in increasing i from 0.0 — the same
    floats as ``np.add.at(zeros, labels, z)`` (a running ``cumsum`` per cluster is sequential by definition; the
    final ``+ 0.0`` turns an all-(-0.0) column into +0.0 as the sum from 0.0 does), about 2x faster."""
    out = np.zeros((counts.size, z.shape[1]))
    order = np.argsort(labels, kind="stable")
    zs = z[order]
    ends = np.cumsum(counts)
    for j in np.flatnonzero(counts):
        out[j] = np.cumsum(zs[ends[j] - counts[j]:ends[j]], axis=0)[-1]
    out += 0.0
    return out


def _kmeans_cosine_once(z: np.ndarray, k: int, seed: int, max_iter: int, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """One Lloyd run of spherical k-means on unit rows ``z (N, D)`` from a k-means++ start drawn with
    ``default_rng(seed)``; returns ``(labels (N,), centers (k, D))``."""
    n = z.shape[0]
    rng = np.random.default_rng(seed)
    centers = np.empty((k, z.shape[1]))
    centers[0] = z[rng.integers(n)]
    d2 = np.maximum(2.0 - 2.0 * z @ centers[0], 0.0)
    for j in range(1, k):
        tot = d2.sum()
        i = rng.choice(n, p=d2 / tot) if tot > 0 else rng.integers(n)
        centers[j] = z[i]
        d2 = np.minimum(d2, np.maximum(2.0 - 2.0 * z @ centers[j], 0.0))
    labels = np.zeros(n, dtype=np.int64)
    for _ in range(max_iter):
        sim = z @ centers.T
        labels = sim.argmax(axis=1)
        counts = np.bincount(labels, minlength=k)
        new = _cluster_sums(z, labels, counts)
        for j in np.flatnonzero(counts == 0):
            far = int(sim[np.arange(n), labels].argmin())
            new[j] = z[far]
            labels[far] = j
            sim[far] = np.inf  # not picked twice
        new = _unit_rows(new)
        shift = float(((new - centers) ** 2).sum())
        centers = new
        if shift <= tol:
            break
    labels = (z @ centers.T).argmax(axis=1).astype(np.int64)
    return labels, centers


def kmeans_cosine(x, k: int, seed: int = 0, max_iter: int = 300, tol: float = 1e-4,
                  n_init: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Cosine (spherical) k-means of ``x (N, D)`` into ``k`` clusters, best of ``n_init`` starts.

    Rows and centres are L2-normalised; k-means++ seeding on the squared chordal distance 2 - 2cos; Lloyd steps
    assign each row to the centre of largest cosine and set each centre to the normalised mean of its rows (an
    empty cluster takes the row farthest from its centre); a run stops when the summed squared centre shift is
    ≤ ``tol`` or after ``max_iter`` steps. Start ``i`` (0..n_init-1) draws with ``default_rng(seed·n_init + i)``
    (so ``n_init = 1`` is the single run of seed ``seed``, and runs r = 0, 1, ... of an evaluation never share a
    start); the run of lowest inertia Σ_i (1 - cos(x_i, c_{label_i})) is kept (first on ties). The released
    code keeps the best of ``n_init = 10`` k-means++ starts by the same inertia
    (``torch_clustering.PyTorchKMeans``). Deterministic for a seed.

    Returns ``labels (N,) int64`` in 0..k-1 and ``centers (k, D) float64`` (unit rows).
    """
    z = _unit_rows(x)
    n = z.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"kmeans_cosine: k={k} must lie in 1..N={n}")
    if n_init < 1:
        raise ValueError(f"kmeans_cosine: n_init={n_init} must be >= 1")
    best, best_inertia = None, np.inf
    for i in range(n_init):
        labels, centers = _kmeans_cosine_once(z, k, seed * n_init + i, max_iter, tol)
        inertia = float((1.0 - (z @ centers.T)[np.arange(n), labels]).sum())
        if inertia < best_inertia:
            best, best_inertia = (labels, centers), inertia
    return best


def overlap_counts(ref_labels: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """``C (k, k)`` with ``C[i, j] = #{n: labels_n = i and ref_n = j}``; labels must lie in 0..k-1."""
    ref, lab = np.asarray(ref_labels), np.asarray(labels)
    if ref.shape != lab.shape or ref.ndim != 1:
        raise ValueError(f"labels {lab.shape} and ref_labels {ref.shape} must be 1-D of equal length")
    for name, arr in (("labels", lab), ("ref_labels", ref)):
        if arr.size and (arr.min() < 0 or arr.max() >= k):
            raise ValueError(f"{name} must lie in 0..{k - 1}, got range {arr.min()}..{arr.max()}")
    c = np.zeros((k, k), dtype=np.int64)
    np.add.at(c, (lab.astype(np.int64), ref.astype(np.int64)), 1)
    return c


def hungarian_align(ref_labels, labels, k: int) -> np.ndarray:
    """``labels`` relabelled by the permutation of 0..k-1 that maximises agreement with ``ref_labels``.

    Solves the K x K assignment on the overlap counts (scipy's ``linear_sum_assignment``, maximise). Returns an
    int64 array (N,); the multiset of cluster sizes is unchanged.
    """
    c = overlap_counts(ref_labels, labels, k)
    rows, cols = linear_sum_assignment(c, maximize=True)
    perm = np.empty(k, dtype=np.int64)
    perm[rows] = cols
    return perm[np.asarray(labels, dtype=np.int64)]


def unstable_mask(s: np.ndarray, delta: float) -> np.ndarray:
    """Samples flagged unstable by the released threshold rule: θ = the ⌊δN⌋-th smallest s, flag s < θ.

    Without ties this flags exactly ⌊δN⌋ - 1 samples; ⌊δN⌋ < 1 (e.g. δ = 0) flags none.
    """
    s = np.asarray(s, dtype=np.float64)
    if not 0.0 <= delta <= 1.0:
        raise ValueError(f"delta={delta} must lie in [0, 1]")
    m = int(np.floor(delta * s.size))
    if m < 1:
        return np.zeros(s.size, dtype=bool)
    theta = np.partition(s, m - 1)[m - 1]
    return s < theta


def stability_from_labels(old_feats, new_feats, old_labels, new_labels, k: int, delta: float = 0.1) -> dict:
    """:func:`stability_scores` given both k-means labellings (lets callers reuse a previous clustering)."""
    a, b = _unit_rows(old_feats), _unit_rows(new_feats)
    if a.shape != b.shape:
        raise ValueError(f"old_feats {a.shape} and new_feats {b.shape} must have the same shape")
    s = (a * b).sum(axis=1)
    aligned = hungarian_align(old_labels, new_labels, k)
    pseudo = aligned.copy()
    pseudo[unstable_mask(s, delta)] = -1
    return {"s": s, "pseudo": pseudo, "new_aligned": aligned, "old": np.asarray(old_labels, dtype=np.int64)}


def stability_scores(old_feats, new_feats, k: int, delta: float = 0.1, seed: int = 0,
                     n_init: int = 1) -> dict[str, np.ndarray]:
    """Sample stability between the previous (``old_feats (N, D)``) and current (``new_feats (N, D)``) features.

    Sec. 3.3: cosine k-means (``seed``, best of ``n_init`` starts) on both; new ids Hungarian-aligned to old;
    s_i = cos(old_i, new_i);
    samples below the ⌊δN⌋-th smallest s get pseudo-label -1, the others their aligned new label.

    Returns ``dict(s (N,) float64, pseudo (N,) int64 with -1 = unstable, new_aligned (N,), old (N,))``.
    """
    old_labels, _ = kmeans_cosine(old_feats, k, seed=seed, n_init=n_init)
    new_labels, _ = kmeans_cosine(new_feats, k, seed=seed, n_init=n_init)
    return stability_from_labels(old_feats, new_feats, old_labels, new_labels, k, delta)


# ----------------------------------------------------------------------------------------------------- losses
def byol_loss(p: "torch.Tensor", k: "torch.Tensor") -> "torch.Tensor":
    """ℓ(q, k) = mean_i (2 - 2 cos(p_i, k_i)) with ``p`` the predictor output on the noised q (Sec. 3.1)."""
    import torch.nn.functional as F

    return (2 - 2 * F.cosine_similarity(p, k.detach(), dim=1)).mean()


def sample_stability_loss(q: "torch.Tensor", old: "torch.Tensor", t: float = 0.5) -> "torch.Tensor":
    """Sample-level stability loss (Sec. 3.2): pull each current embedding to its own previous-epoch embedding
    and away from the other samples' previous embeddings.

    With q̂, ô the L2-normalised rows of ``q (B, D)`` and ``old (B, D)``:
    L = -mean_i log[exp(q̂_i·ô_i/t) / (Σ_j exp(q̂_i·ô_j/t) - exp(q̂_i·ô_i/t))] — the positive is *excluded* from
    the denominator, as in the released code. ``old`` receives no gradient. Needs B ≥ 2.
    """
    import torch
    import torch.nn.functional as F

    if q.ndim != 2 or q.shape != old.shape:
        raise ValueError(f"sample_stability_loss: q {tuple(q.shape)} and old {tuple(old.shape)} must be equal (B, D)")
    if q.shape[0] < 2:
        raise ValueError(f"sample_stability_loss needs B >= 2 samples (the denominator has B - 1 terms), "
                         f"got B={q.shape[0]}")
    logits = F.normalize(q, dim=1) @ F.normalize(old.detach(), dim=1).T / t
    pos = logits.diagonal()
    eye = torch.eye(q.shape[0], dtype=torch.bool, device=q.device)
    neg = torch.logsumexp(logits.masked_fill(eye, float("-inf")), dim=1)
    return (neg - pos).mean()


def prototype_loss(q: "torch.Tensor", k: "torch.Tensor", pseudo: "torch.Tensor", n_clusters: int,
                   t: float = 0.5) -> "torch.Tensor":
    """Cluster-level loss on batch prototypes of stable samples (Sec. 3.3).

    W ∈ {0,1}^{K×B} is the one-hot of the pseudo-labels (``pseudo (B,)``, -1 = unstable, ignored); empty rows
    are dropped and rows L1-normalised; μ^q = normalise(W q), μ^k = normalise(W k) (K′ prototypes each);
    NT-Xent over the 2K′ prototypes: the positive of μ^q_c is μ^k_c (and vice versa), the negatives all other
    prototypes of both sets. Gradients flow into both ``q (B, D)`` and ``k (B, D)`` (callers pass a detached k).
    Returns 0 (still differentiable) when fewer than two clusters are non-empty.
    """
    import torch
    import torch.nn.functional as F

    if q.ndim != 2 or q.shape != k.shape or pseudo.shape != (q.shape[0],):
        raise ValueError(f"prototype_loss: q {tuple(q.shape)}, k {tuple(k.shape)} must be (B, D) and pseudo "
                         f"{tuple(pseudo.shape)} (B,)")
    pseudo = pseudo.to(torch.long)
    if pseudo.numel() and (pseudo.max() >= n_clusters or pseudo.min() < -1):
        raise ValueError(f"prototype_loss: pseudo-labels must lie in -1..{n_clusters - 1}")
    valid = pseudo >= 0
    w = torch.zeros(n_clusters, q.shape[0], dtype=q.dtype, device=q.device)
    w[pseudo[valid], torch.arange(q.shape[0], device=q.device)[valid]] = 1.0
    w = w[w.sum(dim=1) > 0]
    kk = w.shape[0]
    if kk < 2:
        return (q.sum() + k.sum()) * 0.0
    w = w / w.sum(dim=1, keepdim=True)
    out = torch.cat([F.normalize(w @ q, dim=1), F.normalize(w @ k, dim=1)], dim=0)
    logits = out @ out.T / t
    idx = torch.arange(2 * kk, device=q.device)
    pos = logits[idx, (idx + kk) % (2 * kk)]
    denom = torch.logsumexp(logits.masked_fill(torch.eye(2 * kk, dtype=torch.bool, device=q.device),
                                               float("-inf")), dim=1)
    return (denom - pos).mean()
