"""The stages of the coalition_attribution study; each ``(stage, run)`` reads ``stage.inputs``, writes
``stage.outputs`` atomically and logs to the MLflow run.

download   → raw/sources.json (toy scales: nothing is fetched) and, at paper scale, the real-data files of the
             manifest (SST-2, MNIST, CIFAR-10, a KataGo network), sha256-verified
preprocess → interim/functions.json, interim/coalitions.json: every seed's target functions and typed coalitions
train      → models/{arm}/chunk{k}.npz: per seed the games, γ, I_and, I_or, Shapley/Banzhaf values, the identity
             errors, the coalitions' R, R', Q (and, for ``mlp``, the trained networks' weights and fit);
             ``mlp_adam`` reads the ``mlp`` games of its chunk (the same networks)
train_real → models/real/{experiment}.json (paper scale, one GPU job per real-data experiment: the trained network's
             test accuracy, the explained inputs' games, interactions, identity errors and R, R', Q; a text model's
             hub commit (core.hub) under ``model.hub`` and as the MLflow params ``hub/<name>/...``)
evaluate   → claims.json (with the ``models`` block of the text models' commits at paper scale), metrics/eval.json
             (claim statistics, Table 4 beside ours), metrics/coalitions.csv
report     → figures/table4_compare.png, report.md
"""
from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np

from icml25.core import hub
from icml25.core.claims import log_verdicts, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash, to_dict
from icml25.core.download import all_or_nothing, fetch, read_manifest, verified
from icml25.core.io import atomic_path, load_npz, read_json, save_figure, save_npz, write_json, write_text

from . import MANIFEST, PAPER
from .config import REAL_FILES

SLUG = "coalition_attribution"
ARMS = ("oracle", "mlp", "mlp_adam")
log = logging.getLogger(f"icml25.{SLUG}")


def download(stage: Stage, run: Any) -> None:
    """Toy scales: record that nothing is downloaded. Paper scale: fetch each file the configured real-data
    experiments read (``--out sources.json FILE ...`` in the order of :func:`real_file_names`)."""
    names = real_file_names(stage.config.real.experiments)
    if len(stage.outputs) != 1 + len(names):
        raise SystemExit(f"{SLUG} download: expected --out sources.json and {len(names)} file(s) {names}")
    record: dict[str, Any] = {"toy": "generated offline by preprocess (numpy PCG64); nothing to download",
                              "files": {}}
    if names:
        if stage.data_source != "remote":
            raise SystemExit(f"{SLUG} download: the real-data experiments {list(stage.config.real.experiments)} "
                             "need their files: run with data_source=remote (and trust_unpinned=true for the "
                             "manifest rows marked UNPINNED), or set real.experiments: []")
        manifest = read_manifest(MANIFEST)
        with all_or_nothing(stage.outputs[1:]):  # no orphan pins when file k fails
            for name, dest in zip(names, stage.outputs[1:]):
                fetch(manifest[name], dest, stage.mirror, trust_unpinned=stage.trust_unpinned)
                record["files"][name] = {"path": str(dest), "url": manifest[name].url, "bytes": dest.stat().st_size}
                run.log_metric(f"download/{name}_bytes", dest.stat().st_size)
        run.log_artifact(MANIFEST)
    write_json(stage.output(0), record)


def real_file_names(experiments: tuple[str, ...] | list[str]) -> list[str]:
    """Manifest rows read by the given real-data experiments, sorted and without duplicates."""
    return sorted({name for e in experiments for name in REAL_FILES[e]})


def preprocess(stage: Stage, run: Any) -> None:
    """Generate every seed's target functions and typed coalitions (Table 4 toy)."""
    from .experiment import make_functions

    cfg = stage.config
    settings = {"toy": to_dict(cfg.toy)}
    functions, coalitions = {}, {}
    counts = {"F": 0, "P": 0, "U": 0}
    for seed in cfg.seeds:
        fns, coals = make_functions(settings, seed)
        functions[str(seed)], coalitions[str(seed)] = fns, coals
        for per_fn in coals:
            for c in per_fn:
                counts[c["type"]] += 1
    n = cfg.toy.n
    write_json(stage.output(0), {"n": n, "seeds": functions})
    write_json(stage.output(1), {"n": n, "seeds": coalitions})
    run.log_metrics({f"preprocess/coalitions_{t}": k for t, k in counts.items()})
    run.log_metric("preprocess/functions", sum(len(f) for f in functions.values()))


