"""Paper-scale training and evaluation of one official experiment (Unisoma, ICML 2025, Sec. 5; the official
``exp_<dataset>_<task>.py`` recipes, no code copied).

* **Models**: :class:`~.model.Unisoma` with the experiment's entity counts, contact pairs and output channels at the
  configured width (paper C 128, M 32, P 2, 8 heads, MLP ratio 4, kNN k = 3 edges), and the implicit baseline
  [R] with its depth matched to Unisoma's parameter count (±10 %).
* **Long-time** (final state from the initial geometry and the load): per step a batch of samples (stacked when
  their node counts agree, else one sample per step, as the official batch size 1 of the ragged sets), loss
  Σ_m Σ_field relL2 on normalised targets, AdamW/Adam (per experiment), cosine per step to lr / lr_decay.
  Test metric per sample: relative L2 of the final positions ‖(x₀ + Δ̂) − x₁‖ / ‖x₁‖, mean over deformables.
* **Autoregressive**: one trajectory at a time (shuffled), its frames in chunks of ``batch`` consecutive frames;
  Gaussian noise σ on the normalised current positions; loss Σ_m MSE on normalised targets; Adam; cosine stepped
  per trajectory. Test metric per trajectory: the rollout from frame 0 on the model's own predictions (edges
  rebuilt each frame), mean over frames of Σ_m RMSE(x̂_{t+1}, x_{t+1}) in physical units (the official metric).
* The checkpoint with the lowest validation metric (every ``eval_every`` epochs and at the last) is kept.
"""
from __future__ import annotations

import copy
import math
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from .model import Implicit, ImplicitConfig, Unisoma, UnisomaConfig, knn_edges, matched_implicit, param_count, \
    relative_l2
from .paper_data import AUTO, FIELDS, LONG, Experiment, LongSample, Trajectory


# ----------------------------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------------------------
def build_model(exp: Experiment, arm: str, model_cfg: Any) -> tuple[nn.Module, dict]:
    """The arm's model for experiment ``exp`` and its architecture dict (saved with the weights)."""
    ucfg = UnisomaConfig(n_loads=exp.n_loads, n_rigids=exp.n_rigids, n_deformables=exp.n_deformables,
                         width=model_cfg.width, n_slices=model_cfg.n_slices, n_layers=model_cfg.n_layers,
                         n_heads=model_cfg.n_heads, mlp_ratio=model_cfg.mlp_ratio, out_dim=exp.out_dim,
                         use_edge=arm != "unisoma_noedge", contact_pairs=exp.contact_pairs)
    if arm in ("unisoma", "unisoma_noedge"):
        return Unisoma(ucfg), {"kind": "unisoma", **ucfg.__dict__}
    if arm == "implicit":
        icfg = matched_implicit_config(ucfg, model_cfg.implicit_max_layers)
        return Implicit(icfg), {"kind": "implicit", **icfg.__dict__}
    raise ValueError(f"unknown arm {arm!r} (known: unisoma, unisoma_noedge, implicit)")


