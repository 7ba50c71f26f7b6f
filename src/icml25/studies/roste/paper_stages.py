"""The roste stages at paper scale: a Hugging Face model fine-tuned on TL;DR or Tulu 3 (Wei et al., ICML 2025, §5).

Same rules and file layout as the smoke/default scales (see :mod:`.stages`), other contents:

prepare    → raw/paper/{name}.parquet: the dataset's manifest files (sha256-verified, or UNPINNED + trust_unpinned);
             raw/paper/hub_model.json: the model resolved once (:mod:`icml25.core.hub`: ``paper.model``'s row of
             models.csv at its commit, ``paper.revision`` if set, an UNPINNED row's hub commit under
             trust_unpinned, or ``paper.local_dir`` as ``local:<sha256>``); with ``data_source: remote`` the model
             is fetched into the Hugging Face cache at that commit, and loaded once to check it (every later stage
             reads the cache only, at the recorded commit)
pretrain   → models/pretrain_a{α}.pt: no pretraining (the hub model is the SFT start): the tokenised SFT data
             (prompt masked), the hub record of prepare and the model's per-channel max |activation|
preprocess → processed/rotcfg_a{α}_seed{k}.json: the rotation search on the hub model (:mod:`.hf_search`)
train      → models/{arm}/chunk{k}.pt: per seed the fine-tuned state dict (prepared layout), loss and E(W) curves
evaluate   → claims.json + metrics/eval.json: test_loss, token_acc, ROUGE-L per arm × seed and checks 3a-3c, with
             the verdict functions of the default scale; claims.json's ``models`` block (and the MLflow params
             ``hub/<name>/...`` of prepare and evaluate) name the commit every stage loaded

Not implemented: sharding one run over several GPUs (each job trains on one device, ``paper.gpus`` only sizes the
request) and Pythia (GPT-NeoX layout; :func:`.hf.prepare_for_roste` refuses it).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from icml25.core import hub
from icml25.core.claims import log_verdicts, write_claims
from icml25.core.config import config_hash
from icml25.core.download import parquet_check, read_manifest
from icml25.core.io import atomic_path, read_json, write_json

from .config import PTQ_ARMS

SLUG = "roste"
MANIFEST = Path(__file__).with_name("manifest.csv")
HUB_RECORD = "hub_model.json"  #: prepare's record of the resolved model (raw/paper/hub_model.json)
log = logging.getLogger(f"icml25.{SLUG}.paper")
QAT_ROTATIONS = {"ste": "none", "ste_a1": "none", "ste_rot_all": "all", "roste": "search", "roste_a1": "search"}
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}


def dataset_files(dataset: str) -> list[str]:
    """Manifest names of a dataset's files (``tldr_*`` or ``tulu3_*``)."""
    names = [n for n in read_manifest(MANIFEST) if n.startswith(f"{dataset}_")]
    if not names:
        raise SystemExit(f"{SLUG}: manifest.csv lists no file of dataset {dataset!r}")
    return names


def device(paper: Any) -> torch.device:
    if paper.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if paper.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"{SLUG}: paper.device is cuda but torch sees no CUDA device")
    return torch.device(paper.device)


