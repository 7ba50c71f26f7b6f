"""The stages of the roste study; each ``(stage, run)`` reads ``stage.inputs``, writes ``stage.outputs``
atomically and logs to the MLflow run.

prepare    → raw/data.pt (Markov chain, pretraining walks, SFT train/test)
pretrain   → models/pretrain_a{α}.pt (``--set alpha=α``): state dict, loss curve, per-channel max |activation|
preprocess → processed/rotcfg_a{α}_seed{k}.json per seed (``--set alpha=α``): choices, (E_i(I), E_i(H)), E(R*)
train      → models/{arm}/chunk{k}.pt: per seed the trained deployed weights, rotations, SFT loss and E(W) curves
evaluate   → claims.json + metrics/eval.json (test_loss, token_acc, rougeL per arm × seed; checks 3a-3c)
report     → figures/e_w.png (E(W) during SFT, paper Fig. 4), figures/test_loss.png, report.md

At paper scale (a Hugging Face Llama/Qwen2 model on TL;DR or Tulu 3) the same rules run the stages of
:mod:`.paper_stages` (manifest downloads, tokenisation, the rotation search, STE fine-tuning and evaluation of the
transformers model of :mod:`.hf`).
"""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from icml25.core.claims import log_verdicts, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash
from icml25.core.io import atomic_path, read_json, save_figure, write_json, write_text

from . import data as D
from . import experiment as X
from .config import CONTROL_ARMS, PTQ_ARMS
from .evaluate import bound_check_rows
from .model import Model, resolve_rotations

SLUG = "roste"
MANIFEST = Path(__file__).with_name("manifest.csv")
log = logging.getLogger(f"icml25.{SLUG}")


def alpha_tag(alpha: float) -> str:
    """File-name form of α: ``30.0 -> "30"``, ``0.5 -> "0.5"``."""
    return f"{float(alpha):g}"


def _setup(stage: Stage) -> None:
    torch.set_num_threads(int(stage.config.threads) if "threads" in _declared(stage) else 1)


def _scaled(fn: Any) -> Any:
    """Run ``fn`` at smoke/default scale, and the stage of the same name of :mod:`.paper_stages` at paper scale."""
    def stage_fn(stage: Stage, run: Any) -> None:
        if stage.scale == "paper":
            from .paper_stages import STAGES as PAPER_STAGES

            return PAPER_STAGES[fn.__name__](stage, run)
        return fn(stage, run)

    stage_fn.__name__, stage_fn.__doc__ = fn.__name__, fn.__doc__
    return stage_fn


def _declared(stage: Stage) -> frozenset[str]:
    return object.__getattribute__(stage.config, "_keys")


def _alpha(stage: Stage) -> float:
    if "alpha" not in stage.extra:
        raise SystemExit(f"{SLUG} {stage.name}: expected --set alpha=<value>")
    return float(stage.extra["alpha"])


def _save_pt(path: Path, obj: Any) -> None:
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def _load_pt(path: Path, what: str) -> Any:
    try:
        return torch.load(path, weights_only=True)
    except Exception as err:  # noqa: BLE001 - re-raised naming the file
        raise SystemExit(f"{SLUG}: {path} is not a readable {what} ({err})") from err


# -------------------------------------------------------------------------------------------- stages


def prepare(stage: Stage, run: Any) -> None:
    """Generate the chain, the pretraining walks and the SFT splits."""
    _setup(stage)
    cfg = stage.config
    data = D.build_data(cfg.data.model_dump(), cfg.model.context, cfg.pretrain.steps * cfg.pretrain.batch)
    D.save_data(stage.output(0), data)
    run.log_metrics({"prepare/pretrain_sequences": data["pretrain"].shape[0],
                     "prepare/sft_train": data["sft_train"].shape[0], "prepare/sft_test": data["sft_test"].shape[0]})


