"""The paper-scale stages of the unisoma study (the official datasets, the nine experiments of the official code).

download   → raw/<dataset>_dataset_<split>.pkl: each official pickle from ``paper.manual_dir`` (the official README's
             ``root_folder`` layout, placed by hand) or ``--mirror``, sha256-checked (UNPINNED rows only with
             ``trust_unpinned``, then pinned) and accepted only if the restricted loader reads it and every sample
             converts (:func:`paper_data.convert`, shared with preprocess)
preprocess → interim/<dataset>/<split>.npz (ragged npz, one block per task) + processed/<dataset>/normalisers.npz
train      → models/<dataset>/<task>/chunk<k>.pt: every arm for the chunk's seeds (best validation checkpoint)
evaluate   → claims.json (one explicit-vs-implicit claim per experiment, seeds as units; checks) + metrics/eval.json
report     → figures/error_maps.png + report.md
"""
from __future__ import annotations

import logging
import pickle
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from icml25.core.claims import (Claim, Evidence, check, common_seeds, log_verdicts, summarize, untested, verdict,
                                 write_claims)
from icml25.core.cli import Stage
from icml25.core.config import config_hash
from icml25.core.io import atomic_path, load_npz, save_npz, write_json

from . import paper as P
from . import paper_data as PD
from .evaluate import baseline_gate, decide_allocation, decide_data_safety, decide_equivariance, decide_headline, \
    decide_param_match

SLUG = "unisoma"
log = logging.getLogger(f"icml25.{SLUG}")


def experiments(cfg: Any) -> list[PD.Experiment]:
    return [PD.EXPERIMENTS[name] for name in cfg.paper.experiments]


def datasets(cfg: Any) -> list[str]:
    return list(dict.fromkeys(e.dataset for e in experiments(cfg)))


def _tasks(cfg: Any, dataset: str) -> list[PD.Experiment]:
    return [e for e in experiments(cfg) if e.dataset == dataset]


def format_check(dataset: str, cfg: Any):
    """The download's format check of one file: restricted load and every sample through every task view of the
    configured experiments (raises :class:`DataError`, a ValueError, naming file, sample and key)."""
    def check_file(path: Path) -> None:
        samples = PD.read_official(path, max_bytes=cfg.data.max_pickle_bytes)
        for exp in _tasks(cfg, dataset):
            PD.convert(dataset, samples, exp.task, PD.experiment_frames(exp, cfg.paper.frames), str(path))
    return check_file


def download(stage: Stage, run: Any) -> None:
    """Every official pickle of the configured datasets from the hand-placed tree (``paper.manual_dir``, else
    ``--mirror``), verified against manifest.csv and by :func:`format_check`; --out raw/<file> per dataset x split."""
    from icml25.core.download import all_or_nothing, fetch, read_manifest

    cfg = stage.config
    entries = read_manifest(Path(__file__).with_name("manifest.csv"))
    names = [f"{d}_{s}" for d in datasets(cfg) for s in PD.SPLITS]
    if len(stage.outputs) != len(names):
        raise SystemExit(f"{SLUG} download: expected {len(names)} --out paths ({names}), got {len(stage.outputs)}")
    where = cfg.paper.manual_dir or stage.mirror
    if not where:
        raise SystemExit(f"{SLUG} download: the official pickles have no plain-https download (PKU disk and Google "
                         "Drive folders of the official README); place them by hand as <dataset>/data/input/"
                         "<dataset>_dataset_<split>.pkl under one directory and set paper.manual_dir to it")
    if cfg.paper.manual_dir:
        try:
            PD.check_manual_layout(cfg.paper.manual_dir, datasets(cfg))
        except PD.DataError as err:
            raise SystemExit(f"{SLUG} download: {err}") from None
    total = 0
    with all_or_nothing(stage.outputs):
        for name, out in zip(names, stage.outputs):
            dataset, split = name.rsplit("_", 1)
            if Path(out).name != PD.file_name(dataset, split) or name not in entries:
                raise SystemExit(f"{SLUG} download: --out {out} does not match manifest row {name}")
            fetch(entries[name], out, where, trust_unpinned=stage.trust_unpinned, check=format_check(dataset, cfg),
                  progress=False)
            total += Path(out).stat().st_size
    run.log_metrics({"download/files": len(names), "download/bytes": total})


