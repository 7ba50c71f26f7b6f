"""The five stages of the sard study; each ``(stage, run)`` reads ``stage.inputs``, writes ``stage.outputs``
atomically and logs to the MLflow run.

download   → raw/<file> for every file of the configured datasets (``manifest.csv``): copied out of the
             scikit-learn wheel (offline) or fetched (remote; the paper-scale archives), sha256-checked
preprocess → processed/<dataset>.npz per dataset: split, agents' predictions, costs (n, J+1) and the main model's
             parameters of every seed (``s<seed>/...``)
train      → models/<arm>/chunk<k>.{pt,json,npz} per trained arm and seed chunk: the rejectors' state dicts; the
             per-epoch curves and test metrics; the per-test-point arrays of the claims. The job of ``clean_l2d``
             also scores its rejectors for ``clean_l2d_agents_perturbed`` (the threat model)
evaluate   → claims.json + metrics/eval.json
report     → figures/def_loss_vs_eps.png + report.md
"""
from __future__ import annotations

import functools
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from icml25.core.claims import log_verdicts, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash, to_dict
from icml25.core.download import obtain, read_manifest, verified
from icml25.core.io import atomic_path, load_npz, read_json, save_figure, save_npz, write_json, write_text

from . import data as D
from .config import EVALUATION_ARMS, OFFLINE_DATASETS, PREP_KEYS, evaluation_arms_of, trained_arms

SLUG = "sard"
PAPER = {"title": "Adversarial Robustness in Two-Stage Learning-to-Defer: Algorithms and Guarantees",
         "ref": "Montreuil, Carlier, Ng, Ooi. ICML 2025 (PMLR 267); https://arxiv.org/abs/2502.01027"}
log = logging.getLogger(f"icml25.{SLUG}")


def primary_dataset(datasets: tuple[str, ...] | list[str]) -> str:
    """The dataset of the plain claim ids and metric keys: digits when run, else the first configured."""
    return "digits" if "digits" in datasets else datasets[0]


def raw_files(datasets: tuple[str, ...] | list[str]) -> list[str]:
    """Manifest names of the raw files of ``datasets``, in order (the download stage's outputs)."""
    return [name for ds in datasets for name in D.DATASET_FILES[ds]]


def _prefix(group: str, dataset: str, primary: str) -> str:
    return group if dataset == primary else f"{group}/{dataset}"


# ----------------------------------------------------------------------------------------------- download


def download(stage: Stage, run: Any) -> None:
    """Copy the scikit-learn files out of the installed wheel (offline) or fetch every configured file (remote)."""
    cfg = stage.config
    manifest = read_manifest(D.MANIFEST)
    names = raw_files(cfg.datasets)
    if len(stage.outputs) != len(names):
        raise SystemExit(f"{SLUG} download: expected {len(names)} --out paths ({names}), got {len(stage.outputs)}")
    run.log_params({"data_source": stage.data_source})
    for name, dest in zip(names, stage.outputs):
        packaged = functools.partial(D.package_bytes, name) if name in D.PACKAGE_FILES else None
        obtain(manifest[name], dest, stage.data_source, packaged, mirror=stage.mirror,
               trust_unpinned=stage.trust_unpinned)
        run.log_metric(f"download/{name}_bytes", dest.stat().st_size)
    run.log_artifact(D.MANIFEST)


# --------------------------------------------------------------------------------------------- preprocess


