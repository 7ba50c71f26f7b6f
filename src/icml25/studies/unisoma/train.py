"""Training of the unisoma arms (spec "Training"; Unisoma, ICML 2025, Sec. 4 and the official configs).

Inputs and targets are normalised per entity and channel with training-set statistics (:func:`data.fit_normalisers`).
Loss: Σ_m [relL2(Δpos) + relL2(stress) + relL2(PEEQ)] on normalised targets; a target channel constant over the
training set (the rubber's PEEQ, identically 0) is left out, since its relative error is undefined. AdamW with a
per-step cosine schedule from ``lr`` to ``lr · final_lr_factor``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np
import torch
from torch import Tensor, nn

from .data import model_arrays
from .model import Implicit, Unisoma, UnisomaConfig, knn_edges, matched_implicit, param_count, relative_l2

#: target channels of a deformable: (name, slice)
FIELDS = (("pos", slice(0, 3)), ("stress", slice(3, 4)), ("peeq", slice(4, 5)))


@dataclass
class Batchable:
    """Normalised tensors of one split: lists per entity, first dim = samples."""

    loads: list[Tensor]
    rigids: list[Tensor]
    deformables: list[Tensor]
    edges: list[tuple[Tensor, Tensor]]
    targets: list[Tensor]

    def __len__(self) -> int:
        return self.loads[0].shape[0]

    def take(self, idx: Tensor) -> "Batchable":
        return Batchable([x[idx] for x in self.loads], [x[idx] for x in self.rigids],
                         [x[idx] for x in self.deformables], [(l[idx], i[idx]) for l, i in self.edges],
                         [x[idx] for x in self.targets])


def raw_edge_lengths(arrays: Mapping[str, np.ndarray], k: int) -> list[np.ndarray]:
    """kNN edge lengths (S, E, 1) per deformable on the initial positions (for the normalisers)."""
    defs = model_arrays(arrays)["deformables"]
    return [knn_edges(torch.from_numpy(np.asarray(d, dtype=np.float32)), k)[0].numpy() for d in defs]


def to_tensors(arrays: Mapping[str, np.ndarray], norm: Mapping[str, np.ndarray], k: int,
               dtype: torch.dtype = torch.float32) -> Batchable:
    """Normalise a stacked split (schema keys, see :func:`data.stack_samples`) into model tensors."""
    m = model_arrays(arrays)

    def nz(x: np.ndarray, key: str) -> Tensor:
        return torch.as_tensor((x - norm[f"{key}_mean"]) / norm[f"{key}_std"], dtype=dtype)

    edges = []
    for i, d in enumerate(m["deformables"]):
        length, index = knn_edges(torch.as_tensor(np.asarray(d), dtype=torch.float32), k)
        edges.append((nz(length.numpy(), f"edges{i}"), index))
    return Batchable([nz(x, f"loads{i}") for i, x in enumerate(m["loads"])],
                     [nz(x, f"rigids{i}") for i, x in enumerate(m["rigids"])],
                     [nz(x, f"deformables{i}") for i, x in enumerate(m["deformables"])], edges,
                     [nz(x, f"targets{i}") for i, x in enumerate(m["targets"])])


def active_fields(norm: Mapping[str, np.ndarray], n_deformables: int) -> list[list[tuple[str, list[int]]]]:
    """Per deformable, the target fields and their channels that are not constant over the training set (the
    z displacement of this 2-D data and the rubber's PEEQ are constant 0: they are predicted as the constant)."""
    out = []
    for m in range(n_deformables):
        const = norm[f"targets{m}_const"]
        chans = [(name, [c for c in range(sl.start, sl.stop) if not const[c]]) for name, sl in FIELDS]
        out.append([(name, cs) for name, cs in chans if cs])
    return out


def loss_fn(preds: list[Tensor], targets: list[Tensor], fields: list[list[tuple[str, slice]]]) -> Tensor:
    """Σ_m Σ_field relL2(pred[..., field], target[..., field]) on normalised values."""
    return sum(relative_l2(p[..., sl], t[..., sl]) for p, t, fs in zip(preds, targets, fields) for _, sl in fs)


def build_model(arm: str, model_cfg: Any) -> tuple[nn.Module, dict]:
    """The arm's model and its architecture dict (saved with the weights)."""
    ucfg = UnisomaConfig(n_loads=2, n_rigids=2, n_deformables=2, width=model_cfg.width, n_slices=model_cfg.n_slices,
                         n_layers=model_cfg.n_layers, n_heads=model_cfg.n_heads, mlp_ratio=model_cfg.mlp_ratio,
                         use_edge=arm != "unisoma_noedge",
                         contact_pairs=tuple(tuple(p) for p in model_cfg.contact_pairs))
    if arm in ("unisoma", "unisoma_noedge"):
        return Unisoma(ucfg), {"kind": "unisoma", **ucfg.__dict__}
    if arm == "implicit":
        icfg = matched_implicit(UnisomaConfig(**{**ucfg.__dict__, "use_edge": True}),
                                max_layers=model_cfg.implicit_max_layers)
        return Implicit(icfg), {"kind": "implicit", **icfg.__dict__}
    raise ValueError(f"unknown arm {arm!r} (known: unisoma, unisoma_noedge, implicit)")


def model_from_arch(arch: Mapping[str, Any]) -> nn.Module:
    from .model import ImplicitConfig

    arch = dict(arch)
    kind = arch.pop("kind")
    if kind == "unisoma":
        arch["contact_pairs"] = tuple(tuple(p) for p in arch["contact_pairs"])
        return Unisoma(UnisomaConfig(**arch))
    return Implicit(ImplicitConfig(**arch))


@torch.no_grad()
def predict(model: nn.Module, data: Batchable, batch: int = 16) -> list[Tensor]:
    """Normalised predictions per deformable, (S, N_m, 5)."""
    model.eval()
    outs = []
    for start in range(0, len(data), batch):
        b = data.take(torch.arange(start, min(start + batch, len(data))))
        outs.append(model(b.loads, b.rigids, b.deformables, b.edges))
    return [torch.cat([o[m] for o in outs]) for m in range(len(outs[0]))]


def val_metrics(model: nn.Module, data: Batchable, fields) -> dict[str, float]:
    """Normalised relative L2 per field, averaged over the deformables where the field is active."""
    preds = predict(model, data)
    out = {}
    for name, _ in FIELDS:
        vals = [float(relative_l2(p[..., sl], t[..., sl])) for p, t, fs in zip(preds, data.targets, fields)
                for n, sl in fs if n == name]
        if vals:
            out[f"rel_l2_{name}"] = float(np.mean(vals))
    return out


def train_model(arm: str, train: Batchable, val: Batchable, fields, model_cfg: Any, train_cfg: Any, seed: int,
                on_epoch: Callable[[int, dict], None] | None = None) -> tuple[nn.Module, dict, dict]:
    """Train one arm from seed ``seed`` (initialisation and batch order).

    Returns ``(model, arch, history)``; history has per-epoch ``loss`` and validation metrics, ``param_count``
    and ``seconds``. ``on_epoch(epoch, metrics)`` is called after every epoch (for MLflow).
    """
    torch.manual_seed(seed)
    model, arch = build_model(arm, model_cfg)
    # foreach: the same per-tensor AdamW arithmetic as the default single-tensor loop (bitwise equal), fewer calls
    opt = torch.optim.AdamW(model.parameters(), lr=train_cfg.lr, weight_decay=train_cfg.weight_decay, foreach=True)
    steps_per_epoch = math.ceil(len(train) / train_cfg.batch)
    total = steps_per_epoch * train_cfg.epochs
    floor = train_cfg.final_lr_factor

    def lr_at(step: int) -> float:
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * step / max(total, 1)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    gen = torch.Generator().manual_seed(seed)
    history: dict[str, list] = {"loss": []}
    t0 = time.perf_counter()
    for epoch in range(train_cfg.epochs):
        model.train()
        perm, losses = torch.randperm(len(train), generator=gen), []
        for start in range(0, len(train), train_cfg.batch):
            b = train.take(perm[start:start + train_cfg.batch])
            loss = loss_fn(model(b.loads, b.rigids, b.deformables, b.edges), b.targets, fields)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
        metrics = {"loss": float(np.mean(losses)), **{f"val_{k}": v for k, v in val_metrics(model, val, fields).items()}}
        for k, v in metrics.items():
            history.setdefault(k, []).append(v)
        if on_epoch:
            on_epoch(epoch, metrics)
    history["param_count"] = param_count(model)
    history["seconds"] = time.perf_counter() - t0
    return model, arch, history
