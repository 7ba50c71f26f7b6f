"""Training of the autoencoder generators and of the detectors; detector inputs per arm.

All functions are deterministic given their seed (CPU, ``torch.manual_seed`` + a NumPy Generator for batches).
Images are (n, H, W, 3) uint8 throughout; detector inputs are (n, 3, H, W) float32.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .method import npr_residual, pid_residual
from .model import TinyDetector, make_autoencoder

ARMS = ("rgb", "pid", "pid_noise", "npr")
#: Default of ``detector.window_align``: offsets of the random training windows are multiples of this. The
#: autoencoders upsample x4 (two x2 stages) and the crops sit at multiples of the 32-pixel stride, so whole crops all
#: share one phase of that grid; windows at these offsets keep it (and keep NPR's 2x2 grid). Chosen on the detectors'
#: validation pairs (train images) on tuning seeds, see tuning/pid.jsonl (an earlier choice on test crops is
#: disclosed in the README's history; re-run after issue 33 moved the augmentation before the transform).
WINDOW_ALIGN = 4


def detector_input(x: np.ndarray, arm: str, step: float = 1.0, colour_space: str = "yuv601", noise_amp: float = 1.0,
                   rng: np.random.Generator | None = None, train: bool = False) -> np.ndarray:
    """(n, H, W, 3) uint8 -> (n, 3, H, W) float32 input of ``arm``: rgb x/255 − 0.5; pid r/s; pid_noise r/s with
    the noise-aware quantisation at train time only (plain r/s at test time); npr NPR residual/255."""
    if arm == "rgb":
        z = x.astype(np.float32) / np.float32(255.0) - np.float32(0.5)
    elif arm in ("pid", "pid_noise"):
        amp = noise_amp if (arm == "pid_noise" and train) else 0.0
        z = pid_residual(x, step, colour_space, amp, rng) / step
    elif arm == "npr":
        z = npr_residual(x) / 255.0
    else:
        raise ValueError(f"arm {arm!r} unknown; choose one of {ARMS}")
    return np.ascontiguousarray(np.moveaxis(np.asarray(z, dtype=np.float32), -1, -3))


def augment_crops(x: np.ndarray, rng: np.random.Generator, train_crop: int | None = None,
                  window_align: int = WINDOW_ALIGN) -> np.ndarray:
    """The training augmentation of one batch, on the uint8 crops x (n, H, W, 3) before any residual (issue 33):
    one random horizontal and one random vertical flip for the whole batch (two rng draws, in that order), then,
    when ``train_crop`` is set and smaller than the crops, one random ``train_crop`` x ``train_crop`` window whose
    offsets are multiples of ``window_align`` (two more draws, rows then columns). Returns (n, h, w, 3) uint8.

    Flipping must come before the transform: NPR's 2x2 grid anchors at row/column 0, so for even sizes the NPR of a
    flipped crop is not the flipped NPR of the crop (the residual of the other grid phase)."""
    if x.ndim != 4 or x.shape[-1] != 3:
        raise ValueError(f"augment_crops: expected (n, H, W, 3) crops, got shape {x.shape}")
    if rng.random() < 0.5:
        x = x[:, :, ::-1]
    if rng.random() < 0.5:
        x = x[:, ::-1]
    h, w = x.shape[1:3]
    if train_crop and train_crop < min(h, w):
        a = int(window_align)
        y0 = a * int(rng.integers(0, (h - train_crop) // a + 1))
        x0 = a * int(rng.integers(0, (w - train_crop) // a + 1))
        x = x[:, y0:y0 + train_crop, x0:x0 + train_crop]
    return np.ascontiguousarray(x)


def train_autoencoder(x: np.ndarray, decoder: str, epochs: int, seed: int = 0, lr: float = 1e-3,
                      batch: int = 64) -> tuple[nn.Module, list[float]]:
    """Train make_autoencoder(decoder) on crops x (n, H, W, 3) uint8 with MSE on x/255; returns (model, per-epoch
    mean MSE)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    ae = make_autoencoder(decoder)
    opt = torch.optim.Adam(ae.parameters(), lr=lr)
    data = torch.from_numpy(np.moveaxis(x, -1, 1).astype(np.float32) / 255.0)
    curve = []
    for _ in range(epochs):
        perm, tot = rng.permutation(len(data)), 0.0
        for i in range(0, len(data), batch):
            b = data[perm[i:i + batch]]
            loss = nn.functional.mse_loss(ae(b), b)
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += loss.item() * len(b)
        curve.append(tot / len(data))
    ae.eval()
    return ae, curve


