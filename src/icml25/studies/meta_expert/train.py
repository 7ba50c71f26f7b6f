"""Training of one arm on one long-tailed semi-supervised split (FixMatch backbone, §3.4 of the paper).

Arms: ``fixmatch`` (one head, plain CE), ``fixmatch_la`` (one head, logit-adjusted CE with τ = ``la_tau``),
``cpe`` (three logit-adjusted experts, E2 predicts at test; Ma et al. AAAI 2024), ``meta_expert`` (CPE + MFF + DEA,
the aggregate predicts), ``meta_expert_nomff`` (DEA on the last feature only).

Each iteration draws ``batch`` labelled and ``uratio·batch`` unlabelled images (with replacement), a weak view of
each labelled image and a weak and a strong view of each unlabelled one, and runs one forward pass on their
concatenation (BN statistics over all three, as the released code does). The EMA model is evaluated on the test
set every ``eval_every`` iterations (:mod:`.evaluate`).
"""
from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from . import data as D
from .evaluate import evaluate_model
from .method import (CONSISTENT, N_EXPERTS, aggregate, class_balanced_weights, expert_unsup_loss, fixmatch_loss,
                     fusion_expert_weights, interval_of, profile_count_update, unlabelled_profile)
from .model import EMAPairs, SSLNet

ARMS = ("fixmatch", "fixmatch_la", "cpe", "meta_expert", "meta_expert_nomff")
LOSS_KEYS = ("loss", "sup_loss", "unsup_loss", "fuse_sup_loss", "fuse_unsup_loss", "mask_rate")