def cached_commit(repo_id: str) -> str:
    """The commit of ``repo_id``'s ``main`` branch in the local Hugging Face cache (no network): the snapshot that
    ``refs/main`` points at. Raises :class:`~icml25.core.hub.HubError` when the cache holds none."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, "config.json")
    if not isinstance(found, str):
        raise hub.HubError(f"{repo_id}: the Hugging Face cache holds no snapshot of its main branch (run prepare with "
                           "data_source=remote, or set paper.revision to a cached commit)")
    return Path(found).parent.name


def resolve_paper_model(stage: Any) -> hub.ResolvedModel:
    """prepare's single resolution of ``paper.model`` (:func:`.hf.resolve_model`): an UNPINNED row's commit comes
    from the hub with ``data_source: remote``, else from the local cache (:func:`cached_commit`)."""
    from .hf import resolve_model

    p = stage.config.paper
    try:
        return resolve_model(p.model, p.revision, local_dir=p.local_dir, trust_unpinned=stage.trust_unpinned,
                             commit_of=hub.hub_commit if stage.data_source == "remote" else cached_commit)
    except hub.HubError as err:
        raise SystemExit(f"{SLUG} {stage.name}: {err}") from err


def recorded_model(stage: Any, rec: Any, where: str) -> hub.ResolvedModel:
    """The model prepare resolved (``rec``: its ``hub_model.json`` or the start record's ``hub`` entry, read from
    ``where``), checked against the config: the same models.csv row, the same pinned commit, and for a local
    directory the same content digest (a directory changed since prepare is refused)."""
    from .hf import hub_model

    p = stage.config.paper
    missing = [k for k in ("name", "repo_id", "revision", "source") if not isinstance(rec, dict) or not rec.get(k)]
    if missing:
        raise SystemExit(f"{SLUG} {stage.name}: {where}: hub record lacks {missing}; rerun prepare")
    row = hub_model(p.model, p.revision)
    if p.local_dir:
        same_source = rec["source"] == "local"
    elif row.pinned:
        same_source = rec["source"] == "pinned" and rec["revision"] == row.revision
    else:
        same_source = rec["source"] == "resolved"
    stale = rec["repo_id"] != row.repo_id or rec["name"] != row.name or not same_source
    if stale:
        raise SystemExit(f"{SLUG} {stage.name}: {where} records {rec['repo_id']} at {rec['revision']} "
                         f"({rec['source']}), the config asks for {p.model} (revision {p.revision}, local_dir "
                         f"{p.local_dir}); rerun prepare")
    if rec["source"] == "local":
        now = hub.resolve(row, local_dir=p.local_dir)
        if now.revision != rec["revision"]:
            raise SystemExit(f"{SLUG} {stage.name}: paper.local_dir {p.local_dir} changed since prepare "
                             f"({rec['revision']} -> {now.revision}); rerun prepare")
        return now
    return hub.ResolvedModel(rec["name"], rec["repo_id"], rec["repo_id"], rec["revision"], rec["source"])


def _load(stage: Any, res: hub.ResolvedModel, dtype: str | None = None, local_only: bool = True) -> torch.nn.Module:
    from .hf import load_causal_lm

    p = stage.config.paper
    model = load_causal_lm(res, dtype=DTYPES[dtype or p.dtype], local_files_only=local_only)
    return model.to(device(p)).eval()


def _quant(stage: Any) -> Any:
    from .method import QuantConfig

    q = stage.config.quant
    return QuantConfig(q.w_bits, q.a_bits, q.kv_bits, q.symmetric, q.clip)


def _save_pt(path: Path, obj: Any) -> None:
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def _start(stage: Any) -> Any:
    """The tokenised start record (``--in models/pretrain_a*.pt``)."""
    found = [i for i in stage.inputs if Path(i).name.startswith("pretrain_a")]
    if len(found) != 1:
        raise SystemExit(f"{SLUG} {stage.name}: expected one --in models/pretrain_a*.pt (the tokenised start record), "
                         f"got {[str(i) for i in stage.inputs]}")
    return _load_pt(found[0], "tokenised start record")


def _load_pt(path: Path, what: str) -> Any:
    try:
        return torch.load(path, weights_only=True, mmap=True)  # mmap: trained state dicts stay on disk
    except Exception as err:  # noqa: BLE001 - re-raised naming the file
        raise SystemExit(f"{SLUG}: {path} is not a readable {what} ({err})") from err


# -------------------------------------------------------------------------------------------- stages


def prepare(stage: Any, run: Any) -> None:
    """Download the dataset's manifest files (checked as parquet with their columns) and, with remote data, the
    model into the Hugging Face cache."""
    from icml25.core.download import fetch

    from .paper_data import TLDR_COLUMNS, TULU_COLUMNS

    p = stage.config.paper
    manifest = read_manifest(MANIFEST)
    names = dataset_files(p.dataset)
    by_name = {Path(o).stem: Path(o) for o in stage.outputs if Path(o).suffix == ".parquet"}
    missing = [n for n in names if n not in by_name]
    records = [Path(o) for o in stage.outputs if Path(o).name == HUB_RECORD]
    if missing or len(records) != 1:
        raise SystemExit(f"{SLUG} prepare: expected --out raw/paper/<name>.parquet for {names} and "
                         f"raw/paper/{HUB_RECORD}")
    check = parquet_check(TLDR_COLUMNS if p.dataset == "tldr" else TULU_COLUMNS)
    for n in names:
        if stage.data_source == "remote":
            fetch(manifest[n], by_name[n], stage.mirror, trust_unpinned=stage.trust_unpinned, check=check)
        elif not by_name[n].exists():
            raise SystemExit(f"{SLUG} prepare: {by_name[n]} is missing; the paper data come from the hub "
                             "(run with data_source=remote, and trust_unpinned=true for rows marked UNPINNED)")
        else:
            check(by_name[n])
    res = resolve_paper_model(stage)
    model = _load(stage, res, local_only=stage.data_source != "remote")
    from .hf import _decoder

    try:
        _decoder(model)  # the Llama/Qwen2 layout prepare_for_roste needs, checked before any GPU hour is spent
    except NotImplementedError as err:
        raise SystemExit(f"{SLUG} prepare: paper.model {p.model}: {err}") from err
    n_params = sum(t.numel() for t in model.parameters())
    run.log_metrics({"prepare/model_parameters": float(n_params)})
    run.set_tags({"paper_model": p.model, "paper_dataset": p.dataset})
    hub.record(run, [res])
    write_json(records[0], {"name": res.name, **res.record()})


def pretrain(stage: Any, run: Any) -> None:
    """Tokenise the SFT data with the model's tokenizer and record the start model (no pretraining here)."""
    from .hf import load_tokenizer
    from .hf_search import channel_max
    from .paper_data import sft_examples

    cfg, p = stage.config, stage.config.paper
    from icml25.core.download import verified

    files = {Path(i).stem: verified(i) for i in stage.inputs if str(i).endswith(".parquet")}  # re-hashed
    records = [Path(i) for i in stage.inputs if Path(i).name == HUB_RECORD]
    if len(records) != 1:
        raise SystemExit(f"{SLUG} pretrain: expected --in raw/paper/{HUB_RECORD} (prepare's record of the model)")
    res = recorded_model(stage, read_json(records[0]), str(records[0]))
    tok = load_tokenizer(res)
    try:
        data = sft_examples(p.dataset, files, tok, p.max_length, p.train_examples, p.tulu3_test_examples,
                            cfg.data.data_seed)
    except ValueError as err:
        raise SystemExit(f"{SLUG} pretrain (tokenise): {err}") from err
    model = _load(stage, res, p.search_dtype)
    cmax = channel_max(model, [torch.tensor(e["input_ids"]) for e in data["train"][:16]])
    if "alpha" not in stage.extra:
        raise SystemExit(f"{SLUG} pretrain: expected --set alpha=<value> (the file-layout slot of the start model)")
    alpha = float(stage.extra["alpha"])
    out = {"paper": True, "alpha": alpha, "model": p.model, "revision": res.revision,
           "hub": {"name": res.name, **res.record()}, "dataset": p.dataset,
           "pad_id": int(tok.pad_token_id), "train": data["train"], "test": data["test"],
           "channel_max": cmax, "loss": [float("nan")]}
    _save_pt(stage.output(0), out)
    c = np.asarray(cmax)
    run.log_metrics({"prepare/sft_train": len(data["train"]), "prepare/sft_test": len(data["test"]),
                     "train/outlier_ratio": float(c.max() / np.median(c))})