@torch.no_grad()
def generate_fakes(ae: nn.Module, x: np.ndarray, batch: int = 256) -> np.ndarray:
    """Content-aligned fakes: uint8(clip(round(255·AE(x/255)))) per crop, (n, H, W, 3) uint8."""
    ae.eval()
    out = []
    for i in range(0, len(x), batch):
        b = torch.from_numpy(np.moveaxis(x[i:i + batch], -1, 1).astype(np.float32) / 255.0)
        y = torch.clamp(torch.round(255.0 * ae(b)), 0, 255).to(torch.uint8)
        out.append(np.moveaxis(y.numpy(), 1, -1))
    return np.ascontiguousarray(np.concatenate(out))


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR in dB between uint8 arrays."""
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10.0 * np.log10(255.0 ** 2 / mse)


def split_pairs(rng: np.random.Generator, n: int, val_frac: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """(validation, training) indices of ``n`` content-aligned (real, fake) pairs: a seeded permutation whose first
    round(val_frac·n) entries are held out. :func:`train_detector` calls it first on ``default_rng(seed)``, so
    ``split_pairs(np.random.default_rng(seed), n, val_frac)`` reproduces its split."""
    perm = rng.permutation(n)
    n_val = int(round(val_frac * n))
    return perm[:n_val], perm[n_val:]


def train_detector(real: np.ndarray, fake: np.ndarray, arm: str, epochs: int, seed: int, lr: float = 1e-3,
                   batch: int = 64, step: float = 1.0, colour_space: str = "yuv601", noise_amp: float = 1.0,
                   val_frac: float = 0.1, train_crop: int | None = None,
                   window_align: int = WINDOW_ALIGN) -> tuple[nn.Module, dict[str, list[float]]]:
    """Train TinyDetector (BCE, Adam) to tell ``real`` (label 0) from ``fake`` (label 1), (n, H, W, 3) uint8 each,
    content-aligned. A ``val_frac`` of the pairs (seeded) is held out for ``val/acc``. Each training batch is
    augmented on its uint8 crops by :func:`augment_crops` (random horizontal/vertical flips, and with ``train_crop``
    [R] one random ``train_crop`` x ``train_crop`` window at offsets that are multiples of ``window_align``, keeping
    the phase of the generators' upsampling grid that the whole, grid-aligned crops have) and only then turned into
    the arm's input, so every arm sees the input of the augmented crop (issue 33: flipping an NPR residual is not the
    NPR of the flipped crop). Validation and test always see the whole crops (the global average pool makes the
    detector size-agnostic). Returns (model in eval mode, {"train/bce": per epoch, "val/acc": per epoch}).
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    n = len(real)
    val_idx, tr_idx = split_pairs(rng, n, val_frac)
    n_val = len(val_idx)
    x_tr = np.concatenate([real[tr_idx], fake[tr_idx]])
    y_tr = np.concatenate([np.zeros(len(tr_idx)), np.ones(len(tr_idx))]).astype(np.float32)
    x_val = np.concatenate([real[val_idx], fake[val_idx]])
    y_val = np.concatenate([np.zeros(n_val), np.ones(n_val)])
    kw = dict(step=step, colour_space=colour_space, noise_amp=noise_amp)
    val_in = detector_input(x_val, arm, **kw)
    det = TinyDetector()
    opt = torch.optim.Adam(det.parameters(), lr=lr)
    lossf = nn.BCEWithLogitsLoss()
    curves: dict[str, list[float]] = {"train/bce": [], "val/acc": []}
    for _ in range(epochs):
        det.train()
        order, tot = rng.permutation(len(x_tr)), 0.0
        for i in range(0, len(order), batch):
            idx = order[i:i + batch]
            b = detector_input(augment_crops(x_tr[idx], rng, train_crop, window_align), arm, rng=rng, train=True,
                               **kw)
            logits = det(torch.from_numpy(np.ascontiguousarray(b)))
            loss = lossf(logits, torch.from_numpy(y_tr[idx]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += loss.item() * len(idx)
        curves["train/bce"].append(tot / len(order))
        p = predict_scores(det, val_in)
        curves["val/acc"].append(float(np.mean((p > 0) == (y_val > 0.5))) if n_val else float("nan"))
    det.eval()
    return det, curves


@torch.no_grad()
def predict_scores(det: nn.Module, inputs: np.ndarray, batch: int = 512) -> np.ndarray:
    """Logits (n,) float64 of ``det`` on detector inputs (n, 3, H, W) float32 (eval mode)."""
    det.eval()
    out = [det(torch.from_numpy(inputs[i:i + batch])).double().numpy() for i in range(0, len(inputs), batch)]
    return np.concatenate(out) if out else np.zeros(0)