def pretrain(stage: Stage, run: Any) -> None:
    """Pretrain the decoder at ``--set alpha``; log ``train/loss`` per step and the per-channel max |act|."""
    _setup(stage)
    cfg, alpha = stage.config, _alpha(stage)
    data = D.load_data(stage.input(0))
    out = X.make_pretrained(cfg, alpha, data)
    _save_pt(stage.output(0), out)
    for k in range(0, len(out["loss"]), 10):
        run.log_metric("train/loss", out["loss"][k], step=k)
    run.log_metric("train/loss", out["loss"][-1], step=len(out["loss"]) - 1)
    for c, v in enumerate(out["channel_max"]):
        run.log_metric("train/channel_max_abs", v, step=c)  # step = channel index
    run.log_metrics({"train/outlier_ratio": _outlier_ratio(out["channel_max"], cfg.model.outlier_channels)})
    run.set_tags({"alpha": alpha_tag(alpha)})
    run.log_model(stage.output(0), cfg)


def _outlier_ratio(cmax: list[float], channels: tuple[int, ...]) -> float:
    """max |act| of the outlier channels over the median channel's."""
    c = np.asarray(cmax)
    return float(c[list(channels)].max() / np.median(c))


def preprocess(stage: Stage, run: Any) -> None:
    """Rotation search for every seed at ``--set alpha`` (calibration draw and signs from the seed)."""
    _setup(stage)
    cfg, alpha = stage.config, _alpha(stage)
    data = D.load_data(stage.input(0))
    model = X.load_model(cfg, alpha, _load_pt(stage.input(1), "pretrained model")["state"])
    if len(stage.outputs) != len(cfg.seeds):
        raise SystemExit(f"{SLUG} preprocess: expected one --out per seed ({len(cfg.seeds)}), got {len(stage.outputs)}")
    for seed, path in zip(cfg.seeds, stage.outputs):
        rec = X.search_record(cfg, model, data, seed)
        write_json(path, rec)
        with run.seed_run(seed) as srun:
            for s, (e_i, e_h) in rec["errors"].items():
                srun.log_metrics({f"preprocess/E_I/{s}": e_i, f"preprocess/E_H/{s}": e_h,
                                  f"preprocess/choice_H/{s}": float(rec["choices"].get(s, True))})
            srun.log_metrics({f"preprocess/E_{k}": v for k, v in rec["totals"].items()})
    run.set_tags({"alpha": alpha_tag(alpha)})


def train(stage: Stage, run: Any) -> None:
    """Fine-tune the arms of ``--arm A[,B,...]`` (arms of one α) for the seeds of this chunk, writing one
    ``models/{arm}/chunk{k}.pt`` per arm (the ``--out`` files, in the order of the arms); inputs: data.pt,
    pretrain_a{α}.pt[, rotcfg jsons]. One job for several arms saves each arm's process start-up."""
    _setup(stage)
    cfg = stage.config
    arms = [a for a in (stage.arm or "").split(",") if a]
    for arm in arms:
        if arm not in X.QAT_ROTATIONS and arm != "fp_sft":
            raise SystemExit(f"{SLUG} train: --arm must list trained arms {['fp_sft', *X.QAT_ROTATIONS]}, "
                             f"got {arm!r}")
        if arm not in cfg.arms:
            raise SystemExit(f"{SLUG} train: arm {arm!r} is not in the config's arms {list(cfg.arms)}")
    if not arms or len(stage.outputs) != len(arms):
        raise SystemExit(f"{SLUG} train: expected one --out per arm of --arm {stage.arm!r}, got {len(stage.outputs)}")
    if len({cfg.arm_alpha(a) for a in arms}) != 1:
        raise SystemExit(f"{SLUG} train: the arms of one job must share one alpha, got {arms}")
    seeds = stage.seeds or cfg.seeds
    data = D.load_data(stage.input(0))
    alpha = cfg.arm_alpha(arms[0])
    model = X.load_model(cfg, alpha, _load_pt(stage.input(1), "pretrained model")["state"])
    rotcfgs = {read_json(p)["seed"]: read_json(p) for p in stage.inputs[2:]}
    for arm, path in zip(arms, stage.outputs):
        out: dict[str, Any] = {"arm": arm, "alpha": alpha, "seeds": list(seeds), "runs": {}}
        for seed in seeds:
            rec = rotcfgs.get(seed)
            if X.QAT_ROTATIONS.get(arm) == "search" and rec is None:
                raise SystemExit(f"{SLUG} train: arm {arm} needs processed/rotcfg_a{alpha_tag(alpha)}_seed{seed}.json")
            res = X.train_arm(cfg, arm, seed, model, data, rec)
            out["runs"][str(seed)] = {"params": res["params"], "rotations": res["rotations"], "loss": res["loss"],
                                      "e_w": res["e_w"], "seconds": res["seconds"]}
            with _arm_seed_run(run, arms, arm, seed) as srun:
                for k, v in enumerate(res["loss"]):
                    srun.log_metric("train/loss", v, step=k)
                for k, v in res["e_w"]:
                    srun.log_metric("train/e_w", v, step=k)
                srun.log_metric("train/seconds", res["seconds"])
        _save_pt(path, out)
        if len(arms) == 1:
            run.log_model(path, cfg)
        else:
            with run.child(arm=arm) as arun:
                arun.log_model(path, cfg)


