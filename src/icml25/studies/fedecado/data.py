"""Data of the fedecado study: the quadratic consensus problem, the PCA features of MNIST-5k and a restricted reader
of the CIFAR python archives (paper scale). MNIST-5k itself, its 400/100 split and the Dirichlet partitioner are
shared with other studies and live in :mod:`icml25.core.datasets` (re-exported here).

* :func:`quadratic_consensus` — K strongly convex quadratics f_i(x) = ½(x − c_i)ᵀA_i(x − c_i) with data sizes n_i,
  whose weighted sum Σ p_i f_i (p_i = n_i/n) has the closed-form minimiser x* = (Σ p_iA_i)⁻¹ Σ p_iA_ic_i.
* :func:`pca_standardise` — PCA-k fitted on the training split (numpy SVD), components z-scored.
* :func:`read_cifar_archive` / :func:`read_cifar_batch` — CIFAR-10/100 "python version" batches are pickles; they
  are read, inside the published tar.gz, with an unpickler that only admits numpy's array reconstruction.
"""
from __future__ import annotations

import math
import pickle
import tarfile
from pathlib import Path
from typing import BinaryIO

import numpy as np

from icml25.core.datasets import DataError, dirichlet_partition, load_mnist5k, mnist5k_split, read_archive

__all__ = ["DataError", "dirichlet_partition", "load_mnist5k", "mnist5k_split", "pca_standardise",
           "quadratic_consensus", "read_cifar_archive", "read_cifar_batch"]

# ------------------------------------------------------------------------------------- quadratic problem


def quadratic_consensus(K: int = 10, d: int = 20, eig_range: tuple[float, float] = (1., 10.), c_scale: float = 3.,
                        n_range: tuple[int, int] = (50, 500), seed: int = 0) -> dict[str, np.ndarray]:
    """The quadratic consensus problem with a closed-form optimum (float64).

    RNG = ``default_rng(seed)``; for each client i in order: Q_i = Q factor of QR(N(0,1)^{d×d}),
    λ_i ~ U[eig_range]^d, A_i = Q_i diag(λ_i) Q_iᵀ, c_i ~ c_scale·N(0, I_d); then n_i = round(exp(U[ln n_lo,
    ln n_hi])) for all i; p = n/Σn; x* = (Σ p_iA_i)⁻¹ Σ p_iA_ic_i.

    Returns dict A (K,d,d), c (K,d), n (K,) int, p (K,), x_star (d,).
    """
    if K < 1 or d < 1:
        raise ValueError(f"quadratic_consensus: K and d must be >= 1, got K={K}, d={d}")
    lo, hi = eig_range
    if not 0 < lo <= hi:
        raise ValueError(f"quadratic_consensus: eig_range must satisfy 0 < lo <= hi, got {eig_range}")
    rng = np.random.default_rng(seed)
    A = np.empty((K, d, d))
    c = np.empty((K, d))
    for i in range(K):
        Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
        lam = rng.uniform(lo, hi, size=d)
        A[i] = (Q * lam) @ Q.T
        A[i] = 0.5 * (A[i] + A[i].T)  # exact symmetry
        c[i] = c_scale * rng.standard_normal(d)
    n = np.round(np.exp(rng.uniform(math.log(n_range[0]), math.log(n_range[1]), size=K))).astype(np.int64)
    p = n / n.sum()
    x_star = np.linalg.solve(np.einsum("k,kij->ij", p, A), np.einsum("k,kij,kj->i", p, A, c))
    return {"A": A, "c": c, "n": n, "p": p, "x_star": x_star}


# ------------------------------------------------------------------------------------------------- MNIST-5k