def arm_spec(arm: str, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Number of experts, their τ, whether the DEA is trained, with or without fusion, and the test predictor."""
    m = cfg["method"]
    if arm == "fixmatch":
        return {"n_experts": 1, "taus": (0.0,), "dea": False, "fusion": False, "predict": "e1"}
    if arm == "fixmatch_la":
        return {"n_experts": 1, "taus": (float(m["la_tau"]),), "dea": False, "fusion": False, "predict": "e1"}
    if arm == "cpe":
        return {"n_experts": 3, "taus": tuple(m["taus"]), "dea": False, "fusion": False, "predict": "e2"}
    if arm in ("meta_expert", "meta_expert_nomff"):
        return {"n_experts": 3, "taus": tuple(m["taus"]), "dea": True, "fusion": arm == "meta_expert",
                "predict": "aggregate"}
    raise ValueError(f"unknown arm {arm!r}; known: {ARMS}")


def build_model(arm: str, cfg: Mapping[str, Any], seed: int) -> SSLNet:
    """The arm's network, initialised from ``torch.manual_seed(seed)`` (the backbone and expert 1 come first, so
    arms of one seed share their initial backbone)."""
    spec, m, mod = arm_spec(arm, cfg), cfg["method"], cfg["model"]
    torch.manual_seed(seed)
    return SSLNet(D.NUM_CLASSES, tuple(mod["widths"]), spec["n_experts"], stem_pool=mod["stem_pool"],
                  bn_branches=mod["bn_branches"] and spec["n_experts"] == N_EXPERTS, dea=spec["dea"],
                  fusion=spec["fusion"], cut1=m["cut1"], cut2=m["cut2"], dea_hidden=tuple(mod["dea_hidden"]),
                  backbone=mod.get("backbone", "small_cnn"), depth=mod.get("depth", 28), widen=mod.get("widen", 2))


def resolve_device(name: str) -> torch.device:
    """``cpu`` or ``cuda``; asking for cuda on a machine without one is an error naming the key."""
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("train.device: cuda asked for, but torch sees no CUDA device (set train.device: cpu to "
                           "run on the CPU)")
    return torch.device(name)


class _Views:
    """The three input views of a batch for one dataset: MNIST-5k (float images, grey-scale augmentations [R]) or
    a paper dataset (uint8 RGB images kept on the CPU, converted per batch, USB's flip-crop / RandAugment views
    moved to ``device``)."""

    def __init__(self, split: Mapping[str, np.ndarray], dataset: str, aug: Mapping[str, Any], device):
        self.dataset, self.aug, self.device = dataset, aug, device
        self.rgb = dataset != "mnist5k"
        if self.rgb:
            self.x_lab = torch.from_numpy(np.ascontiguousarray(split["x_lab"]))
            self.x_unl = torch.from_numpy(np.ascontiguousarray(split["x_unl"]))
            self.flip = bool(aug.get("flip", True)) and dataset != "svhn"
        else:
            self.x_lab, self.x_unl = D.to_tensor(split["x_lab"]), D.to_tensor(split["x_unl"])

    def _float(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.device).permute(0, 3, 1, 2).float().div_(255.0)

    def batch(self, il: torch.Tensor, iu: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """Normalised concatenation [weak labelled; weak unlabelled; strong unlabelled] (bl + 2 bu, C, H, W)."""
        a = self.aug
        if not self.rgb:
            xl = D.weak_augment(self.x_lab[il], gen, a["shift"])
            xu = self.x_unl[iu]
            xw = D.weak_augment(xu, gen, a["shift"])
            xs = D.strong_augment(xu, gen, a["shift"], a["rotate"], a["scale"], a["cutout"], a["noise"])
            return D.normalise(torch.cat([xl, xw, xs])).to(self.device)
        xl = D.weak_augment_rgb(self._float(self.x_lab[il]), gen, a["crop_pad"], self.flip)
        xu = self._float(self.x_unl[iu])
        xw = D.weak_augment_rgb(xu, gen, a["crop_pad"], self.flip)
        xs = D.strong_augment_rgb(xu, gen, a["crop_pad"], self.flip, a["ra_ops"], a["ra_cutout"])
        return D.normalise(torch.cat([xl, xw, xs]), self.dataset)


def _optimizer(net: torch.nn.Module, t: Mapping[str, Any]) -> torch.optim.Optimizer:
    """SGD over every parameter of ``net``, the MFF/DEA modules included: the released code builds its optimizer
    before wrapping the backbone in the fusion/assignment network, so those modules are never trained there; the
    paper trains them (§3.4), and so do we."""
    decay, no_decay = [], []
    for name, p in net.named_parameters():  # no weight decay on BN parameters and biases (USB convention)
        (no_decay if p.ndim <= 1 else decay).append(p)
    # foreach: the same per-tensor SGD arithmetic as the default single-tensor loop (bitwise equal), fewer calls
    return torch.optim.SGD([{"params": decay, "weight_decay": t["weight_decay"]},
                            {"params": no_decay, "weight_decay": 0.0}],
                           lr=t["lr"], momentum=t["momentum"], nesterov=t["nesterov"], foreach=True)


def _lr(t: Mapping[str, Any], it: int) -> float:
    """The learning rate of iteration ``it`` (0-based): cosine decay lr·cos(7πk / 16K) (FixMatch, USB's default) if
    ``train.cosine``, else constant lr (the released code on CIFAR-10 / SVHN / STL-10 has no scheduler)."""
    return t["lr"] * math.cos(7 * math.pi * it / (16 * t["iterations"])) if t["cosine"] else t["lr"]


def train_arm(arm: str, split: Mapping[str, np.ndarray], cfg: Mapping[str, Any], seed: int,
              log=None) -> dict[str, Any]:
    """Train ``arm`` on one split (:func:`data.mnist_lt` dict) with ``seed``; return the per-evaluation curves,
    the final metrics of the EMA model, the estimated unlabelled profile and the EMA state dict.

    ``log(step, metrics)`` is called at every evaluation (the stage logs them to MLflow)."""
    spec, m, t, aug = arm_spec(arm, cfg), cfg["method"], cfg["train"], cfg["augment"]
    dataset = cfg.get("dataset", "mnist5k")
    device = resolve_device(t.get("device", "cpu"))
    net = build_model(arm, cfg, seed).to(device, memory_format=torch.channels_last)
    ema = build_model(arm, cfg, seed).to(device, memory_format=torch.channels_last)
    ema.load_state_dict(net.state_dict())
    ema.eval()
    opt = _optimizer(net, t)
    ema_pairs = EMAPairs(ema, net)
    gen = torch.Generator().manual_seed(seed)

    views = _Views(split, dataset, aug, device)
    x_lab, y_lab = views.x_lab, torch.from_numpy(split["y_lab"]).long()
    x_unl = views.x_unl
    y_test = torch.from_numpy(split["y_test"]).long().to(device)
    x_test = (torch.from_numpy(np.ascontiguousarray(split["x_test"])) if views.rgb else D.to_tensor(split["x_test"]))
    eval_kw = {"dataset": dataset, "batch": t.get("eval_batch", 1024), "device": device}
    counts = torch.bincount(y_lab, minlength=D.NUM_CLASSES)
    if (counts == 0).any():
        raise ValueError(f"labelled set lacks classes {torch.nonzero(counts == 0).ravel().tolist()}")
    log_prior = torch.log(counts.float() / counts.sum()).to(device)
    taus = torch.tensor(spec["taus"], dtype=torch.float32, device=device)
    cut1, cut2 = m["cut1"], m["cut2"]
    interval_counts = torch.bincount(interval_of(y_lab, cut1, cut2), minlength=3)
    cb_class = class_balanced_weights(counts, m["cb_beta"])
    cb_interval = class_balanced_weights(interval_counts, m["cb_beta"])

    bl, bu = t["batch"], t["batch"] * t["uratio"]
    epoch = t["epoch_iters"]
    count_start, dea_start = (m["est_epoch"] + 1) * epoch, (m["est_epoch"] + 2) * epoch
    pl_counts = torch.zeros(D.NUM_CLASSES)  # on the CPU (the profile rule is a CPU computation)
    cb_class, cb_interval = cb_class.to(device), cb_interval.to(device)
    profile = CONSISTENT
    fusion_w = fusion_expert_weights(pl_counts, m["empty_profile"])
    sums = dict.fromkeys(LOSS_KEYS, 0.0)
    n_sums = 0
    curves: list[dict[str, Any]] = []
    final: dict[str, Any] | None = None
    t0 = time.process_time()
    net.train()
    for it in range(t["iterations"]):
        for g in opt.param_groups:
            g["lr"] = _lr(t, it)
        il = torch.randint(0, len(x_lab), (bl,), generator=gen)
        iu = torch.randint(0, len(x_unl), (bu,), generator=gen)
        x = views.batch(il, iu, gen)
        y = y_lab[il].to(device)
        out = net(x, log_prior, taus)
        z = out["logits"]  # (K, bl + 2bu, C)
        zl, zw, zs = z[:, :bl], z[:, bl:bl + bu], z[:, bl + bu:]
        sup = sum(F.cross_entropy(zl[k] + taus[k] * log_prior, y) for k in range(spec["n_experts"]))
        if spec["n_experts"] == 1:
            unsup, mask = fixmatch_loss(zs[0], zw[0], m["threshold"])
        else:
            unsup, masks = 0.0, []
            for k in range(N_EXPERTS):
                branches_s = out["branches"][k, :, bl + bu:]
                loss_k, mask_k, pseudo_k = expert_unsup_loss(branches_s, zw[k], m["threshold"], cut1, cut2)
                unsup = unsup + loss_k
                masks.append(mask_k)
                if k == 1 and count_start <= it < dea_start:  # the uniform expert's confident pseudo-labels
                    pl_counts += profile_count_update(pseudo_k.cpu(), mask_k.cpu(), D.NUM_CLASSES,
                                                      m["profile_count"])
            mask = masks[1]
        fuse_sup = fuse_unsup = torch.zeros(())
        if spec["dea"]:
            if it == dea_start:
                profile = unlabelled_profile(pl_counts)
                fusion_w = fusion_expert_weights(pl_counts, m["empty_profile"])
            if it >= dea_start:
                o, w = out["o"], out["w"]
                agg = aggregate(zl, w[:bl], "train", taus, log_prior)
                fuse_sup = (F.cross_entropy(agg, y, weight=cb_class)
                            + F.cross_entropy(o[:bl], interval_of(y, cut1, cut2), weight=cb_interval))
                o_w, o_s = o[bl:bl + bu], o[bl + bu:]
                fuse_unsup = F.cross_entropy(o_s, o_w.detach().argmax(1))
                for k in range(N_EXPERTS):  # expert k's H/M/T branches (3, N, C): Σ_j w_j (z_{k,j} − min z_{k,j})
                    if fusion_w[k] > 0:
                        br = out["branches"][k]
                        fused = torch.einsum("nj,jnc->nc", w, br - br.min(dim=2, keepdim=True).values)
                        fuse_unsup = fuse_unsup + fusion_w[k] * F.cross_entropy(
                            fused[bl + bu:], fused[bl:bl + bu].detach().argmax(1))
        loss = sup + fuse_sup + m["lambda_u"] * (unsup + fuse_unsup)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        decay = min(t["ema"], (1 + it) / (10 + it)) if t["ema_warmup"] else t["ema"]
        ema_pairs.update(decay)
        for key, val in zip(LOSS_KEYS, (loss, sup, unsup, fuse_sup, fuse_unsup, mask.mean())):
            sums[key] += float(val.detach()) if torch.is_tensor(val) else float(val)
        n_sums += 1
        last = it + 1 == t["iterations"]
        if (it + 1) % t["eval_every"] == 0 or last:
            metrics = {k: v / n_sums for k, v in sums.items()}
            ev = evaluate_model(ema, x_test, y_test, spec, log_prior, taus, cut1, cut2, keep_arrays=last, **eval_kw)
            if last:  # the EMA model no longer changes: this evaluation is also the final one (evaluated once)
                final, ev = ev, {k: v for k, v in ev.items() if k != "w"}
            metrics.update(ev)
            metrics["cpu_seconds"] = time.process_time() - t0
            metrics["iteration"] = it + 1
            curves.append(metrics)
            if log is not None:
                log(it + 1, metrics)
            sums, n_sums = dict.fromkeys(LOSS_KEYS, 0.0), 0
    if final is None:  # no iterations
        final = evaluate_model(ema, x_test, y_test, spec, log_prior, taus, cut1, cut2, keep_arrays=True, **eval_kw)
    state = {k: v.detach().cpu() for k, v in ema.state_dict().items()}
    return {"curves": curves, "final": final, "profile_estimate": int(profile), "fusion_weights": fusion_w.tolist(),
            "pl_counts": pl_counts.tolist(), "state_dict": state, "log_prior": log_prior.tolist(),
            "taus": list(spec["taus"])}
