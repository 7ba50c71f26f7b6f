"""One arm x dataset x seed of the morphing_flow study, end to end in memory: :func:`run`.

Data: ``synth`` is one fixed series (``make_fat_tailed_ett(n_rows, data_seed)``), ``msft`` the five return channels
of the verified pmdarima file; both are split by time (``split``), z-scored with training statistics and cut into
sliding windows. Every arm of a seed sees the same windows (paired). Randomness: model initialisation
``torch.manual_seed(seed)``, batch order ``torch.Generator(seed)``.
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
from .evaluate import flow_identities
from .method import excess_kurtosis
from .model import MoFForecaster
from .settings import ARMS
from .train import mse_per_window, predict, train_model

N_IDENTITY_WINDOWS = 8  # test windows used for the Morph-modulated identities and the m = 1 bitwise check


@lru_cache(maxsize=4)
def _series(source: str, n_rows: int | None, data_seed: int | None, generator: tuple) -> np.ndarray:
    if source == "generator":
        return D.make_fat_tailed_ett(n_rows, data_seed, dict(generator)).iloc[:, 1:].to_numpy(np.float64)
    if source == "pmdarima":
        df = D.read_msft_csv(io.BytesIO(D.msft_csv_bytes()))
        return D.msft_features(df).iloc[:, 1:].to_numpy(np.float64)
    raise ValueError(f"dataset source {source!r} is not available offline (expected generator | pmdarima)")


def load_series(spec: Mapping[str, Any]) -> np.ndarray:
    """The raw (T, C) array of a dataset's settings (cached per process)."""
    gen = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in (spec.get("generator") or {}).items()))
    return _series(spec["source"], spec.get("n_rows"), spec.get("data_seed"), gen)


def dataset_windows(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Windows of the three splits (float32) plus the test window starts, borders and segment mask."""
    L, H = int(spec["seq_len"]), int(spec["pred_len"])
    prep = D.prepare(load_series(spec), L, H, spec["split"])
    out: dict[str, Any] = {"border1s": prep["border1s"], "border2s": prep["border2s"], "scaler": prep["scaler"]}
    for i, name in enumerate(("train", "val", "test")):
        starts = D.window_starts(prep["border1s"][i], prep["border2s"][i], L, H)
        x, y = D.windows(prep["data"], starts, L, H)
        out[name] = (x.astype(np.float32), y.astype(np.float32))
        out[f"{name}_starts"] = starts
    return out


def segment_mask(starts: np.ndarray, seq_len: int, test_end: int, hours: int) -> np.ndarray:
    """Windows whose whole target [s+L, s+L+H) lies in the last ``hours`` rows of the test period (ending at
    ``test_end``): s + L >= test_end - hours."""
    return np.asarray(starts) + seq_len >= test_end - hours


def arm_model(settings: Mapping[str, Any], arm: str, n_channels: int, seq_len: int, pred_len: int) -> tuple[MoFForecaster, float]:
    """(untrained forecaster, lambda) of an arm."""
    if arm not in ARMS:
        raise KeyError(f"unknown arm {arm!r}; expected one of {sorted(ARMS)}")
    spec = ARMS[arm]
    cfg = {**settings["model"], **spec["cfg"]}
    lam = float(settings["train"]["lam"]) if spec["lam"] == "train" else float(spec["lam"])
    return MoFForecaster(settings.get("backbone", "linear"), n_channels, seq_len, pred_len, cfg), lam


def run(settings: Mapping[str, Any], arm: str, seed: int, dataset: str = "synth") -> dict[str, Any]:
    """Train and evaluate ``arm`` on ``dataset`` with ``seed``. Returns ``curves`` (per epoch), ``metrics``
    (test_mse, test_mae, kurtosis_in (mean per-channel excess kurtosis of backbone inputs on test windows),
    kurtosis_in_channels, segment_mse, val_mse, best_epoch, epochs_run), ``per_window`` (test ``mse`` (N,) and the
    claim-4 ``segment`` mask), ``identities`` (claim 1; Flow arms only), ``seconds`` (wall) and ``cpu_seconds``."""
    t0, c0 = time.perf_counter(), time.process_time()
    spec = settings["datasets"][dataset]
    win = dataset_windows(spec)
    xte, yte = win["test"]
    L, H, C = xte.shape[1], yte.shape[1], xte.shape[2]
    torch.manual_seed(seed)
    model, lam = arm_model(settings, arm, C, L, H)
    fit = train_model(model, win["train"], win["val"], settings["train"], lam, seed)
    y_hat, z = predict(model, xte)
    mse = mse_per_window(y_hat, yte)
    mae = np.abs(y_hat - yte).mean(axis=(1, 2))
    kurt = excess_kurtosis(z.transpose(1, 0, 2).reshape(C, -1), axis=-1)
    seg = segment_mask(win["test_starts"], L, win["border2s"][2], int(settings["eval"]["segment_hours"]))
    metrics = {"test_mse": float(mse.mean()), "test_mae": float(mae.mean()), "kurtosis_in": float(kurt.mean()),
               "kurtosis_in_channels": kurt.tolist(), "segment_mse": float(mse[seg].mean()) if seg.any() else None,
               "n_segment_windows": int(seg.sum()), "n_test_windows": int(len(mse)), "val_mse": fit["best_val_mse"],
               "best_epoch": fit["best_epoch"], "epochs_run": fit["epochs_run"]}
    out = {"arm": arm, "dataset": dataset, "seed": seed, "curves": fit["curves"], "metrics": metrics,
           "per_window": {"mse": mse, "segment": seg}, "identities": None}
    if model.flow is not None:
        model.eval()
        out["identities"] = flow_identities(model, torch.as_tensor(xte[:N_IDENTITY_WINDOWS]))
    out["seconds"] = time.perf_counter() - t0
    out["cpu_seconds"] = time.process_time() - c0
    return out
