"""gpu-check builder of fedecado (issue 39; :mod:`icml25.core.gpucheck`): one client step of the paper's image
experiment with the study's own :class:`~.cifar.CnnLearner` (VGG-11 on CIFAR-10 at ``image.model: vgg11``; the
flat-θ minibatch gradient of :meth:`~.cifar.CnnLearner.grad`, with the paper's augmentation, and the SGD update
θ ← θ - lr g), on synthetic 32x32 images. Steps per run: rounds x active clients x mean local epochs x minibatches
per client (50,000 training images split evenly on average); runs: image arms x image seeds.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from icml25.core.gpucheck import Bench

from .cifar import CnnLearner
from .config import IMAGE_ARMS

TRAIN_IMAGES = {"cifar10": 50_000, "cifar100": 50_000}
CLASSES = {"cifar10": 10, "cifar100": 100}


def build(config: Any, shapes: str, device: torch.device) -> Bench:
    im = config.image
    if im.model not in ("vgg11", "resnet34"):
        raise ValueError(f"fedecado gpu-check: image.model {im.model!r} has no GPU paper path (vgg11 | resnet34)")
    batch = im.batch_size if shapes == "paper" else 2  # tiny: VGG-11 stays at its paper size (32 px inputs)
    n = max(batch, 64 if shapes == "paper" else 8)
    rng = np.random.default_rng(0)
    classes = CLASSES.get(im.dataset, 10)
    X = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
    y = rng.integers(0, classes, size=n).astype(np.int64)
    learner = CnnLearner(im.model, X, y, X[:8], y[:8], classes, device=device.type, augment=im.augment, seed=0,
                         n_train_eval=8, eval_batch=8, fast=im.fast)
    theta = learner.init(0)
    lr = float(np.mean(im.lr_range))
    gen = torch.Generator().manual_seed(0)

    def step() -> None:
        nonlocal theta
        idx = torch.randint(0, n, (batch,), generator=gen)
        theta = theta - lr * learner.grad(theta, idx)

    n_train = im.n_train or TRAIN_IMAGES.get(im.dataset, 50_000)
    active = max(1, round(im.participation * im.n_clients))
    local = (im.epoch_range[0] + im.epoch_range[1]) / 2 * math.ceil(n_train / im.n_clients / im.batch_size)
    arms = [a for a in config.arms if a in IMAGE_ARMS]
    return Bench(model=f"{im.model} (CnnLearner, batch {batch})", module=learner.net, step=step,
                 steps_per_run=int(im.rounds * active * local), runs=len(arms) * len(im.seeds),
                 note=f"{im.rounds} rounds x {active} clients x {local:g} local steps; {len(arms)} image arms x "
                      f"{len(im.seeds)} seeds")
