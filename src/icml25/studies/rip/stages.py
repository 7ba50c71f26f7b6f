"""The stages of the rip study (spec "Stages"); each ``(stage, run)`` reads ``stage.inputs``, writes
``stage.outputs`` atomically and logs to the MLflow run.

prepare    → raw/{sft,pool,val,test}.parquet + models/seed.pt (world; the seed model M is SFT-trained here)
download   → raw/wildchat/*.parquet + raw/released/*.jsonl (paper; manifest-verified)
preprocess → processed/pairs.parquet (pair scoring; or a validated pair table scored elsewhere)
             [+ processed/{val,test}.parquet at paper scale]
train      → models/{arm}/chunk{k}.pt (world: {"seed<k>": state_dict}) + models/{arm}/chunk{k}.json (records)
evaluate   → claims.json + metrics/eval.json + figures/reward_by_arm.png + report.md + metrics/{arm}_seed{k}.json
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from icml25.core.claims import log_verdicts, summarize, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash
from icml25.core.io import atomic_path, read_json, save_figure, write_json, write_text

from . import data as D
from .config import ARMS
from .method import arm_mask, build_pairs, low_quality_share
from .pairs import read_pairs, write_pairs

SLUG = "rip"
MANIFEST = Path(__file__).with_name("manifest.csv")
log = logging.getLogger(f"icml25.{SLUG}")


def _threads(stage: Stage) -> None:
    import torch

    torch.set_num_threads(int(stage.extra.get("threads", 1)))


def _write_parquet(df: pd.DataFrame, path: Path) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def _q(cfg) -> tuple:
    f = cfg.filter
    return (f.q_rejected_reward, f.q_rejected_length, f.q_gap)


def _seed_model(cfg, path: Path):
    from .model import build_model, load_state

    model = build_model(cfg.model)
    model.load_state_dict(load_state(path))
    return model.eval()


# --------------------------------------------------------------------------------------------------- prepare
def prepare(stage: Stage, run: Any) -> None:
    """Generate the world's four splits and SFT the seed model M on the demonstrations."""
    import torch

    from .model import build_model, n_params, save_state
    from .train import train_sft

    cfg = stage.config
    if cfg.source != "world":
        raise SystemExit(f"{SLUG} prepare: source is {cfg.source!r}; prepare builds the offline world only")
    _threads(stage)
    splits = D.generate_world(cfg.world, cfg.data_seed)
    for i, name in enumerate(("sft", "pool", "val", "test")):
        _write_parquet(splits[name], stage.output(i))
        run.log_metric(f"prepare/{name}_n", len(splits[name]))
        for q, share in splits[name]["quality"].value_counts(normalize=True).items():
            run.log_metric(f"prepare/{name}_share_{q}", float(share))
    torch.manual_seed(cfg.sft.seed)
    model = build_model(cfg.model)
    run.log_metric("prepare/n_params", n_params(model))
    losses: list[tuple[int, float]] = []
    sft = splits["sft"]
    train_sft(model, list(sft["prompt"]), list(sft["demo"]), steps=cfg.sft.steps, batch=cfg.sft.batch,
              lr=cfg.sft.lr, seed=cfg.sft.seed, on_step=lambda s, v: losses.append((s, v)))
    for s, v in losses:
        run.log_metric("prepare/sft_loss", v, step=s)
    save_state(model, stage.output(4))
    log.info("seed model: %d parameters, final SFT loss %.4f", n_params(model), losses[-1][1])


# -------------------------------------------------------------------------------------------------- download
def download(stage: Stage, run: Any) -> None:
    """Fetch the paper-scale files of ``manifest.csv`` (in manifest order) to the outputs, sha256-verified (rows
    marked UNPINNED only with ``--trust-unpinned``), each checked to be parquet."""
    from icml25.core.download import fetch, jsonl_check, parquet_check, read_manifest

    if stage.data_source != "remote":
        raise SystemExit(f"{SLUG} download: the paper data (WildChat, released RIP sets) need "
                         f"--data-source remote (got {stage.data_source!r})")
    entries = list(read_manifest(MANIFEST).values())
    if len(entries) != len(stage.outputs):
        raise SystemExit(f"{SLUG} download: {len(stage.outputs)} --out paths for {len(entries)} manifest entries")
    for entry, dest in zip(entries, stage.outputs):
        check = parquet_check(("language", "conversation")) if dest.suffix == ".parquet" else jsonl_check()
        fetch(entry, dest, stage.mirror, trust_unpinned=stage.trust_unpinned, check=check)
        run.log_metric(f"download/{entry.name}_bytes", dest.stat().st_size)
    run.log_artifact(MANIFEST)


