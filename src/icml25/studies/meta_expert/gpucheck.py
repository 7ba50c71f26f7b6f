"""gpu-check builder of meta_expert (:mod:`icml25.core.gpucheck`): one paper train step of the ``meta_expert`` arm
with the study's own classes — :class:`~.model.SSLNet` on the WRN-28-2 with H/M/T BN branches, MFF + DEA — on a
batch of 64 labelled + 2 × 128 unlabelled 32×32 RGB images (weak / strong views made on the device by
:func:`~.data.weak_augment_rgb` / :func:`~.data.strong_augment_rgb`): the three experts' logit-adjusted supervised
losses and FixMatch losses, the DEA's supervised and unsupervised losses (the steady state after ``est_epoch`` + 2),
SGD, EMA update. Evaluation every 1024 iterations is not in the step. Steps per run: ``train.iterations``; runs:
arms × seeds × (settings × profiles). The baselines' steps (one or three experts, no DEA) cost about the same
backbone work, so every run is counted at the meta_expert step.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from icml25.core.config import to_dict
from icml25.core.gpucheck import Bench

from . import data as D
from .config import run_settings
from .method import N_EXPERTS, aggregate, class_balanced_weights, expert_unsup_loss, interval_of
from .model import ema_update
from .train import _optimizer, build_model


def build(config: Any, shapes: str, device: torch.device) -> Bench:
    cfg = to_dict(config)
    if shapes != "paper":  # tiny: the same classes at WRN-10-1, batch 4 (the rehearsal's sizes)
        cfg["model"] = {**cfg["model"], "depth": 10, "widen": 1}
        cfg["train"] = {**cfg["train"], "batch": 4}
    m, t, aug = cfg["method"], cfg["train"], cfg["augment"]
    net = build_model("meta_expert", cfg, 0).to(device).train()
    ema = build_model("meta_expert", cfg, 0).to(device).eval()
    opt = _optimizer(net, t)
    gen = torch.Generator().manual_seed(0)
    bl, bu = t["batch"], t["batch"] * t["uratio"]
    x_lab = torch.randint(0, 256, (bl, 32, 32, 3), dtype=torch.uint8, generator=gen)
    x_unl = torch.randint(0, 256, (bu, 32, 32, 3), dtype=torch.uint8, generator=gen)
    y = (torch.arange(bl) % D.NUM_CLASSES).to(device)
    counts = torch.tensor([1500, 859, 492, 282, 161, 92, 53, 30, 17, 10])  # CIFAR-10-LT N1 1500, gamma 150
    log_prior = torch.log(counts.float() / counts.sum()).to(device)
    taus = torch.tensor(m["taus"], dtype=torch.float32, device=device)
    cut1, cut2 = m["cut1"], m["cut2"]
    cb_class = class_balanced_weights(counts, m["cb_beta"]).to(device)
    cb_interval = class_balanced_weights(torch.bincount(interval_of(torch.arange(10).repeat_interleave(counts),
                                                                    cut1, cut2), minlength=3), m["cb_beta"]).to(device)
    fusion_w = torch.full((N_EXPERTS,), 1.0 / N_EXPERTS)

    def to_float(x: torch.Tensor) -> torch.Tensor:
        return x.to(device).permute(0, 3, 1, 2).float().div_(255.0)

    def step() -> None:
        xl = D.weak_augment_rgb(to_float(x_lab), gen, aug["crop_pad"], aug["flip"])
        xu = to_float(x_unl)
        xw = D.weak_augment_rgb(xu, gen, aug["crop_pad"], aug["flip"])
        xs = D.strong_augment_rgb(xu, gen, aug["crop_pad"], aug["flip"], aug["ra_ops"], aug["ra_cutout"])
        out = net(D.normalise(torch.cat([xl, xw, xs]), "cifar10"), log_prior, taus)
        z = out["logits"]
        zl, zw = z[:, :bl], z[:, bl:bl + bu]
        loss = sum(F.cross_entropy(zl[k] + taus[k] * log_prior, y) for k in range(N_EXPERTS))
        for k in range(N_EXPERTS):
            loss = loss + m["lambda_u"] * expert_unsup_loss(out["branches"][k, :, bl + bu:], zw[k], m["threshold"],
                                                            cut1, cut2)[0]
        o, w = out["o"], out["w"]
        loss = loss + F.cross_entropy(aggregate(zl, w[:bl], "train", taus, log_prior), y, weight=cb_class)
        loss = loss + F.cross_entropy(o[:bl], interval_of(y, cut1, cut2), weight=cb_interval)
        fuse = F.cross_entropy(o[bl + bu:], o[bl:bl + bu].detach().argmax(1))
        for k in range(N_EXPERTS):
            br = out["branches"][k]
            fused = torch.einsum("nj,jnc->nc", w, br - br.min(dim=2, keepdim=True).values)
            fuse = fuse + fusion_w[k] * F.cross_entropy(fused[bl + bu:], fused[bl:bl + bu].detach().argmax(1))
        loss = loss + m["lambda_u"] * fuse
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        ema_update(ema, net, t["ema"])

    runs_per_seed = sum(len(st["profiles"]) for st in run_settings(cfg))
    runs = len(cfg["arms"]) * len(cfg["seeds"]) * runs_per_seed
    mod = cfg["model"]
    return Bench(model=f"SSLNet(WRN-{mod['depth']}-{mod['widen']}, 3 experts x H/M/T BN, MFF + DEA; batch "
                       f"{bl} + 2x{bu})", module=net, step=step, steps_per_run=t["iterations"], runs=runs,
                 note=f"{t['iterations']} iterations; {len(cfg['arms'])} arms x {len(cfg['seeds'])} seeds x "
                      f"{runs_per_seed} setting-profiles, each counted at the meta_expert step")
