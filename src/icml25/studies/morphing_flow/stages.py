"""The five stages of the morphing_flow study; each ``(stage, run)`` reads ``stage.inputs``, writes ``stage.outputs``
atomically and logs to the MLflow run.

download   → raw/<dataset>.csv for every dataset of ``datasets`` (synth generated, msft and taylor from the
             verified pmdarima wheel, ETT fetched through manifest.csv with ``data_source: remote``), then
             raw/manifest.csv (name, source, bytes, sha256 of what was written)
preprocess → processed/<dataset>.npz (the series z-scored with training statistics, TSLib split borders, L, H)
             for every dataset, then processed/scaler.json
train      → models/<arm>/chunk<k>.pt (the trained weights of every dataset x backbone x horizon x seed of the
             chunk) and models/<arm>/chunk<k>.json (their records: curves, test metrics, per-window test MSE,
             Flow identities, figure data)
evaluate   → claims.json + metrics/eval.json
report     → figures/kurtosis.png, figures/flow_curves.png, figures/forecasts.png, report.md
"""
from __future__ import annotations

import csv
import importlib.metadata
import logging
from pathlib import Path
from typing import Any

import numpy as np

from icml25.core.claims import log_verdicts, validate_claims, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash
from icml25.core.download import sha256_file, verified
from icml25.core.io import atomic_path, load_npz, read_json, save_figure, save_npz, write_json, write_text

from . import data as D
from .config import REMOTE_DATASETS

SLUG = "morphing_flow"
log = logging.getLogger(f"icml25.{SLUG}")
FIDELITY = {"fidelity": "reconstructed"}  # no official code: every method detail is a labelled reconstruction


def _paths(stage: Stage, kind: str, names: tuple[str, ...], extra: int) -> dict[str, Path]:
    """The first len(names) paths of ``stage.inputs``/``outputs`` by dataset name; ``extra`` more must follow."""
    paths = stage.inputs if kind == "in" else stage.outputs
    if len(paths) != len(names) + extra:
        raise SystemExit(f"{SLUG} {stage.name}: expected {len(names) + extra} --{kind} paths (one per dataset "
                         f"{list(names)}{' + ' + str(extra) if extra else ''}), got {len(paths)}")
    for name, path in zip(names, paths):
        if Path(path).stem != name:
            raise SystemExit(f"{SLUG} {stage.name}: --{kind} path {path} should be named after dataset {name!r}")
    return dict(zip(names, paths))


def download(stage: Stage, run: Any) -> None:
    """Write every dataset's raw CSV: generate synth, extract msft/taylor from the pmdarima wheel (hash-checked),
    fetch the ETT files (remote only, sha256 from manifest.csv); then raw/manifest.csv of what was written."""
    cfg = stage.config
    names = tuple(cfg.datasets)
    out = _paths(stage, "out", names, 1)
    rows = []
    for name, dest in out.items():
        if name == "synth":
            s = cfg.data.synth
            D.write_csv(D.make_fat_tailed_ett(s.n_rows, s.data_seed, s.generator.model_dump()), dest)
            source = f"make_fat_tailed_ett(n_rows={s.n_rows}, seed={s.data_seed})"
        elif name == "msft":
            D.extract_msft(dest)
            source = f"pmdarima=={importlib.metadata.version('pmdarima')}:{D.packaged()['msft']['path']}"
        elif name == "taylor":
            D.write_csv(D.taylor_frame(), dest)
            source = f"pmdarima=={importlib.metadata.version('pmdarima')}:{D.packaged()['taylor']['path']}"
        elif name in REMOTE_DATASETS:
            if stage.data_source != "remote":
                raise SystemExit(f"{SLUG} download: {name} is a remote file (paper scale); run with "
                                 f"data_source=remote (and mirror=<dir or URL> for a local copy)")
            D.fetch_remote(name, dest, stage.mirror, trust_unpinned=stage.trust_unpinned)
            source = D.remote_manifest()[name].url
        else:  # the Config's Literal makes this unreachable
            raise SystemExit(f"{SLUG} download: unknown dataset {name!r}")
        size = dest.stat().st_size
        rows.append({"name": name, "source": source, "bytes": size, "sha256": sha256_file(dest)})
        run.log_metric(f"download/{name}_bytes", size)
        log.info("%s: %d bytes from %s", name, size, source)
    manifest = stage.outputs[-1]
    with atomic_path(manifest) as tmp:
        with open(tmp, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=["name", "source", "bytes", "sha256"])
            writer.writeheader()
            writer.writerows(rows)
    run.log_params({"data_source": stage.data_source})
    for name, rec in D.data_files(rows, D.remote_manifest()).items():  # which bytes of which revision were read
        run.log_params({f"data/{name}/{key}": rec[key] for key in ("revision", "sha256", "pin")})
    run.log_artifact(manifest)


