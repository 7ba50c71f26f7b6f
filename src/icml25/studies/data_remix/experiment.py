"""One arm × seed of the data_remix study end to end, in memory (the train + evaluate stages' computation).

:func:`run` builds every dataset of the settings with data seed = ``seed``, trains the arm
(:func:`.train.train_arm`), fits the linear probes on frozen encoder features and returns per-epoch curves and
final held-out metrics. No files are written.
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


def encoder_features(model, split: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Frozen encoder features (a (N, F), v (N, F)) of a split, model in eval mode."""
    model.eval()
    a, v = model.features(torch.from_numpy(split["x_a"]), torch.from_numpy(split["x_v"]))
    return a.numpy(), v.numpy()


def run(settings: Mapping[str, Any], arm: str, seed: int) -> dict[str, Any]:
    """Train and evaluate ``arm`` with ``seed`` on every dataset of ``settings`` (a scale dict of .settings).

    Returns ``{"arm", "seed", "time_s", "datasets": {name: {"curve": [per-epoch dict], "final": {fused_acc,
    head_a_acc, head_v_acc, probe_a, probe_v, n_train, ...last-epoch routing}, "assign": (N,) bool | None,
    "z": (N,) int8 | None}}}``. Accuracies are fractions of the test split.
    """
    if arm not in ARMS:
        raise ValueError(f"run: unknown arm {arm!r} (known: {ARMS})")
    if settings.get("encoder", "mlp") != "mlp":
        raise NotImplementedError(f"run: encoder {settings.get('encoder')!r} needs the paper-scale GPU path")
    torch.set_num_threads(int(settings.get("threads", 1)))
    t0 = time.perf_counter()
    out: dict[str, Any] = {"arm": arm, "seed": int(seed), "datasets": {}}
    for name, spec in settings["datasets"].items():
        data = make_dataset(name, spec, seed)
        validate_dataset(data, name)
        res = train_arm(data, arm, settings["train"], seed)
        (fa_tr, fv_tr), (fa_te, fv_te) = (encoder_features(res["model"], data[s]) for s in ("train", "test"))
        ytr, yte = data["train"]["y"], data["test"]["y"]
        it = int(settings.get("probe_max_iter", 500))
        last = res["curve"][-1]
        final = {k: last[k] for k in ("fused_acc", "head_a_acc", "head_v_acc", "route_a_given_acorrupt",
                                      "route_v_given_vcorrupt", "grad_cos_av")}
        final.update(probe_a=linear_probe(fa_tr, ytr, fa_te, yte, it), probe_v=linear_probe(fv_tr, ytr, fv_te, yte, it),
                     n_train=int(len(ytr)))
        out["datasets"][name] = {"curve": res["curve"], "final": final, "assign": res["assign"],
                                 "z": data["train"].get("z")}
    out["time_s"] = time.perf_counter() - t0
    return out
