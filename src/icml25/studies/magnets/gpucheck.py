"""gpu-check builder of magnets (issue 39; :mod:`icml25.core.gpucheck`): one step of the study's own nested
generator training (:class:`~.model.NestedMaskedTransformer` from :func:`~.train.build_model`, the nested loss of
:func:`~.method.nested_loss` over all widths, AdamW with clipping) at the paper's sizes: MaskGIT VQ tokens of
ImageNet-256 (16 x 16 = 256 tokens, codebook ``tokenizer.K``), 1000 classes, batch ``train.batch_size``.
Steps per run: ``train.steps``; runs: arms x seeds.
"""
from __future__ import annotations

from typing import Any

import torch

from icml25.core.gpucheck import Bench

from .method import nested_loss
from .train import build_model

PAPER_TOKENS, PAPER_CLASSES = 256, 1000  #: 16 x 16 VQGAN tokens of a 256 px image; ImageNet classes


def build(config: Any, shapes: str, device: torch.device) -> Bench:
    tr = config.train
    model_cfg = config.model.model_dump()
    if shapes == "paper":
        vocab, n, classes, batch = config.tokenizer.K, PAPER_TOKENS, PAPER_CLASSES, tr.batch_size
    else:
        vocab, n, classes, batch = 16, 16, 10, 4
        model_cfg.update(dim=32, depth=1, heads=4)
    net = build_model(model_cfg, vocab, n_classes=classes, seq_len=n).to(device).train()
    opt = torch.optim.AdamW(net.parameters(), lr=tr.lr, weight_decay=tr.weight_decay, betas=(0.9, 0.96))
    tokens = torch.randint(0, vocab, (batch, n), device=device)
    labels = torch.randint(0, classes, (batch,), device=device)

    def step() -> None:
        with device:  # the masks are drawn on the device (the study draws them on the CPU generator)
            loss, _ = nested_loss(net, tokens, labels, None, lambda_ce=tr.lambda_ce, lambda_kd=tr.lambda_kd,
                                  label_smoothing=tr.label_smoothing)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()

    return Bench(model=f"NestedMaskedTransformer({model_cfg['depth']}x{model_cfg['dim']}, N={n}, K={vocab})",
                 module=net, step=step, steps_per_run=tr.steps, runs=len(config.arms) * len(config.seeds),
                 note=f"{tr.steps} steps of batch {tr.batch_size}; {len(config.arms)} arm x {len(config.seeds)} seeds")
