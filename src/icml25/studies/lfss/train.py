"""Training loop of one arm x seed (Sec. 3 of the paper; Algorithm 1): L = L_n + λ_ss L_ss (+ λ_p L_p after
epoch η), EMA target update after every step, stability and pseudo-labels at every epoch boundary.

Epoch-boundary order [R] (key ``stability.snapshot``): after epoch e the target's clean-view features F_e are
clustered; with ``previous_boundary`` (default) the stability compares F_e with F_{e-1}, the features of the old
network o (the target snapshot of the previous boundary, which it is exactly: its BatchNorm statistics are
frozen), and only then o is refreshed. ``released_order`` refreshes o first, as the released code's order does,
which makes F° = F and s ≡ 1. Pseudo-labels from boundary e train epoch e + 1 when e + 1 > η.

Backbones (``model.backbone``): the small digit CNN of the offline scales or the paper's ResNet-18/34/50
(:mod:`.model`); views (``augment.pipeline``): digit or colour augmentations (:mod:`.data`). ``train.device``
places the networks and the images (cpu, cuda, auto); every random draw (batch order, views, predictor noise)
comes from one CPU generator seeded with the seed, so a seed gives the same draws on every device.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from icml25.core.speed import autocast, prepare_input, prepare_model

from .data import augment, view_fn
from .evaluate import cluster_metrics, mapped_correct, stability_correctness
from .method import byol_loss, kmeans_cosine, prototype_loss, sample_stability_loss, stability_from_labels
from .model import LFSSNet

#: Arms: how each one weights the three losses and which δ it uses for its pseudo-labels (spec "Arms").
#: ``lambda_ss``/``lambda_p`` multiply ``train.lam``; ``delta`` None means ``train.delta``.
ARMS: dict[str, dict[str, Any]] = {
    "base": {"lambda_ss": 0.0, "lambda_p": 1.0, "delta": 0.0},           # L_n + λ L_p on all samples from η
    "lfss": {"lambda_ss": 1.0, "lambda_p": 1.0, "delta": None},          # the method
    "lfss_no_ss": {"lambda_ss": 0.0, "lambda_p": 1.0, "delta": None},    # ablation: no sample-stability loss
    "lfss_no_proto": {"lambda_ss": 1.0, "lambda_p": 0.0, "delta": None},  # ablation: no prototype loss
}


def lr_at(step: int, steps_per_epoch: int, epochs: int, warmup: float, base_lr: float,
          min_ratio: float = 0.5) -> float:
    """Learning rate of optimiser step ``step`` (0-based, global), the released schedule [V].

    The released code counts steps from 1 and reads the epoch as e = step/steps_per_epoch + 1, i.e. here
    e = (step + 1)/steps_per_epoch + 1 (so e runs from 1 + 1/spe to epochs + 1). Warm-up: lr = base·e/warmup while
    e < warmup; then lr = min + ½(base − min)(1 + cos(π(e − warmup)/epochs)) with min = min_ratio·base — the
    cosine spans ``epochs`` (not epochs − warmup), so it ends just above min (0.5·base by default), never at 0.
    """
    e = (step + 1) / steps_per_epoch + 1.0
    if e < warmup:
        return base_lr * e / warmup
    lo = min_ratio * base_lr
    return lo + 0.5 * (base_lr - lo) * (1.0 + math.cos(math.pi * (e - warmup) / epochs))


def _param_groups(net: LFSSNet, wd: float, wd_bias_bn: bool = True) -> list[dict]:
    """SGD groups: encoder + projector, and the predictor (lr x ``predictor_lr_mult``); weight decay ``wd`` on
    every parameter when ``wd_bias_bn`` (the released code [V]), else not on 1-D ones (biases, BatchNorm)."""
    wd_1d = wd if wd_bias_bn else 0.0
    decay, no_decay = [], []
    for name, p in [*net.encoder_q.named_parameters(), *net.projector_q.named_parameters()]:
        (no_decay if p.ndim == 1 else decay).append(p)
    pred_decay = [p for p in net.predictor.parameters() if p.ndim > 1]
    pred_no = [p for p in net.predictor.parameters() if p.ndim == 1]
    return [{"params": decay, "weight_decay": wd, "pred": False},
            {"params": no_decay, "weight_decay": wd_1d, "pred": False},
            {"params": pred_decay, "weight_decay": wd, "pred": True},
            {"params": pred_no, "weight_decay": wd_1d, "pred": True}]


def resolve_device(name: str) -> torch.device:
    """``train.device``: cpu, cuda (a clear error when no GPU is visible) or auto (cuda when available)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("lfss: train.device=cuda but torch sees no CUDA device (use cpu or auto)")
    if name not in ("cpu", "cuda"):
        raise ValueError(f"lfss: train.device must be cpu, cuda or auto, got {name!r}")
    return torch.device(name)