def matched_implicit_config(ucfg: UnisomaConfig, max_layers: int, tol: float = 0.10) -> ImplicitConfig:
    """The implicit baseline [R] at Unisoma's width with the depth closest in parameters; when no depth comes
    within ±``tol`` (one block is a large share of a small model, e.g. deforming plate's 1/1/1 entities), the
    (depth, width) pair closest in parameters over widths of multiples of the head count within [C/2, 2C]
    (parameters are affine in depth: two models per width suffice)."""
    icfg = matched_implicit(ucfg, max_layers=max_layers)
    target = param_count(Unisoma(ucfg))
    if abs(param_count(Implicit(icfg)) / target - 1) <= tol:
        return icfg
    best, h = None, ucfg.n_heads
    for width in range(max(h, (ucfg.width // 2) // h * h), 2 * ucfg.width + 1, h):
        one, two = (param_count(Implicit(ImplicitConfig(**{**icfg.__dict__, "width": width, "n_layers": d})))
                    for d in (1, 2))
        for depth in range(1, max_layers + 1):
            gap = (abs(one + (depth - 1) * (two - one) - target), abs(width - ucfg.width))
            if best is None or gap < best[0]:
                best = (gap, width, depth)
    return ImplicitConfig(**{**icfg.__dict__, "width": best[1], "n_layers": best[2]})


def model_from_arch(arch: Mapping[str, Any]) -> nn.Module:
    arch = dict(arch)
    kind = arch.pop("kind")
    if kind == "unisoma":
        arch["contact_pairs"] = tuple(tuple(p) for p in arch["contact_pairs"])
        return Unisoma(UnisomaConfig(**arch))
    return Implicit(ImplicitConfig(**arch))


# ----------------------------------------------------------------------------------------------------------------
# Normalised tensors
# ----------------------------------------------------------------------------------------------------------------
class Norm:
    """Normalisers of one experiment (:func:`paper_data.fit_normalisers`) as tensors on ``device``."""

    def __init__(self, arrays: Mapping[str, np.ndarray], device: str = "cpu"):
        self.t = {k: torch.as_tensor(np.asarray(v), dtype=torch.float32, device=device) for k, v in arrays.items()}

    def fwd(self, x: Tensor, key: str) -> Tensor:
        return (x - self.t[f"{key}_mean"]) / self.t[f"{key}_std"]

    def inv_target(self, y: Tensor, m: int) -> Tensor:
        """Normalised prediction -> physical; channels constant in training are the constant."""
        phys = y * self.t[f"targets{m}_std"] + self.t[f"targets{m}_mean"]
        return torch.where(self.t[f"targets{m}_const"] > 0, self.t[f"targets{m}_mean"], phys)


def active_fields(norm: Mapping[str, np.ndarray], exp: Experiment) -> list[list[tuple[str, list[int]]]]:
    """Per deformable, the output fields and their channels that vary in training."""
    out = []
    for m in range(exp.n_deformables):
        const = np.asarray(norm[f"targets{m}_const"])
        chans = [(name, [c for c in range(sl.start, sl.stop) if not const[c]]) for name, sl in FIELDS[exp.out_dim]]
        out.append([(n, cs) for n, cs in chans if cs])
    return out


def _edges(defs_phys: Sequence[Tensor], norm: Norm, k: int) -> list[tuple[Tensor, Tensor]]:
    out = []
    for i, d in enumerate(defs_phys):
        length, index = knn_edges(d, k)
        out.append((norm.fwd(length, f"edges{i}"), index))
    return out


def model_inputs(loads: Sequence[Tensor], rigids: Sequence[Tensor], defs: Sequence[Tensor], norm: Norm, k: int,
                 noise: float = 0.0, gen: torch.Generator | None = None):
    """Physical batched entity tensors -> normalised (loads, rigids, deformables, edges); edges on the physical
    positions; ``noise``: σ of Gaussian noise added to the normalised deformable positions (training only)."""
    ln = [norm.fwd(x, f"loads{i}") for i, x in enumerate(loads)]
    rn = [norm.fwd(x, f"rigids{i}") for i, x in enumerate(rigids)]
    dn = [norm.fwd(x, f"deformables{i}") for i, x in enumerate(defs)]
    if noise > 0:
        dn = [x + noise * torch.randn(x.shape, generator=gen, device="cpu").to(x.device) for x in dn]
    return ln, rn, dn, _edges(defs, norm, k)


def _t(xs: Sequence[np.ndarray], device: str) -> list[Tensor]:
    return [torch.as_tensor(np.stack(x) if isinstance(x, (list, tuple)) else x, dtype=torch.float32,
                            device=device) for x in xs]


def long_batches(items: Sequence[LongSample], order: Sequence[int], batch: int) -> list[list[int]]:
    """Batches of sample indices in ``order``: consecutive runs of at most ``batch`` samples whose entity node
    counts all agree (so they stack); a sample whose counts differ from its predecessor's starts a new batch."""
    def sig(s: LongSample):
        return tuple(x.shape for g in (s.loads, s.rigids, s.deformables) for x in g)

    out: list[list[int]] = []
    for i in order:
        if out and len(out[-1]) < batch and sig(items[out[-1][-1]]) == sig(items[i]):
            out[-1].append(int(i))
        else:
            out.append([int(i)])
    return out


def _stack_long(items: Sequence[LongSample], idx: Sequence[int], device: str):
    g = lambda name: [torch.as_tensor(np.stack([getattr(items[i], name)[e] for i in idx]), dtype=torch.float32,
                                      device=device) for e in range(len(getattr(items[idx[0]], name)))]
    return g("loads"), g("rigids"), g("deformables"), g("targets")


# ----------------------------------------------------------------------------------------------------------------
# Losses and metrics
# ----------------------------------------------------------------------------------------------------------------
def long_loss(preds: Sequence[Tensor], targets_n: Sequence[Tensor], fields) -> Tensor:
    """Σ_m Σ_field relL2(pred[..., channels], target[..., channels]) on normalised values (official criterion)."""
    return sum(relative_l2(p[..., cs], t[..., cs]) for p, t, fs in zip(preds, targets_n, fields) for _, cs in fs)


def _rel(pred: np.ndarray, true: np.ndarray) -> float:
    return float(np.linalg.norm(pred - true) / max(np.linalg.norm(true), 1e-300))


@torch.no_grad()
def long_metrics(model: nn.Module, items: Sequence[LongSample], norm: Norm, fields, k: int, device: str
                 ) -> dict[str, np.ndarray]:
    """Per-sample physical metrics (S,), means over deformables: ``rel_l2_pos`` (final positions), ``rel_l2_disp``
    and, where the experiment has them and they vary, ``rel_l2_stress`` / ``rel_l2_peeq``; also ``val_loss``
    (Σ over deformables and fields of the relative L2, the official validation criterion)."""
    model.eval()
    out: dict[str, list[float]] = {}
    for i in range(len(items)):
        loads, rigids, defs, targets = _stack_long(items, [i], device)
        preds = model(*model_inputs(loads, rigids, defs, norm, k))
        per: dict[str, list[float]] = {}
        val = 0.0
        for m, (p, x0, t) in enumerate(zip(preds, defs, targets)):
            p = norm.inv_target(p, m).double().cpu().numpy()[0]
            x0, t = x0.double().cpu().numpy()[0], t.double().cpu().numpy()[0]
            per.setdefault("rel_l2_pos", []).append(_rel(x0 + p[:, :3], x0 + t[:, :3]))
            per.setdefault("rel_l2_disp", []).append(_rel(p[:, :3], t[:, :3]))
            val += per["rel_l2_pos"][-1]
            for name, cs in fields[m]:
                if name != "pos":
                    per.setdefault(f"rel_l2_{name}", []).append(_rel(p[:, cs], t[:, cs]))
                    val += per[f"rel_l2_{name}"][-1]
        for key, v in per.items():
            out.setdefault(key, []).append(float(np.mean(v)))
        out.setdefault("val_loss", []).append(val)
    return {key: np.asarray(v) for key, v in out.items()}


@torch.no_grad()
def rollout_metrics(model: nn.Module, trajs: Sequence[Trajectory], norm: Norm, k: int, device: str
                    ) -> dict[str, np.ndarray]:
    """Per-trajectory physical metrics (S,): ``rollout_rmse`` = mean over frames of Σ_m RMSE of the autoregressive
    rollout from frame 0 (official metric); ``static_rmse`` the same for predicting no motion (x̂_t = x_0), the
    reference of the adequacy gate; ``val_loss`` = ``rollout_rmse``."""
    model.eval()
    rmse, static = [], []
    for tr in trajs:
        defs = _t([d for d in tr.deformables], device)
        rig = _t([r for r in tr.rigids], device)
        cur = [d[0:1] for d in defs]
        n_t = defs[0].shape[0] - 1
        acc = acc0 = 0.0
        for t in range(n_t):
            loads = [torch.cat([r[t:t + 1], r[t + 1:t + 2] - r[t:t + 1]], -1) for r in rig]
            rigids = [r[t:t + 1] for r in rig]
            preds = model(*model_inputs(loads, rigids, cur, norm, k))
            cur = [c + norm.inv_target(p, m) for m, (c, p) in enumerate(zip(cur, preds))]
            acc += sum(float(torch.sqrt(((c - d[t + 1:t + 2]) ** 2).mean())) for c, d in zip(cur, defs))
            acc0 += sum(float(torch.sqrt(((d[0:1] - d[t + 1:t + 2]) ** 2).mean())) for d in defs)
        rmse.append(acc / n_t)
        static.append(acc0 / n_t)
    return {"rollout_rmse": np.asarray(rmse), "static_rmse": np.asarray(static), "val_loss": np.asarray(rmse)}


def test_metrics(model: nn.Module, exp: Experiment, items, norm_arrays: Mapping[str, np.ndarray], k: int,
                 device: str) -> dict[str, np.ndarray]:
    norm = Norm(norm_arrays, device)
    if exp.task == LONG:
        return long_metrics(model, items, norm, active_fields(norm_arrays, exp), k, device)
    return rollout_metrics(model, items, norm, k, device)


# ----------------------------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------------------------
def _optimizer(exp: Experiment, model: nn.Module, lr: float) -> torch.optim.Optimizer:
    cls = torch.optim.AdamW if exp.optimizer == "adamw" else torch.optim.Adam
    return cls(model.parameters(), lr=lr, weight_decay=exp.weight_decay)


def _cosine(opt: torch.optim.Optimizer, total: int, lr_decay: float):
    """Cosine annealing from lr to lr / lr_decay over ``total`` scheduler steps (PyTorch CosineAnnealingLR)."""
    floor = 1.0 / lr_decay
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(s, total) / max(total, 1))))