def _calib(data: dict[str, Any], n: int, seed: int) -> list[torch.Tensor]:
    """``n`` calibration sequences of the training examples, drawn by ``seed`` (as :func:`.data.calibration_draw`)."""
    train = data["train"]
    if n > len(train):
        raise SystemExit(f"{SLUG} preprocess: search.calib_examples {n} exceeds the {len(train)} SFT train examples")
    g = torch.Generator().manual_seed(int(seed) + 7919)
    return [torch.tensor(train[int(i)]["input_ids"]) for i in torch.randperm(len(train), generator=g)[:n]]


def preprocess(stage: Any, run: Any) -> None:
    """The rotation search of every seed on the hub model (R1 always on; calibration draw and signs from the seed)."""
    from .hf_search import search_record

    cfg = stage.config
    if cfg.search.r1 != "always":
        raise SystemExit(f"{SLUG} preprocess: search.r1={cfg.search.r1!r} is implemented for the tiny decoder only; "
                         "the paper path keeps R1 always on (the official code)")
    data = _start(stage)
    res = recorded_model(stage, data.get("hub"), "the start record")
    if len(stage.outputs) != len(cfg.seeds):
        raise SystemExit(f"{SLUG} preprocess: expected one --out per seed ({len(cfg.seeds)}), got {len(stage.outputs)}")
    for seed, path in zip(cfg.seeds, stage.outputs):
        t0 = time.perf_counter()
        rec = search_record(lambda: _load(stage, res, cfg.paper.search_dtype),
                            _calib(data, cfg.search.calib_examples, seed), _quant(stage), seed)
        rec.update(alpha=data["alpha"], seconds=time.perf_counter() - t0)
        write_json(path, rec)
        with run.seed_run(seed) as srun:
            for s, (e_i, e_h) in rec["errors"].items():
                srun.log_metrics({f"preprocess/E_I/{s}": e_i, f"preprocess/E_H/{s}": e_h,
                                  f"preprocess/choice_H/{s}": float(rec["choices"][s])})
            srun.log_metrics({f"preprocess/E_{k}": v for k, v in rec["totals"].items()})