# ------------------------------------------------------------------------------------------------ preprocess
def _log_pair_stats(pairs: pd.DataFrame, run: Any, stage: Stage) -> None:
    for col, key in (("rejected_reward", "m1"), ("rejected_length", "m2"), ("reward_gap", "m3")):
        for q in (0.25, 0.5, 0.75):
            run.log_metric(f"preprocess/{key}_q{int(q * 100)}", float(pairs[col].quantile(q)))
    if pairs["quality"].notna().all():
        for q, share in pairs["quality"].value_counts(normalize=True).items():
            run.log_metric(f"preprocess/share_{q}", float(share))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(10, 2.8))
    for ax, (col, title) in zip(axes, (("rejected_reward", "m1 rejected reward"),
                                       ("rejected_length", "m2 rejected length"), ("reward_gap", "m3 gap"))):
        ax.hist(pairs[col], bins=30)
        ax.set_title(title)
    hist = stage.output(0).with_name("pair_metrics_hist.png")
    save_figure(fig, hist)
    run.log_artifact(hist)


def score_pairs(cfg, pool: pd.DataFrame, model, progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """Pair scoring of the world pool (spec "Pair scoring" steps 1–5) → the full pair table and timings."""
    from .judge import judge_matrix
    from .model import batched_logps, sample_responses

    s = cfg.sampling
    prompts = list(pool["prompt"])
    t0 = time.perf_counter()
    responses = sample_responses(model, prompts, s.n_responses, s.max_new_tokens, temperature=s.temperature,
                                 top_p=s.top_p, seed=s.seed, batch_size=s.batch_size, progress=progress)
    t1 = time.perf_counter()
    rng = np.random.default_rng([s.seed, 101])
    rewards = judge_matrix(responses, list(pool["target"]), list(pool["cap"]), s.judge_noise, rng)
    t2 = time.perf_counter()
    pairs = build_pairs(pool["prompt_id"].to_numpy(np.int64), prompts, responses, rewards)
    pairs.insert(2, "quality", list(pool["quality"]))
    pairs["ref_logp_chosen"] = batched_logps(model, prompts, list(pairs["chosen"])).numpy()
    pairs["ref_logp_rejected"] = batched_logps(model, prompts, list(pairs["rejected"])).numpy()
    t3 = time.perf_counter()
    n = len(prompts) * s.n_responses
    timing = {"sample_s": t1 - t0, "judge_s": t2 - t1, "ref_logp_s": t3 - t2, "responses": n,
              "responses_per_s": n / (t2 - t0)}
    return pairs, timing


def preprocess(stage: Stage, run: Any) -> None:
    """Pair scoring → ``processed/pairs.parquet`` (or validate and adopt ``pairs_table`` scored elsewhere)."""
    cfg = stage.config
    if cfg.pairs_table:
        pairs = read_pairs(cfg.pairs_table)  # raises naming the bad column
        log.info("adopting the external pair table %s (%d rows)", cfg.pairs_table, len(pairs))
        run.set_tags({"pairs_table": str(cfg.pairs_table)})
        if cfg.source == "wildchat":  # the held-out val/test prompts still come from WildChat
            _paper_splits(stage)
    elif cfg.source == "world":
        _threads(stage)
        pool = D.read_split(stage.input(0), "pool")
        pairs, timing = score_pairs(cfg, pool, _seed_model(cfg, stage.input(1)))
        run.log_metrics({f"preprocess/{k}": v for k, v in timing.items()})
        log.info("pair scoring: %d responses, %.0f sampled+scored per second", timing["responses"],
                 timing["responses_per_s"])
    else:
        pairs = _preprocess_paper(stage, run)
    write_pairs(pairs, stage.output(0))
    _log_pair_stats(pairs, run, stage)
    run.log_metric("preprocess/rows", len(pairs))


def _paper_splits(stage: Stage) -> pd.DataFrame:
    """WildChat → prepared prompts → a seeded pick of pool / val / test (disjoint); writes processed val and test
    (outputs 1, 2) and returns the pool."""
    from icml25.core.download import verified

    from . import paper as P

    cfg = stage.config
    shards = [verified(p) for p in stage.inputs if p.suffix == ".parquet"]  # downloads, hash re-checked
    prompts = P.prepare_wildchat(P.read_wildchat(shards))
    rng = np.random.default_rng([cfg.data_seed, 1])
    need = cfg.paper.pool_size + 2 * cfg.paper.val_size
    if len(prompts) < need:
        raise SystemExit(f"{SLUG} preprocess: {len(prompts)} prepared WildChat prompts < {need} needed "
                         "(paper.pool_size + 2 x paper.val_size)")
    pick = prompts.iloc[rng.permutation(len(prompts))[:need]].reset_index(drop=True)
    n_pool, n_val = cfg.paper.pool_size, cfg.paper.val_size
    pool, val, test = pick.iloc[:n_pool], pick.iloc[n_pool:n_pool + n_val], pick.iloc[n_pool + n_val:]
    for df, out in ((val, stage.output(1)), (test, stage.output(2))):
        _write_parquet(df.assign(quality=None, target="", cap=1.0), out)
    return pool


def _preprocess_paper(stage: Stage, run: Any) -> pd.DataFrame:
    """WildChat → pool/val/test prompts → N samples (vLLM or transformers) → ArmoRM → pairs (+ processed val/test);
    the seed and reward models at their models.csv commits (recorded in MLflow)."""
    from icml25.core import hub

    from . import paper as P

    cfg, s = stage.config, stage.config.sampling
    pp = cfg.paper
    models = P.resolve_models(pp, [pp.seed_model, pp.reward_model], trust_unpinned=stage.trust_unpinned)
    hub.record(run, models.values())
    seed, reward = models[pp.seed_model], models[pp.reward_model]
    pool = _paper_splits(stage)
    prompts = list(pool["prompt"])
    responses = P.sample(seed, prompts, s.n_responses, temperature=s.temperature, top_p=s.top_p,
                         max_new_tokens=pp.max_new_tokens, seed=s.seed, paper=pp)
    rewards = P.armorm_rewards(reward, prompts, responses, pp)
    pairs = build_pairs(pool["prompt_id"].to_numpy(np.int64), prompts, responses, rewards)
    pairs.insert(2, "quality", pd.Series([None] * len(pairs), dtype="object"))
    both = P.reference_logps(seed, prompts + prompts, list(pairs["chosen"]) + list(pairs["rejected"]), pp)
    pairs["ref_logp_chosen"], pairs["ref_logp_rejected"] = both[:len(pairs)], both[len(pairs):]
    return pairs


# ----------------------------------------------------------------------------------------------------- train
def train(stage: Stage, run: Any) -> None:
    """Filter the pair table for the arm, then DPO once per seed of the chunk (inputs: pairs, val[, seed.pt])."""
    cfg, arm = stage.config, stage.arm
    if arm not in ARMS:
        raise SystemExit(f"{SLUG} train: --arm must be one of {list(ARMS)}, got {arm!r}")
    if arm not in cfg.arms:
        raise SystemExit(f"{SLUG} train: arm {arm!r} is not in the config's arms {list(cfg.arms)}")
    seeds = stage.seeds or cfg.seeds
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"{SLUG} train: seeds {unknown} are not in the config's seeds")
    pairs = read_pairs(stage.input(0))
    val = D.read_split(stage.input(1))
    json_out = next((p for p in stage.outputs if p.suffix == ".json"), None)
    if json_out is None:
        raise SystemExit(f"{SLUG} train: expected a .json record among --out")
    records: dict[str, Any] = {}
    if cfg.source == "world":
        from .model import save_state
        from .train import train_dpo

        _threads(stage)
        seed_model = _seed_model(cfg, stage.input(2))
        states = {}
        for seed in seeds:
            mask = arm_mask(pairs, arm, seed=seed, q=_q(cfg))
            kept = pairs[mask]
            lq = low_quality_share(pairs["quality"], mask)
            payload = {"prompts": list(kept["prompt"]), "chosen": list(kept["chosen"]),
                       "rejected": list(kept["rejected"]),
                       "ref_logp_chosen": kept["ref_logp_chosen"].to_numpy(np.float64).copy(),
                       "ref_logp_rejected": kept["ref_logp_rejected"].to_numpy(np.float64).copy()}
            with run.seed_run(seed) as srun:  # one nested run per seed (tag seed): train/<metric> at each step
                srun.log_metrics({"train/kept_n": int(mask.sum()), "train/low_quality_share": lq})
                log_step = lambda step, m, r=srun: r.log_metrics({f"train/{k}": v for k, v in m.items()}, step=step)
                policy, rec = train_dpo(seed_model, payload, beta=cfg.dpo.beta, lr=cfg.dpo.lr, batch=cfg.dpo.batch,
                                        steps=cfg.dpo.steps, eval_every=cfg.dpo.eval_every,
                                        val_prompts=list(val["prompt"]), val_targets=list(val["target"]),
                                        max_new_tokens=cfg.sampling.max_new_tokens, seed=seed, on_log=log_step)
            states[f"seed{seed}"] = policy.state_dict()
            rec.update(low_quality_share=lq, kept_ids=kept["prompt_id"].astype(int).tolist())
            records[str(seed)] = rec
            log.info("%s seed %d: kept %d (low-quality %.3f), step-0 loss %.6f, best val %.4f at step %d", arm,
                     seed, rec["kept_n"], lq, rec["step0_loss"], rec["best_val_reward"], rec["best_step"])
        pt_out = next(p for p in stage.outputs if p.suffix == ".pt")
        save_state(states, pt_out)
        run.log_model(pt_out, cfg)  # the job's policies (one state_dict per seed), with the config
    else:  # paper: DPO from the seed model (TRL on GPUs, or the transformers-only loop), early stopping
        from icml25.core import hub

        from . import paper as P

        pp = cfg.paper
        models = P.resolve_models(pp, [pp.seed_model, pp.reward_model], trust_unpinned=stage.trust_unpinned)
        hub.record(run, models.values())
        weights = next(p for p in stage.outputs if p.suffix != ".json")
        for seed in seeds:
            mask = arm_mask(pairs, arm, seed=seed, q=_q(cfg))
            out_dir = weights / f"seed{seed}"
            with run.seed_run(seed) as srun:  # an 8B policy: recorded by path and sha256, not uploaded
                srun.log_metric("train/kept_n", int(mask.sum()))
                if pp.dpo_backend == "trl":
                    rec = P.dpo_trl(models[pp.seed_model], pairs[mask], out_dir, val_prompts=list(val["prompt"]),
                                    reward=models[pp.reward_model], paper=pp, beta=cfg.dpo.beta, seed=seed)
                else:
                    log_step = lambda step, m, r=srun: r.log_metrics({f"train/{k}": v for k, v in m.items()},
                                                                     step=step)
                    rec = P.dpo_torch(models[pp.seed_model], pairs[mask], out_dir, val_prompts=list(val["prompt"]),
                                      reward=models[pp.reward_model], paper=pp, beta=cfg.dpo.beta, seed=seed,
                                      on_log=log_step)
                srun.log_model(out_dir, cfg)
            records[str(seed)] = rec | {"kept_ids": pairs.loc[mask, "prompt_id"].astype(int).tolist(),
                                        "low_quality_share": None}
            log.info("%s seed %d: kept %d, step-0 loss %s, best val reward %s at step %s", arm, seed,
                     int(mask.sum()), rec.get("step0_loss"), rec.get("best_val_reward"), rec.get("best_step"))
    write_json(json_out, {"arm": arm, "seeds": list(seeds), "scale": stage.scale, "records": records})