def train_experiment(exp: Experiment, arm: str, train_items, val_items, norm_arrays: Mapping[str, np.ndarray],
                     model_cfg: Any, *, lr: float, epochs: int, eval_every: int, seed: int, device: str = "cpu",
                     on_epoch: Callable[[int, dict], None] | None = None) -> tuple[nn.Module, dict, dict]:
    """Train ``arm`` on experiment ``exp`` from ``seed`` (initialisation, order, noise). Returns ``(model with
    the best validation checkpoint, arch, history)``; history: per-epoch ``loss``, ``val_loss`` where validated,
    ``best_epoch``, ``param_count``, ``seconds``."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model, arch = build_model(exp, arm, model_cfg)
    model.to(device)
    norm, fields, k = Norm(norm_arrays, device), active_fields(norm_arrays, exp), model_cfg.knn_k
    opt = _optimizer(exp, model, lr)
    if exp.task == LONG:
        n_steps = len(long_batches(train_items, range(len(train_items)), exp.batch))
    else:
        n_steps = len(train_items)
    sched = _cosine(opt, n_steps * epochs, exp.lr_decay)
    history: dict[str, Any] = {"loss": [], "val_loss": [], "val_epochs": []}
    best, best_state, best_epoch = math.inf, None, -1
    t0 = time.perf_counter()
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(train_items), generator=gen).tolist()
        losses = []
        if exp.task == LONG:
            for idx in long_batches(train_items, perm, exp.batch):
                loads, rigids, defs, targets = _stack_long(train_items, idx, device)
                preds = model(*model_inputs(loads, rigids, defs, norm, k))
                loss = long_loss(preds, [norm.fwd(t, f"targets{m}") for m, t in enumerate(targets)], fields)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                losses.append(float(loss.detach()))
        else:
            for j in perm:
                tr = train_items[j]
                defs, rig = _t(tr.deformables, device), _t(tr.rigids, device)
                n_t = defs[0].shape[0] - 1
                for b in range(0, n_t, exp.batch):
                    e = min(b + exp.batch, n_t)
                    loads = [torch.cat([r[b:e], r[b + 1:e + 1] - r[b:e]], -1) for r in rig]
                    rigids = [r[b:e] for r in rig]
                    cur = [d[b:e] for d in defs]
                    targets = [norm.fwd(d[b + 1:e + 1] - d[b:e], f"targets{m}") for m, d in enumerate(defs)]
                    preds = model(*model_inputs(loads, rigids, cur, norm, k, noise=exp.noise, gen=gen))
                    loss = sum(nn.functional.mse_loss(p, t) for p, t in zip(preds, targets))
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    losses.append(float(loss.detach()))
                sched.step()
        metrics = {"loss": float(np.mean(losses))}
        history["loss"].append(metrics["loss"])
        if (epoch + 1) % eval_every == 0 or epoch == epochs - 1:
            val = float(np.mean((long_metrics(model, val_items, norm, fields, k, device) if exp.task == LONG else
                                 rollout_metrics(model, val_items, norm, k, device))["val_loss"]))
            metrics["val_loss"] = val
            history["val_loss"].append(val)
            history["val_epochs"].append(epoch)
            if val < best:
                best, best_epoch = val, epoch
                best_state = copy.deepcopy({n: p.detach().cpu() for n, p in model.state_dict().items()})
        if on_epoch:
            on_epoch(epoch, metrics)
    model.load_state_dict(best_state)
    history.update(best_epoch=best_epoch, best_val_loss=best, param_count=param_count(model),
                   seconds=time.perf_counter() - t0)
    return model.cpu(), arch, history


def edge_lengths(task: str, items, k: int) -> list[np.ndarray]:
    """All kNN edge lengths (E, 1) per deformable over the training set (every frame but the last for
    trajectories), for the edge normalisers."""
    per: list[list[np.ndarray]] = []
    for it in items:
        frames = [it.deformables] if task == LONG else [[d[:-1] for d in it.deformables]]
        for defs in frames:
            if not per:
                per = [[] for _ in defs]
            for i, d in enumerate(defs):
                x = torch.as_tensor(np.asarray(d), dtype=torch.float32)
                x = x[None] if x.ndim == 2 else x
                per[i].append(knn_edges(x, k)[0].reshape(-1, 1).numpy())
    return [np.concatenate(v, 0) for v in per]


__all__ = ["AUTO", "LONG", "build_model", "model_from_arch", "train_experiment", "test_metrics", "edge_lengths",
           "long_batches", "active_fields", "Norm"]