def _prepared(stage: Any, res: hub.ResolvedModel, seed: int, rotations: Any, quantized: bool) -> torch.nn.Module:
    from .hf import prepare_for_roste
    from .method import QuantConfig

    q = _quant(stage) if quantized else QuantConfig(None, None, None)
    return prepare_for_roste(_load(stage, res), rotations, q, seed)


def train(stage: Any, run: Any) -> None:
    """Per seed of the chunk: load the start model, prepare it for the arm (folding, rotations, fake quantizers;
    fp_sft: folding only, quantizers off) and fine-tune it with AdamW for ``paper.epochs``."""
    from .hf import sft_steps
    from .hf_search import weight_error
    from .paper_data import batches

    cfg, arm, p = stage.config, stage.arm, stage.config.paper
    if arm not in QAT_ROTATIONS and arm != "fp_sft":
        raise SystemExit(f"{SLUG} train: --arm must be a trained arm {['fp_sft', *QAT_ROTATIONS]}, got {arm!r}")
    data = _start(stage)
    res = recorded_model(stage, data.get("hub"), "the start record")
    rotcfgs = {read_json(q)["seed"]: read_json(q) for q in stage.inputs[2:] if str(q).endswith(".json")}
    seeds = stage.seeds or cfg.seeds
    out: dict[str, Any] = {"paper": True, "arm": arm, "alpha": data["alpha"], "seeds": list(seeds), "runs": {}}
    qcfg = _quant(stage)
    for seed in seeds:
        rot = QAT_ROTATIONS.get(arm, "none")
        if rot == "search":
            if seed not in rotcfgs:
                raise SystemExit(f"{SLUG} train: arm {arm} needs the rotation configuration of seed {seed}")
            rot = {"r1": True, **rotcfgs[seed]["choices"]}
        model = _prepared(stage, res, seed, rot, arm != "fp_sft")
        torch.manual_seed(seed)
        e_w = [(0, weight_error(model, qcfg))]
        t0 = time.perf_counter()

        def on_step(k: int, loss: float, model: Any = model, e_w: list = e_w) -> None:
            if (k + 1) % p.e_every == 0:
                e_w.append((k + 1, weight_error(model, qcfg)))

        losses = sft_steps(model, batches(data["train"], p.batch, data["pad_id"], seed, p.epochs), p.lr,
                           p.weight_decay, on_step=on_step,
                           autocast=None if p.autocast is None else DTYPES[p.autocast])
        if not np.isfinite(losses).all():
            raise SystemExit(f"{SLUG} train: arm {arm} seed {seed}: non-finite SFT loss (lr {p.lr} too large?)")
        if e_w[-1][0] != len(losses):
            e_w.append((len(losses), weight_error(model, qcfg)))
        out["runs"][str(seed)] = {"state": {k: v.detach().cpu() for k, v in model.state_dict().items()},
                                  "rotations": dict(model.roste_choices), "loss": losses,
                                  "e_w": [list(x) for x in e_w], "seconds": time.perf_counter() - t0}
        with run.seed_run(seed) as srun:
            for k, v in enumerate(losses):
                srun.log_metric("train/loss", v, step=k)
            for k, v in e_w:
                srun.log_metric("train/e_w", v, step=k)
        del model
    _save_pt(stage.output(0), out)