def read_toy(functions_path, coalitions_path, seed: int, n: int) -> tuple[list[dict], list[list[dict]]]:
    """The seed's functions and coalitions from the preprocess files (validated; errors name the file)."""
    from .data import TYPES, validate_function

    fdoc, cdoc = read_json(functions_path), read_json(coalitions_path)
    for path, doc in ((functions_path, fdoc), (coalitions_path, cdoc)):
        if doc.get("n") != n:
            raise ValueError(f"{path}: n = {doc.get('n')}, the config says toy.n = {n}; rerun preprocess")
        if str(seed) not in doc.get("seeds", {}):
            raise ValueError(f"{path}: no seed {seed} (has {sorted(doc.get('seeds', {}))})")
    fns, coals = fdoc["seeds"][str(seed)], cdoc["seeds"][str(seed)]
    if len(fns) != len(coals):
        raise ValueError(f"{coalitions_path}: seed {seed} has {len(coals)} coalition lists for {len(fns)} functions")
    for k, f in enumerate(fns):
        validate_function(f, n, where=f"{functions_path}: seed {seed} function {k}")
    for k, per_fn in enumerate(coals):
        for c in per_fn:
            if c.get("type") not in TYPES or not 0 < int(c.get("mask", 0)) < 2 ** n:
                raise ValueError(f"{coalitions_path}: seed {seed} function {k}: bad coalition {c}")
    return fns, coals


def train(stage: Stage, run: Any) -> None:
    """One arm on every seed of its chunk: games (exact f, trained MLPs, or the mlp arm's games for mlp_adam),
    γ, interactions, identity errors, R/R'/Q of the coalitions. Logs per seed ``train/loss`` (step = epoch,
    MLP arms), and ``train/mlp_rel_mse``, ``train/l1_objective``, ``train/identity_max_err`` (step = function
    index)."""
    import torch

    from .experiment import make_games, run as run_arm
    from .identities import IDENTITIES

    cfg, arm = stage.config, stage.arm
    if arm not in ARMS:
        raise SystemExit(f"{SLUG} train: --arm must be one of {list(ARMS)}, got {arm!r}")
    if arm not in cfg.arms:
        raise SystemExit(f"{SLUG} train: arm {arm!r} is not in the config's arms {list(cfg.arms)}")
    seeds = stage.seeds or cfg.seeds
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"{SLUG} train: seeds {unknown} are not in the config's seeds")
    expected_in = 3 if arm == "mlp_adam" else 2
    if len(stage.inputs) != expected_in:
        raise SystemExit(f"{SLUG} train: --in functions.json coalitions.json"
                         + (" models/mlp/chunkK.npz" if arm == "mlp_adam" else ""))
    torch.set_num_threads(cfg.mlp.threads)
    n = cfg.toy.n
    settings = {"toy": {"n": n}, "mlp": to_dict(cfg.mlp), "gamma": to_dict(cfg.gamma),
                "faithfulness": to_dict(cfg.faithfulness), "identities": to_dict(cfg.identities)}
    mlp_games = load_npz(stage.input(2)) if arm == "mlp_adam" else None
    arrays: dict[str, np.ndarray] = {"seeds": np.asarray(seeds, dtype=np.int64), "n": np.asarray(n)}
    for seed in seeds:
        toy = read_toy(stage.input(0), stage.input(1), seed, n)
        games = None
        if arm == "mlp":
            games = make_games(settings, "mlp", seed, toy[0])
        elif arm == "mlp_adam":
            key = f"s{seed}/values"
            if key not in mlp_games:
                raise ValueError(f"{stage.input(2)}: no games of seed {seed} ({key})")
            games = {"values": mlp_games[key]}
        out = run_arm(settings, arm, seed, games=games, toy=toy)
        p = f"s{seed}/"
        for k in ("values", "gamma", "i_and", "i_or", "shapley", "banzhaf", "l1_objective", "l1_half_v", "vmax"):
            arrays[p + k] = out[k]
        for which, errs in out["identity_errors"].items():
            for name in IDENTITIES:
                arrays[f"{p}identity/{which}/{name}"] = errs[name]
        for k, v in out["coalitions"].items():
            arrays[f"{p}coalitions/{k}"] = v
        for k, v in out["seconds"].items():
            arrays[f"{p}seconds/{k}"] = np.asarray(v)
        if arm == "mlp":
            arrays[p + "rel_mse"], arrays[p + "flagged"] = out["rel_mse"], np.asarray(out["flagged"])
            arrays[p + "curve_step"], arrays[p + "curve_loss"] = out["curve_step"], out["curve_loss"]
            for name, tensor in games["model"].state_dict().items():  # the trained networks (K stacked)
                arrays[f"{p}net/{name}"] = tensor.detach().cpu().numpy()
        identity_max = np.max([out["identity_errors"]["learned"][k] for k in IDENTITIES], axis=0)
        with run.seed_run(seed) as srun:
            if "curve_loss" in out:
                for step, losses in zip(out["curve_step"], out["curve_loss"]):
                    srun.log_metric("train/loss", float(np.mean(losses)), step=int(step))
            for k in range(len(out["l1_objective"])):
                metrics = {"train/l1_objective": out["l1_objective"][k], "train/identity_max_err": identity_max[k]}
                if "rel_mse" in out:
                    metrics["train/mlp_rel_mse"] = out["rel_mse"][k]
                srun.log_metrics(metrics, step=k)
            srun.log_metrics({f"train/seconds/{k}": v for k, v in out["seconds"].items()})
            srun.log_metric("train/seconds", float(sum(out["seconds"].values())))
            if "flagged" in out:
                srun.log_metric("train/mlp_flagged", out["flagged"])
        log.info("%s seed %d: mean L1 %.3f, identity max err %.2e, %s", arm, seed, float(out["l1_objective"].mean()),
                 float(identity_max.max()), {k: round(v, 1) for k, v in out["seconds"].items()})
    save_npz(stage.output(0), **arrays)
    run.log_model(stage.output(0), cfg)


