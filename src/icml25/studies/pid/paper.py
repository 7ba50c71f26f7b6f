"""Paper scale: ResNet-50 detectors on GenImage (spec "Data", "Scales: paper"; the paper's protocol: train on the
SD v1.4 subset, test on the val split of all eight subsets).

* :func:`build_index` — the file index of the unpacked archives (preprocess): the training images of
  ``train_generators`` (ai = 1, nature = 0; a seeded ``val_frac`` of each class held out as validation pairs) and
  the val images of every ``test_generators`` subset (the test sets, one group per subset).
* :class:`CropDataset` — one detector input per file, computed on the fly in the DataLoader workers: decode (never
  resized), a 256x256 window (:func:`.genimage.crop_or_pad`: random with flips at train time, central at test time,
  optionally a JPEG round trip for claim 4), then the arm's transform (:func:`.train.detector_input`: x/255 - 0.5,
  r/s, noise-aware r/s at train time only, NPR/255). Deterministic: image ``i`` of epoch ``e`` draws from
  ``default_rng([seed, e, i])`` whatever the number of workers.
* :func:`train_resnet` / :func:`score` / :func:`run` — BCE + Adam on :class:`.resnet.ResNet50`, the threshold
  calibrated on the validation pairs (as at default scale), and per test subset the balanced accuracy, AUC, the
  accuracy on each class and on JPEG-compressed copies; the per-image units of claim 3.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from icml25.core.datasets import DataError

from .evaluate import accuracy, auc, calibrate_threshold
from .genimage import CLASSES, SUBSETS, crop_or_pad, load_image, subset_files
from .resnet import ResNet50
from .train import detector_input

ROLES = ("train", "val", "test")  #: role codes 0, 1, 2 of the index


def build_index(unpacked: Mapping[str, str | Path], train_generators: Sequence[str], test_generators: Sequence[str],
                val_frac: float = 0.1, seed: int = 0) -> dict[str, np.ndarray]:
    """The index of the paper run from ``unpacked`` ({subset key: unpacked archive directory}).

    Returns ``image`` (n,) str (file path), ``label`` (n,) int8 (1 = ai), ``role`` (n,) int8 (0 train, 1 val, 2 test),
    ``group`` (n,) int16 (index into ``test_generators`` for test rows, -1 otherwise), ``is_jpeg`` (n,) bool
    (file suffix) and ``groups`` (k,) str. The validation rows are ``round(val_frac * n_class)`` files of each class
    of the training subsets, drawn with ``default_rng(seed)``; a subset in both lists trains on its train split and
    is tested on its val split (GenImage's own split), so no file is in two roles."""
    need = [*dict.fromkeys([*train_generators, *test_generators])]
    missing = [g for g in need if g not in unpacked]
    if missing:
        raise DataError(f"GenImage: no unpacked archive for subsets {missing} (have {sorted(unpacked)})")
    rows: list[tuple[str, int, int, int]] = []
    rng = np.random.default_rng(seed)
    for g in train_generators:
        files = subset_files(unpacked[g], g)
        for cls, label in CLASSES.items():
            fs = files[("train", cls)]
            n_val = int(round(val_frac * len(fs)))
            val = set(rng.permutation(len(fs))[:n_val].tolist())
            rows += [(str(f), label, 1 if i in val else 0, -1) for i, f in enumerate(fs)]
    for k, g in enumerate(test_generators):
        files = subset_files(unpacked[g], g)
        for cls, label in CLASSES.items():
            rows += [(str(f), label, 2, k) for f in files[("val", cls)]]
    path = np.array([r[0] for r in rows])
    return {"image": path, "label": np.array([r[1] for r in rows], np.int8),
            "role": np.array([r[2] for r in rows], np.int8), "group": np.array([r[3] for r in rows], np.int16),
            "is_jpeg": np.array([Path(p).suffix.lower() in (".jpg", ".jpeg") for p in path]),
            "groups": np.array(list(test_generators))}


def sample_crops(index: Mapping[str, np.ndarray], size: int, n: int = 32) -> dict[str, np.ndarray]:
    """Central crops (n, size, size, 3) uint8 of the first ``n`` real (``test_real``) and fake (``test_fake``)
    test images: the inputs of checks 1-2 and of the residual figure."""
    out = {}
    for name, label in (("test_real", 0), ("test_fake", 1)):
        sel = np.flatnonzero((index["role"] == 2) & (index["label"] == label))[:n]
        if not len(sel):
            raise DataError(f"GenImage index: no {'ai' if label else 'nature'} test images")
        out[name] = np.stack([crop_or_pad(load_image(index["image"][i]), size) for i in sel])
    return out


class CropDataset(torch.utils.data.Dataset):
    """Detector inputs of ``paths`` (see module docstring); items ``(x (3, size, size) float32, label float32)``.

    ``train``: random window, random horizontal and vertical flips (on the uint8 window, before the transform, as
    at default scale) and the noise-aware quantisation of ``pid_noise``; else the central window, optionally JPEG
    round-tripped at quality ``jpeg`` (4:4:4, :func:`.data.jpeg_roundtrip`). Call :meth:`set_epoch` before each
    epoch."""

    def __init__(self, paths: Sequence[str], labels: Sequence[int], arm: str, size: int, *, train: bool,
                 seed: int = 0, step: float = 1.0, colour_space: str = "yuv601", noise_amp: float = 1.0,
                 jpeg: int | None = None):
        self.paths, self.labels = list(paths), np.asarray(labels, np.float32)
        self.arm, self.size, self.train, self.seed, self.jpeg = arm, int(size), bool(train), int(seed), jpeg
        self.kw = {"step": step, "colour_space": colour_space, "noise_amp": noise_amp}
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.paths)

    def window(self, i: int, rng: np.random.Generator | None = None) -> np.ndarray:
        """The uint8 window (size, size, 3) of item ``i`` before the transform."""
        img = load_image(self.paths[i])
        x = crop_or_pad(img, self.size, rng)
        if rng is not None:
            if rng.random() < 0.5:
                x = x[:, ::-1]
            if rng.random() < 0.5:
                x = x[::-1]
        elif self.jpeg is not None:
            from .data import jpeg_roundtrip
            x = jpeg_roundtrip(x[None], self.jpeg)[0]
        return np.ascontiguousarray(x)

    def __getitem__(self, i: int):
        rng = np.random.default_rng([self.seed, self.epoch, i]) if self.train else None
        x = self.window(i, rng)
        z = detector_input(x[None], self.arm, rng=rng, train=self.train, **self.kw)[0]
        return torch.from_numpy(z), torch.tensor(self.labels[i])


