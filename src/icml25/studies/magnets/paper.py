"""The paper-scale stages of magnets (``data: paper``): MaGNeTS' class-conditional ImageNet-256 setting (Goyal et
al., ICML 2025, Sec. 4 "Experiments", ImageNet 256×256): MaskGIT VQGAN tokens (16×16, 1024 codes), the nested
masked transformer at MaskGIT's size (24 layers, width 768, 16 heads, MLP 3072), the same nested loss and the same
decoding arms as the default scale, FID on generated samples with the FID Inception-v3, and claims.json through
the same claim code (:func:`.evaluate.build_claims`).

preprocess → processed/vqgan.pt (the converted tokenizer), tokens_train.npz (tokens (n, 256) uint16, labels,
             wnids), tokens_val.npz, fid_reference.npz (Inception mean/covariance of the real validation images and
             the tokenizer floor: FID of the round-tripped validation images)
train      → models/nested/chunk{k}.pt (same blob as the default scale)
evaluate   → claims.json, metrics/eval.json, metrics/arms.csv, metrics/samples.npz (a few decoded images per arm)

The video settings of the paper (UCF-101, Kinetics-600 frame prediction with the MAGVIT tokenizer, FVD with I3D)
are not implemented: claims.json lists them as untested entries (:func:`video_untested`).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("icml25.magnets")

TRAIN_PREFIX, VAL, TOKENIZER, INCEPTION = "imagenet_train_", "imagenet_val", "maskgit_tokenizer", "fid_inception"


class PaperInputError(SystemExit):
    pass


def raw_roles(paths: Sequence[Path]) -> dict[str, Any]:
    """Split the raw inputs by manifest row name (the file name of ``raw/paper/<name>``): training shards (sorted
    by name), validation shard, tokenizer checkpoint, Inception weights; a missing role raises naming it."""
    by_name = {Path(p).name: Path(p) for p in paths}
    roles = {"train": [by_name[n] for n in sorted(by_name) if n.startswith(TRAIN_PREFIX)],
             "val": by_name.get(VAL), "tokenizer": by_name.get(TOKENIZER), "inception": by_name.get(INCEPTION)}
    missing = [k for k, v in roles.items() if not v]
    if missing:
        raise PaperInputError(f"magnets preprocess: no raw input for {missing} among {sorted(by_name)} (rows "
                              f"{TRAIN_PREFIX}*, {VAL}, {TOKENIZER}, {INCEPTION} of manifest.csv)")
    return roles


def _torch():
    import torch

    torch.set_num_threads(1)
    return torch


def load_tokenizer_checkpoint(path: Path, section: Mapping, K: int):
    """The VQGAN from the published Flax checkpoint at ``path`` (hash re-checked, restricted msgpack reader)."""
    from icml25.core.download import verified

    from . import flaxmsgpack, vqgan

    cfg = vqgan.config_from(section, K)
    tree = flaxmsgpack.load(verified(path))
    model = vqgan.VQGAN(cfg)
    model.load_state_dict(vqgan.convert_flax(tree, cfg, str(path)))
    return model.eval()


def frechet_from_stats(mu_a: np.ndarray, s_a: np.ndarray, mu_b: np.ndarray, s_b: np.ndarray,
                       eps: float = 1e-6) -> float:
    """‖μ_a − μ_b‖² + Tr(Σ_a + Σ_b − 2 (Σ_a Σ_b)^{1/2}) (``scipy.linalg.sqrtm``, real part; clipped at 0): the
    same formula as :func:`.evaluate.frechet_distance`, from stored statistics. When the square root is not finite
    (singular covariances: fewer samples than feature dimensions, as in the rehearsal) it is recomputed with ``eps``
    added to both diagonals, as the FID reference code does."""
    from scipy.linalg import sqrtm

    covmean = sqrtm(s_a @ s_b)
    if not np.isfinite(covmean).all():
        offset = eps * np.eye(len(s_a))
        covmean = sqrtm((s_a + offset) @ (s_b + offset))
    covmean = np.real(covmean)
    fd = float(((mu_a - mu_b) ** 2).sum() + np.trace(s_a) + np.trace(s_b) - 2.0 * np.trace(covmean))
    return max(fd, 0.0)


def stats(feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean (p,), covariance (p, p)) of features (n, p) (``np.cov``, ddof 1)."""
    if len(feats) < 2:
        raise ValueError(f"stats: need at least 2 feature rows, got {len(feats)}")
    return feats.mean(0), np.cov(feats, rowvar=False)