def preprocess(stage: Stage, run: Any) -> None:
    """Read and validate every raw CSV, split it by time (TSLib borders), z-score it with training statistics
    only; log each dataset's raw per-channel excess kurtosis."""
    from .evaluate import excess_kurtosis  # numpy only: preprocess imports no torch

    cfg = stage.config
    names = tuple(cfg.datasets)
    raw = _paths(stage, "in", names, 0)
    out = _paths(stage, "out", names, 1)
    scalers: dict[str, Any] = {}
    for name in names:
        spec = getattr(cfg.data, name)
        horizons = cfg.pred_lens or (spec.pred_len,)
        L, H_max = spec.seq_len, max(horizons)
        n_ch = cfg.data.synth.generator.n_channels if name == "synth" else 7
        if name in REMOTE_DATASETS:  # a downloaded file: re-hashed against its record before it is read
            verified(raw[name])
        values = D.read_raw(name, raw[name], n_ch, min_rows=L + H_max)
        prep = D.prepare(values, L, H_max, spec.split)  # raises naming the split that holds no window
        save_npz(out[name], data=prep["data"], border1s=np.asarray(prep["border1s"]),
                 border2s=np.asarray(prep["border2s"]), seq_len=np.asarray(L), pred_lens=np.asarray(horizons),
                 mean=prep["scaler"]["mean"], std=prep["scaler"]["std"])
        kurt = excess_kurtosis(values, axis=0)
        scalers[name] = {"split": spec.split, "rows": len(values), "channels": values.shape[1],
                         "border1s": prep["border1s"], "border2s": prep["border2s"],
                         "mean": prep["scaler"]["mean"].tolist(), "std": prep["scaler"]["std"].tolist(),
                         "raw_excess_kurtosis": kurt.tolist()}
        run.log_metrics({f"preprocess/{name}/rows": len(values), f"preprocess/{name}/channels": values.shape[1],
                         f"preprocess/{name}/kurtosis_raw": float(np.mean(kurt))})
        log.info("%s: %d rows x %d channels, borders %s -> %s, raw excess kurtosis %s", name, len(values),
                 values.shape[1], prep["border1s"], prep["border2s"], np.round(kurt, 2).tolist())
    write_json(stage.outputs[-1], scalers)
    run.log_artifact(stage.outputs[-1])


def _check_arm_and_seeds(stage: Stage) -> tuple[str, tuple[int, ...]]:
    from .experiment import ARMS

    cfg, arm = stage.config, stage.arm
    if arm not in ARMS:
        raise SystemExit(f"{SLUG} train: --arm must be one of {list(ARMS)}, got {arm!r}")
    if arm not in cfg.arms:
        raise SystemExit(f"{SLUG} train: arm {arm!r} is not in the config's arms {list(cfg.arms)}")
    seeds = tuple(stage.seeds or cfg.seeds)
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"{SLUG} train: seeds {unknown} are not in the config's seeds")
    return arm, seeds


def train(stage: Stage, run: Any) -> None:
    """Train one arm on every dataset x backbone x horizon x seed of its chunk; write the weights (.pt) and the
    records (.json); log ``train/<cell>/loss``, ``train/<cell>/val_mse``, ``train/<cell>/grad_norm_var`` per
    epoch (step = epoch) and ``train/<cell>/seconds`` in one nested run per seed."""
    import torch

    from .evaluate import cell_name, crosses_cells
    from .experiment import fit_and_test, windows_of

    cfg = stage.config
    arm, seeds = _check_arm_and_seeds(stage)
    torch.set_num_threads(cfg.train.threads)
    names = tuple(cfg.datasets)
    processed = _paths(stage, "in", names, 0)
    if len(stage.outputs) != 2 or stage.outputs[0].suffix != ".pt" or stage.outputs[1].suffix != ".json":
        raise SystemExit(f"{SLUG} train: expected --out MODEL.pt RECORDS.json")
    model_cfg, train_cfg = cfg.model.model_dump(), cfg.train.model_dump()
    records, weights = [], {}
    for name in names:
        arrays = load_npz(processed[name], required=("data", "border1s", "border2s", "seq_len", "pred_lens"))
        horizons = cfg.pred_lens or tuple(int(h) for h in arrays["pred_lens"])
        L = int(arrays["seq_len"])
        for H in horizons:
            win = windows_of(arrays["data"], arrays["border1s"].tolist(), arrays["border2s"].tolist(), L, int(H))
            for backbone in cfg.backbones:
                for seed in seeds:
                    record, model = fit_and_test(win, arm, seed, model_cfg, train_cfg, backbone)
                    record = {"dataset": name, **record}
                    records.append(record)
                    weights[f"{name}/{backbone}/H{H}/seed{seed}"] = model.state_dict()
                    m = record["metrics"]
                    log.info("%s %s %s H=%d seed %d: test MSE %.4f, kurtosis in %.3f, %d epochs (best %d), %.1f s",
                             arm, name, backbone, H, seed, m["test_mse"], m["kurtosis_in"], m["epochs_run"],
                             m["best_epoch"], record["seconds"])
            del win  # the windows are materialised (Traffic, H = 720: ~55 GB float32): never hold two horizons
    multi = crosses_cells(records)
    run.set_tags(FIDELITY)
    for seed in seeds:  # one nested run per seed; step = epoch
        with run.seed_run(seed) as srun:
            for r in (r for r in records if r["seed"] == seed):
                cell = cell_name(r, multi)
                for epoch in range(len(r["curves"]["loss"])):
                    srun.log_metrics({f"train/{cell}/{k}": v[epoch] for k, v in r["curves"].items()}, step=epoch)
                srun.log_metrics({f"train/{cell}/seconds": r["seconds"],
                                  f"train/{cell}/best_epoch": r["metrics"]["best_epoch"]})
    with atomic_path(stage.outputs[0]) as tmp:
        torch.save({"arm": arm, "seeds": list(seeds), "state_dicts": weights}, tmp)
    write_json(stage.outputs[1], {"arm": arm, "seeds": list(seeds), "scale": stage.scale, "records": records})
    run.log_model(stage.outputs[0], cfg)