def _loader(ds: CropDataset, batch: int, workers: int, shuffle: bool, seed: int = 0):
    g = torch.Generator()
    g.manual_seed(seed)
    return torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=shuffle, num_workers=workers, generator=g,
                                       drop_last=False, pin_memory=False)


@torch.no_grad()
def score(model: nn.Module, ds: CropDataset, batch: int, workers: int, device: str) -> np.ndarray:
    """Logits (n,) float64 of ``model`` on every item of ``ds`` in order (eval mode)."""
    model.eval()
    out = [model(x.to(device)).double().cpu().numpy() for x, _ in _loader(ds, batch, workers, shuffle=False)]
    return np.concatenate(out) if out else np.zeros(0)


def make_optimizer(model: nn.Module, s: Mapping) -> torch.optim.Optimizer:
    """The detector's optimiser: Adam at ``det_lr`` (torch's other defaults) [R]."""
    return torch.optim.Adam(model.parameters(), lr=s["det_lr"])


def train_step(model: nn.Module, opt: torch.optim.Optimizer, lossf: nn.Module, x: torch.Tensor,
               y: torch.Tensor) -> torch.Tensor:
    """One training step of :func:`train_resnet` on a batch x (B, 3, H, W), y (B,) float labels on the model's
    device: ``lossf(model(x), y)`` (BCE with logits), backward, optimiser step. Returns the batch loss."""
    loss = lossf(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def train_resnet(index: Mapping[str, np.ndarray], arm: str, seed: int, s: Mapping) -> tuple[nn.Module, dict]:
    """Train :class:`.resnet.ResNet50` (width ``det_width``) with BCE + Adam (``det_lr``, ``batch``,
    ``det_epochs``) on the index's training rows; ``val/acc`` (logit 0) on its validation rows after each epoch.
    Returns (model in eval mode on ``det_device``, {"train/bce": [...], "val/acc": [...]})."""
    torch.manual_seed(seed)
    dev = s["det_device"]
    if dev == "cuda" and not torch.cuda.is_available():
        raise SystemExit("pid train: detector.device is cuda but torch sees no CUDA device (paper scale needs a "
                         "GPU; the rehearsal sets device: cpu)")
    kw = {"step": s["step"], "colour_space": s["colour_space"], "noise_amp": s["noise_amp"]}
    tr, va = index["role"] == 0, index["role"] == 1
    ds = CropDataset(index["image"][tr], index["label"][tr], arm, s["crop"], train=True, seed=seed, **kw)
    val_ds = CropDataset(index["image"][va], index["label"][va], arm, s["crop"], train=False, **kw)
    model = ResNet50(width=s["det_width"]).to(dev)
    opt = make_optimizer(model, s)
    lossf = nn.BCEWithLogitsLoss()
    curves: dict[str, list[float]] = {"train/bce": [], "val/acc": []}
    for epoch in range(s["det_epochs"]):
        ds.set_epoch(epoch)
        model.train()
        tot, n = 0.0, 0
        for x, y in _loader(ds, s["batch"], s["det_workers"], shuffle=True, seed=seed * 1000 + epoch):
            x, y = x.to(dev), y.to(dev)
            loss = train_step(model, opt, lossf, x, y)
            tot, n = tot + loss.item() * len(y), n + len(y)
        curves["train/bce"].append(tot / max(n, 1))
        if len(val_ds):
            p = score(model, val_ds, s["det_eval_batch"], s["det_workers"], dev)
            curves["val/acc"].append(accuracy(p, val_ds.labels))
        else:
            curves["val/acc"].append(float("nan"))
    model.eval()
    return model, curves


def balanced_units(correct: np.ndarray, label: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Per test image: ``correct * n_g / (2 n_{g,class})``, so that the mean over group g's images is g's balanced
    accuracy (mean of the accuracies on its real and on its fake images). Inputs (n,); output (n,) float."""
    c, y, g = np.asarray(correct, float), np.asarray(label), np.asarray(group)
    w = np.empty(len(c))
    for k in np.unique(g):
        sel = g == k
        for lab in (0, 1):
            m = sel & (y == lab)
            w[m] = sel.sum() / (2.0 * m.sum()) if m.any() else 0.0
    return c * w


def run(index: Mapping[str, np.ndarray], arm: str, seed: int, s: Mapping, heldout: Sequence[str]) -> dict:
    """Train ``arm`` with ``seed`` and test it on every test group; ``heldout``: the groups not trained on.

    ``metrics``: per group g ``test/acc_<g>`` (balanced, at the validation-calibrated threshold), ``test/auc_<g>``,
    ``test/acc_real_<g>``, ``test/acc_fake_<g>``; ``test/acc_mean`` (mean over all groups: the paper's number),
    ``test/acc_heldout`` (mean over the held-out groups), ``test/acc_heldout_jpeg<q>``; ``val/threshold``,
    ``val/acc_at_threshold``, ``val/auc_A`` (validation AUC on the training generator). ``units`` (n_test,) per
    test image (:func:`balanced_units`), ``unit_group`` (n_test,) group index."""
    model, curves = train_resnet(index, arm, seed, s)
    dev, bs, nw = s["det_device"], s["det_eval_batch"], s["det_workers"]
    kw = {"step": s["step"], "colour_space": s["colour_space"], "noise_amp": s["noise_amp"]}
    va, te = index["role"] == 1, index["role"] == 2
    val_y = index["label"][va].astype(float)
    val_s = score(model, CropDataset(index["image"][va], val_y, arm, s["crop"], train=False, **kw), bs, nw, dev)
    mode = s.get("det_threshold", "val")
    t = calibrate_threshold(val_s, val_y) if mode == "val" and len(val_s) else 0.0
    m = {"val/threshold": t,
         "val/acc_at_threshold": accuracy(val_s, val_y, t) if len(val_s) else float("nan"),
         "val/auc_A": auc(val_s, val_y) if len(val_s) else float("nan")}
    y, grp, names = index["label"][te].astype(float), index["group"][te], [str(g) for g in index["groups"]]
    logits = score(model, CropDataset(index["image"][te], y, arm, s["crop"], train=False, **kw), bs, nw, dev)
    correct = (logits > t) == (y > 0.5)
    for k, g in enumerate(names):
        sel = grp == k
        acc_r, acc_f = float(correct[sel & (y == 0)].mean()), float(correct[sel & (y == 1)].mean())
        m[f"test/acc_{g}"], m[f"test/acc_real_{g}"], m[f"test/acc_fake_{g}"] = (acc_r + acc_f) / 2, acc_r, acc_f
        m[f"test/auc_{g}"] = auc(logits[sel], y[sel])
    units = balanced_units(correct, y, grp)
    ho = np.isin(grp, [names.index(g) for g in heldout])
    m["test/acc_mean"] = float(np.mean([m[f"test/acc_{g}"] for g in names]))
    m["test/acc_heldout"] = float(np.mean([m[f"test/acc_{g}"] for g in heldout])) if len(heldout) else float("nan")
    for q in s["jpeg_qualities"]:  # both classes of the held-out groups JPEG-compressed alike (claim 4)
        ds = CropDataset(index["image"][te][ho], y[ho], arm, s["crop"], train=False, jpeg=int(q), **kw)
        u = balanced_units((score(model, ds, bs, nw, dev) > t) == (y[ho] > 0.5), y[ho], grp[ho])
        m[f"test/acc_heldout_jpeg{q}"] = (float(np.mean([u[grp[ho] == k].mean() for k in np.unique(grp[ho])]))
                                          if ho.any() else float("nan"))
    return {"arm": arm, "seed": int(seed), "curves": curves, "metrics": m, "units": units,
            "unit_group": grp.astype(int), "model": model.cpu()}
