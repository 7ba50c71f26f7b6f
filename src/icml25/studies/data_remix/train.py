"""Training one arm on one dataset (paper §3.4 "training procedure" and the released training script [V]).

Arms (identical model, initialisation, optimiser, schedule and data order unless the arm says otherwise):

* ``joint``: the released baseline, every epoch L = CE(h([a;v])) + α CE(h_a(a)) + β CE(h_v(v)), α = β = 0.5.
* ``joint_noaux``: plain late fusion, L = CE(h([a;v])) (α = β = 0; the unimodal heads stay untrained).
* ``remix``: ``warmup`` epochs of the joint loss, then every epoch an assignment pass (§3.2) and reassembled
  unimodal batches (§3.3): D_v batches first, L = CE(h([0;v])) + γ₁ CE(h_v(v)); then D_a batches,
  L = CE(h([a;0])) + γ₂ CE(h_a(a)), γ₁ = γ₂ = 1.
* ``remix_code_lr``: ``remix`` at the released learning rate (``remix_code_lr``, 5e-5) while the baselines keep
  ``lr`` (the released pair) [R].
* ``solo_a`` / ``solo_v``: every batch is an audio (visual) batch of the remix loss: a single-modality reference.

Optimiser [V]: Adam(β = (0.9, 0.999), ε = 1e-8, weight decay 1e-4), StepLR(``lr_step``, ×``lr_gamma``) per epoch.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .method import assign_modalities, logit_grad_cosine, masked_forward, masked_grad_max, remix_batches
from .model import FusionNet, resnet18_fusion

ARMS = ("joint", "joint_noaux", "remix", "remix_code_lr", "solo_a", "solo_v")
REMIX_ARMS = ("remix", "remix_code_lr")
SOLO_MODE = {"solo_a": "a", "solo_v": "v"}
PROBE_ROWS = 256  #: training rows used for the grad_cos_av diagnostic


def _t(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x))


def arm_lr(arm: str, cfg: Mapping[str, Any]) -> float:
    """Learning rate of an arm: ``remix_code_lr`` for that arm, ``lr`` for every other."""
    return float(cfg["remix_code_lr"] if arm == "remix_code_lr" else cfg["lr"])


def joint_loss(out: tuple[torch.Tensor, ...], y: torch.Tensor, alpha: float, beta: float) -> torch.Tensor:
    """Warm-up / joint loss CE(fused) + α CE(h_a) + β CE(h_v) (batch means)."""
    fused, la, lv = out
    loss = F.cross_entropy(fused, y)
    if alpha:
        loss = loss + alpha * F.cross_entropy(la, y)
    if beta:
        loss = loss + beta * F.cross_entropy(lv, y)
    return loss


def unimodal_loss(out: tuple[torch.Tensor, ...], y: torch.Tensor, mode: str, gamma: float) -> torch.Tensor:
    """Loss of a reassembled batch: CE(fused with the other modality zeroed) + γ CE(this modality's head)."""
    fused, la, lv = out
    return F.cross_entropy(fused, y) + gamma * F.cross_entropy(la if mode == "a" else lv, y)


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def forward_chunks(model: nn.Module, x_a: torch.Tensor, x_v: torch.Tensor, mode: str = "av",
                   batch: int = 4096) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`..method.masked_forward` over a whole split in chunks of ``batch`` rows on the model's device, in the
    model's current mode; the three logits (N, C) come back on the CPU."""
    dev = _device(model)
    outs = [masked_forward(model, x_a[i:i + batch].to(dev), x_v[i:i + batch].to(dev), mode)
            for i in range(0, len(x_a), batch)]
    return tuple(torch.cat([o[k] for o in outs]).cpu() for k in range(3))


@torch.no_grad()
def predict_probs(model: nn.Module, x_a: torch.Tensor, x_v: torch.Tensor, batch: int = 4096):
    """Softmax of (fused, h_a, h_v) over a whole split in eval mode (the assignment pass of §3.2), each (N, C)."""
    was = model.training
    model.eval()
    outs = forward_chunks(model, x_a, x_v, "av", batch)
    model.train(was)
    return tuple(o.softmax(1).numpy() for o in outs)


@torch.no_grad()
def accuracies(model: nn.Module, split: Mapping[str, np.ndarray], fused_mode: str = "av",
               batch: int = 4096) -> dict[str, float]:
    """Test accuracies (fractions): fused head (in ``fused_mode``), audio head, visual head."""
    was = model.training
    model.eval()
    x_a, x_v, y = _t(split["x_a"]), _t(split["x_v"]), _t(split["y"])
    fused, la, lv = forward_chunks(model, x_a, x_v, "av", batch)
    if fused_mode != "av":
        fused = forward_chunks(model, x_a, x_v, fused_mode, batch)[0]
    model.train(was)
    acc = lambda logits: float((logits.argmax(1) == y).double().mean())  # noqa: E731
    return {"fused_acc": acc(fused), "head_a_acc": acc(la), "head_v_acc": acc(lv)}


@torch.no_grad()
def grad_cos_av(model: nn.Module, split: Mapping[str, np.ndarray], rows: int = PROBE_ROWS) -> float:
    """Diagnostic: :func:`..method.logit_grad_cosine` of an audio-only and a visual-only pass of the first rows."""
    was = model.training
    model.eval()
    dev = _device(model)
    x_a, x_v, y = (_t(split[k][:rows]).to(dev) for k in ("x_a", "x_v", "y"))
    cos = logit_grad_cosine(masked_forward(model, x_a, x_v, "a")[0], masked_forward(model, x_a, x_v, "v")[0], y)
    model.train(was)
    return cos


def build_model(data: Mapping, cfg: Mapping[str, Any], seed: int) -> FusionNet:
    """FusionNet sized for ``data``, initialised from ``torch.manual_seed(seed)`` (identical for every arm), on
    ``cfg["device"]`` (default cpu). ``cfg["encoder"]`` "mlp" (default): MLP encoders (``hidden``, ``feat``);
    "resnet18": the paper's two ResNet-18 (:func:`..model.resnet18_fusion`, ``resnet_width``, ``resnet_init``)."""
    tr = data["train"]
    n_classes = int(max(tr["y"].max(), data["test"]["y"].max())) + 1
    torch.manual_seed(seed)
    if cfg.get("encoder", "mlp") == "resnet18":
        model = resnet18_fusion(n_classes, init=str(cfg.get("resnet_init", "official")),
                                width=int(cfg.get("resnet_width", 64)))
    else:
        model = FusionNet(d_a=tr["x_a"].shape[1], d_v=tr["x_v"].shape[1], n_classes=n_classes,
                          hidden=int(cfg["hidden"]), feat=int(cfg["feat"]))
    return model.to(cfg.get("device", "cpu"))


def make_optimizer(model: nn.Module, arm: str, cfg: Mapping[str, Any]) -> torch.optim.Optimizer:
    """The released optimiser [V]: Adam(β = (0.9, 0.999), ε = 1e-8, ``weight_decay``) at :func:`arm_lr`."""
    return torch.optim.Adam(model.parameters(), lr=arm_lr(arm, cfg), betas=(0.9, 0.999), eps=1e-8, foreach=True,
                            weight_decay=float(cfg["weight_decay"]))


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x_a: torch.Tensor, x_v: torch.Tensor, y: torch.Tensor,
               mode: str, alpha: float, beta: float, gammas: Mapping[str, float]) -> tuple[torch.Tensor, float | None]:
    """One batch of :func:`train_arm` (inputs on the model's device): :func:`..method.masked_forward` in ``mode``,
    :func:`joint_loss` (mode "av", α, β) or :func:`unimodal_loss` (γ of the mode), backward, optimiser step.
    Returns (loss, :func:`..method.masked_grad_max` after backward for a unimodal batch, else None)."""
    opt.zero_grad(set_to_none=True)
    out = masked_forward(model, x_a, x_v, mode)
    loss = joint_loss(out, y, alpha, beta) if mode == "av" else unimodal_loss(out, y, mode, gammas[mode])
    loss.backward()
    gmax = masked_grad_max(model, mode) if mode != "av" else None
    opt.step()
    return loss, gmax