def preprocess(stage: Stage, run: Any) -> None:
    """Split each dataset, build its agents and costs for every seed; log the agents' quality (seed 0 of the
    config: ``preprocess/agent_acc_{j}`` or ``agent_mse_{j}``, ``preprocess/oracle_def_loss``)."""
    cfg = stage.config
    names = raw_files(cfg.datasets)
    if len(stage.inputs) != len(names) or len(stage.outputs) != len(cfg.datasets):
        raise SystemExit(f"{SLUG} preprocess: expected --in {names} and --out one npz per dataset "
                         f"{list(cfg.datasets)}")
    raw = dict(zip(names, stage.inputs))
    primary = primary_dataset(cfg.datasets)
    if cfg.device == "cpu" and set(cfg.datasets) & set(IMAGE_DATASETS):
        import torch

        torch.set_num_threads(1)  # the image main models train here; 2 shared cores
    for ds, out in zip(cfg.datasets, stage.outputs):
        files = [verified(raw[n]) for n in D.DATASET_FILES[ds]]
        section = getattr(cfg, ds)
        if ds in OFFLINE_DATASETS:
            data = D.read_raw(ds, files)
        else:  # the paper archives: CIFAR-10 tarball, cal_housing.tgz, the VOC 2007 tars
            data = D.read_paper_raw(ds, files, getattr(section, "image_size", None))
        settings = {ds: {k: to_dict(getattr(section, k)) for k in PREP_KEYS[ds]}, "device": cfg.device}
        images = ds in IMAGE_DATASETS  # x (uint8 images) is the same for every seed: stored once
        arrays: dict[str, np.ndarray] = {}
        for seed in cfg.seeds:
            prep = D.prepare(ds, seed, settings, data)
            arrays.update(D.prepared_arrays(prep, seed, shared_x=images))
            if seed == cfg.seeds[0]:
                run.log_metrics({f"{_prefix('preprocess', ds, primary)}/{k}": v for k, v in prep["info"].items()})
        if images:
            arrays["x"] = np.asarray(prep["x"])
        arrays.update(D.dataset_arrays(ds, prep["task"], prep["beta"], prep["clip"], prep["cost_scale"]))
        save_npz(out, **arrays)
        log.info("%s: %d seeds prepared, agents %s", ds, len(cfg.seeds), prep["info"])


#: paper-scale datasets whose inputs are images (ResNet-18 rejector; x stored once as uint8)
IMAGE_DATASETS = ("cifar10", "voc2007")


def rejector_settings(cfg: Any, ds: str) -> dict[str, Any]:
    """The train stage's settings of dataset ``ds``: ``epochs`` and the rejector (``hidden`` of an MLP, or
    ``rejector`` resnet18 with ``width`` and ``image_shape``)."""
    section = getattr(cfg, ds)
    if ds in IMAGE_DATASETS:
        size = 32 if ds == "cifar10" else int(section.image_size)
        return {"rejector": section.rejector, "width": int(section.width), "image_shape": [3, size, size],
                "epochs": int(section.epochs)}
    return {"hidden": list(section.hidden), "epochs": section.epochs}


# -------------------------------------------------------------------------------------------------- train


def train(stage: Stage, run: Any) -> None:
    """Train one arm's rejector for every dataset and seed of the chunk, evaluate it on the test split (and for
    the evaluation-only arms that reuse it); one nested MLflow run per seed with ``train/loss``,
    ``train/val_def_loss_clean``, ``train/val_def_loss_adv`` per epoch (``train/<dataset>/...`` for a non-primary
    dataset) and ``train/seconds``; the state dicts are the job's model.

    Inputs: processed/<dataset>.npz in the order of ``datasets``. Outputs: model .pt, records .json, points .npz.
    """
    import torch

    from .experiment import train_and_evaluate

    cfg = stage.config
    arm = stage.arm
    if arm not in trained_arms(cfg.arms):
        raise SystemExit(f"{SLUG} train: --arm must be one of the trained arms {trained_arms(cfg.arms)}, got "
                         f"{arm!r} (evaluation-only arms {sorted(EVALUATION_ARMS)} are scored in their base arm's "
                         "job)")
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"{SLUG} train: device 'cuda' (paper scale) but torch sees no CUDA device; run it on a "
                         "GPU node, or set device: cpu (the rehearsal does)")
    seeds = list(stage.seeds or cfg.seeds)
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"{SLUG} train: seeds {unknown} are not in the config's seeds")
    if len(stage.inputs) != len(cfg.datasets) or len(stage.outputs) != 3:
        raise SystemExit(f"{SLUG} train: expected --in one processed npz per dataset {list(cfg.datasets)} and "
                         "--out MODEL.pt RECORDS.json POINTS.npz")
    torch.set_num_threads(1)  # 2 shared cores, one job per arm: more threads only spin
    also = tuple(evaluation_arms_of(arm, cfg.arms))
    settings = {"arm_config": to_dict(cfg.arm_config), "train": to_dict(cfg.train), "attack": to_dict(cfg.attack)}
    for ds in cfg.datasets:
        settings[ds] = rejector_settings(cfg, ds)
    primary = primary_dataset(cfg.datasets)
    states, records, points = {}, [], {}
    for seed in seeds:
        with run.seed_run(seed) as srun:
            for ds, path in zip(cfg.datasets, stage.inputs):
                prep = D.prepared_from_arrays(_npz(path), seed, where=str(path))
                t0 = time.perf_counter()
                out = train_and_evaluate(settings, arm, seed, prep, also, device=cfg.device)
                p = _prefix("train", ds, primary)
                c = out["curves"]
                for i, epoch in enumerate(c["epoch"]):
                    srun.log_metrics({f"{p}/loss": c["train_surrogate"][i],
                                      f"{p}/val_def_loss_clean": c["val_def_loss_clean"][i],
                                      f"{p}/val_def_loss_adv": c["val_def_loss_adv"][i]}, step=int(epoch))
                srun.log_metrics({f"{p}/seconds": out["train_seconds"]}, step=int(c["epoch"][-1]))
                states[f"{ds}/s{seed}"] = {k: v.detach().cpu().clone() for k, v in out["model"].state_dict().items()}
                for name, ev in out["evals"].items():
                    metrics = {**ev["metrics"], **{f"agents/{k}": v for k, v in prep["info"].items()},
                               "train_seconds": out["train_seconds"], "eval_seconds": ev["eval_seconds"]}
                    records.append({"dataset": ds, "arm": name, "seed": seed, "metrics": metrics,
                                    "curves": c, "target": 1 + int(np.argmax(prep["beta"]))})
                    points.update({f"{name}/{ds}/s{seed}/{k}": np.asarray(v) for k, v in ev["points"].items()})
                log.info("%s %s seed %d: clean %.3f, adv@claim %s, %.1f s", arm, ds, seed,
                         out["evals"][arm]["metrics"]["def_loss_clean"],
                         {k: round(v, 3) for k, v in out["evals"][arm]["metrics"].items()
                          if k.startswith("def_loss_adv_")}, time.perf_counter() - t0)
    with atomic_path(stage.output(0)) as tmp:
        torch.save(states, tmp)
    write_json(stage.output(1), {"arm": arm, "arms": [arm, *also], "seeds": seeds, "scale": stage.scale,
                                 "runs": records})
    save_npz(stage.output(2), **points)
    run.log_model(stage.output(0), cfg)


