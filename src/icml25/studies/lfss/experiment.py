"""One arm x seed of the lfss study end to end in memory, and the per-seed adequacy-gate reference.

The functions take the study config as plain nested dicts (:func:`settings_of` of a
:class:`~icml25.studies.lfss.config.Config`): sections ``data``, ``model``, ``train``, ``augment``, ``stability``,
``evaluate``. The pipeline's stages call the same pieces on the preprocessed arrays.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any


from .data import load_dataset, pca_kmeans_reference
from .evaluate import claim1_statistics, kmeans_eval

SECTIONS = ("data", "model", "train", "augment", "stability", "evaluate")


def settings_of(cfg: Any) -> dict[str, Any]:
    """The config's sections as plain dicts (plus ``arms`` and ``seeds``), the form the training loop reads."""
    out: dict[str, Any] = {s: getattr(cfg, s).model_dump() for s in SECTIONS}
    out.update(arms=list(cfg.arms), seeds=list(cfg.seeds))
    return out


def reference(settings: Mapping[str, Any], seed: int) -> dict[str, float]:
    """Gate reference of one seed's subset: cosine k-means on PCA pixels (``evaluate.pca_dim``), mean of
    ``evaluate.kmeans_runs`` runs (the ``prepare`` stage's ``pca50_kmeans_acc.json``)."""
    x, y = load_dataset(settings["data"], seed)
    ev = settings["evaluate"]
    return pca_kmeans_reference(x, y, pca_dim=int(ev["pca_dim"]), runs=int(ev["kmeans_runs"]),
                                n_init=int(ev["kmeans_n_init"]))


def run(settings: Mapping[str, Any], arm: str, seed: int) -> dict[str, Any]:
    """Train ``arm`` with ``seed`` and evaluate it.

    Returns ``arm, seed, curves`` (per-epoch dicts, see :func:`.train.train_arm`), ``final`` (mean ACC/NMI/ARI
    of ``evaluate.kmeans_runs`` cosine k-means runs on the final target features), ``claim1`` (AUROC and gap
    averaged over the claim epochs), ``best_acc`` / ``final_curve_acc`` (for the gate), ``stability`` records,
    ``features`` (N, D) float32, ``labels`` (N,) and ``time_s``.
    """
    from .train import train_arm

    t0 = time.perf_counter()
    x, y = load_dataset(settings["data"], seed)
    out = train_arm(x, y, settings, arm, seed)
    ev = settings["evaluate"]
    final = kmeans_eval(out["features"], y, int(settings["data"]["n_classes"]), runs=int(ev["kmeans_runs"]),
                       n_init=int(ev["kmeans_n_init"]))
    curves = out["curves"]
    return {"arm": arm, "seed": int(seed), "curves": curves, "final": final,
            "claim1": claim1_statistics(curves, list(ev["claim_epochs_back"])),
            "curve_acc": [c["acc"] for c in curves], "stability": out["stability"], "features": out["features"],
            "labels": y, "time_s": time.perf_counter() - t0}
