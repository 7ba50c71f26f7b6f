"""Training of the magnets study: the nested generator (all widths jointly, online distillation from the full
width; MaGNeTS Sec. 3.4 [R: loss weights]) and the evaluator CNN whose 64-d features define the Fréchet distance
[R: our stand-in for the Inception network of FID]."""
from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .method import nested_loss
from .model import NestedMaskedTransformer


def build_model(model_cfg: Mapping[str, Any], vocab: int, n_classes: int = 10, seq_len: int = 49
                ) -> NestedMaskedTransformer:
    """The generator from the ``model`` config section (dim, depth, heads, mlp_ratio, widths)."""
    return NestedMaskedTransformer(vocab=vocab, n_classes=n_classes, seq_len=seq_len, dim=model_cfg["dim"],
                                   depth=model_cfg["depth"], heads=model_cfg["heads"],
                                   mlp_ratio=model_cfg["mlp_ratio"], widths=tuple(model_cfg["widths"]))


def lr_at(step: int, steps: int, lr: float, warmup: int) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay to 0 at ``steps``."""
    if step < warmup:
        return lr * (step + 1) / warmup
    return 0.5 * lr * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))


def train_generator(tokens: np.ndarray, labels: np.ndarray, model_cfg: Mapping[str, Any],
                    train_cfg: Mapping[str, Any], vocab: int, seed: int, *, n_classes: int = 10,
                    device: str = "cpu") -> tuple[NestedMaskedTransformer, dict]:
    """Train the nested generator on tokens (n, N) (uint8, or uint16 for K > 256) with class labels (n,) in
    0..n_classes-1 for ``train_cfg['steps']`` AdamW steps (batch ``batch_size``, warm-up + cosine) on ``device``
    (batches and masks are drawn on the CPU generator, so the draws do not depend on the device). Returns (model in
    eval mode, curves {"loss", "ce_f<f>", "kd_f<f>": list per step, "seconds": float})."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = build_model(model_cfg, vocab, n_classes=n_classes, seq_len=tokens.shape[1]).to(device)
    # foreach: the multi-tensor AdamW, the same numbers as the per-tensor loop (bit for bit; tested) in fewer ops
    opt = torch.optim.AdamW(model.parameters(), lr=train_cfg["lr"], weight_decay=train_cfg["weight_decay"],
                            betas=(0.9, 0.96), foreach=True)
    X = torch.as_tensor(tokens.astype(np.int64))
    y = torch.as_tensor(labels.astype(np.int64))
    curves: dict[str, list[float]] = {"loss": []}
    steps, t0 = int(train_cfg["steps"]), time.perf_counter()
    model.train()
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, train_cfg["lr"], train_cfg["warmup"])
        idx = torch.randint(0, len(X), (train_cfg["batch_size"],), generator=gen)
        loss, parts = nested_loss(model, X[idx], y[idx], gen, lambda_ce=train_cfg["lambda_ce"],
                                  lambda_kd=train_cfg["lambda_kd"], label_smoothing=train_cfg["label_smoothing"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        curves["loss"].append(float(loss.detach()))
        for k, v in parts.items():
            curves.setdefault(k, []).append(v)
    curves["seconds"] = time.perf_counter() - t0
    return model.eval(), curves


class EvaluatorCNN(nn.Module):
    """conv16 → pool → conv32 → pool → FC64 (features, before ReLU) → FC10, on (B, 1, 28, 28) images."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 16, 3, padding=1), nn.Conv2d(16, 32, 3, padding=1)
        self.fc, self.out = nn.Linear(32 * 7 * 7, 64), nn.Linear(64, 10)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Images (B, 784) in [0, 1] → features (B, 64)."""
        x = x.view(-1, 1, 28, 28)
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(F.relu(self.features(x)))


def train_evaluator(X: np.ndarray, y: np.ndarray, epochs: int, batch_size: int = 64, lr: float = 1e-3,
                    seed: int = 0) -> EvaluatorCNN:
    """Train the evaluator CNN (Adam) on images X (n, 784) in [0, 1] with labels y for ``epochs`` epochs."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    net = EvaluatorCNN()
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    Xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.long)
    net.train()
    for _ in range(epochs):
        perm = torch.randperm(len(Xt), generator=gen)
        for i in range(0, len(Xt), batch_size):
            b = perm[i:i + batch_size]
            loss = F.cross_entropy(net(Xt[b]), yt[b])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return net.eval()


@torch.no_grad()
def evaluator_outputs(net: EvaluatorCNN, X: np.ndarray, batch_size: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """(features (n, 64) float64, predicted classes (n,) int64) of images X (n, 784)."""
    feats, preds = [], []
    Xt = torch.as_tensor(np.asarray(X), dtype=torch.float32)
    for i in range(0, len(Xt), batch_size):
        f = net.features(Xt[i:i + batch_size])
        feats.append(f.double().numpy())
        preds.append(net.out(F.relu(f)).argmax(1).numpy())
    return np.concatenate(feats), np.concatenate(preds)
