"""gpu-check builder of pid (issue 39; :mod:`icml25.core.gpucheck`): one paper train step of the study's own
:class:`~.resnet.ResNet50` detector (width ``detector.width``, one logit) as :func:`~.paper.train_resnet` performs
it — :func:`~.paper.train_step` (BCE with logits, backward, step) with :func:`~.paper.make_optimizer` (Adam at
``detector.lr``) — on a batch of ``detector.batch`` detector inputs of the ``pid`` arm: r/s of random uint8
``data.crop`` x ``data.crop`` windows (:func:`~.train.detector_input`, made once on the CPU as the DataLoader
workers do, then moved to the device). Decoding, windowing and the residual run in the CPU workers and are not in
the step; nor are the per-epoch validation scoring and the test scoring. Steps per run: ``detector.epochs`` x
ceil(training images / ``detector.batch``), the training images being GenImage SD v1.4's train split (162,000 ai +
162,000 nature, GenImage's Table 1) less the ``data.val_frac`` validation share of each class
(:func:`~.paper.build_index`); runs: arms x seeds (one GPU job each, ``seeds_per_job: 1``). Every arm's step is the
same ResNet-50 on a (3, crop, crop) input, so all are counted at the pid step.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from icml25.core.gpucheck import Bench

from .paper import make_optimizer, train_step
from .resnet import ResNet50
from .train import detector_input

SDV14_TRAIN_PER_CLASS = 162_000  #: GenImage SD v1.4 train images per class (ai, nature)


def build(config: Any, shapes: str, device: torch.device) -> Bench:
    det, res = config.detector, config.residual
    if shapes == "paper":
        batch, crop, width = det.batch, config.data.crop, det.width
    else:  # tiny: the same class (same depth and strides) at width 2 on 32x32 windows, batch 4
        batch, crop, width = 4, 32, 2
    torch.manual_seed(0)
    model = ResNet50(width=width).to(device).train()
    opt = make_optimizer(model, {"det_lr": det.lr})
    lossf = nn.BCEWithLogitsLoss()
    rng = np.random.default_rng(0)
    windows = rng.integers(0, 256, (batch, crop, crop, 3), dtype=np.uint8)
    x = torch.from_numpy(detector_input(windows, "pid", step=res.step, colour_space=res.colour_space,
                                        noise_amp=res.noise_amp, rng=rng, train=True)).to(device)
    y = torch.from_numpy((np.arange(batch) % 2).astype(np.float32)).to(device)

    def step() -> None:
        train_step(model, opt, lossf, x, y)

    val = int(round(config.data.val_frac * SDV14_TRAIN_PER_CLASS))
    n_train = 2 * (SDV14_TRAIN_PER_CLASS - val) * len(config.data.train_generators)
    per_epoch = math.ceil(n_train / det.batch)
    return Bench(model=f"ResNet50 (width {width}, 1 logit; pid r/s input 3x{crop}x{crop}; batch {batch})",
                 module=model, step=step, steps_per_run=det.epochs * per_epoch,
                 runs=len(config.arms) * len(config.seeds),
                 note=f"{det.epochs} epochs x ceil({n_train:,} GenImage SD v1.4 train images (2 x 162,000 less "
                      f"{config.data.val_frac:g} validation) / {det.batch}) = {per_epoch} steps; "
                      f"{len(config.arms)} arms x {len(config.seeds)} seeds; decoding / residual in CPU workers and "
                      "validation / test scoring not counted")