def train_arm(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """:func:`_train_arm` with NumPy's BLAS limited to one thread (the k-means matrices are small; several BLAS
    threads next to torch's only contend for the same cores)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return _train_arm(*args, **kwargs)


def _train_arm(x: np.ndarray, y: np.ndarray, settings: Mapping[str, Any], arm: str, seed: int,
              progress: Callable[[dict], None] | None = None) -> dict[str, Any]:
    """Train one arm for one seed on ``x (N, C, H, W)`` float32 in [0, 1] (digits: C = 1; RGB: C = 3); ``y (N,)``
    is used only for the metrics.

    Returns ``curves`` (one dict per epoch: losses, lr, n_unstable, acc/nmi/ari of the k-means on the
    target features, auroc/acc_unstable/acc_stable/gap of stability vs correctness), ``stability``
    ({epoch: dict(s, labels, pseudo, correct)} every ``record_every`` epochs and the last), ``features`` (N, D)
    float32 (final target features), ``time_s`` and ``net`` (on the CPU). ``progress`` (optional) receives each
    epoch's dict.
    """
    if arm not in ARMS:
        raise KeyError(f"lfss: unknown arm {arm!r}; known: {sorted(ARMS)}")
    tr, st, mo, au = settings["train"], settings["stability"], settings["model"], settings["augment"]
    spec = ARMS[arm]
    lam_ss, lam_p = tr["lam"] * spec["lambda_ss"], tr["lam"] * spec["lambda_p"]
    delta = tr["delta"] if spec["delta"] is None else spec["delta"]
    k_clusters = int(settings["data"]["n_classes"])
    if st["snapshot"] not in ("previous_boundary", "released_order"):
        raise ValueError(f"lfss: stability.snapshot={st['snapshot']!r}; use previous_boundary or released_order")

    t0, c0 = time.perf_counter(), time.process_time()
    torch.set_num_threads(int(tr.get("threads", 1)))
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    device = resolve_device(tr.get("device", "cpu"))
    xt = torch.as_tensor(x, dtype=torch.float32).to(device)
    n, bs, epochs, eta = len(xt), int(tr["batch_size"]), int(tr["epochs"]), int(tr["eta"])
    if n < bs and tr["drop_last"]:
        raise ValueError(f"lfss: {n} images < batch_size {bs} with drop_last")
    spe = n // bs if tr["drop_last"] else math.ceil(n / bs)
    net = LFSSNet(mo["channels"], mo["hidden"], mo["dim"], in_channels=xt.shape[1],
                  backbone=mo.get("backbone", "small_cnn"), stem=mo.get("stem", "cifar"),
                  resnet_width=mo.get("width", 1.0)).to(device).train()
    fast = tr.get("fast")  # issue 39: channels_last / bf16 autocast / compile, on CUDA only (core.speed)
    net = prepare_model(net, fast, device, compile_part=net.encoder_q)
    opt = torch.optim.SGD(_param_groups(net, tr["weight_decay"], tr["wd_bias_bn"]), lr=tr["lr"],
                          momentum=tr["momentum"])
    view = view_fn(au.get("pipeline", "auto"), int(xt.shape[1]))
    keys = (("crop_scale", "rotation_deg", "erase_p", "erase_scale", "noise_sigma") if view is augment
            else ("crop_scale", "flip_p", "jitter", "jitter_p", "grayscale_p"))
    aug = {key: au[key] for key in keys if key in au}

    prev = net.features(xt).cpu().numpy()
    prev_labels, _ = kmeans_cosine(prev, k_clusters, seed=st["kmeans_seed"], max_iter=st["kmeans_max_iter"],
                                   tol=st["kmeans_tol"], n_init=int(st["kmeans_n_init"]))
    pseudo = None
    curves, records, step = [], {}, 0
    for epoch in range(1, epochs + 1):
        use_proto = epoch > eta and lam_p > 0 and pseudo is not None
        pseudo_t = torch.as_tensor(pseudo).to(device) if use_proto else None
        sums = {"loss": 0.0, "loss_n": 0.0, "loss_ss": 0.0, "loss_p": 0.0}
        order = torch.randperm(n, generator=gen)
        for b in range(spe):
            idx = order[b * bs:(b + 1) * bs]
            lr = lr_at(step, spe, epochs, tr["warmup_epochs"], tr["lr"], tr["lr_min_ratio"])
            for g in opt.param_groups:
                g["lr"] = lr * (tr["predictor_lr_mult"] if g["pred"] else 1.0)
            xb = xt[idx]
            x1, x2 = (prepare_input(view(xb, gen, **aug), fast, device) for _ in range(2))
            with autocast(fast, device):
                q1, q2 = net.online(x1), net.online(x2)
                k1, k2 = net.target(x1), net.target(x2)
                p1 = net.predictor(q1 + tr["sigma"] * torch.randn(q1.shape, generator=gen).to(device))
                p2 = net.predictor(q2 + tr["sigma"] * torch.randn(q2.shape, generator=gen).to(device))
            q1, q2, k1, k2, p1, p2 = (t.float() for t in (q1, q2, k1, k2, p1, p2))
            loss_n = 0.5 * (byol_loss(p1, k2) + byol_loss(p2, k1))
            loss = loss_n
            loss_ss = loss_p = torch.zeros(())
            if lam_ss > 0:
                o1, o2 = net.old_embed(x1), net.old_embed(x2)
                loss_ss = 0.5 * (sample_stability_loss(q1, o1, tr["temperature"])
                                 + sample_stability_loss(q2, o2, tr["temperature"]))
                loss = loss + lam_ss * loss_ss
            if use_proto:
                pb = pseudo_t[idx]
                loss_p = 0.5 * (prototype_loss(q1, k2, pb, k_clusters, tr["temperature"])
                                + prototype_loss(q2, k1, pb, k_clusters, tr["temperature"]))
                loss = loss + lam_p * loss_p
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            net.ema_update(tr["ema"])
            step += 1
            for key, val in (("loss", loss), ("loss_n", loss_n), ("loss_ss", loss_ss), ("loss_p", loss_p)):
                sums[key] += float(val.detach()) / spe

        # ---- epoch boundary: cluster, stability, pseudo-labels for the next epoch, refresh o
        feats = net.features(xt).cpu().numpy()
        labels, _ = kmeans_cosine(feats, k_clusters, seed=st["kmeans_seed"], max_iter=st["kmeans_max_iter"],
                                  tol=st["kmeans_tol"], n_init=int(st["kmeans_n_init"]))
        if st["snapshot"] == "previous_boundary":
            old_f, old_l = prev, prev_labels
        else:
            old_f, old_l = feats, labels
        stab = stability_from_labels(old_f, feats, old_l, labels, k_clusters, delta)
        pseudo = stab["pseudo"]
        correct = mapped_correct(y, labels)
        acc, nmi, ari = cluster_metrics(y, labels)
        sc = stability_correctness(stab["s"], correct, st["eval_delta"])
        curves.append({"epoch": epoch, **sums, "lr": lr, "n_unstable": int((pseudo == -1).sum()),
                       "acc": acc, "nmi": nmi, "ari": ari, "auroc": sc["auroc"], "acc_unstable": sc["acc_unstable"],
                       "acc_stable": sc["acc_stable"], "gap": sc["gap"], "s_mean": float(stab["s"].mean()),
                       "cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - t0})
        if progress is not None:
            progress(curves[-1])
        if epoch % int(st["record_every"]) == 0 or epoch == epochs:
            records[epoch] = {"s": stab["s"].astype(np.float32), "labels": labels, "pseudo": pseudo,
                              "correct": correct}
        net.refresh_old()
        prev, prev_labels = feats, labels
    return {"curves": curves, "stability": records, "features": prev.astype(np.float32),
            "time_s": time.perf_counter() - t0, "net": net.cpu()}