def preprocess(stage: Stage, run: Any) -> None:
    """--in the 3 pickles of one dataset (train, eval, test); --out 3 ragged npz + normalisers.npz. Every task of
    the dataset's configured experiments gets its block (``<task>/…`` keys); normalisers from the train split."""
    cfg = stage.config
    dataset = Path(stage.input(0)).name.removesuffix("_dataset_train.pkl")
    exps = _tasks(cfg, dataset)
    if not exps:
        raise SystemExit(f"{SLUG} preprocess: {stage.input(0)} is not a dataset of paper.experiments")
    norm: dict[str, np.ndarray] = {}
    from icml25.core.download import verified

    for i, split in enumerate(PD.SPLITS):
        path = verified(stage.input(i))  # re-hash against the download's record before unpickling
        samples = PD.read_official(path, max_bytes=cfg.data.max_pickle_bytes)
        arrays: dict[str, np.ndarray] = {}
        for exp in exps:
            items = PD.convert(dataset, samples, exp.task, PD.experiment_frames(exp, cfg.paper.frames), str(path))
            arrays.update(PD.pack(exp.task, items))
            if split == "train":
                norm.update(PD.with_prefix(exp.task, PD.fit_normalisers(
                    exp.task, items, P.edge_lengths(exp.task, items, cfg.model.knn_k))))
        save_npz(stage.output(i), **arrays)
        run.log_metric(f"preprocess/{split}_samples", len(samples))
    save_npz(stage.output(3), **norm)


def _load(paths, task: str):
    return [PD.unpack(task, load_npz(p)) for p in paths]


def train(stage: Stage, run: Any) -> None:
    """--set experiment=<dataset>/<task>; --in 3 npz + normalisers; every arm for every seed of the chunk; --out
    the chunk (state dicts, archs, histories, normalisers)."""
    cfg = stage.config
    name = stage.extra.get("experiment")
    if name not in cfg.paper.experiments:
        raise SystemExit(f"{SLUG} train: --set experiment=<dataset>/<task> must be one of "
                         f"{list(cfg.paper.experiments)}, got {name!r}")
    exp = PD.EXPERIMENTS[name]
    torch.set_num_threads(cfg.threads)
    train_items, val_items, _ = _load(stage.inputs[:3], exp.task)
    norm = PD.strip_prefix(exp.task, load_npz(stage.input(3)))
    epochs = cfg.paper.epochs or exp.epochs
    eval_every = min(cfg.paper.eval_every or exp.eval_every, epochs)
    seeds = stage.seeds or cfg.seeds
    chunk: dict[str, Any] = {"experiment": name, "seeds": list(seeds), "runs": {}}
    for arm in cfg.arms:
        for seed in seeds:
            with run.child(arm=arm) as arun, arun.seed_run(seed) as srun:
                model, arch, hist = P.train_experiment(
                    exp, arm, train_items, val_items, norm, cfg.model, lr=cfg.train.lr, epochs=epochs,
                    eval_every=eval_every, seed=seed, device=cfg.paper.device,
                    on_epoch=lambda e, m: srun.log_metrics({f"train/{k}": v for k, v in m.items()}, step=e))
                srun.log_params({"param_count": hist["param_count"], "best_epoch": hist["best_epoch"]})
            chunk["runs"][f"{arm}/{seed}"] = {"state_dict": model.state_dict(), "arch": arch, "history": hist}
            log.info("%s %s seed %d: %d params, best val %.4g at epoch %d, %.1f s", name, arm, seed,
                     hist["param_count"], hist["best_val_loss"], hist["best_epoch"], hist["seconds"])
    with atomic_path(stage.output(0)) as tmp:
        torch.save(chunk, tmp)
    run.log_model(stage.output(0), cfg)