def routing_fractions(assign: np.ndarray, z: np.ndarray | None) -> dict[str, float]:
    """Fraction of audio-corrupt (z = 1) rows routed to D_a and of visual-corrupt (z = 2) rows routed to D_v."""
    if z is None:
        return {"route_a_given_acorrupt": float("nan"), "route_v_given_vcorrupt": float("nan")}
    za, zv = z == 1, z == 2
    return {"route_a_given_acorrupt": float(assign[za].mean()) if za.any() else float("nan"),
            "route_v_given_vcorrupt": float((~assign[zv]).mean()) if zv.any() else float("nan")}


def train_arm(data: Mapping, arm: str, cfg: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Train ``arm`` on ``data`` ({"train", "test"} splits) with data-order seed ``seed``.

    ``cfg`` keys: epochs, warmup, batch_size, lr, remix_code_lr, weight_decay, lr_step, lr_gamma, alpha, beta,
    gamma1, gamma2, hidden, feat; optional encoder, resnet_width, resnet_init, device, eval_batch
    (:func:`build_model`). Returns ``model`` (trained), ``curve`` (one dict per epoch: epoch, loss,
    fused_acc, head_a_acc, head_v_acc, n_a, n_v, n_seen, max_masked_grad, route_a_given_acorrupt,
    route_v_given_vcorrupt, grad_cos_av; n_a / n_v / routes NaN-free only on remix epochs) and ``assign`` (the
    last assignment pass, (N,) bool, or None).
    """
    if arm not in ARMS:
        raise ValueError(f"train_arm: unknown arm {arm!r} (known: {ARMS})")
    tr, te = data["train"], data["test"]
    model = build_model(data, cfg, seed)
    opt = make_optimizer(model, arm, cfg)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=int(cfg["lr_step"]), gamma=float(cfg["lr_gamma"]))
    x_a, x_v, y = _t(tr["x_a"]), _t(tr["x_v"]), _t(tr["y"])
    dev, eval_batch = _device(model), int(cfg.get("eval_batch", 4096))
    z = tr.get("z")
    N, bs = len(y), int(cfg["batch_size"])
    rng = np.random.default_rng([seed, 1])
    alpha, beta = (0.0, 0.0) if arm == "joint_noaux" else (float(cfg["alpha"]), float(cfg["beta"]))
    gammas = {"v": float(cfg["gamma1"]), "a": float(cfg["gamma2"])}
    curve, assign = [], None
    model.train()
    for epoch in range(int(cfg["epochs"])):
        row: dict[str, Any] = {"epoch": epoch, "n_a": float("nan"), "n_v": float("nan"),
                               "max_masked_grad": float("nan"), **routing_fractions(np.zeros(0, bool), None)}
        if arm in SOLO_MODE:
            perm = rng.permutation(N)
            batches = [(SOLO_MODE[arm], perm[i:i + bs]) for i in range(0, N, bs)]
        elif arm in REMIX_ARMS and epoch >= int(cfg["warmup"]):
            _, pa, pv = predict_probs(model, x_a, x_v, eval_batch)
            assign = assign_modalities(pa, pv)
            batches = remix_batches(assign, bs, rng)
            row.update(n_a=int(assign.sum()), n_v=int(N - assign.sum()), **routing_fractions(assign, z))
        else:
            perm = rng.permutation(N)
            batches = [("av", perm[i:i + bs]) for i in range(0, N, bs)]
        losses, n_seen, gmax = [], 0, 0.0
        for mode, idx in batches:
            ti = torch.from_numpy(idx)
            loss, g = train_step(model, opt, x_a[ti].to(dev), x_v[ti].to(dev), y[ti].to(dev), mode, alpha, beta,
                                 gammas)
            if g is not None:
                gmax = max(gmax, g)
            losses.append(float(loss.detach()) * len(idx))
            n_seen += len(idx)
        sched.step()
        if mode != "av" or arm in SOLO_MODE:
            row["max_masked_grad"] = gmax
        row.update(loss=sum(losses) / max(n_seen, 1), n_seen=n_seen,
                   **accuracies(model, te, SOLO_MODE.get(arm, "av"), eval_batch), grad_cos_av=grad_cos_av(model, tr))
        curve.append(row)
    return {"model": model, "curve": curve, "assign": assign}