_NPZ_CACHE: dict[str, dict[str, np.ndarray]] = {}


def _npz(path: Path) -> dict[str, np.ndarray]:
    key = str(path)
    if key not in _NPZ_CACHE:
        _NPZ_CACHE[key] = load_npz(path, required=("name", "task", "beta", "clip", "cost_scale"))
    return _NPZ_CACHE[key]


# ----------------------------------------------------------------------------------------------- evaluate


def collect(records_paths: list[Path], points_paths: list[Path]) -> dict[tuple[str, str, int], dict[str, Any]]:
    """{(dataset, arm, seed): {metrics, curves, target, points}} from the train outputs."""
    runs: dict[tuple[str, str, int], dict[str, Any]] = {}
    for rec_path, pts_path in zip(records_paths, points_paths):
        doc = read_json(rec_path)
        pts = load_npz(pts_path)
        for r in doc["runs"]:
            key = (r["dataset"], r["arm"], int(r["seed"]))
            if key in runs:
                raise SystemExit(f"{SLUG} evaluate: {key} appears twice (in {rec_path})")
            prefix = f"{r['arm']}/{r['dataset']}/s{r['seed']}/"
            r["points"] = {k[len(prefix):]: v for k, v in pts.items() if k.startswith(prefix)}
            if not r["points"]:
                raise SystemExit(f"{SLUG} evaluate: {pts_path} holds no points for {key}")
            runs[key] = r
    return runs


