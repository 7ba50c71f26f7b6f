"""gpu-check builder of sard (issue 39; :mod:`icml25.core.gpucheck`): one paper train step of the ``sard`` arm on
CIFAR-10 with the study's own classes — the rejector :class:`~.model.ResNet18` (CIFAR form, base width
``cifar10.width``, 3 outputs: g and the two experts) built by :func:`~.model.build_rejector` from the train stage's
:func:`~.stages.rejector_settings`, on a batch of ``train.batch_size`` flattened 32x32 RGB images in [0, 1] with
costs in [0, 1]^3: :func:`~.train.batch_loss` (the SARD smooth surrogate with one PGD point per agent, each
``train.steps`` PGD steps at budget ``train.eps``), Adam. The main model g (the same ResNet-18 class, trained in
preprocess: ``cifar10.main_epochs`` epochs per seed), the per-epoch validation attack, the test attacks and the other
paper datasets (California Housing MLP, VOC 2007 ResNet-18 at 128x128) are not in the step. Steps per run:
``cifar10.epochs`` x ceil(rejector-train split / batch); runs: trained arms x seeds, every arm counted at the SARD
step (an upper bound: ``clean_l2d`` has no PGD).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from icml25.core.config import to_dict
from icml25.core.gpucheck import Bench

from .config import trained_arms
from .data import split_indices
from .experiment import arm_settings
from .model import build_rejector
from .stages import rejector_settings
from .train import batch_loss

CIFAR10_PER_CLASS = 6_000  #: images per class, train + test batches pooled (:mod:`.agents`, ``prepare_cifar10``)
N_AGENTS = 3  #: g and two experts (``cifar10.expert_classes``)


def build(config: Any, shapes: str, device: torch.device) -> Bench:
    settings = to_dict(config)
    spec = rejector_settings(config, "cifar10")
    train = dict(settings["train"])
    if shapes == "paper":
        batch = int(train["batch_size"])
    else:  # tiny: the same class at width 2 on 8x8 images, batch 4, 2 PGD steps
        spec = {**spec, "width": 2, "image_shape": [3, 8, 8]}
        batch, train = 4, {**train, "steps": 2}
    d_in = math.prod(spec["image_shape"])
    net = build_rejector(spec, d_in, N_AGENTS, seed=0).to(device).train()
    opt = torch.optim.Adam(net.parameters(), lr=float(train["lr"]))  # as train.train_rejector
    arm = arm_settings(settings, "sard")
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(batch, d_in, generator=gen).to(device)
    c = torch.rand(batch, N_AGENTS, generator=gen).to(device)
    clip = (0.0, 1.0)  # image datasets: inputs clipped to [0, 1]

    def step() -> None:
        loss = batch_loss(net, x, c, arm, train, clip, gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    labels = np.repeat(np.arange(10), CIFAR10_PER_CLASS)  # the stratified split's sizes (seed-independent)
    n_train = len(split_indices(len(labels), settings["cifar10"]["split"], 0, stratify=labels)["train"])
    per_epoch = math.ceil(n_train / int(settings["train"]["batch_size"]))
    arms = trained_arms(settings["arms"])
    return Bench(model=f"ResNet18 rejector (width {spec['width']}, {spec['image_shape']}; SARD PGD-{train['steps']} "
                       f"x {N_AGENTS} agents; batch {batch})", module=net, step=step,
                 steps_per_run=spec["epochs"] * per_epoch, runs=len(arms) * len(settings["seeds"]),
                 note=f"CIFAR-10 only: {spec['epochs']} epochs x ceil({n_train} rejector-train images / "
                      f"{settings['train']['batch_size']}) = {per_epoch} steps; {len(arms)} trained arms x "
                      f"{len(settings['seeds'])} seeds, all at the SARD step (clean_l2d has no PGD: upper bound); "
                      "g's training, validation/test attacks, California Housing and VOC 2007 not counted")