def hub_models(docs: dict[str, dict[str, Any]]) -> dict[str, dict[str, str]]:
    """The ``models`` block of claims.json from the real-data experiments' documents (``{experiment: doc}``): every
    ``model.hub`` entry by its models.csv name. Two experiments that loaded one model at different commits raise
    ``ValueError`` naming both."""
    out: dict[str, dict[str, str]] = {}
    seen: dict[str, str] = {}
    for experiment, doc in sorted(docs.items()):
        for name, rec in ((doc.get("model") or {}).get("hub") or {}).items():
            if name in out and out[name] != rec:
                raise ValueError(f"models/real/{experiment}.json: hub model {name} at {rec.get('revision')}, but "
                                 f"{seen[name]} loaded it at {out[name].get('revision')}")
            out[name], seen[name] = dict(rec), experiment
    return out


def _collect(paths) -> dict[str, dict[int, dict[str, np.ndarray]]]:
    """{arm: {seed: {key: array}}} from the train outputs (the arm is the parent directory's name)."""
    out: dict[str, dict[int, dict[str, np.ndarray]]] = {}
    for path in paths:
        arm = path.parent.name
        if arm not in ARMS:
            raise ValueError(f"{path}: parent directory must name an arm of {ARMS}")
        arrays = load_npz(path, required=("seeds",))
        for seed in arrays["seeds"].tolist():
            p = f"s{seed}/"
            out.setdefault(arm, {})[int(seed)] = {k[len(p):]: v for k, v in arrays.items() if k.startswith(p)}
    return out


def evaluate(stage: Stage, run: Any) -> None:
    """Every claim and check from the train outputs (inputs: the arms' npz files)."""
    from .evaluate import coalition_rows, evaluate_claims, table_by_type

    from .evaluate import real_entries

    toy_paths = [p for p in stage.inputs if p.suffix == ".npz"]
    real_paths = [p for p in stage.inputs if p.suffix == ".json" and p.parent.name == "real"]
    other = sorted(set(map(str, stage.inputs)) - set(map(str, toy_paths + real_paths)))
    if not toy_paths or other:
        raise SystemExit(f"{SLUG} evaluate: expected --in models/<arm>/chunkK.npz ... [models/real/<experiment>.json "
                         f"...]" + (f"; not one of them: {other}" if other else ""))
    data = _collect(toy_paths)
    claims, extra = evaluate_claims(data, stage.config.claims, stage.config.identities.tol,
                                    adequacy=to_dict(stage.config.adequacy))
    models: dict[str, dict[str, str]] = {}
    if stage.scale == "paper":  # the real-data experiments of Sec. 5 (and the untested Go case)
        real_docs = {p.stem: read_json(p) for p in real_paths}
        more, extra["real"] = real_entries(real_docs, stage.config.identities.tol)
        claims += more
        try:
            models = hub_models(real_docs)  # the commits the text models were loaded at (train_real)
        except ValueError as err:
            raise SystemExit(f"{SLUG} evaluate: {err}") from err
    seeds = sorted({s for by in data.values() for s in by})
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source,
                       claims=claims, config_hash=config_hash(stage.config), paper=PAPER, seeds=seeds,
                       models=models or None)
    tables = {arm: table_by_type(by_seed) for arm, by_seed in data.items()}
    write_json(stage.output(1), {"scale": stage.scale, "seeds": seeds, "table": tables, **extra,
                                 "claims": [{"id": c.id, "kind": c.kind, "verdict": c.verdict,
                                             "key_numbers": c.key_numbers} for c in claims]})
    rows = coalition_rows(data)
    with atomic_path(stage.output(2)) as tmp:
        rows.to_csv(tmp, index=False)
    for arm, table in tables.items():
        with run.child(arm=arm) as arun:  # pooled over seeds, functions and coalitions
            for t, by_metric in table.items():
                arun.log_metrics({f"eval/{t}/{m}": v["mean"] for m, v in by_metric.items()
                                  if v["mean"] is not None and v["mean"] == v["mean"]})
            arun.log_metric("eval/l1_objective", extra["l1_objective"][arm]["mean"])
    log_verdicts(run, doc)
    for p in stage.outputs[:3]:
        run.log_artifact(p)
    for c in claims:
        log.info("%s (%s): %s %s", c.id, c.kind, c.verdict, json.dumps(c.key_numbers, default=str))