def pca_standardise(X_train: np.ndarray, X_test: np.ndarray, k: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """PCA-k fitted on train, then each component z-scored with the train mean/std.

    The principal axes are the right singular vectors of the centred train matrix Xc, taken from the numpy SVD of
    the D×D scatter matrix XcᵀXc (same axes, a D×D instead of an n×D decomposition). Component signs: the first
    nonzero loading of each axis is made positive (deterministic). X_train (n, D), X_test (m, D) → (n, k), (m, k)
    float32."""
    if k > min(X_train.shape):
        raise ValueError(f"pca_standardise: k={k} exceeds min(n, D)={min(X_train.shape)}")
    X_train = np.asarray(X_train, dtype=np.float64)
    mu = X_train.mean(axis=0)
    Xc = X_train - mu
    _, _, Vt = np.linalg.svd(Xc.T @ Xc, hermitian=True)
    V = Vt[:k].T
    sign = np.sign(V[np.argmax(np.abs(V) > 1e-12, axis=0), np.arange(k)])
    V = V * np.where(sign == 0, 1.0, sign)
    Z_train = (X_train - mu) @ V
    Z_test = (np.asarray(X_test, dtype=np.float64) - mu) @ V
    m, s = Z_train.mean(axis=0), Z_train.std(axis=0)
    s = np.where(s > 0, s, 1.0)
    return ((Z_train - m) / s).astype(np.float32), ((Z_test - m) / s).astype(np.float32)


# ------------------------------------------------------------------------------------ CIFAR (paper scale)

#: members of the published archives: (training batches, test batch) [V]
CIFAR_MEMBERS = {
    "cifar10": (tuple(f"cifar-10-batches-py/data_batch_{k}" for k in range(1, 6)), "cifar-10-batches-py/test_batch"),
    "cifar100": (("cifar-100-python/train",), "cifar-100-python/test"),
}
CIFAR_CLASSES = {"cifar10": 10, "cifar100": 100}
_ALLOWED_GLOBALS = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                    ("numpy", "ndarray"), ("numpy", "dtype")}


class _RestrictedUnpickler(pickle.Unpickler):
    """Admits only numpy's array reconstruction; any other global in the pickle is refused."""

    def find_class(self, module: str, name: str):  # noqa: ANN201 — pickle protocol
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"CIFAR batch: global {module}.{name} is not allowed")


def _parse_cifar_batch(fh: BinaryIO, name: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        obj = _RestrictedUnpickler(fh, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError) as exc:
        raise DataError(f"{name}: not a CIFAR python batch ({exc})") from exc
    if not isinstance(obj, dict) or b"data" not in obj:
        raise DataError(f"{name}: CIFAR batch must be a dict with key 'data'")
    key = b"labels" if b"labels" in obj else b"fine_labels"
    if key not in obj:
        raise DataError(f"{name}: CIFAR batch has neither 'labels' nor 'fine_labels'")
    data = np.asarray(obj[b"data"], dtype=np.uint8)
    if data.ndim != 2 or data.shape[1] != 3072:
        raise DataError(f"{name}: 'data' must be (n, 3072), got {data.shape}")
    y = np.asarray(obj[key], dtype=np.int64)
    if len(y) != len(data):
        raise DataError(f"{name}: {len(y)} labels for {len(data)} images")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), y


def read_cifar_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read one CIFAR-10/100 python batch (``data_batch_1``, ``test``, …) → X (n, 32, 32, 3) uint8, y (n,) int64.

    Labels: ``labels`` (CIFAR-10) or ``fine_labels`` (CIFAR-100). The pickle is read with a restricted unpickler.
    """
    with open(path, "rb") as fh:
        return _parse_cifar_batch(fh, str(path))


def read_cifar_archive(path: str | Path, dataset: str) -> dict[str, np.ndarray]:
    """The published ``cifar-10-python.tar.gz`` / ``cifar-100-python.tar.gz`` read in place (no extraction; every
    batch through the restricted unpickler) → X_train (50000, 32, 32, 3) uint8, y_train (50000,) int64, X_test
    (10000, 32, 32, 3), y_test. Errors name the archive and the member."""
    if dataset not in CIFAR_MEMBERS:
        raise ValueError(f"read_cifar_archive: dataset must be one of {sorted(CIFAR_MEMBERS)}, got {dataset!r}")
    train_names, test_name = CIFAR_MEMBERS[dataset]
    out: dict[str, list] = {"train": [], "test": []}
    try:
        with read_archive(path) as tar:
            for part, names in (("train", train_names), ("test", (test_name,))):
                for name in names:
                    try:
                        fh = tar.extractfile(name)
                    except KeyError:
                        fh = None
                    if fh is None:
                        raise DataError(f"{path}: member {name} missing (is this the {dataset} python archive?)")
                    with fh:
                        out[part].append(_parse_cifar_batch(fh, f"{path}:{name}"))
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise DataError(f"{path}: not a readable tar.gz archive ({exc})") from exc
    X_tr = np.concatenate([x for x, _ in out["train"]])
    y_tr = np.concatenate([y for _, y in out["train"]])
    (X_te, y_te), = out["test"]
    n_cls = CIFAR_CLASSES[dataset]
    for name, y in (("train", y_tr), ("test", y_te)):
        if y.min() < 0 or y.max() >= n_cls:
            raise DataError(f"{path}: {name} labels outside 0..{n_cls - 1}")
    return {"X_train": X_tr, "y_train": y_tr, "X_test": X_te, "y_test": y_te}
