"""gpu-check builder of coastalbench (issue 39; :mod:`icml25.core.gpucheck`): one AdamW step of the study's own
:class:`~.model.CoastalViT` at the paper's sizes (patch 16, width 768, 12 blocks, 12 heads) on the real grid
598 x 898 coarsened by ``model.coarsen`` (README), batch ``train.batch_size``, MSE on synthetic fields. Steps per
run: epochs x ceil(hourly training records / batch), the training months being ``remote.first_month`` ..
``last_month`` less the test and validation months (730.5 records a month); runs: ViT arms x seeds.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from icml25.core.gpucheck import Bench

from .emulator import IN_CH, OUT_CH, build_model

GRID = (598, 898)  #: the real ROMS rho grid (README)
RECORDS_PER_MONTH = 730.5  #: hourly records


def _months(first: str, last: str) -> int:
    (y0, m0), (y1, m1) = (map(int, first.split("-")), map(int, last.split("-")))
    return (y1 - y0) * 12 + (m1 - m0) + 1


def build(config: Any, shapes: str, device: torch.device) -> Bench:
    mo, tr, rem = config.model, config.train, config.remote
    if shapes == "paper":
        c = max(1, getattr(mo, "coarsen", 1))
        hw, model_cfg, batch = (-(-GRID[0] // c), -(-GRID[1] // c)), mo, tr.batch_size
    else:
        hw, batch = (24, 32), 2
        model_cfg = mo.model_copy(update={"patch": 8, "dim": 32, "depth": 1, "heads": 2})
    net = build_model(model_cfg, hw).to(device).train()
    opt = torch.optim.AdamW(net.parameters(), lr=tr.lr, weight_decay=tr.weight_decay)
    x = torch.randn(batch, IN_CH, *hw, device=device)
    target = torch.randn(batch, OUT_CH, *hw, device=device)
    lead = torch.ones(batch, device=device)

    def step() -> None:
        loss = torch.nn.functional.mse_loss(net(x, lead), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    train_months = _months(rem.first_month, rem.last_month) - rem.test_months - rem.val_months
    per_epoch = math.ceil(train_months * RECORDS_PER_MONTH / tr.batch_size)
    vit_arms = [a for a in config.arms if a.startswith("vit")]
    return Bench(model=f"CoastalViT(p{model_cfg.patch}, d{model_cfg.dim}, L{model_cfg.depth}, {hw[0]}x{hw[1]})",
                 module=net, step=step, steps_per_run=tr.epochs * per_epoch, runs=len(vit_arms) * len(config.seeds),
                 note=f"{tr.epochs} epochs x {per_epoch} steps ({train_months} training months, hourly); "
                      f"{len(vit_arms)} ViT arms x {len(config.seeds)} seeds")