# -------------------------------------------------------------------------------------------------- preprocess
def preprocess(stage: Any, run: Any) -> None:
    """Tokenise the ImageNet shards with the converted MaskGIT VQGAN, Inception statistics of the real validation
    images and the tokenizer floor (FID of round-tripped vs real validation images)."""
    torch = _torch()
    from icml25.core.download import verified
    from icml25.core.io import atomic_path, save_npz

    from . import imagenet as IN
    from .data import codebook_perplexity
    from .inception import image_features, load_fid_inception

    cfg, p = stage.config, stage.config.paper
    roles = raw_roles(list(stage.inputs))
    dev = torch.device(p.device)
    t0 = time.perf_counter()
    vq = load_tokenizer_checkpoint(roles["tokenizer"], p.vqgan.model_dump(), cfg.tokenizer.K).to(dev)
    net = load_fid_inception(verified(roles["inception"]), p.inception_width, dev)

    def tokenize(images: np.ndarray) -> np.ndarray:
        x = torch.as_tensor(images).to(dev).permute(0, 3, 1, 2).float() / 255.0
        return vq.encode(x).cpu().numpy().astype(np.uint16)

    tok, wnids = [], []
    for w, imgs in IN.batches([verified(s) for s in roles["train"]], p.image_size, p.batch):
        tok.append(tokenize(imgs))
        wnids += w
    if not tok:
        raise PaperInputError(f"magnets preprocess: the training shards {roles['train']} hold no images")
    index = IN.class_index(wnids, p.n_classes, "training shards " + ", ".join(s.name for s in roles["train"]))
    tok_tr, y_tr = np.concatenate(tok), IN.labels_of(wnids, index, "training shards")
    classes = np.asarray(sorted(index, key=index.get))
    v_tok, v_wnids, real, rt, se, n_px = [], [], [], [], 0.0, 0
    for w, imgs in IN.batches([verified(roles["val"])], p.image_size, p.batch):
        t = tokenize(imgs)
        back = vq.decode(torch.as_tensor(t.astype(np.int64)).to(dev))  # (b, 3, H, W) in [0, 1]
        back_u8 = (back * 255.0).round().byte().permute(0, 2, 3, 1).cpu().numpy()
        se += float((((back_u8.astype(np.float64) - imgs) / 255.0) ** 2).sum())
        n_px += imgs.size
        real.append(image_features(net, imgs, p.batch, dev))
        rt.append(image_features(net, back_u8, p.batch, dev))
        v_tok.append(t)
        v_wnids += w
    if not v_tok:
        raise PaperInputError(f"magnets preprocess: {roles['val']} holds no images")
    real_f, rt_f = np.concatenate(real), np.concatenate(rt)
    mu_r, s_r = stats(real_f)
    mu_t, s_t = stats(rt_f)
    floor = frechet_from_stats(mu_t, s_t, mu_r, s_r)
    y_val = IN.labels_of(v_wnids, index, str(roles["val"]))
    with atomic_path(stage.output(0)) as tmp:
        torch.save({"config": {**p.vqgan.model_dump(), "channel_multipliers": list(p.vqgan.channel_multipliers),
                               "codebook_size": cfg.tokenizer.K}, "state": vq.cpu().state_dict()}, tmp)
    save_npz(stage.output(1), tokens=tok_tr, labels=y_tr, classes=classes)
    save_npz(stage.output(2), tokens=np.concatenate(v_tok), labels=y_val, classes=classes)
    save_npz(stage.output(3), mu=mu_r, sigma=s_r, n=np.int64(len(real_f)), fid_floor_tokenizer=np.float64(floor),
             mu_roundtrip=mu_t, sigma_roundtrip=s_t, feature_dim=np.int64(net.dim))
    metrics = {"n_train": len(tok_tr), "n_val": len(real_f), "n_classes": len(classes),
               "recon_mse": se / max(n_px, 1), "codebook_perplexity": codebook_perplexity(tok_tr, cfg.tokenizer.K),
               "fid_floor_tokenizer": floor, "seconds": time.perf_counter() - t0}
    run.log_metrics({f"preprocess/{k}": float(v) for k, v in metrics.items()})
    log.info("preprocess (paper): %s", metrics)


