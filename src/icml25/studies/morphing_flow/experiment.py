"""One arm x dataset x backbone x horizon x seed of the morphing_flow study: train, test, measure (:func:`fit_and_test`).

Data arrive prepared (:func:`icml25.studies.morphing_flow.data.prepare`: split by time, z-scored with training
statistics); :func:`windows_of` cuts the sliding windows. Every arm of a seed sees the same windows (paired).
Randomness: model initialisation ``torch.manual_seed(seed)``, batch order ``torch.Generator(seed)``.

The pipeline's train stage calls :func:`fit_and_test` on the preprocessed arrays; :func:`run` does the same from
the offline sources in memory (tests, tuning runs).
"""
from __future__ import annotations

import io
import time
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from . import data as D
from .evaluate import FLOW_GRID, HIST_EDGES
from .identities import flow_identities
from .method import excess_kurtosis
from .model import MoFForecaster
from .train import mse_per_window, predict, train_model

#: Arms: forecaster cfg overrides and the Gaussianisation weight (``lam``: "train" = train.lam, or a number).
ARMS: dict[str, dict[str, Any]] = {
    "revin_linear": {"cfg": {"flow": False, "morph_mode": "off"}, "lam": 0.0},   # baseline: RevIN + backbone
    "mof_flow": {"cfg": {"flow": True, "morph_mode": "off"}, "lam": "train"},    # Flow, Morph off
    "mof_linear": {"cfg": {"flow": True}, "lam": "train"},                       # Flow + Morph (model.morph_mode)
    "mof_linear_nonll": {"cfg": {"flow": True}, "lam": 0.0},                     # as mof_linear with lambda = 0
    # the normalisation wrappers the paper compares with (paper scale; .normalizers)
    "dishts_linear": {"cfg": {"flow": False, "morph_mode": "off", "norm": "dishts"}, "lam": 0.0},
    "san_linear": {"cfg": {"flow": False, "morph_mode": "off", "norm": "san"}, "lam": 0.0},
    "fan_linear": {"cfg": {"flow": False, "morph_mode": "off", "norm": "fan"}, "lam": 0.0},
}
N_IDENTITY_WINDOWS = 8   # test windows used for the Morph-modulated identities and the m = 1 bitwise check


# --------------------------------------------------------------------------------------------- data


@lru_cache(maxsize=4)
def _offline(name: str, n_rows: int, data_seed: int, generator: tuple) -> np.ndarray:
    if name == "synth":
        return D.make_fat_tailed_ett(n_rows, data_seed, dict(generator)).iloc[:, 1:].to_numpy(np.float64)
    if name == "msft":
        return D.msft_features(D.read_msft_csv(io.BytesIO(D.msft_csv_bytes()))).iloc[:, 1:].to_numpy(np.float64)
    if name == "taylor":
        return D.load_taylor()[:, None]
    raise ValueError(f"dataset {name!r} is not available offline (synth, msft, taylor); the ETT files are remote")