def _deployed(stage: Any, res: hub.ResolvedModel, arm: str, seed: int, runs: dict[str, dict[int, Any]]
              ) -> torch.nn.Module:
    """The arm's deployment model: its fine-tuned weights (rtn/quarot_lite: fp_sft's of the same seed) in the
    prepared layout, with W4A4KV4 quantizers (fp_sft: none)."""
    from .hf import prepare_for_roste, untie

    base = runs["fp_sft" if arm in PTQ_ARMS else arm][seed]
    if arm == "quarot_lite":  # fp_sft's folded weights, then every rotation, then RTN
        model = untie(_load(stage, res))
        model.load_state_dict(base["state"])
        return prepare_for_roste(model, "all", _quant(stage), seed)
    model = _prepared(stage, res, seed, base["rotations"], arm != "fp_sft")
    model.load_state_dict(base["state"])
    return model


def invariance_errors(stage: Any, res: hub.ResolvedModel, tokens: torch.Tensor, n_random: int, seed: int = 0
                      ) -> list[dict[str, Any]]:
    """Check 3a on the start model in ``paper.search_dtype``: max |logits(config) - logits(unrotated)| with every
    quantizer off for "none", "all" and ``n_random`` random configurations."""
    from .hf import prepare_for_roste
    from .hf_search import OFF

    model = _load(stage, res, stage.config.paper.search_dtype)
    dev = next(model.parameters()).device
    n = model.config.num_hidden_layers
    with torch.no_grad():
        ref = model(input_ids=tokens.to(dev)).logits.double()
    del model
    rng = np.random.default_rng([seed, 3])
    configs: list[Any] = ["none", "all"]
    for _ in range(n_random):
        configs.append({"r1": bool(rng.integers(2)),
                        **{f"r{k}.{l}": bool(rng.integers(2)) for l in range(n) for k in (2, 3, 4)}})
    out = []
    for k, c in enumerate(configs):
        m = prepare_for_roste(_load(stage, res, stage.config.paper.search_dtype), c, OFF, seed + k)
        with torch.no_grad():
            got = m(input_ids=tokens.to(dev)).logits.double()
        out.append({"config": c, "max_abs_diff": float((got - ref).abs().max())})
        del m
    return out