def _arm_seed_run(run: Any, arms: list[str], arm: str, seed: int) -> Any:
    """The MLflow run of one arm × seed: the job's seed run when the job trains one arm, else a nested run
    tagged with the arm and the seed."""
    return run.seed_run(seed) if len(arms) == 1 else run.child(arm=arm, seed=seed)


def _classify(paths: tuple[Path, ...]) -> dict[str, list[Path]]:
    kinds: dict[str, list[Path]] = {"data": [], "pretrain": [], "rotcfg": [], "chunk": []}
    for p in paths:
        if p.name == "data.pt":
            kinds["data"].append(p)
        elif p.name.startswith("pretrain_a"):
            kinds["pretrain"].append(p)
        elif p.name.startswith("rotcfg_"):
            kinds["rotcfg"].append(p)
        elif re.fullmatch(r"chunk\d+\.pt", p.name):
            kinds["chunk"].append(p)
        else:
            raise SystemExit(f"{SLUG} evaluate: unexpected input {p}")
    if len(kinds["data"]) != 1 or not kinds["pretrain"] or not kinds["chunk"]:
        raise SystemExit(f"{SLUG} evaluate: expected --in data.pt pretrain_a*.pt [rotcfg_*.json] "
                         "models/<arm>/chunk*.pt ...")
    return kinds


def invariance_errors(model: Model, tokens: torch.Tensor, n_random: int, seed: int = 0) -> list[dict[str, Any]]:
    """Check 3a: max |logits(config) - logits(unrotated model)| with quantizers off, float32, for "none", "all" and
    ``n_random`` random slot configurations (random R1 too)."""
    from .method import QuantConfig
    from .model import fake_quant_forward

    off = QuantConfig(None, None, None)
    rng = np.random.default_rng([seed, 3])
    configs: list[Any] = ["none", "all"]
    slots = model.cfg.slots()
    for _ in range(n_random):
        configs.append({"r1": bool(rng.integers(2)), **{s: bool(rng.integers(2)) for s in slots}})
    out = []
    with torch.no_grad():
        ref = model(tokens)
        for k, c in enumerate(configs):
            got = fake_quant_forward(model, tokens, c, off, seed=seed + k)
            out.append({"config": c, "max_abs_diff": float((got - ref).abs().max())})
    return out