# -------------------------------------------------------------------------------------------------- evaluate
def _evaluate_world(stage: Stage) -> tuple[dict, float, dict]:
    """Greedy noise-free judge reward of the seed model and every trained policy on the world's test prompts."""
    import torch

    from .evaluate import win_rate
    from .model import build_model, load_state
    from .train import mean_reward

    cfg = stage.config
    _threads(stage)
    test = D.read_split(stage.input(1))
    prompts, targets = list(test["prompt"]), list(test["target"])
    T = cfg.sampling.max_new_tokens
    seed_reward, seed_per_prompt, _ = mean_reward(_seed_model(cfg, stage.input(2)), prompts, targets, T)
    metrics: dict[str, dict[int, dict[str, float]]] = {}
    records: dict[str, dict[int, dict]] = {}
    for path in (p for p in stage.inputs[3:] if p.suffix == ".json"):
        doc = read_json(path)
        states = load_state(path.with_suffix(".pt"))
        for seed_s, rec in doc["records"].items():
            seed = int(seed_s)
            model = build_model(cfg.model)
            model.load_state_dict(states[f"seed{seed}"])
            with torch.no_grad():
                reward, per_prompt, _ = mean_reward(model.eval(), prompts, targets, T)
            metrics.setdefault(doc["arm"], {})[seed] = {
                "test_reward": reward, "win_rate_vs_seed": win_rate(per_prompt, seed_per_prompt),
                "kept_n": rec["kept_n"], "low_quality_share": rec["low_quality_share"],
                "best_step": rec["best_step"], "best_val_reward": rec["best_val_reward"]}
            records.setdefault(doc["arm"], {})[seed] = rec
    return metrics, seed_reward, records