def evaluate(stage: Stage, run: Any) -> None:
    """Every claim and check from the train outputs (inputs: the .json and .npz of every train chunk, paired in
    order: json₁ npz₁ json₂ npz₂ …)."""
    from .evaluate import build_claims
    from .experiment import run_identities
    from .metrics import eps_key

    cfg = stage.config
    if len(stage.inputs) < 2 or len(stage.inputs) % 2:
        raise SystemExit(f"{SLUG} evaluate: expected --in RECORDS.json POINTS.npz [RECORDS.json POINTS.npz ...]")
    runs = collect(list(stage.inputs[0::2]), list(stage.inputs[1::2]))
    seeds = sorted({s for (_, _, s) in runs})
    datasets = [d for d in cfg.datasets if any(k[0] == d for k in runs)]
    arms = [a for a in cfg.arms if any(k[1] == a for k in runs)]
    primary = primary_dataset(cfg.datasets)
    eps_values = sorted(float(e) for e in cfg.attack.eps_grid)
    targets = {ds: next(r["target"] for k, r in runs.items() if k[0] == ds) for ds in datasets}
    identities = run_identities({"identities": to_dict(cfg.identities)})
    claims = build_claims(runs, datasets=datasets, primary=primary, arms=arms, seeds=seeds,
                          claim_eps_key=eps_key(cfg.attack.claim_eps), eps_keys=[eps_key(e) for e in eps_values],
                          eps_values=eps_values, targets=targets, identities=identities,
                          collapse_share=cfg.adequacy.collapse_share)
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source, claims=claims,
                       config_hash=config_hash(cfg), paper=PAPER, seeds=seeds)
    summary = summarize_runs(runs, datasets, arms, seeds, eps_values, targets)
    write_json(stage.output(1), {
        "scale": stage.scale, "seeds": seeds, "datasets": datasets, "arms": arms, "primary": primary,
        "eps": eps_values, "claim_eps": cfg.attack.claim_eps, "targets": targets, "identities": identities,
        "summary": summary,
        "per_seed": {f"{d}/{a}/s{s}": r["metrics"] for (d, a, s), r in sorted(runs.items())},
        "claims": [{"id": c.id, "kind": c.kind, "verdict": c.verdict, "statistic": c.statistic, "note": c.note,
                    "gates_failed": [g.name for g in c.gates if not g.passed]} for c in claims]})
    for arm in arms:  # one nested run per arm (means over seeds), one per seed under it
        with run.child(arm=arm) as arun:
            for ds in datasets:
                arun.log_metrics({f"{_prefix('eval', ds, primary)}/{k}": v["mean"]
                                  for k, v in summary[ds].get(arm, {}).items() if v["mean"] is not None})
            for seed in seeds:
                with arun.child(arm=arm, seed=seed) as srun:
                    for ds in datasets:
                        m = runs.get((ds, arm, seed), {}).get("metrics", {})
                        srun.log_metrics({f"{_prefix('eval', ds, primary)}/{k}": float(v) for k, v in m.items()
                                          if k in summary[ds].get(arm, {}) and v is not None and np.isfinite(float(v))})
    log_verdicts(run, doc)
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))
    for c in claims:
        log.info("%s: %s %s", c.id, c.verdict, c.key_numbers)


#: per-run test metrics summarised over seeds (eval.json, MLflow eval/<metric>)
def _summary_keys(eps_values: list[float], n_agents: int, target_keys: bool = True) -> list[str]:
    from .metrics import eps_key

    keys = ["def_loss_clean", *[f"def_loss_adv_{eps_key(e)}" for e in eps_values]]
    keys += [f"alloc_rate_{j}" for j in range(n_agents)] + [f"adv_alloc_rate_{j}" for j in range(n_agents)]
    if target_keys:
        keys += [f"targeted_success_{j}" for j in range(n_agents)]
    return keys


def summarize_runs(runs: dict, datasets: list[str], arms: list[str], seeds: list[int], eps_values: list[float],
                   targets: dict[str, int]) -> dict[str, dict[str, dict[str, dict[str, float | None]]]]:
    """{dataset: {arm: {metric: {mean, sd, n}}}} over seeds (NaN values, an undefined targeted rate, left out)."""
    out: dict = {}
    for ds in datasets:
        out[ds] = {}
        for arm in arms:
            per = [runs[(ds, arm, s)]["metrics"] for s in seeds if (ds, arm, s) in runs]
            if not per:
                continue
            n_agents = sum(1 for k in per[0] if k.startswith("alloc_rate_"))
            out[ds][arm] = {}
            for key in _summary_keys(eps_values, n_agents):
                vals = np.array([m[key] for m in per if key in m and m[key] is not None], dtype=float)
                vals = vals[np.isfinite(vals)]
                out[ds][arm][key] = {"mean": float(vals.mean()) if vals.size else None,
                                     "sd": float(vals.std(ddof=1)) if vals.size > 1 else 0.0, "n": int(vals.size)}
    return out


# ------------------------------------------------------------------------------------------------- report


def report(stage: Stage, run: Any) -> None:
    """Deferral loss against ε (per dataset, every arm, mean ± sd over seeds) and report.md from eval.json."""
    from .report import def_loss_figure, report_markdown

    doc = read_json(stage.input(0))
    save_figure(def_loss_figure(doc), stage.output(0))
    write_text(stage.output(1), report_markdown(doc))
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))


STAGES = {"download": download, "preprocess": preprocess, "train": train, "evaluate": evaluate, "report": report}
