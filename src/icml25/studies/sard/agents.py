"""Agents and costs of the sard paper scale: CIFAR-10, California Housing, Pascal VOC 2007 (all [R]; the paper's
experiment section was not read, see the README).

* ``cifar10`` (60,000 images, the archive's train and test batches pooled; x in [0, 1], (3, 32, 32)): stratified
  split 30 % agents / 40 % rejector-train / 10 % validation / 20 % test, as digits. Main model g = a ResNet-18
  classifier (:class:`.model.ResNet18`, the paper's classifier [R]) trained on the agent split with classes
  ``main_weak_classes`` subsampled to ``main_weak_keep`` (weak there), SGD with momentum, cosine schedule, random
  crop + flip. Experts simulated on class subsets (as digits: right w.p. ``expert_p`` on their set, else a uniform
  label). Costs c₀ = 1{g ≠ y}, c_j = 1{m_j ≠ y} + β_j, divided by 1 + max β.
* ``california_housing`` (20,640 × 8 scikit-learn features, standardised with agent-split statistics; target
  standardised too): unstratified split; g = ridge on ``main_features``; expert 1 = ridge on all features fitted on
  the agent rows north of the agent-split median latitude, expert 2 on the rows with median income above its
  median. Costs as diabetes: min(1, (ŷ − y)²/``cost_scale``) + β_j, divided by 1 + max β.
* ``voc2007`` (trainval + test pooled, 9,963 images; per image the class and box of its largest non-difficult
  object; image resized to ``image_size``², in [0, 1]): unstratified split. g = a ResNet-18 with a class head (20)
  and a box head (4, sigmoid, normalised ``xmin ymin xmax ymax``) trained on the agent split (cross-entropy +
  ``box_weight`` × smooth-ℓ1). *The paper's agents are Faster R-CNN detectors* [R]: torchvision is not a dependency
  of this project and its pretrained detector weights cannot be obtained or pinned offline, so the detector is
  replaced by this single-object multi-task ResNet-18 and the claims on VOC carry an ``untested`` entry for the
  detector agents (``evaluate.py``). Experts: right w.p. ``expert_p`` on their class set, with the true box
  jittered by ``expert_box_noise`` × its size per corner; otherwise a uniform label and a uniform random box.
  Multi-task cost (spec): c = c_cls + λ c_reg with c_cls = 1{ŷ ≠ y}, c_reg = 1 − IoU(b̂, b), plus β_j, divided by
  1 + λ + max β so that c ∈ [0, 1].

Random streams (shared by every arm of a seed): split ``default_rng([seed, 0])``, g's subsample
``default_rng([seed, 1])``, expert draws ``default_rng([seed, 2])``, g's initialisation and minibatches
``torch.manual_seed(seed)`` / ``Generator(seed)`` (CPU generators, so a CUDA run draws the same batches).
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from .model import make_resnet18
from .paper_data import CAL_HOUSING_FEATURES, VOC_CLASSES, box_iou


def _device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("sard: device 'cuda' requested but torch sees no CUDA device (set device: cpu to run on "
                         "the CPU)")
    return torch.device(name)


def _augment(xb: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Random crop (4-pixel zero padding) and horizontal flip per image: (b, C, H, W) → same shape."""
    b, _, h, w = xb.shape
    pad = nn.functional.pad(xb, (4, 4, 4, 4))
    dx = torch.randint(0, 9, (b,), generator=generator).tolist()
    dy = torch.randint(0, 9, (b,), generator=generator).tolist()
    flip = (torch.rand(b, generator=generator) < 0.5).tolist()
    out = torch.stack([pad[i, :, dy[i]:dy[i] + h, dx[i]:dx[i] + w] for i in range(b)])
    return torch.where(torch.tensor(flip, device=xb.device).view(b, 1, 1, 1), out.flip(3), out)