def _data_safety(raw: Path, dataset: str, task: str, frames: int | None, npz: Path, max_bytes: int) -> dict:
    """Round trip (the test pickle re-read and converted equals preprocess's npz) and rejection of a malicious and
    an OrderedDict pickle by the paper reader, without side effects."""
    from .method import malicious_pickle, ordered_dict_pickle

    items = PD.convert(dataset, PD.read_official(raw, max_bytes=max_bytes), task, frames, str(raw))
    packed, stored = PD.pack(task, items), load_npz(npz)
    equal = all(np.array_equal(v, stored[k]) for k, v in packed.items())
    with tempfile.TemporaryDirectory() as tmp:
        sentinel, bad = Path(tmp, "pwned"), Path(tmp, "bad.pkl")
        rejected = {}
        for kind, payload in (("malicious", malicious_pickle(sentinel)), ("ordered", ordered_dict_pickle())):
            bad.write_bytes(payload)
            try:
                PD.read_official(bad)
                rejected[kind] = False
            except PD.DataError:
                rejected[kind] = True
        return {"roundtrip_equal": bool(equal), "malicious_rejected": rejected["malicious"],
                "side_effect_absent": not sentinel.exists(), "ordered_dict_rejected": rejected["ordered"]}


def evaluate(stage: Stage, run: Any) -> None:
    """--in raw pickles (dataset x split), interim npz (dataset x split), normalisers (per dataset), model chunks
    (experiment x chunk), in the rule's order; --out claims.json metrics/eval.json."""
    from . import PAPER
    from .method import allocation_check, equivariance_deviation

    cfg = stage.config
    torch.set_num_threads(cfg.threads)
    dsets = datasets(cfg)
    nd = len(dsets)
    raw = dict(zip([(d, s) for d in dsets for s in PD.SPLITS], stage.inputs[:3 * nd]))
    interim = dict(zip([(d, s) for d in dsets for s in PD.SPLITS], stage.inputs[3 * nd:6 * nd]))
    norms = dict(zip(dsets, stage.inputs[6 * nd:7 * nd]))
    chunks = stage.inputs[7 * nd:]
    if not chunks:
        raise SystemExit(f"{SLUG} evaluate: no model chunks among --in")
    by_exp: dict[str, list[dict]] = {}
    for path in chunks:
        doc = torch.load(path, map_location="cpu", weights_only=True)
        by_exp.setdefault(doc["experiment"], []).append(doc)
    claims: list[Claim] = []
    summary: dict[str, Any] = {}
    per_sample: dict[str, Any] = {}
    params: dict[str, dict[str, int]] = {}
    first_models: dict[str, Any] = {}
    all_seeds: set[int] = set()
    for exp in experiments(cfg):
        if exp.name not in by_exp:
            raise SystemExit(f"{SLUG} evaluate: no model chunk for experiment {exp.name}")
        test = PD.unpack(exp.task, load_npz(interim[(exp.dataset, "test")]))
        norm = PD.strip_prefix(exp.task, load_npz(norms[exp.dataset]))
        per: dict[str, dict[int, dict[str, np.ndarray]]] = {}
        for doc in by_exp[exp.name]:
            for key, r in doc["runs"].items():
                arm, seed = key.split("/")
                model = P.model_from_arch(r["arch"])
                model.load_state_dict(r["state_dict"])
                model.to(cfg.paper.device)
                per.setdefault(arm, {})[int(seed)] = P.test_metrics(model, exp, test, norm, cfg.model.knn_k,
                                                                     cfg.paper.device)
                params.setdefault(exp.name, {})[arm] = r["history"]["param_count"]
                first_models.setdefault(exp.name, {}).setdefault(arm, model.cpu())
        seeds = common_seeds(per, list(per))
        all_seeds.update(seeds)
        metric = "rel_l2_pos" if exp.task == PD.LONG else "rollout_rmse"
        summary[exp.name] = {arm: {k: summarize([per[arm][s][k].mean() for s in seeds]) for k in per[arm][seeds[0]]
                                   if k != "val_loss"} for arm in per}
        per_sample[exp.name] = {arm: {str(s): {k: v.tolist() for k, v in per[arm][s].items()} for s in seeds}
                                for arm in per}
        if "unisoma" in per and "implicit" in per:
            u = np.stack([per["unisoma"][s][metric] for s in seeds])
            i = np.stack([per["implicit"][s][metric] for s in seeds])
            rep, notrep, stat = decide_headline(u, i, floor=cfg.eval.min_gain)
            if exp.task == PD.LONG:
                g = baseline_gate([per["implicit"][s]["rel_l2_disp"].mean() for s in seeds],
                                  cfg.adequacy.max_baseline_rel_l2_disp)
            else:  # the rollout error relative to predicting no motion (1 = no better than standing still)
                g = baseline_gate([per["implicit"][s]["rollout_rmse"].mean() / per["implicit"][s]["static_rmse"].mean()
                                   for s in seeds], cfg.adequacy.max_baseline_rel_l2_disp)
            what = ("relative L2 of the final positions" if exp.task == PD.LONG else
                    "rollout RMSE (mean over frames of the sum over deformables)")
            claims.append(Claim(
                id=f"headline_explicit_beats_implicit_{exp.dataset}_{exp.task}",
                title=f"explicit beats implicit: {exp.dataset} {exp.task}",
                statement=f"Unisoma's test {what} on {exp.dataset} ({exp.task}) is lower than the implicit "
                          "baseline's (the paper's explicit-beats-implicit claim; baseline and thresholds ours)",
                source="ours", data=f"official {exp.dataset} test split, {len(test)} "
                                    f"{'samples' if exp.task == PD.LONG else 'trajectories'}",
                test=f"per seed d = mean over test items of (unisoma - implicit) {metric}; Student-t 95% CI over seeds",
                threshold="reproduced if CI high < 0 (and mean <= -eval.min_gain); not reproduced if CI low > "
                          "-eval.min_gain",
                verdict=verdict(rep, notrep), statistic=stat, gates=[g],
                metrics={arm: summary[exp.name][arm][metric] for arm in ("unisoma", "implicit")},
                evidence=Evidence(n=len(seeds), unit="seeds", paper_data=True, ci_method=stat["ci_method"],
                                  mde=stat["mde"]),
                key_numbers={"mean_diff": stat["mean_diff"], "ci": [stat["ci_low"], stat["ci_high"]],
                             "per_seed_diff": stat["per_seed_diff"]}))
    claims.append(untested(
        "paper_tables_sota_over_baselines", "Unisoma achieves the lowest error of all compared methods on the seven "
        "datasets and two tasks (the paper's result tables)", scale="paper", paper_data=True,
        title="state of the art over the paper's baselines",
        reason="the paper's baselines (graph networks, neural operators, Transolver and others) are not part of "
               "this study, and the paper's table values are not recorded in the spec; only the implicit "
               "single-stream baseline [R] is trained (the headline claims above)"))
    # checks on the trained models of the first experiment that has each piece
    first = experiments(cfg)[0]
    model = first_models[first.name].get("unisoma")
    if model is not None:
        test = PD.unpack(first.task, load_npz(interim[(first.dataset, "test")]))
        if first.task == PD.LONG:
            s = test[0]
            loads, rigids, defs = ([torch.as_tensor(x, dtype=torch.float64)[None] for x in g]
                                   for g in (s.loads, s.rigids, s.deformables))
        else:
            fr = test[0].frame_inputs(0)
            loads, rigids, defs = ([torch.as_tensor(x, dtype=torch.float64)[None] for x in g] for g in fr[:3])
        gen = torch.Generator().manual_seed(0)
        defs = [d + 1e-3 * torch.randn(d.shape, generator=gen, dtype=torch.float64) for d in defs]  # no kNN ties
        dev = equivariance_deviation(model, loads, rigids, defs, k=cfg.model.knn_k)
        holds, stat = decide_equivariance(dev["self"], dev["others"], dev["tokens"], cfg.eval.equivariance_tol)
        claims.append(check("permutation_equivariance", "Permuting one entity's nodes permutes its outputs "
                            "identically and leaves the others and its slice tokens unchanged (float64)",
                            holds=holds, data=f"trained unisoma ({first.name}, first seed), 1 test item",
                            test="max |delta| after un-permuting", threshold=f"<= {cfg.eval.equivariance_tol:g}",
                            statistic=stat, title="permutation equivariance",
                            evidence=Evidence(n=len(loads) + len(rigids) + len(defs), unit="entities permuted")))
    with_loads = next((m["unisoma"] for m in first_models.values()
                       if "unisoma" in m and "load_alloc" in m["unisoma"].layers[0]), None)
    if with_loads is not None:
        alloc = allocation_check(with_loads.layers[0]["load_alloc"][0].proj, with_loads.cfg.width)
        holds, stat = decide_allocation(alloc["sum_dev"], alloc["bypass_bitwise"], alloc["counts_run"])
        claims.append(check("allocation", "Allocation weights sum to 1 over K; K = 1 is bypassed bitwise; one model "
                            "class runs 1/1/1, 2/2/2 and 4/4/3 entities", holds=holds,
                            data="trained load-allocation projection; random tokens", test="max |sum alpha - 1|",
                            threshold="<= 1e-6; exact", statistic=stat, title="adaptive allocation",
                            evidence=Evidence(n=len(alloc["counts_run"]), unit="entity-count configurations")))
    safety = _data_safety(raw[(first.dataset, "test")], first.dataset, first.task,
                          PD.experiment_frames(first, cfg.paper.frames), interim[(first.dataset, "test")],
                          cfg.data.max_pickle_bytes)
    holds, stat = decide_data_safety(**safety)
    claims.append(check("data_safety_roundtrip", "The official test pickle read through the restricted loader and "
                        "converted equals preprocess's npz; malicious pickles are rejected without side effects",
                        holds=holds, data=f"{first.dataset} test pickle; a __reduce__ and an OrderedDict pickle",
                        test="array equality; rejection; sentinel absent", threshold="all true", statistic=stat,
                        title="pickle safety and round trip", evidence=Evidence(n=1, unit="files")))
    ratios = {name: decide_param_match(p["unisoma"], p["implicit"]) for name, p in params.items()
              if "unisoma" in p and "implicit" in p}
    if ratios:
        claims.append(check("baseline_param_match", "The implicit baseline's parameter count is within 10% of "
                            "Unisoma's in every experiment", holds=all(h for h, _ in ratios.values()),
                            data="model definitions per experiment", test="ratio", threshold="|ratio - 1| <= 0.1",
                            statistic={n: s for n, (_, s) in ratios.items()}, title="baseline size",
                            evidence=Evidence(n=len(ratios), unit="model pairs")))
    seeds = sorted(all_seeds)
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source, claims=claims,
                       config_hash=config_hash(cfg), paper=PAPER, seeds=seeds)
    write_json(stage.output(1), {
        "scale": stage.scale, "seeds": seeds, "summary": summary, "params": params, "per_sample": per_sample,
        "claims": [{"id": c.id, "kind": c.kind, "verdict": c.verdict, "statistic": c.statistic} for c in claims]})
    for name, arms in summary.items():
        for arm, ms in arms.items():
            with run.child(arm=f"{arm}:{name}") as arun:
                arun.log_metrics({f"eval/test_{k}": v["mean"] for k, v in ms.items()})
    log_verdicts(run, doc)
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))