def read_tokens(path: Path) -> dict[str, np.ndarray]:
    from icml25.core.io import load_npz

    z = load_npz(path, required=("tokens", "labels", "classes"))
    if z["tokens"].ndim != 2 or len(z["tokens"]) != len(z["labels"]):
        raise PaperInputError(f"magnets: {path}: tokens (n, N) and labels (n,) expected, got {z['tokens'].shape} "
                              f"and {z['labels'].shape}")
    return z


# ------------------------------------------------------------------------------------------------------- train
def train(stage: Any, run: Any) -> None:
    """The nested generator of every seed of the chunk on the ImageNet tokens (same loss and schedule code as the
    default scale, on ``paper.device``); curves logged every ``paper.log_every`` steps."""
    torch = _torch()
    from icml25.core.io import atomic_path

    from .train import train_generator

    cfg, p = stage.config, stage.config.paper
    if stage.arm not in cfg.arms:
        raise SystemExit(f"magnets train: --arm must be one of {list(cfg.arms)}, got {stage.arm!r}")
    seeds = stage.seeds or cfg.seeds
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"magnets train: seeds {unknown} are not in the config's seeds")
    z = read_tokens(stage.input(0))
    n_classes = len(z["classes"])
    model_cfg, train_cfg = cfg.model.model_dump(), cfg.train.model_dump()
    states = {}
    run.log_params({"arm": stage.arm, "seeds_run": list(seeds)})
    for seed in seeds:
        model, curves = train_generator(z["tokens"], z["labels"], model_cfg, train_cfg, cfg.tokenizer.K, seed,
                                        n_classes=n_classes, device=p.device)
        states[str(seed)] = {k: v.cpu() for k, v in model.state_dict().items()}
        with run.seed_run(seed) as srun:
            for step in range(0, len(curves["loss"]), p.log_every):
                srun.log_metrics({f"train/{k}": v[step] for k, v in curves.items() if k != "seconds"}, step=step)
            srun.log_metric("train/seconds", curves["seconds"])
        log.info("seed %d: %.1f s, final loss %.3f", seed, curves["seconds"], curves["loss"][-1])
    with atomic_path(stage.output(0)) as tmp:
        torch.save({"model": {**model_cfg, "widths": list(model_cfg["widths"])}, "vocab": cfg.tokenizer.K,
                    "seq_len": int(z["tokens"].shape[1]), "n_classes": n_classes, "states": states}, tmp)
    run.log_model(stage.output(0), stage.config)


# ---------------------------------------------------------------------------------------------------- evaluate
def load_generators(paths: Sequence[Path], device: str) -> dict[int, Any]:
    torch = _torch()
    from .train import build_model

    models = {}
    for path in paths:
        blob = torch.load(path, weights_only=True)
        for seed, sd in blob["states"].items():
            m = build_model(blob["model"], blob["vocab"], n_classes=int(blob.get("n_classes", 10)),
                            seq_len=blob["seq_len"])
            m.load_state_dict(sd)
            models[int(seed)] = m.to(device).eval()
    return models


