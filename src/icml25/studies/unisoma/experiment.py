"""One arm x seed of the unisoma study end to end, in memory (tuning runs and the
tests use it; the pipeline runs the same functions stage by stage).
"""
from __future__ import annotations

import functools
import json
from typing import Any, Mapping

import numpy as np
import torch

from icml25.core.config import build

from .config import Config
from .data import SimParams, fit_normalisers, generate_dataset, model_arrays, sim_params, stack_samples
from .evaluate import denormalise, per_sample_metrics
from .train import active_fields, predict, raw_edge_lengths, to_tensors, train_model


def prepared_splits(arrays: Mapping[str, Mapping[str, np.ndarray]], k: int) -> tuple[dict, dict]:
    """Normalisers from the train split and normalised tensors of every split."""
    norm = fit_normalisers(model_arrays(arrays["train"]), raw_edge_lengths(arrays["train"], k))
    return norm, {s: to_tensors(a, norm, k) for s, a in arrays.items()}


@functools.lru_cache(maxsize=2)
def _dataset(sim_json: str, seed: int, n_train: int, n_eval: int, n_test: int, k: int):
    sim = SimParams(**json.loads(sim_json))
    raw = generate_dataset(seed, {"train": n_train, "eval": n_eval, "test": n_test}, sim)
    arrays = {s: stack_samples(v) for s, v in raw.items()}
    norm, tensors = prepared_splits(arrays, k)
    return arrays, norm, tensors


def test_metrics(model: torch.nn.Module, arrays: Mapping[str, np.ndarray], tensors, norm) -> dict[str, np.ndarray]:
    """Per-sample physical test metrics of a trained model (see :func:`evaluate.per_sample_metrics`)."""
    preds = denormalise([p.numpy().astype(np.float64) for p in predict(model, tensors)], norm)
    m = model_arrays(arrays)
    return per_sample_metrics(preds, [x.astype(np.float64) for x in m["deformables"]],
                              [t.astype(np.float64) for t in m["targets"]], norm)


def run(settings: Mapping[str, Any] | Config, arm: str, seed: int) -> dict[str, Any]:
    """Simulate (cached per data config), train ``arm`` from ``seed`` and evaluate on the test split.

    Returns ``{"arm", "seed", "history" (per-epoch loss / val metrics, param_count, seconds), "test"
    (per-sample metric arrays), "test_mean"}``.
    """
    cfg = settings if isinstance(settings, Config) else build(Config, dict(settings), "unisoma")
    torch.set_num_threads(cfg.threads)
    d = cfg.data
    sim = sim_params(cfg.sim)
    arrays, norm, tensors = _dataset(json.dumps(sim.__dict__, sort_keys=True), d.data_seed, d.n_train, d.n_eval,
                                     d.n_test, cfg.model.knn_k)
    fields = active_fields(norm, 2)
    model, arch, history = train_model(arm, tensors["train"], tensors["eval"], fields, cfg.model, cfg.train, seed)
    test = test_metrics(model, arrays["test"], tensors["test"], norm)
    return {"arm": arm, "seed": seed, "arch": arch, "history": history, "test": test,
            "test_mean": {k: float(v.mean()) for k, v in test.items()}}