def _evaluate_paper(stage: Stage, run: Any) -> tuple[dict, float, dict, dict, str]:
    """Paper scale with a local judge (spec "Evaluation" [R]: the hosted AlpacaEval2 / Arena-Hard / WildBench GPT-4
    judges are out of reach): greedy answers of the seed model and of every trained policy to the held-out WildChat
    test prompts, each scored by the judge of ``models.csv`` (an open reward model at a pinned commit, not the
    ArmoRM that chose the pairs); ``test_reward`` = mean judge reward, ``win_rate_vs_seed`` = share of prompts
    where the policy's answer beats the seed model's (ties 0.5). All answers first, then the judge (one model on
    the device at a time). Returns metrics, the seed model's reward, the train records, the hub models used and
    the judge's description for the claims."""
    from icml25.core import hub

    from . import paper as P
    from .evaluate import win_rate
    from .rewardmodels import load_judge, score_judge

    cfg = stage.config
    pp = cfg.paper
    models = P.resolve_models(pp, [pp.seed_model, pp.judge_model], trust_unpinned=stage.trust_unpinned)
    recorded = hub.record(run, models.values())
    test = pd.read_parquet(stage.input(1))
    prompts = list(test["prompt"])

    def greedy(model) -> list[str]:
        return [a[0] for a in P.sample(model, prompts, 1, temperature=0.0, top_p=1.0,
                                       max_new_tokens=pp.max_new_tokens, seed=0, paper=pp)]

    answers: dict[tuple[str, int], list[str]] = {("seed", -1): greedy(models[pp.seed_model])}
    records: dict[str, dict[int, dict]] = {}
    for path in (p for p in stage.inputs[2:] if p.suffix == ".json"):
        doc = read_json(path)
        hf_dir = path.with_name(path.stem + "_hf")
        for seed_s, rec in doc["records"].items():
            model_dir = hf_dir / f"seed{seed_s}"
            if not model_dir.is_dir():
                raise SystemExit(f"{SLUG} evaluate: no trained policy at {model_dir} (record {path})")
            answers[(doc["arm"], int(seed_s))] = greedy(P.LocalModel(str(model_dir)))
            records.setdefault(doc["arm"], {})[int(seed_s)] = rec
    judge, jtok = load_judge(models[pp.judge_model], device=pp.device, dtype=pp.dtype)
    scores = {k: score_judge(judge, jtok, prompts, a, batch=pp.score_batch) for k, a in answers.items()}
    seed_scores = scores.pop(("seed", -1))
    metrics: dict[str, dict[int, dict[str, float]]] = {}
    for (arm, seed), sc in scores.items():
        rec = records[arm][seed]
        metrics.setdefault(arm, {})[seed] = {
            "test_reward": float(sc.mean()), "win_rate_vs_seed": win_rate(sc, seed_scores), "kept_n": rec["kept_n"],
            "low_quality_share": rec.get("low_quality_share"), "best_step": rec.get("best_step"),
            "best_val_reward": rec.get("best_val_reward")}
    j = recorded[pp.judge_model]
    judge_words = (f"{len(prompts)} held-out WildChat test prompts (disjoint from the pool and the validation "
                   f"prompts), greedy answers scored by the local judge {j['repo_id']} at {j['revision']} "
                   f"({j['source']}; an open reward model, not ArmoRM and not the hosted AlpacaEval2/Arena-Hard/"
                   "WildBench GPT-4 judges)")
    models_used = P.resolve_models(pp, [pp.reward_model], trust_unpinned=stage.trust_unpinned)
    recorded |= hub.record(run, models_used.values())  # the pair scorer, for the claims' models block
    return metrics, float(seed_scores.mean()), records, recorded, judge_words


