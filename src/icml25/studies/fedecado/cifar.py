"""Paper-scale learners of the fedecado study: VGG-11 on CIFAR-10 and ResNet-34 on CIFAR-100 (paper §6 [V]), run on
one flat parameter vector so that every federated method (which adds, averages and integrates parameter vectors)
works on them unchanged.

Reconstructions [R], since the paper's architectures are named but not specified: VGG-11 is the 8 convolutions of
configuration "A" (Simonyan & Zisserman 2015) with ReLU and no normalisation, and a 512-512-classes head (no
dropout, so a minibatch gradient is a deterministic function of θ); ResNet-34 is the CIFAR variant (3×3 stem, no
max-pool; blocks 3-4-6-3) with GroupNorm (min(32, C/2) groups) in place of BatchNorm, whose running statistics
would be state outside θ. Inputs are normalised with the training-set channel means/stds; with
``augment`` each minibatch gets a random 4-pixel-padded crop and a random horizontal flip, drawn from a generator
seeded by the run's seed.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from icml25.core.speed import autocast, prepare_input, prepare_model

VGG11_CFG = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


def scaled(channels: int, width: float) -> int:
    """``channels`` × ``width`` rounded, at least 2 (``width`` 1 = the paper's architecture; the rehearsal runs the
    same classes at a fraction of the width on CPU)."""
    if not width > 0:
        raise ValueError(f"image.width: must be positive, got {width}")
    return max(2, int(round(channels * width)))


def vgg11(n_classes: int = 10, width: float = 1.0) -> nn.Module:
    """VGG-11 for 32×32 inputs [R: no BatchNorm, head 512-512-n_classes without dropout]; every convolution and
    head layer has ``scaled(c, width)`` channels (width 1: 64 ... 512)."""
    layers: list[nn.Module] = []
    c_in = 3
    for v in VGG11_CFG:
        if v == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            c_out = scaled(int(v), width)
            layers += [nn.Conv2d(c_in, c_out, 3, padding=1), nn.ReLU(inplace=True)]
            c_in = c_out
    h = scaled(512, width)
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(c_in, h), nn.ReLU(inplace=True), nn.Linear(h, h),
                         nn.ReLU(inplace=True), nn.Linear(h, n_classes))


def _norm(channels: int) -> nn.Module:
    return nn.GroupNorm(min(32, channels // 2), channels)  # [R] GroupNorm: no running statistics outside θ


class _Block(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.n1 = _norm(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.n2 = _norm(c_out)
        self.short = (nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), _norm(c_out))
                      if stride != 1 or c_in != c_out else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.n1(self.conv1(x)))
        return torch.relu(self.n2(self.conv2(out)) + self.short(x))


def resnet34(n_classes: int = 100, width: float = 1.0) -> nn.Module:
    """ResNet-34 for 32×32 inputs: 3×3 stem, stages of 3-4-6-3 basic blocks (64-128-256-512 channels × ``width``),
    global average pool, linear head [R: GroupNorm with min(32, C/2) groups instead of BatchNorm]."""
    stem = scaled(64, width)
    layers: list[nn.Module] = [nn.Conv2d(3, stem, 3, 1, 1, bias=False), _norm(stem), nn.ReLU(inplace=True)]
    c_in = stem
    for c, n, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        c_out = scaled(c, width)
        for k in range(n):
            layers.append(_Block(c_in, c_out, stride if k == 0 else 1))
            c_in = c_out
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c_in, n_classes))


ARCHITECTURES = {"vgg11": vgg11, "resnet34": resnet34}


class CnnLearner:
    """A CIFAR learner for :func:`~.experiment.run_image` on a flat parameter vector θ (P,) float32 on ``device``.

    X_train (n, 32, 32, 3) uint8, y_train (n,) int64, X_test, y_test: the images (moved to ``device`` once).
    ``grad(θ, idx, k)`` is the minibatch gradient of the mean cross-entropy on the training images ``idx``;
    ``round_metrics`` gives (loss on a fixed subsample of ``n_train_eval`` training images, test accuracy);
    ``final_metrics`` (test loss, test accuracy). Evaluation runs in batches of ``eval_batch`` images.
    """

    def __init__(self, arch: str, X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, y_test: np.ndarray,
                 n_classes: int, *, device: str = "cpu", augment: bool = False, seed: int = 0,
                 n_train_eval: int = 5000, eval_batch: int = 1000, width: float = 1.0, fast: Any = None) -> None:
        if arch not in ARCHITECTURES:
            raise ValueError(f"CnnLearner: arch must be one of {sorted(ARCHITECTURES)}, got {arch!r}")
        if device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("fedecado: image.device is cuda but no CUDA device is visible to this job (the paper "
                               "scale trains VGG-11 / ResNet-34 on a GPU: run it on a GPU node, or set image.device: "
                               "cpu to run it, slowly, on CPU)")
        self.arch, self.n_classes, self.device = arch, int(n_classes), torch.device(device)
        self.augment, self.eval_batch = bool(augment), int(eval_batch)
        to = lambda a: torch.as_tensor(np.ascontiguousarray(a)).to(self.device)  # noqa: E731
        Xtr = to(X_train).permute(0, 3, 1, 2).float().div_(255)
        mean = Xtr.mean(dim=(0, 2, 3), keepdim=True)
        std = Xtr.std(dim=(0, 2, 3), keepdim=True)
        self.Xtr, self.ytr = (Xtr - mean) / std, to(y_train)
        self.Xte = (to(X_test).permute(0, 3, 1, 2).float().div_(255) - mean) / std
        self.yte = to(y_test)
        gen = np.random.default_rng(seed + 4000)
        n_eval = min(n_train_eval, len(y_train))
        self.eval_idx = torch.as_tensor(np.sort(gen.choice(len(y_train), size=n_eval, replace=False)),
                                        device=self.device)
        self.aug_gen = torch.Generator(device="cpu").manual_seed(int(seed) + 5000)
        self.width = float(width)
        self.net = ARCHITECTURES[arch](self.n_classes, self.width).to(self.device)
        self.fast = fast  # issue 39: channels_last / bf16 autocast / compile of the minibatch step, CUDA only
        self.net = prepare_model(self.net, fast, self.device)
        self.shapes = [(name, p.shape, p.numel()) for name, p in self.net.named_parameters()]

    @property
    def n_params(self) -> int:
        """P, the length of θ."""
        return sum(n for _, _, n in self.shapes)

    def init(self, seed: int) -> torch.Tensor:
        """θ₀ (P,): PyTorch's default initialisation of the architecture under torch.manual_seed(seed)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            net = ARCHITECTURES[self.arch](self.n_classes, self.width)
        return torch.cat([p.detach().reshape(-1) for p in net.parameters()]).to(self.device)

    def _params(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        out, a = {}, 0
        for name, shape, n in self.shapes:
            out[name] = theta[a:a + n].view(shape)
            a += n
        return out

    def _logits(self, theta: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(self.net, self._params(theta), (X,))

    def _augment(self, X: torch.Tensor) -> torch.Tensor:
        n = X.shape[0]
        flip = torch.rand(n, generator=self.aug_gen) < 0.5
        shift = torch.randint(0, 9, (n, 2), generator=self.aug_gen)
        padded = torch.nn.functional.pad(X, (4, 4, 4, 4))
        rows = [padded[j, :, shift[j, 0]:shift[j, 0] + 32, shift[j, 1]:shift[j, 1] + 32] for j in range(n)]
        out = torch.stack(rows)
        return torch.where(flip.to(X.device)[:, None, None, None], out.flip(3), out)

    def _logits_features(self, theta: torch.Tensor, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits (n, classes), representation (n, 512): the input of the last linear layer)."""
        seen: list[torch.Tensor] = []
        handle = self.net[-1].register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
        try:
            logits = self._logits(theta, X)
        finally:
            handle.remove()
        return logits, seen[0]

    def grad(self, theta: torch.Tensor, idx: torch.Tensor, k: int = 0, *, decorr: float = 0.0,
             logit_scale: torch.Tensor | None = None) -> torch.Tensor:
        """Minibatch gradient (P,) of the mean cross-entropy on the training images ``idx``; ``decorr`` = β adds
        FedDecorr's β·:func:`~.model.decorr_loss` of the representation before the last linear layer,
        ``logit_scale`` (classes,) multiplies the logits (FedRS's restricted softmax), as in :mod:`.model`."""
        from .model import decorr_loss

        idx = idx.to(self.device)
        X = self.Xtr[idx]
        if self.augment:
            X = self._augment(X)
        th = theta.detach().requires_grad_(True)
        with autocast(self.fast, self.device):
            logits, feats = self._logits_features(th, prepare_input(X, self.fast, self.device))
        logits, feats = logits.float(), feats.float()
        if logit_scale is not None:
            logits = logits * logit_scale.to(logits)
        loss = torch.nn.functional.cross_entropy(logits, self.ytr[idx])
        if decorr:
            loss = loss + decorr * decorr_loss(feats)
        (g,) = torch.autograd.grad(loss, th)
        return g

    @torch.no_grad()
    def _loss_acc(self, theta: torch.Tensor, X: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
        loss, correct = 0.0, 0
        for a in range(0, len(y), self.eval_batch):
            logits = self._logits(theta, X[a:a + self.eval_batch])
            yb = y[a:a + self.eval_batch]
            loss += float(torch.nn.functional.cross_entropy(logits, yb, reduction="sum"))
            correct += int((logits.argmax(1) == yb).sum())
        return loss / len(y), correct / len(y)

    def round_metrics(self, theta: torch.Tensor) -> tuple[float, float]:
        """(loss on the fixed training subsample, test accuracy in [0, 1])."""
        return (self._loss_acc(theta, self.Xtr[self.eval_idx], self.ytr[self.eval_idx])[0],
                self._loss_acc(theta, self.Xte, self.yte)[1])

    def final_metrics(self, theta: torch.Tensor) -> tuple[float, float]:
        """(test loss, test accuracy in [0, 1])."""
        return self._loss_acc(theta, self.Xte, self.yte)


def cnn_learner(image: Any, setup: dict[str, Any], seed: int) -> CnnLearner:
    """The learner of one seed from the ``image`` config section (plain dict) and the seed's CIFAR setup."""
    from .data import CIFAR_CLASSES

    return CnnLearner(image["model"], setup["X_train"], setup["y_train"], setup["X_test"], setup["y_test"],
                      CIFAR_CLASSES[image["dataset"]], device=image["device"], augment=image["augment"], seed=seed,
                      width=image.get("width", 1.0), fast=image.get("fast"))