def report(stage: Stage, run: Any, doc: dict) -> None:
    """Per experiment, the per-seed test metric of each arm (figure) and the summary table (report.md)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from icml25.core.io import save_figure, write_text

    names = list(doc["summary"])
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.2), squeeze=False)
    lines = [f"# unisoma (paper), seeds {doc['seeds']}", "", "| experiment | arm | params | metric | mean [95% CI] |",
             "|---|---|---|---|---|"]
    for ax, name in zip(axes[0], names):
        arms = list(doc["summary"][name])
        metric = "rel_l2_pos" if name.endswith(PD.LONG) else "rollout_rmse"
        data = [[float(np.mean(v[metric])) for v in doc["per_sample"][name][arm].values()] for arm in arms]
        ax.boxplot(data)
        ax.set_xticks(range(1, len(arms) + 1), arms, fontsize=7)
        ax.set_title(name, fontsize=8)
        ax.set_ylabel(metric, fontsize=7)
        for arm in arms:
            m = doc["summary"][name][arm][metric]
            lines.append(f"| {name} | {arm} | {doc['params'].get(name, {}).get(arm, '')} | {metric} | "
                         f"{m['mean']:.4g} [{m['ci_low']:.4g}, {m['ci_high']:.4g}] |")
    fig.tight_layout()
    save_figure(fig, stage.output(0))
    lines += ["", "| id | kind | verdict |", "|---|---|---|"]
    lines += [f"| {c['id']} | {c['kind']} | {c['verdict']} |" for c in doc["claims"]]
    write_text(stage.output(1), "\n".join(lines) + "\n")
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))