def evaluate(stage: Stage, run: Any) -> None:
    """Greedy test reward of every trained model and of M, the claims, and the reward-by-arm figure.

    Inputs: pairs, test, seed.pt (world only), the train records (.json; weights beside them: .pt in the world,
    ``chunk<k>_hf/seed<s>/`` model folders at paper scale). Outputs: claims.json, metrics/eval.json,
    figures/reward_by_arm.png, report.md, then metrics/{arm}_seed{k}.json. At paper scale a local judge decides
    (:func:`_evaluate_paper`) and claims.json records the hub commits used. The figure is made here rather than in
    a report job: one job less saves the ~5–9 s of per-job start-up.
    """
    from .evaluate import evaluate_claims

    cfg = stage.config
    pairs = read_pairs(stage.input(0))
    if cfg.source == "world":
        metrics, seed_reward, records = _evaluate_world(stage)
        models, judge = None, None
    else:
        metrics, seed_reward, records, models, judge = _evaluate_paper(stage, run)
    claims = evaluate_claims(metrics, {"test_reward": seed_reward}, records, pairs, _q(cfg),
                             min_effect=cfg.claims.min_effect, dpo_min_gain=cfg.adequacy.dpo_min_gain,
                             min_pool_low_quality=cfg.adequacy.min_pool_low_quality,
                             paper_data=cfg.source == "wildchat", judge=judge)
    from . import PAPER

    claims_doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source,
                              claims=claims, config_hash=config_hash(cfg), paper=PAPER,
                              seeds=sorted({s for by in metrics.values() for s in by}), models=models)
    arms_doc: dict[str, Any] = {"seed": {"test_reward": {"mean": seed_reward, "ci_low": seed_reward,
                                                         "ci_high": seed_reward, "n": 1}}}
    for arm, by in metrics.items():
        vals = [by[s] for s in sorted(by)]
        arms_doc[arm] = {"test_reward": summarize([v["test_reward"] for v in vals], unit="DPO seeds"),
                         "win_rate_vs_seed": summarize([v["win_rate_vs_seed"] for v in vals], unit="DPO seeds"),
                         "kept_n": vals[0]["kept_n"], "per_seed": {str(s): by[s] for s in sorted(by)}}
        with run.child(arm=arm) as arun:  # one nested run per arm (means over seeds), one per seed under it
            arun.log_metrics({"eval/test_reward": arms_doc[arm]["test_reward"]["mean"],
                              "eval/win_rate_vs_seed": arms_doc[arm]["win_rate_vs_seed"]["mean"]})
            for seed in sorted(by):
                with arun.child(seed=seed) as srun:
                    srun.log_metrics({f"eval/{k}": by[seed][k] for k in ("test_reward", "win_rate_vs_seed")})
    with run.child(arm="seed") as arun:  # the seed model M itself, the arms' common baseline
        arun.log_metric("eval/test_reward", seed_reward)
    doc = {"scale": stage.scale, "arms": arms_doc, **({"reward_label": "local-judge reward", "judge": judge}
                                                      if judge else {}),
           "claims": [{"id": c.id, "kind": c.kind, "verdict": c.verdict, "statistic": c.statistic, "note": c.note,
                       **({"status": c.status} if c.status != "tested" else {})} for c in claims]}
    write_json(stage.output(1), doc)
    for out in stage.outputs[4:]:  # metrics/{arm}_seed{k}.json
        arm, _, seed = out.stem.rpartition("_seed")
        if arm not in metrics or int(seed) not in metrics[arm]:
            raise SystemExit(f"{SLUG} evaluate: no trained model for {out.name}")
        write_json(out, {"arm": arm, "seed": int(seed), **metrics[arm][int(seed)]})
    for c in claims:
        log.info("%s (%s): %s", c.id, c.kind, c.verdict)
    log_verdicts(run, claims_doc)
    from .report import report_markdown, reward_figure

    fig_out, md_out = stage.output(2), stage.output(3)
    save_figure(reward_figure(doc), fig_out)
    write_text(md_out, report_markdown(doc))
    for path in (stage.output(0), stage.output(1), fig_out, md_out):
        run.log_artifact(path)


STAGES = {"prepare": prepare, "download": download, "preprocess": preprocess, "train": train,
          "evaluate": evaluate}
