"""gpu-check builder of data_remix (issue 39; :mod:`icml25.core.gpucheck`): one paper train step of the ``joint``
arm with the study's own model — :func:`~.train.build_model` with ``encoder: resnet18`` (two ResNet-18 from scratch,
:func:`~.model.resnet18_fusion`, ``train.resnet_width``, ``train.resnet_init``) — as :func:`~.train.train_arm`
performs it: :func:`~.train.train_step` in mode "av" (:func:`~.method.masked_forward`, :func:`~.train.joint_loss`
with α, β) and :func:`~.train.make_optimizer` (Adam, ``train.weight_decay``, the joint arm's lr), on a batch of
``train.batch_size`` clips at Kinetics-Sounds' paper input shapes: log-spectrograms (257, 454) (:mod:`.audio`:
16 kHz x 10 s, n_fft 512, hop 353) and 2 uint8 frames 3x224x224 (normalised inside the encoder).

Kinetics-Sounds has 3.5x CREMA-D's training clips; CREMA-D's steps are counted at this step too, an over-estimate
(its spectrogram is (257, 188), the frames are the same). Remix's reassembled batches run both encoders
(:func:`~.method.masked_forward` zeroes a feature, not a pass), so every arm is counted at this step. Not in the
step: the per-epoch assignment pass of the Remix arms (a no-grad forward of the training set), test accuracies,
probes. Steps per run: ``train.epochs`` x ceil(training clips / batch) summed over the paper datasets; runs:
arms x seeds.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from icml25.core.config import to_dict
from icml25.core.gpucheck import Bench

from .train import build_model, make_optimizer, train_step

#: training clips of the OGM-GE split lists: CREMA-D exact (README "Data"); Kinetics-Sounds ≈ 23.6 k (README
#: "Data": from the lists' sizes; YouTube clips that cannot be fetched reduce it)
TRAIN_CLIPS = {"cremad": 6698, "kinetics_sounds": 23_600}


def spectrogram_shape(spec: dict[str, Any]) -> tuple[int, int]:
    """(n_fft // 2 + 1, 1 + L // hop), L = round(seconds x sample_rate): :func:`.audio.log_spectrogram`'s output."""
    return spec["n_fft"] // 2 + 1, 1 + int(round(spec["seconds"] * spec["sample_rate"])) // spec["hop"]


def build(config: Any, shapes: str, device: torch.device) -> Bench:
    cfg = to_dict(config)
    ks = cfg["kinetics_sounds"]
    train = {**cfg["train"], "encoder": cfg["encoder"], "device": str(device)}
    if shapes == "paper":
        batch, (f, t), frames, side = train["batch_size"], spectrogram_shape(ks), ks["frames"], ks["image_size"]
    else:  # tiny: the same classes at width 2, batch 4, small spectrograms and frames
        batch, (f, t), frames, side = 4, (17, 12), 2, 32
        train = {**train, "resnet_width": 2}
    labels = {"y": np.array([ks["n_classes"] - 1])}
    model = build_model({"train": labels, "test": labels}, train, seed=0).train()
    opt = make_optimizer(model, "joint", train)
    gen = torch.Generator().manual_seed(0)
    x_a = torch.randn(batch, f, t, generator=gen).to(device)
    x_v = torch.randint(0, 256, (batch, frames, 3, side, side), dtype=torch.uint8, generator=gen).to(device)
    y = (torch.arange(batch) % ks["n_classes"]).to(device)
    alpha, beta = float(train["alpha"]), float(train["beta"])
    gammas = {"v": float(train["gamma1"]), "a": float(train["gamma2"])}

    def step() -> None:
        train_step(model, opt, x_a, x_v, y, "av", alpha, beta, gammas)

    bs, epochs = int(cfg["train"]["batch_size"]), int(cfg["train"]["epochs"])
    per_epoch = {ds: math.ceil(TRAIN_CLIPS[ds] / bs) for ds in cfg["datasets"]}
    return Bench(model=f"FusionNet(2 x ResNet18Encoder width {train['resnet_width']}; audio {f}x{t}, "
                       f"{frames} frames 3x{side}x{side}; batch {batch})", module=model, step=step,
                 steps_per_run=epochs * sum(per_epoch.values()), runs=len(cfg["arms"]) * len(cfg["seeds"]),
                 note=f"{epochs} epochs x ({' + '.join(f'{ds} {n}' for ds, n in per_epoch.items())}) steps of "
                      f"batch {bs} (Kinetics-Sounds ~23.6 k clips, approximate), all at the Kinetics-Sounds step; "
                      f"{len(cfg['arms'])} arms x {len(cfg['seeds'])} seeds; Remix assignment passes, test "
                      "accuracies and probes not counted")