def offline_series(name: str, synth: Any = None) -> np.ndarray:
    """The raw (T, C) array of an offline dataset (cached per process); ``synth`` is the ``data.synth`` section
    (``n_rows``, ``data_seed``, ``generator``) for ``synth``."""
    if name != "synth":
        return _offline(name, 0, 0, ())
    gen = synth.generator.model_dump() if hasattr(synth.generator, "model_dump") else dict(synth.generator)
    return _offline(name, int(synth.n_rows), int(synth.data_seed),
                    tuple(sorted((k, tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in gen.items())))


def windows_of(data: np.ndarray, border1s: list[int], border2s: list[int], seq_len: int, pred_len: int
               ) -> dict[str, Any]:
    """Windows (float32) of the three splits of a scaled (T, C) series, the test window starts and the test end."""
    out: dict[str, Any] = {"border1s": list(border1s), "border2s": list(border2s), "seq_len": int(seq_len),
                           "pred_len": int(pred_len)}
    for i, name in enumerate(("train", "val", "test")):
        starts = D.window_starts(border1s[i], border2s[i], seq_len, pred_len)
        x, y = D.windows(data, starts, seq_len, pred_len)
        out[name] = (x.astype(np.float32), y.astype(np.float32))
        out[f"{name}_starts"] = starts
    return out


# ------------------------------------------------------------------------------------------- one cell


def arm_model(arm: str, model_cfg: Mapping[str, Any], lam_train: float, backbone: str, n_channels: int,
              seq_len: int, pred_len: int) -> tuple[MoFForecaster, float]:
    """(untrained forecaster, lambda) of an arm; ``model_cfg`` holds the ``model`` section's keys."""
    if arm not in ARMS:
        raise KeyError(f"unknown arm {arm!r}; expected one of {sorted(ARMS)}")
    spec = ARMS[arm]
    lam = float(lam_train) if spec["lam"] == "train" else float(spec["lam"])
    return MoFForecaster(backbone, n_channels, seq_len, pred_len, {**dict(model_cfg), **spec["cfg"]}), lam


def fit_and_test(win: Mapping[str, Any], arm: str, seed: int, model_cfg: Mapping[str, Any],
                 train_cfg: Mapping[str, Any], backbone: str = "linear") -> tuple[dict[str, Any], MoFForecaster]:
    """Train ``arm`` on the windows ``win`` (:func:`windows_of`) with ``seed``; test it. Returns (record, model).

    The record (json-able) holds ``curves`` per epoch (``loss``: training MSE, ``val_mse``, ``grad_norm_var``),
    ``metrics`` (test_mse, test_mae, kurtosis_in: mean per-channel excess kurtosis of the backbone inputs on the
    test windows, kurtosis_in_channels, val_mse, best_epoch, epochs_run, n_test_windows), ``test_mse`` (per test
    window, for the paired bootstrap), ``test_start0`` and ``test_end`` (windows start at test_start0 + i; the test
    rows end at test_end), ``identities`` (claim 1, Flow arms only), ``figure`` (histograms of x~ and of the
    backbone inputs on :data:`HIST_EDGES`, the unmodulated spline on :data:`FLOW_GRID` per channel, the last test
    window's forecast of the last channel), ``seconds`` and ``cpu_seconds``. The model is on the CPU."""
    t0, c0 = time.perf_counter(), time.process_time()
    xte, yte = win["test"]
    L, H, C = xte.shape[1], yte.shape[1], xte.shape[2]
    torch.manual_seed(seed)
    model, lam = arm_model(arm, model_cfg, train_cfg["lam"], backbone, C, L, H)
    fit = train_model(model, win["train"], win["val"], train_cfg, lam, seed)
    y_hat, z, xn = predict(model, xte, with_norm=True)
    model.cpu()
    mse = mse_per_window(y_hat, yte)
    kurt = excess_kurtosis(z.transpose(1, 0, 2).reshape(C, -1), axis=-1)
    metrics = {"test_mse": float(mse.mean()), "test_mae": float(np.abs(y_hat - yte).mean()),
               "kurtosis_in": float(kurt.mean()), "kurtosis_in_channels": kurt.tolist(),
               "val_mse": fit["best_val_mse"], "best_epoch": fit["best_epoch"], "epochs_run": fit["epochs_run"],
               "n_test_windows": int(len(mse))}
    curves = {"loss": fit["curves"]["train/mse"], "val_mse": fit["curves"]["val/mse"],
              "grad_norm_var": fit["curves"]["train/grad_norm_var"]}
    figure: dict[str, Any] = {
        "hist_x_norm": np.histogram(xn, HIST_EDGES)[0].tolist(), "hist_z": np.histogram(z, HIST_EDGES)[0].tolist(),
        "flow_curve": None,
        "example": {"x": xte[-1, :, -1].tolist(), "y": yte[-1, :, -1].tolist(), "y_hat": y_hat[-1, :, -1].tolist()}}
    identities = None
    if model.flow is not None:
        model.eval()
        identities = flow_identities(model, torch.as_tensor(xte[:N_IDENTITY_WINDOWS]))
        with torch.no_grad():
            grid = torch.as_tensor(FLOW_GRID, dtype=torch.float32).expand(1, C, -1).contiguous()
            figure["flow_curve"] = model.flow(grid)[0][0].double().numpy().tolist()
    record = {"arm": arm, "backbone": backbone, "seed": int(seed), "seq_len": int(L), "pred_len": int(H),
              "n_channels": int(C), "curves": curves, "metrics": metrics, "test_mse": mse.tolist(),
              "test_start0": int(win["test_starts"][0]), "test_end": int(win["border2s"][2]),
              "identities": identities, "figure": figure,
              "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0}
    return record, model


def run(cfg: Any, arm: str, seed: int, dataset: str = "synth", backbone: str = "linear",
        pred_len: int | None = None) -> dict[str, Any]:
    """:func:`fit_and_test` of ``arm`` on an offline ``dataset`` (synth, msft, taylor) prepared in memory with the
    study config ``cfg`` (a :class:`~icml25.studies.morphing_flow.config.Config`); returns the record with
    ``dataset`` added."""
    spec = getattr(cfg.data, dataset)
    H = int(pred_len or spec.pred_len)
    prep = D.prepare(offline_series(dataset, cfg.data.synth), spec.seq_len, H, spec.split)
    win = windows_of(prep["data"], prep["border1s"], prep["border2s"], spec.seq_len, H)
    record, _ = fit_and_test(win, arm, seed, cfg.model.model_dump(), cfg.train.model_dump(), backbone)
    return {"dataset": dataset, **record}