def decode_arm_fid(model: Any, arm: str, settings: Mapping[str, Any], seed: int, vq: Any, net: Any,
                   ref: Mapping[str, np.ndarray], n_samples: int, batch: int, device: str) -> dict[str, Any]:
    """Decode ``n_samples`` class-balanced samples (``n_samples / n_classes`` per class) with one arm in batches
    (decoding generator on ``device`` seeded ``seed_offset + seed``, the same for every arm), decode the tokens to
    images with the VQGAN and score FID against the real validation statistics."""
    torch = _torch()
    from .data import balanced_classes
    from .evaluate import arm_schedule
    from .inception import image_features
    from .method import count_flops, decode_trace

    dc = settings["decode"]
    schedule, use_cache = arm_schedule(arm, dc["magnets_schedule"], dc["T"])
    classes = balanced_classes(n_samples, model.n_classes)
    gen = torch.Generator(device=device).manual_seed(int(dc["seed_offset"]) + int(seed))
    feats, shown, flops, wall = [], [], None, 0.0
    for i in range(0, n_samples, batch):
        cls = torch.as_tensor(classes[i:i + batch]).to(device)
        t0 = time.perf_counter()
        tr = decode_trace(model, cls, schedule, use_cache, dc["T"], dc["choice_temperature"], gen,
                          on_width_change=dc["on_width_change"])
        if device != "cpu":
            torch.cuda.synchronize()
        wall += time.perf_counter() - t0
        flops = tr["flops"]
        imgs = (vq.decode(tr["tokens"]) * 255.0).round().byte().permute(0, 2, 3, 1).cpu().numpy()
        if not shown:
            shown.append(imgs[:8])
        feats.append(image_features(net, imgs, batch, device))
    f = np.concatenate(feats)
    mu, sigma = stats(f)
    fid = frechet_from_stats(mu, sigma, ref["mu"], ref["sigma"])
    closed = count_flops(schedule, use_cache, model.seq_len, model.dim, model.depth, model.vocab, dc["T"],
                         on_width_change=dc["on_width_change"])
    return {"arm": arm, "seed": int(seed), "schedule": schedule, "use_cache": use_cache, "fd": fid,
            "class_acc": float("nan"), "flops_step": [int(x) for x in flops], "flops_total": int(sum(flops)),
            "counter_matches_closed_form": [int(x) for x in flops] == closed, "wall_s": wall,
            "wall_ms_per_sample": 1e3 * wall / n_samples, "images": shown[0]}


def video_untested() -> list:
    """The paper's video settings, not implemented here: explicit untested entries naming what is missing."""
    from icml25.core.claims import untested

    missing = ("this package has no UCF-101 (rar/avi) or Kinetics-600 (mp4) clip loader, no "
               "MAGVIT video tokenizer in torch with a converter from its published checkpoint, no I3D network for "
               "FVD; the data (https://www.crcv.ucf.edu/data/UCF101/UCF101.rar; the Kinetics-600 lists of "
               "s3.amazonaws.com/kinetics/600/annotations) are not in manifest.csv because nothing reads them")
    return [untested("c6_ucf101_fvd", "On UCF-101 class-conditional video generation MaGNeTS keeps FVD competitive "
                     "with the full MAGVIT-style model at about 3x less decoding compute", scale="paper",
                     reason=missing, title="UCF-101 video generation (FVD)"),
            untested("c7_k600_fvd", "On Kinetics-600 frame prediction MaGNeTS keeps FVD competitive with the full "
                     "model at about 3x less decoding compute", scale="paper", reason=missing,
                     title="Kinetics-600 frame prediction (FVD)")]


