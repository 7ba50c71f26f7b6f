"""gpu-check builder of morphing_flow (issue 39; :mod:`icml25.core.gpucheck`): one Adam step of the study's own
:class:`~.model.MoFForecaster` (:func:`~.experiment.arm_model`, arm ``mof_flow``, loss :func:`~.train.loss_terms`)
on the paper's largest cell: Traffic (862 series), lookback ``data.Traffic.seq_len``, the longest horizon of
``pred_lens``, the last backbone of ``backbones`` (patch_mamba), batch ``train.batch_size``. An upper bound: every
run is costed at that cell, with every training window every epoch and no early stopping. Steps per run: epochs x
ceil(Traffic training windows / batch) (17,544 hourly rows, 70 % for training); runs: datasets x horizons x
backbones x arms x seeds.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from icml25.core.gpucheck import Bench

from .experiment import arm_model
from .train import loss_terms

TRAFFIC_ROWS, TRAFFIC_SERIES = 17_544, 862  #: hourly rows and sensors of the Autoformer bundle's traffic.csv


def build(config: Any, shapes: str, device: torch.device) -> Bench:
    tr = config.train
    pred_lens = list(config.pred_lens) or [config.data.Traffic.pred_len]
    backbone = config.backbones[-1]
    if shapes == "paper":
        channels, L, H, batch = TRAFFIC_SERIES, config.data.Traffic.seq_len, max(pred_lens), tr.batch_size
    else:
        channels, L, H, batch = 3, 32, 8, 4
    model, lam = arm_model("mof_flow", config.model.model_dump(), tr.lam, backbone, channels, L, H)
    model = model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=tr.lr)
    x = torch.randn(batch, L, channels, device=device)
    y = torch.randn(batch, H, channels, device=device)

    def step() -> None:
        loss, _ = loss_terms(model, x, y, lam)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    windows = int(0.7 * TRAFFIC_ROWS) - config.data.Traffic.seq_len - max(pred_lens) + 1
    per_epoch = math.ceil((tr.windows_per_epoch or windows) / tr.batch_size)
    runs = len(config.datasets) * len(pred_lens) * len(config.backbones) * len(config.arms) * len(config.seeds)
    return Bench(model=f"MoFForecaster({backbone}, C={channels}, L={L}, H={H})", module=model, step=step,
                 steps_per_run=tr.epochs * per_epoch, runs=runs,
                 note=f"upper bound: every run costed at Traffic, H={max(pred_lens)}, {backbone}, {tr.epochs} epochs "
                      f"x {per_epoch} steps, no early stopping; {runs} runs = datasets x horizons x backbones x arms "
                      "x seeds")