def evaluate(stage: Any, run: Any) -> None:
    """Held-out test_loss, token_acc and ROUGE-L of every arm × seed, checks 3a-3c, claims.json, metrics/eval.json."""
    from . import PAPER
    from .claims import build_claims
    from .evaluate import bound_check_weights, rouge_l
    from .hf import load_tokenizer
    from .hf_search import block_weights, greedy_texts, response_metrics

    cfg, p = stage.config, stage.config.paper
    data = _start(stage)
    res = recorded_model(stage, data.get("hub"), "the start record")
    searches = [read_json(i) for i in stage.inputs if Path(i).name.startswith("rotcfg_")]
    runs: dict[str, dict[int, Any]] = {}
    for i in stage.inputs:
        if Path(i).name.startswith("chunk"):
            doc = _load_pt(i, "trained chunk")
            runs.setdefault(doc["arm"], {}).update({int(s): r for s, r in doc["runs"].items()})
    tok = load_tokenizer(res)
    test = data["test"][: p.eval_examples] if p.eval_examples else data["test"]
    per_seed: dict[str, dict[int, dict[str, float]]] = {}
    for arm in cfg.arms:
        base = "fp_sft" if arm in PTQ_ARMS else arm
        for seed in sorted(runs.get(base, {})):
            model = _deployed(stage, res, arm, seed, runs)
            m = response_metrics(model, test)
            preds = greedy_texts(model, tok, [e["prompt_ids"] for e in test], p.max_new_tokens)
            m["rougeL"] = rouge_l(preds, [e["reference"] for e in test])
            per_seed.setdefault(arm, {})[seed] = m
            log.info("%s seed %d: %s", arm, seed, m)
            del model
    toks = torch.tensor([e["input_ids"][: p.invariance_tokens] for e in test[:4]
                         if len(e["input_ids"]) >= p.invariance_tokens] or [test[0]["input_ids"]])
    inv = invariance_errors(stage, res, toks, cfg.eval.invariance_configs)
    bounds = {"rows": 0, "violations": 0, "max_ratio": 0.0}
    for r in runs.get("roste", {}).values():
        b = bound_check_weights(block_weights(r["state"]), cfg.quant.w_bits or 4)
        bounds = {"rows": bounds["rows"] + b["rows"], "violations": bounds["violations"] + b["violations"],
                  "max_ratio": max(bounds["max_ratio"], b["max_ratio"])}
    c = np.asarray(data["channel_max"])
    ratios = {float(data["alpha"]): float(c.max() / np.median(c))}
    claims = build_claims(per_seed, inv, searches, bounds, ratios, paper_data=True,  # TL;DR or Tulu 3: paper data
                          c1_margin=cfg.eval.c1_margin)
    seeds_seen = sorted({s for r in per_seed.values() for s in r})
    models = hub.record(run, [res])  # the commit every stage loaded (checked against the start record)
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source, claims=claims,
                       config_hash=config_hash(cfg), paper=PAPER, seeds=seeds_seen, models=models)
    metrics = {"scale": stage.scale, "model": data["model"], "revision": res.revision, "models": models,
               "dataset": data["dataset"],
               "per_seed": {a: {str(s): m for s, m in r.items()} for a, r in per_seed.items()},
               "curves": {a: {str(s): {"loss": r["loss"], "e_w": r["e_w"]} for s, r in rs.items()}
                          for a, rs in runs.items()},
               "invariance": inv, "search": searches, "bounds": bounds,
               "pretrain": {f"{float(data['alpha']):g}": {"loss_final": None, "channel_max": data["channel_max"]}},
               "claims": [{"id": cl.id, "kind": cl.kind, "verdict": cl.verdict, "statistic": cl.statistic,
                           "note": cl.note} for cl in claims]}
    write_json(stage.output(1), metrics)
    for arm, r in per_seed.items():
        with run.child(arm=arm) as arun:
            for key in ("test_loss", "token_acc", "rougeL"):
                arun.log_metric(f"eval/{key}", float(np.mean([m[key] for m in r.values()])))
    run.log_metrics({"eval/invariance_max_abs_diff": max(r["max_abs_diff"] for r in inv),
                     "eval/bound_violations": bounds["violations"]})
    log_verdicts(run, doc)
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))


STAGES = {"prepare": prepare, "pretrain": pretrain, "preprocess": preprocess, "train": train, "evaluate": evaluate}

__all__ = ["STAGES", "HUB_RECORD", "cached_commit", "dataset_files", "device", "invariance_errors", "recorded_model",
           "resolve_paper_model"]