def train_image_model(x: np.ndarray, labels: np.ndarray, boxes: np.ndarray | None, n_classes: int,
                      cfg: Mapping[str, Any], seed: int, device: str = "cpu") -> dict[str, Any]:
    """Train a ResNet-18 main model g: x (n, 3, H, W) uint8, labels (n,), boxes (n, 4) normalised or None.

    Output units: ``n_classes`` logits (+ 4 box outputs through a sigmoid when ``boxes`` is given). Loss:
    cross-entropy (+ ``cfg["box_weight"]`` × smooth-ℓ1 on the box, no flip augmentation then). SGD, momentum 0.9,
    weight decay 5e-4, lr ``cfg["main_lr"]`` with a cosine schedule over ``cfg["main_epochs"]`` epochs, batch
    ``cfg["main_batch_size"]``. Returns the g record of a prepared dataset: ``{"kind": "resnet18", "spec":
    {...}, "state": {name: ndarray}}`` (CPU arrays, so it can be stored in the processed npz)."""
    dev = _device(device)
    multitask = boxes is not None
    n_out = n_classes + (4 if multitask else 0)
    spec = {"image_shape": list(x.shape[1:]), "n_classes": int(n_classes), "multitask": multitask,
            "width": int(cfg["main_width"])}
    model = make_resnet18(spec["image_shape"], n_out, spec["width"], seed).to(dev)
    epochs, bs = int(cfg["main_epochs"]), int(cfg["main_batch_size"])
    opt = torch.optim.SGD(model.parameters(), lr=float(cfg["main_lr"]), momentum=0.9, weight_decay=5e-4)
    steps = max(1, epochs * math.ceil(len(x) / bs))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 0.5 * (1 + math.cos(math.pi * min(k, steps) / steps)))
    gen = torch.Generator().manual_seed(seed)
    xt = torch.from_numpy(x)
    yt = torch.from_numpy(labels.astype(np.int64))
    bt = None if boxes is None else torch.from_numpy(boxes.astype(np.float32))
    model.train()
    for _ in range(epochs):
        for b in torch.randperm(len(x), generator=gen).split(bs):
            if len(b) < 2:  # BatchNorm needs 2 samples; a 1-image tail batch is skipped
                continue
            xb = xt[b].to(dev).float() / 255.0
            if not multitask:
                xb = _augment(xb, gen)
            out = model(xb)
            loss = nn.functional.cross_entropy(out[:, :n_classes], yt[b].to(dev))
            if multitask:
                loss = loss + float(cfg["box_weight"]) * nn.functional.smooth_l1_loss(
                    torch.sigmoid(out[:, n_classes:]), bt[b].to(dev))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
    return {"kind": "resnet18", "spec": spec,
            "state": {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}}


def build_image_model(g: Mapping[str, Any], device: str | torch.device = "cpu") -> nn.Module:
    """The ResNet-18 of a g record (:func:`train_image_model`) in eval mode on ``device``."""
    spec = g["spec"] if isinstance(g["spec"], Mapping) else json.loads(str(g["spec"]))
    n_out = int(spec["n_classes"]) + (4 if spec["multitask"] else 0)
    model = make_resnet18(spec["image_shape"], n_out, int(spec["width"]), 0)
    model.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in g["state"].items()})
    return model.to(device).eval()


@torch.no_grad()
def image_model_predict(model: nn.Module, x: torch.Tensor, n_classes: int, multitask: bool,
                        batch_size: int = 512) -> tuple[np.ndarray, np.ndarray | None]:
    """g's predictions on x (n, C·H·W) or (n, C, H, W) float in [0, 1] (any device): labels (n,) int64 (first
    maximum) and, multi-task, boxes (n, 4) float64 in [0, 1]."""
    labels, boxes = [], []
    for xb in x.split(batch_size):
        out = model(xb.to(next(model.parameters()).device)).float()
        labels.append(out[:, :n_classes].argmax(dim=1).cpu().numpy())
        if multitask:
            boxes.append(torch.sigmoid(out[:, n_classes:]).double().cpu().numpy())
    return np.concatenate(labels).astype(np.int64), (np.concatenate(boxes) if multitask else None)


