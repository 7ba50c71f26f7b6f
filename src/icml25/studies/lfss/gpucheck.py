"""gpu-check builder of lfss (issue 39; :mod:`icml25.core.gpucheck`): the paper's train step of the study's own
:class:`~.model.LFSSNet` (ResNet-18, CIFAR stem, projector/predictor 4096 -> 256, batch 256 of 32x32 RGB images):
two colour views, online/target/predictor, BYOL loss + L_ss against the old network, SGD, EMA update, with the
paper config's speed switches (``train.fast``, CUDA only). The prototype loss (from epoch eta + 1) and the epoch's
k-means are not in the step. Steps per run: epochs x (CIFAR-10 train images // batch); runs: arms x seeds.
"""
from __future__ import annotations

from typing import Any

import torch

from icml25.core.gpucheck import Bench
from icml25.core.speed import autocast, prepare_input, prepare_model

from .data import augment_colour
from .method import byol_loss, sample_stability_loss
from .model import LFSSNet
from .train import _param_groups

CIFAR10_TRAIN = 50_000  #: training images of CIFAR-10 (data.per_class and n_images null at paper scale)


def build(config: Any, shapes: str, device: torch.device) -> Bench:
    tr, mo = config.train, config.model
    if shapes == "paper":
        batch, side, hidden, dim, backbone, channels = tr.batch_size, 32, mo.hidden, mo.dim, mo.backbone, mo.channels
    else:  # tiny: the same class with its small CNN backbone (a ResNet-18 step takes seconds on one CPU core)
        batch, side, hidden, dim, backbone, channels = 4, 16, 32, 16, "small_cnn", (8, 16)
    net = LFSSNet(channels, hidden, dim, in_channels=3, backbone=backbone, stem=mo.stem).to(device).train()
    fast = tr.fast
    net = prepare_model(net, fast, device, compile_part=net.encoder_q)
    opt = torch.optim.SGD(_param_groups(net, tr.weight_decay, tr.wd_bias_bn), lr=tr.lr, momentum=tr.momentum)
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(batch, 3, side, side, generator=gen).to(device)
    aug = config.augment

    def step() -> None:
        x1, x2 = (prepare_input(augment_colour(x, gen, crop_scale=aug.crop_scale), fast, device) for _ in range(2))
        with autocast(fast, device):
            q1, q2 = net.online(x1), net.online(x2)
            k1, k2 = net.target(x1), net.target(x2)
            p1, p2 = net.predictor(q1), net.predictor(q2)
            o1, o2 = net.old_embed(x1), net.old_embed(x2)
        q1, q2, k1, k2, p1, p2, o1, o2 = (t.float() for t in (q1, q2, k1, k2, p1, p2, o1, o2))
        loss = 0.5 * (byol_loss(p1, k2) + byol_loss(p2, k1))
        loss = loss + tr.lam * 0.5 * (sample_stability_loss(q1, o1, tr.temperature)
                                      + sample_stability_loss(q2, o2, tr.temperature))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        net.ema_update(tr.ema)

    n = config.data.n_images or CIFAR10_TRAIN
    return Bench(model=f"LFSSNet({backbone}, {hidden}->{dim}, batch {batch})", module=net, step=step,
                 steps_per_run=tr.epochs * (n // tr.batch_size), runs=len(config.arms) * len(config.seeds),
                 note=f"{tr.epochs} epochs x {n // tr.batch_size} steps of batch {tr.batch_size}; "
                      f"{len(config.arms)} arms x {len(config.seeds)} seeds; fast={fast.model_dump()} (CUDA only)")