def evaluate(stage: Stage, run: Any) -> None:
    """Held-out metrics of every arm × seed, checks 3a-3c, claims.json and metrics/eval.json."""
    _setup(stage)
    cfg = stage.config
    kinds = _classify(stage.inputs)
    data = D.load_data(kinds["data"][0])
    pre = {float(_load_pt(p, "pretrained model")["alpha"]): _load_pt(p, "pretrained model") for p in kinds["pretrain"]}
    per_seed: dict[str, dict[int, dict[str, float]]] = {}
    trained: dict[str, dict[int, Any]] = {}
    for p in kinds["chunk"]:
        doc = _load_pt(p, "trained chunk")
        trained.setdefault(doc["arm"], {}).update({int(s): r for s, r in doc["runs"].items()})
    curves = {arm: {s: {"loss": r["loss"], "e_w": r["e_w"]} for s, r in runs.items()} for arm, runs in trained.items()}
    mcfgs = {a: X.model_config(cfg, a) for a in pre}
    for arm in cfg.arms:
        base = "fp_sft" if arm in PTQ_ARMS else arm
        for seed, r in sorted(trained.get(base, {}).items()):
            mcfg = mcfgs[cfg.arm_alpha(arm)]
            per_seed.setdefault(arm, {})[seed] = X.evaluate_arm(cfg, arm, seed, mcfg, r["params"], r["rotations"],
                                                                data["sft_test"])
    # check 3a on the pretrained model at the main alpha (float32)
    model = X.load_model(cfg, cfg.alpha, pre[cfg.alpha]["state"])
    inv = invariance_errors(model, data["sft_test"][:64], cfg.eval.invariance_configs)
    searches = [read_json(p) for p in kinds["rotcfg"]]
    bounds = bound_check_rows_all(trained.get("roste", {}), mcfgs[cfg.alpha], cfg.quant.w_bits or 4)
    from .claims import build_claims

    ratios = {a: _outlier_ratio(p["channel_max"], cfg.model.outlier_channels) for a, p in pre.items()}
    claims = build_claims(per_seed, inv, searches, bounds, ratios, paper_data=False,  # generated stand-in task
                          c1_margin=cfg.eval.c1_margin)
    from . import PAPER

    seeds_seen = sorted({s for runs in per_seed.values() for s in runs})
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source, claims=claims,
                       config_hash=config_hash(cfg), paper=PAPER, seeds=seeds_seen)
    metrics = {"scale": stage.scale,
               "per_seed": {a: {str(s): m for s, m in runs.items()} for a, runs in per_seed.items()},
               "curves": {a: {str(s): c for s, c in runs.items()} for a, runs in curves.items()},
               "invariance": inv, "search": searches, "bounds": bounds,
               "pretrain": {alpha_tag(a): {"loss_final": p["loss"][-1], "channel_max": p["channel_max"]}
                            for a, p in pre.items()},
               "claims": [{"id": c.id, "kind": c.kind, "verdict": c.verdict, "statistic": c.statistic,
                           "note": c.note} for c in claims]}
    write_json(stage.output(1), metrics)
    for arm, runs in per_seed.items():
        with run.child(arm=arm) as arun:
            for key in ("test_loss", "token_acc", "rougeL"):
                arun.log_metric(f"eval/{key}", float(np.mean([m[key] for m in runs.values()])))
            for seed, m in runs.items():
                with arun.child(arm=arm, seed=seed) as srun:
                    srun.log_metrics({f"eval/{k}": v for k, v in m.items()})
    run.log_metrics({"eval/invariance_max_abs_diff": max(r["max_abs_diff"] for r in inv),
                     "eval/bound_violations": bounds["violations"]})
    log_verdicts(run, doc)
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))
    for c in claims:
        log.info("%s: %s %s", c.id, c.verdict, c.key_numbers)


def bound_check_rows_all(runs: dict[int, Any], mcfg: Any, bits: int) -> dict[str, Any]:
    """Check 3c over every seed's trained roste weights."""
    total = {"rows": 0, "violations": 0, "max_ratio": 0.0}
    for r in runs.values():
        b = bound_check_rows(r["params"], mcfg, bits)
        total["rows"] += b["rows"]
        total["violations"] += b["violations"]
        total["max_ratio"] = max(total["max_ratio"], b["max_ratio"])
    return total


def report(stage: Stage, run: Any) -> None:
    """Figures (E(W) during SFT, test loss per arm) and report.md from metrics/eval.json."""
    from .report import e_w_figure, loss_figure, report_markdown

    doc = read_json(stage.input(0))
    save_figure(e_w_figure(doc), stage.output(0))
    save_figure(loss_figure(doc), stage.output(1))
    write_text(stage.output(2), report_markdown(doc))
    for p in stage.outputs:
        run.log_artifact(p)


STAGES = {"prepare": _scaled(prepare), "pretrain": _scaled(pretrain), "preprocess": _scaled(preprocess),
          "train": _scaled(train), "evaluate": _scaled(evaluate), "report": report}

__all__ = ["STAGES", "alpha_tag", "invariance_errors", "resolve_rotations", "CONTROL_ARMS", "json"]
