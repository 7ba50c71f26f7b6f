"""One arm × seed of the data_remix study end to end, in memory (the train stage's computation).

:func:`train_dataset` trains one arm on one dataset, fits the linear probes on frozen encoder features and returns
the per-epoch curve and the final held-out metrics; :func:`run` does it for every dataset of the config (built
from the generator and the wheels), as a train job does. ``settings`` is the plain dict of
a validated :class:`.config.Config` (``Config.model_dump(mode="json")``). No files are written.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from .data import make_dataset, validate_dataset
from .evaluate import linear_probe
from .train import ARMS, train_arm

FINAL_KEYS = ("fused_acc", "head_a_acc", "head_v_acc", "route_a_given_acorrupt", "route_v_given_vcorrupt",
              "grad_cos_av")


def encoder_features(model, split: Mapping[str, np.ndarray], batch: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Frozen encoder features (a (N, F), v (N, F)) of a split, model in eval mode, in chunks of ``batch`` rows on
    the model's device."""
    model.eval()
    dev = next(model.parameters()).device
    x_a, x_v = torch.from_numpy(split["x_a"]), torch.from_numpy(split["x_v"])
    parts = [model.features(x_a[i:i + batch].to(dev), x_v[i:i + batch].to(dev)) for i in range(0, len(x_a), batch)]
    return (torch.cat([p[0] for p in parts]).cpu().numpy(), torch.cat([p[1] for p in parts]).cpu().numpy())


def train_dataset(data: Mapping, arm: str, train_cfg: Mapping[str, Any], seed: int,
                  probe_max_iter: int = 500) -> dict[str, Any]:
    """Train ``arm`` on one dataset ({"train", "test"} splits) with seed ``seed`` and score it on the test split.

    Returns ``model``, ``curve`` (one dict per epoch, :func:`.train.train_arm`), ``final`` {fused_acc, head_a_acc,
    head_v_acc, route_a_given_acorrupt, route_v_given_vcorrupt, grad_cos_av (last epoch), probe_a, probe_v (linear
    probes on frozen features, fitted on train, scored on test), n_train}, ``assign`` (the last assignment pass,
    (N,) bool, or None) and ``z`` (train corruption flags or None). Accuracies are fractions."""
    res = train_arm(data, arm, train_cfg, seed)
    batch = int(train_cfg.get("eval_batch", 4096))
    (fa_tr, fv_tr), (fa_te, fv_te) = (encoder_features(res["model"], data[s], batch) for s in ("train", "test"))
    ytr, yte = data["train"]["y"], data["test"]["y"]
    final = {k: res["curve"][-1][k] for k in FINAL_KEYS}
    final.update(probe_a=linear_probe(fa_tr, ytr, fa_te, yte, probe_max_iter),
                 probe_v=linear_probe(fv_tr, ytr, fv_te, yte, probe_max_iter), n_train=int(len(ytr)))
    return {"model": res["model"], "curve": res["curve"], "final": final, "assign": res["assign"],
            "z": data["train"].get("z")}


def run(settings: Mapping[str, Any], arm: str, seed: int) -> dict[str, Any]:
    """Train and evaluate ``arm`` with ``seed`` on every dataset of ``settings`` (the dict of a validated Config).

    Returns ``{"arm", "seed", "time_s", "datasets": {name: {"curve", "final", "assign", "z"}}}`` (see
    :func:`train_dataset`)."""
    if arm not in ARMS:
        raise ValueError(f"run: unknown arm {arm!r} (known: {ARMS})")
    if settings.get("encoder", "mlp") != "mlp":
        raise ValueError(f"run: builds the offline datasets only (encoder mlp); the paper datasets (encoder "
                         f"{settings.get('encoder')!r}) run through the pipeline's preprocess and train stages")
    torch.set_num_threads(int(settings.get("threads", 1)))
    t0 = time.perf_counter()
    out: dict[str, Any] = {"arm": arm, "seed": int(seed), "datasets": {}}
    for name in settings["datasets"]:
        data = make_dataset(name, settings[name], seed)
        validate_dataset(data, name)
        res = train_dataset(data, arm, settings["train"], seed, int(settings.get("probe_max_iter", 500)))
        res.pop("model")
        out["datasets"][name] = res
    out["time_s"] = time.perf_counter() - t0
    return out