def report(stage: Stage, run: Any) -> None:
    """Table 4 figure (ours beside the paper's) and report.md from metrics/eval.json and claims.json."""
    from .report import report_markdown, table4_figure

    doc = read_json(stage.input(0))
    claims_doc = read_json(stage.input(1))
    if "table" not in doc:
        raise ValueError(f"{stage.input(0)}: missing key 'table'")
    save_figure(table4_figure(doc["table"]), stage.output(0))
    write_text(stage.output(1), report_markdown(doc, claims_doc))
    for p in stage.outputs[:2]:
        run.log_artifact(p)


def resolve_device(device: str) -> str:
    """``cpu``, ``cuda`` (an error naming the key when no GPU is visible) or ``auto`` (cuda when available)."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"{SLUG}: real.device is cuda but no GPU is visible (set real.device: cpu or auto)")
    return device


def train_real(stage: Stage, run: Any) -> None:
    """One real-data experiment of Sec. 5 (``--arm`` = sst2_bert_large, sst2_llama, mnist_vgg11 or
    cifar10_resnet20; ``--in`` its downloaded files in the order of ``REAL_FILES``): train the paper's network,
    explain ``real.n_inputs`` test inputs with ``real.n_variables`` variables each, and write every game's
    interactions, identity errors and R, R', Q to ``models/real/<experiment>.json`` (:mod:`.realexp`)."""
    import torch

    from .realexp import TEXT, run_image, run_text

    cfg, experiment = stage.config, stage.arm
    if experiment not in REAL_FILES:
        raise SystemExit(f"{SLUG} train_real: --arm must be one of {sorted(REAL_FILES)}, got {experiment!r}")
    if experiment not in cfg.real.experiments:
        raise SystemExit(f"{SLUG} train_real: {experiment!r} is not in real.experiments {list(cfg.real.experiments)}")
    names = REAL_FILES[experiment]
    if len(stage.inputs) != len(names):
        raise SystemExit(f"{SLUG} train_real {experiment}: expected --in {' '.join(names)}")
    missing = [str(p) for p in stage.inputs if not p.exists()]
    if missing:
        raise FileNotFoundError(f"{SLUG} train_real {experiment}: missing inputs {missing}")
    for path in stage.inputs:  # the downloaded files, re-hashed against their records before anything reads them
        verified(path)
    files = dict(zip(names, stage.inputs))
    device = resolve_device(cfg.real.device)
    torch.set_num_threads(cfg.real.threads)
    real = to_dict(cfg.real)

    def log_metric(key: str, value: float, step: int) -> None:
        run.log_metric(key, float(value), step=int(step))

    if experiment in TEXT:
        from .realtext import resolve_model

        settings = real[experiment]
        try:  # the commit is resolved once here, loaded by run_text and recorded in the document and MLflow
            resolved = resolve_model(settings["model"], settings["revision"], local_dir=settings["local_dir"],
                                     trust_unpinned=stage.trust_unpinned)
        except hub.HubError as err:
            raise SystemExit(f"{SLUG} train_real {experiment}: {err}") from err
        hub.record(run, [resolved])
        doc = run_text(experiment, files, real, device, resolved, log_metric=log_metric)
    else:
        doc = run_image(experiment, files, real, device, log_metric=log_metric)
    doc["device"] = device
    write_json(stage.output(0), doc)
    games = doc["inputs"]
    worst = max((max(g["identity_errors"].values()) for g in games), default=float("nan"))
    run.log_metrics({"train_real/test_accuracy": doc["test"]["accuracy"], "train_real/games": len(games),
                     "train_real/identity_max_err": worst,
                     "train_real/l1_objective": float(np.mean([g["l1_objective"] for g in games])) if games else 0.0,
                     **{f"train_real/seconds/{k}": v for k, v in doc["seconds"].items()}})
    run.log_artifact(stage.output(0))
    log.info("%s on %s: test accuracy %.4f, %d games, identity max err %.2e, %s", experiment, device,
             doc["test"]["accuracy"], len(games), worst, {k: round(v, 1) for k, v in doc["seconds"].items()})


STAGES = {"download": download, "preprocess": preprocess, "train": train, "train_real": train_real,
          "evaluate": evaluate, "report": report}