def _records(paths: tuple[Path, ...]) -> list[dict[str, Any]]:
    out = []
    for p in paths:
        doc = read_json(p)
        if "records" not in doc:
            raise SystemExit(f"{SLUG}: {p} is not a train records file (no 'records')")
        out += doc["records"]
    return out


def evaluate(stage: Stage, run: Any) -> None:
    """Every claim and check from the train records (inputs: the models' .json records)."""
    from . import PAPER
    from .evaluate import build_claims, summaries

    cfg = stage.config
    downloads = [p for p in stage.inputs if p.name == "manifest.csv"]  # paper scale: raw/manifest.csv
    inputs = tuple(p for p in stage.inputs if p.name != "manifest.csv")
    if not inputs or len(downloads) > 1:
        raise SystemExit(f"{SLUG} evaluate: expected --in RECORDS.json [RECORDS.json ...] [raw/manifest.csv]")
    records = _records(inputs)
    ev = cfg.eval
    claims = build_claims(records, ev.n_boot, ev.boot_seed, ev.segment_hours, min_rel_gain=ev.min_rel_gain,
                          min_baseline_kurtosis=cfg.adequacy.min_baseline_kurtosis,
                          min_segment_ratio=cfg.adequacy.min_segment_mse_ratio)
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source,
                       claims=claims, config_hash=config_hash(cfg), paper=PAPER,
                       seeds=sorted({r["seed"] for r in records}))
    if downloads:  # the remote files the run read: revision, sha256, and whether the hash was pinned or trusted
        with open(downloads[0], newline="") as fh:
            files = D.data_files(list(csv.DictReader(fh)), D.remote_manifest())
        if files:
            doc = {**doc, "data_files": files}
            validate_claims(doc)
            write_json(stage.output(0), doc)
    cells = summaries(records, ev.segment_hours)
    identities = {f"{r['dataset']}/{r['backbone']}/H{r['pred_len']}/{r['arm']}/seed{r['seed']}": r["identities"]
                  for r in records if r["identities"] is not None}
    write_json(stage.output(1), {"scale": stage.scale, "cells": cells, "identities": identities,
                                 "claims": [{"id": c.id, "kind": c.kind, "verdict": c.verdict, "title": c.title,
                                             "key_numbers": c.key_numbers, "statistic": c.statistic,
                                             "note": c.note} for c in claims]})
    run.set_tags(FIDELITY)
    for arm in sorted({r["arm"] for r in records}):  # one nested run per arm: means over seeds
        with run.child(arm=arm) as arun:
            for cell, arms in cells.items():
                if arm in arms:
                    arun.log_metrics({f"eval/{cell}/{k}": v["mean"] for k, v in arms[arm].items()})
    log_verdicts(run, doc)
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))
    for c in claims:
        log.info("%s: %s %s", c.id, c.verdict, c.key_numbers)


def report(stage: Stage, run: Any) -> None:
    """Figures (input/latent distributions, learned splines, forecasts) and report.md from metrics/eval.json
    and the train records."""
    from .report import flow_figure, forecast_figure, kurtosis_figure, report_markdown

    if len(stage.inputs) < 2 or len(stage.outputs) != 4:
        raise SystemExit(f"{SLUG} report: expected --in eval.json RECORDS.json ... --out kurtosis.png "
                         "flow_curves.png forecasts.png report.md")
    doc = read_json(stage.input(0))
    records = _records(stage.inputs[1:])
    save_figure(kurtosis_figure(records, doc), stage.output(0))
    save_figure(flow_figure(records), stage.output(1))
    save_figure(forecast_figure(records), stage.output(2))
    write_text(stage.output(3), report_markdown(doc))
    for p in stage.outputs:
        run.log_artifact(p)


STAGES = {"download": download, "preprocess": preprocess, "train": train, "evaluate": evaluate, "report": report}