def _as_float(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(x).float() / 255.0


def multitask_costs(labels: np.ndarray, boxes: np.ndarray, pred_labels: np.ndarray, pred_boxes: np.ndarray,
                    beta, lam: float) -> np.ndarray:
    """c_j = (1{ŷ_j ≠ y} + λ (1 − IoU(b̂_j, b)) + β_j) / (1 + λ + max β) (β₀ = 0): labels (n,), boxes (n, 4),
    pred_labels (n, J+1), pred_boxes (n, J+1, 4) → (n, J+1) in [0, 1]."""
    fee = np.concatenate([[0.0], np.asarray(beta, dtype=np.float64)])
    if pred_labels.ndim != 2 or pred_labels.shape[1] != len(fee) or pred_boxes.shape != (*pred_labels.shape, 4):
        raise ValueError(f"multitask_costs: predictions must be (n, {len(fee)}) labels and (n, {len(fee)}, 4) boxes")
    iou = np.stack([box_iou(pred_boxes[:, j], boxes) for j in range(len(fee))], axis=1)
    return ((pred_labels != labels[:, None]) + lam * (1.0 - iou) + fee) / (1.0 + lam + fee.max())


def simulate_box_experts(labels: np.ndarray, boxes: np.ndarray, competence, p_correct: float, noise: float,
                         n_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Simulated multi-task experts. rng = ``default_rng([seed, 2])``; per expert in order: u ~ U[0,1)^n, random
    labels ~ U{0..K−1}^n, corner noise ~ N(0, 1)^(n, 4), two random corner pairs ~ U[0,1)^(n, 4). An expert
    that knows (y ∈ its set and u < p): label y, box = b + noise · (w, h, w, h) · N(0,1), sorted and clipped to
    [0, 1]; otherwise the random label and the box spanned by the random corners. → labels (n, J), boxes (n, J, 4)."""
    rng = np.random.default_rng([seed, 2])
    n = len(labels)
    out_l = np.empty((n, len(competence)), dtype=np.int64)
    out_b = np.empty((n, len(competence), 4), dtype=np.float64)
    size = np.column_stack([boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]] * 2)
    for j, classes in enumerate(competence):
        u = rng.random(n)
        rand = rng.integers(0, n_classes, size=n)
        jitter = rng.standard_normal((n, 4))
        corners = rng.random((n, 4))
        knows = np.isin(labels, np.asarray(classes)) & (u < p_correct)
        good = np.clip(boxes + noise * size * jitter, 0.0, 1.0)
        good = np.column_stack([np.minimum(good[:, 0], good[:, 2]), np.minimum(good[:, 1], good[:, 3]),
                                np.maximum(good[:, 0], good[:, 2]), np.maximum(good[:, 1], good[:, 3])])
        bad = np.column_stack([np.minimum(corners[:, 0], corners[:, 2]), np.minimum(corners[:, 1], corners[:, 3]),
                               np.maximum(corners[:, 0], corners[:, 2]), np.maximum(corners[:, 1], corners[:, 3])])
        out_l[:, j] = np.where(knows, labels, rand)
        out_b[:, j] = np.where(knows[:, None], good, bad)
    return out_l, out_b


# ---------------------------------------------------------------------------------------------- datasets


def prepare_cifar10(seed: int, cfg: Mapping[str, Any], data: tuple[np.ndarray, np.ndarray], device: str = "cpu"
                    ) -> dict[str, Any]:
    """CIFAR-10 for one seed (module docstring). data = (x (N, 3, 32, 32) uint8, y (N,)) from
    :func:`.paper_data.read_cifar10`. Returns the keys of :func:`.data.prepare_digits` with x kept uint8
    (N, 3, 32, 32) (the processed file stores it once; :func:`.data.prepared_from_arrays` scales it to [0, 1]) and
    g the ResNet-18 record."""
    from .data import _finish, classification_costs, simulate_experts, split_indices

    X, y = data
    idx = split_indices(len(y), cfg["split"], seed, stratify=y)
    a = idx["agents"]
    rng = np.random.default_rng([seed, 1])
    keep = ~np.isin(y[a], np.asarray(cfg["main_weak_classes"])) | (rng.random(len(a)) < float(cfg["main_weak_keep"]))
    g = train_image_model(X[a[keep]], y[a[keep]], None, 10, cfg, seed, device)
    net = build_image_model(g, _device(device))
    g_pred, _ = image_model_predict(net, _as_float(X), 10, False)
    preds = np.column_stack([g_pred, simulate_experts(y, cfg["expert_classes"], float(cfg["expert_p"]), 10, seed)])
    costs = classification_costs(y, preds, cfg["beta"])
    return _finish("cifar10", X, y, idx, preds, costs, g, cfg["beta"], (0.0, 1.0), 1.0)


def prepare_california_housing(seed: int, cfg: Mapping[str, Any], data: tuple[np.ndarray, np.ndarray]
                               ) -> dict[str, Any]:
    """California Housing for one seed (module docstring); data = (X (N, 8) scikit-learn features, y (N,) in
    100,000 $) from :func:`.paper_data.read_california_housing`. Returns the keys of :func:`.data.prepare_diabetes`."""
    from sklearn.linear_model import Ridge

    from .data import _finish, regression_costs, split_indices

    X, yraw = data
    idx = split_indices(len(yraw), cfg["split"], seed)
    a = idx["agents"]
    mu, sd = X[a].mean(axis=0), X[a].std(axis=0)
    x = ((X - mu) / np.where(sd > 0, sd, 1.0)).astype(np.float32)
    y = (yraw - yraw[a].mean()) / yraw[a].std()
    cols = [CAL_HOUSING_FEATURES.index(c) for c in cfg["main_features"]]
    alpha = float(cfg["ridge_alpha"])
    g = Ridge(alpha=alpha).fit(x[a][:, cols], y[a])
    lat, inc = CAL_HOUSING_FEATURES.index("Latitude"), CAL_HOUSING_FEATURES.index("MedInc")
    north = a[X[a, lat] > np.median(X[a, lat])]
    rich = a[X[a, inc] > np.median(X[a, inc])]
    e1 = Ridge(alpha=alpha).fit(x[north], y[north])
    e2 = Ridge(alpha=alpha).fit(x[rich], y[rich])
    preds = np.column_stack([g.predict(x[:, cols]), e1.predict(x), e2.predict(x)])
    costs = regression_costs(y, preds, cfg["beta"], float(cfg["cost_scale"]))
    params = {"coef": np.atleast_1d(g.coef_), "intercept": np.atleast_1d(g.intercept_),
              "classes": np.zeros(0, dtype=np.int64), "columns": np.asarray(cols, dtype=np.int64)}
    return _finish("california_housing", x, y, idx, preds, costs, params, cfg["beta"], None,
                   float(cfg["cost_scale"]))


def prepare_voc2007(seed: int, cfg: Mapping[str, Any], data: tuple[np.ndarray, np.ndarray, np.ndarray],
                    device: str = "cpu") -> dict[str, Any]:
    """VOC 2007 for one seed (module docstring); data = (x (N, 3, S, S) uint8, labels (N,), boxes (N, 4)) from
    :func:`.paper_data.read_voc`. Returns the keys of :func:`.data.prepare_digits` plus ``box`` (N, 4), with
    ``task`` "multitask" and ``cost_scale`` = λ."""
    from .data import _finish, split_indices

    X, y, box = data
    k = len(VOC_CLASSES)
    idx = split_indices(len(y), cfg["split"], seed)
    a = idx["agents"]
    g = train_image_model(X[a], y[a], box[a], k, cfg, seed, device)
    net = build_image_model(g, _device(device))
    g_l, g_b = image_model_predict(net, _as_float(X), k, True)
    e_l, e_b = simulate_box_experts(y, box, cfg["expert_classes"], float(cfg["expert_p"]),
                                    float(cfg["expert_box_noise"]), k, seed)
    lam = float(cfg["lambda_reg"])
    pred_l = np.column_stack([g_l, e_l])
    pred_b = np.concatenate([g_b[:, None], e_b], axis=1)
    costs = multitask_costs(y, box, pred_l, pred_b, cfg["beta"], lam)
    prep = _finish("voc2007", X, y, idx, pred_l, costs, g, cfg["beta"], (0.0, 1.0), lam)
    prep["box"] = box
    prep["task"] = "multitask"
    return prep


def net_main_costs(prep: Mapping[str, Any], x_new: torch.Tensor, rows: np.ndarray) -> np.ndarray:
    """Cost of an image main model g (ResNet-18 record) re-evaluated at x_new (n, d) float in [0, 1] for the
    examples ``rows``: classification 1{ĝ ≠ y} / (1 + max β); multitask (1{ĝ ≠ y} + λ (1 − IoU)) / (1 + λ + max β).
    The network is built once per prep (cached in ``prep["_gnet"]``) on x_new's device."""
    g = prep["g"]
    spec = g["spec"] if isinstance(g["spec"], Mapping) else json.loads(str(g["spec"]))
    net = prep.get("_gnet")
    if net is None or next(net.parameters()).device != x_new.device:
        net = build_image_model(g, x_new.device)
        if isinstance(prep, dict):
            prep["_gnet"] = net
    labels, boxes = image_model_predict(net, x_new, int(spec["n_classes"]), bool(spec["multitask"]))
    y = prep["y"][rows]
    wrong = (labels != y).astype(np.float64)
    if spec["multitask"]:
        lam = float(prep["cost_scale"])
        c = (wrong + lam * (1.0 - box_iou(boxes, prep["box"][rows]))) / (1.0 + lam + max(prep["beta"]))
    else:
        c = wrong / (1.0 + max(prep["beta"]))
    return c.astype(prep["costs"].dtype)
