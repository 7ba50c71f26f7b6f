"""One end-to-end run of the study in memory: data + generators (:func:`prepare`), then one detector arm x seed
(:func:`run`). Settings are the flat mapping of :func:`.config.settings_of` (keys ``crop``, ``det_epochs``, ...)."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from .data import jpeg_roundtrip, real_crops
from .evaluate import accuracy, auc, calibrate_threshold, heldout_unit_scores
from .train import (WINDOW_ALIGN, detector_input, generate_fakes, predict_scores, psnr, split_pairs, train_autoencoder,
                    train_detector)

GENERATORS = {"A": "tconv", "B": "nearest", "C": "bilinear"}  #: A trains the detectors; B and C are held out

def prepare(settings: Mapping, paths: Mapping | None = None, keep_models: bool = False) -> dict:
    """Real crops of the train/test images, the three AEs (trained on train crops, seed ``ae_seed``) and their
    content-aligned fakes, plus JPEG round trips of the test sets. Returns arrays (n, H, W, 3) uint8 and stats
    (``ae_models`` too when ``keep_models``). ``paths`` ({image name: file}) reads copied files, else the wheels."""
    s = settings
    kw = dict(size=s["crop"], stride=s["stride"], min_std=s["min_std"], max_crops=s["max_crops"], seed=s["crop_seed"])
    tr, te = real_crops(s["train_images"], paths=paths, **kw), real_crops(s["test_images"], paths=paths, **kw)
    out = {"train_real": tr["x"], "test_real": te["x"], "test_is_jpeg": te["is_jpeg"], "test_source": te["source"],
           "ae_curves": {}, "ae_psnr": {}}
    for g, dec in GENERATORS.items():
        ae, curve = train_autoencoder(tr["x"], dec, s["ae_epochs"], s["ae_seed"], s["ae_lr"], s["ae_batch"])
        out[f"train_fake{g}"] = generate_fakes(ae, tr["x"])
        out[f"test_fake{g}"] = generate_fakes(ae, te["x"])
        out["ae_curves"][g] = curve
        out["ae_psnr"][g] = psnr(out[f"test_fake{g}"], te["x"])
        if keep_models:
            out.setdefault("ae_models", {})[g] = ae
    for q in s["jpeg_qualities"]:
        for k in ("real", "fakeA", "fakeB", "fakeC"):
            out[f"test_{k}_jpeg{q}"] = jpeg_roundtrip(out[f"test_{k}"], q)
    return out


def _scores(det, x, arm, s, cache=None, key=None):
    """Logits of ``det`` on the crops x; the test-time input of arm (seed-independent) is kept in ``cache`` under
    ``key`` when both are given, so a job that trains several seeds builds each test set's input once."""
    if cache is None or key is None:
        return predict_scores(det, detector_input(x, arm, s["step"], s["colour_space"], s["noise_amp"]))
    if (arm, key) not in cache:
        cache[(arm, key)] = detector_input(x, arm, s["step"], s["colour_space"], s["noise_amp"])
    return predict_scores(det, cache[(arm, key)])


def run(settings: Mapping, arm: str, seed: int, data: dict | None = None, cache: dict | None = None) -> dict:
    """Train detector ``arm`` with ``seed`` on train real vs fake-A, evaluate on the held-out test images.

    Accuracies call a crop fake when its logit exceeds the decision threshold: 0, or (``det_threshold: val``,
    [R]) the threshold that maximises accuracy on the detector's held-out validation pairs (train images, real vs
    fake-A, test-time input), see :func:`.evaluate.calibrate_threshold`; test crops never choose it.

    Returns ``curves`` (train/bce, val/acc per epoch), ``metrics`` (test/acc_{A,B,C}, test/auc_{A,B,C},
    test/acc_heldout = mean of acc_B and acc_C, test/acc_heldout_jpeg{q}, test/acc_heldout_{png,jpeg}_src,
    val/threshold, val/acc_at_threshold, val/auc_A: AUC on the validation pairs of the training generator) and ``units`` (n_test,) per-crop held-out scores for the paired bootstrap
    of claim 3.

    ``cache`` (a dict the caller keeps across the seeds of one ``data``): the test sets' detector inputs, built on
    the first seed and reused (the same arrays: test-time inputs draw no randomness)."""
    s = settings
    data = prepare(s) if data is None else data
    real_tr, fake_tr = data["train_real"], data["train_fakeA"]
    det, curves = train_detector(real_tr, fake_tr, arm, s["det_epochs"], seed, s["det_lr"],
                                 s["batch"], s["step"], s["colour_space"], s["noise_amp"],
                                 train_crop=s.get("det_train_crop"),
                                 window_align=s.get("det_window_align", WINDOW_ALIGN))
    val_idx, _ = split_pairs(np.random.default_rng(seed), len(real_tr))
    val_s = _scores(det, np.concatenate([real_tr[val_idx], fake_tr[val_idx]]), arm, s)
    val_y = np.r_[np.zeros(len(val_idx)), np.ones(len(val_idx))]
    mode = s.get("det_threshold", "val")
    if mode not in ("zero", "val"):
        raise ValueError(f"detector.threshold must be 'zero' or 'val', got {mode!r}")
    t = calibrate_threshold(val_s, val_y) if mode == "val" and len(val_idx) else 0.0
    real = _scores(det, data["test_real"], arm, s, cache, "test_real")
    m = {"val/threshold": t, "val/acc_at_threshold": accuracy(val_s, val_y, t) if len(val_idx) else float("nan"),
         "val/auc_A": auc(val_s, val_y) if len(val_idx) else float("nan")}
    correct = {"real": real <= t}
    for g in GENERATORS:
        f = _scores(det, data[f"test_fake{g}"], arm, s, cache, f"test_fake{g}")
        correct[g] = f > t
        lab = np.r_[np.zeros(len(real)), np.ones(len(f))]
        m[f"test/acc_{g}"] = accuracy(np.r_[real, f], lab, t)
        m[f"test/auc_{g}"] = auc(np.r_[real, f], lab)
    units = heldout_unit_scores(correct["real"], correct["B"], correct["C"])
    m["test/acc_heldout"] = float(units.mean())
    src = data["test_is_jpeg"]
    for name, sel in (("png", ~src), ("jpeg", src)):
        m[f"test/acc_heldout_{name}_src"] = float(units[sel].mean()) if sel.any() else float("nan")
    for q in s["jpeg_qualities"]:
        c = {k: _scores(det, data[f"test_{k}_jpeg{q}"], arm, s, cache, f"test_{k}_jpeg{q}")
             for k in ("real", "fakeB", "fakeC")}
        m[f"test/acc_heldout_jpeg{q}"] = float(heldout_unit_scores(c["real"] <= t, c["fakeB"] > t,
                                                                   c["fakeC"] > t).mean())
    return {"arm": arm, "seed": int(seed), "curves": curves, "metrics": m, "units": units, "model": det}


def checks(settings: Mapping, data: dict) -> dict:
    """Claims 1 and 2 (checks): the bound over all colours (or ``bound_random`` random ones) and the pixelwise
    invariances on the first 32 test crops. Returns {"bound": (holds, stat), "invariance": (holds, stat)}."""
    from .evaluate import decide_bound, decide_invariance, invariance_check
    from .method import bound_check
    s = settings
    x = data["test_real"][:32]
    bound = decide_bound(bound_check(s["bound_steps"], s["colour_space"], n_random=s["bound_random"]))
    inv = decide_invariance(invariance_check(x, s["step"], s["colour_space"], lut_red=int(x[0, 0, 0, 0])))
    return {"bound": bound, "invariance": inv}