def evaluate(stage: Any, run: Any) -> None:
    """Every decoding arm × seed on ImageNet-256: FID, FLOPs, wall time; the mechanism checks on each trained
    generator; claims.json through :func:`.evaluate.build_claims` plus the untested video entries."""
    torch = _torch()
    import pandas as pd

    from icml25.core.claims import log_verdicts, write_claims
    from icml25.core.config import config_hash
    from icml25.core.download import verified
    from icml25.core.io import atomic_path, load_npz, save_npz, write_json

    from . import PAPER
    from .evaluate import build_claims
    from .experiment import mechanism_checks
    from .inception import load_fid_inception
    from .vqgan import VQGAN, VQGANConfig

    cfg, p = stage.config, stage.config.paper
    if len(stage.inputs) < 4:
        raise SystemExit("magnets evaluate: expected --in vqgan.pt fid_reference.npz fid_inception CHUNK.pt...")
    dev = p.device
    blob = torch.load(stage.input(0), weights_only=True)
    c = blob["config"]
    vq = VQGAN(VQGANConfig(filters=c["filters"], channel_multipliers=tuple(c["channel_multipliers"]),
                           num_res_blocks=c["num_res_blocks"], embedding_dim=c["embedding_dim"],
                           codebook_size=c["codebook_size"], groups=c["groups"]))
    vq.load_state_dict(blob["state"])
    vq = vq.to(dev).eval()
    ref = load_npz(stage.input(1), required=("mu", "sigma", "fid_floor_tokenizer"))
    net = load_fid_inception(verified(stage.input(2)), p.inception_width, dev)
    models = load_generators(list(stage.inputs[3:]), dev)
    missing = sorted(set(cfg.seeds) - set(models))
    if missing:
        raise SystemExit(f"magnets evaluate: no trained model for seeds {missing}")
    settings = {"decode": cfg.decode.model_dump(), "decode_arms": list(cfg.decode_arms)}
    rows, shown, checks = [], {}, {}
    for seed in cfg.seeds:
        for arm in cfg.decode_arms:
            r = decode_arm_fid(models[seed], arm, settings, seed, vq, net, ref, p.fid_samples, p.batch, dev)
            if seed == cfg.seeds[0]:
                shown[arm] = r["images"]
            rows.append({k: v for k, v in r.items() if k != "images"})
            log.info("seed %d %s: FID %.4g, %.3g FLOPs", seed, arm, r["fd"], r["flops_total"])
        checks[seed] = mechanism_checks(models[seed], settings, seed)
    table = pd.DataFrame(rows)
    floor = float(ref["fid_floor_tokenizer"])
    claims, metrics = build_claims(table, checks, list(cfg.seeds), list(cfg.decode_arms), fd_floor_tokenizer=floor,
                                   adequacy=cfg.adequacy.model_dump(), paper_data=True)
    claims += video_untested()
    doc = write_claims(stage.output(0), study="magnets", scale=stage.scale, data_source=stage.data_source,
                       claims=claims, config_hash=config_hash(stage.config), paper=PAPER, seeds=list(cfg.seeds))
    write_json(stage.output(1), {"scale": stage.scale, "seeds": list(cfg.seeds), "metric": "FID (Inception pool3)",
                                 **metrics, "claims": [{"id": c.id, "kind": c.kind, "verdict": c.verdict,
                                                        "key_numbers": c.key_numbers} for c in claims]})
    flat = table.drop(columns=["schedule"]).assign(
        schedule=table["schedule"].map(lambda s: " ".join(f"{f:g}" for f in s)),
        flops_step=table["flops_step"].map(lambda s: " ".join(map(str, s))))
    with atomic_path(stage.output(2)) as tmp:
        flat.to_csv(tmp, index=False)
    save_npz(stage.output(3), **{f"images_{a}": im for a, im in shown.items()})
    for arm, g in table.groupby("arm", sort=False):
        with run.child(arm=str(arm)) as arun:
            arun.log_metrics({"eval/fid": float(g["fd"].mean()), "eval/flops_total": float(g["flops_total"].iloc[0]),
                              "eval/wall_ms_per_sample": float(g["wall_ms_per_sample"].mean())})
    run.log_metric("eval/fid_floor_tokenizer", floor)
    log_verdicts(run, doc)
    for path in stage.outputs[:3]:
        run.log_artifact(path)
