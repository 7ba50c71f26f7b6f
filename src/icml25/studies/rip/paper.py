"""The paper path (spec "Scales: paper"): WildChat preparation, sampling, ArmoRM scoring and DPO.

Every hub model is a row of ``models.csv`` resolved by ``icml25.core.hub`` (a pinned commit; a local directory in
the rehearsal) and loaded with ``trust_remote_code=False``; ArmoRM through our own head module
(:mod:`.rewardmodels`). Two switches choose the tools: ``paper.sampler`` (``vllm`` on the cluster, ``hf`` =
transformers ``generate``) and ``paper.dpo_backend`` (``trl`` on the cluster, ``torch`` = :mod:`.hfpolicy`'s
loop). The ``hf``/``torch`` side runs in the rehearsal on CPU with tiny models; the vLLM and TRL functions are
UNTESTED here (no GPU; the packages are not installed). They are imported lazily (extra ``rip-paper``, env
``envs/rip-paper.yaml``); a missing package raises an error naming the extra. Pure parts are unit-tested:
:func:`prepare_wildchat`, :func:`read_released_set`, and the DPO set-up (:func:`dpo_trl_dataset`,
:func:`dpo_trl_config`, :func:`checkpoint_steps`, :func:`best_checkpoint`).

DPO on the paper path (paper Section 4: DPO with early stopping by mean reward on held-out validation prompts):

- **Reference log-probs.** TRL computes log π_ref itself, once, before training (``precompute_ref_log_probs``),
  on exactly the tokens the policy's log-probs are summed over (its chat template, EOS and truncation). The pair
  table's ``ref_logp_*`` columns are *not* fed to TRL: they are summed over our own chat-template tokenisation,
  and a reference summed over other tokens than the policy would make the step-0 loss differ from ln 2 (older
  TRL versions used such columns whenever present, newer ones ignore them unless precomputing, and precomputing
  onto a dataset that already holds them fails). The one flag covers the training set and any evaluation set
  alike; their largest difference from the stored columns is recorded as a cross-check.
- **Early stopping.** A checkpoint is saved every ``paper.eval_every`` optimiser steps and at the end; after
  training, each checkpoint answers the validation prompts greedily (vLLM) and ArmoRM scores the answers; the
  checkpoint with the highest mean reward is kept (the earliest on ties), as the offline path does with its judge.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

MIDJOURNEY = re.compile(r"midjourney|/imagine prompt", re.IGNORECASE)  # [R] the paper's rule is unstated


def _need(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"rip paper path needs {module!r}: pip install 'icml25[rip-paper]' or use "
                          f"envs/rip-paper.yaml (GPU nodes)") from err


def prepare_wildchat(conversations: pd.DataFrame) -> pd.DataFrame:
    """WildChat → prompts (spec "WildChat preparation" [V]): English, first user turn, Midjourney prompts
    dropped [R rule], exact duplicates dropped (first kept). Needs columns ``language`` and ``conversation`` (a
    list of ``{role, content}``); returns ``prompt_id`` (int64, row order) and ``prompt``."""
    for col in ("language", "conversation"):
        if col not in conversations.columns:
            raise KeyError(f"prepare_wildchat: column {col!r} missing")
    prompts = []
    for lang, conv in zip(conversations["language"], conversations["conversation"]):
        if lang != "English" or conv is None:
            continue
        first = next((t for t in conv if t.get("role") == "user"), None)
        text = (first or {}).get("content") or ""
        if text.strip() and not MIDJOURNEY.search(text):
            prompts.append(text)
    out = pd.DataFrame({"prompt": prompts}).drop_duplicates("prompt", keep="first").reset_index(drop=True)
    out.insert(0, "prompt_id", np.arange(len(out), dtype=np.int64))
    return out


def read_wildchat(paths: Iterable[str | Path]) -> pd.DataFrame:
    """The WildChat parquet shards (only the two columns the preparation reads)."""
    return pd.concat([pd.read_parquet(p, columns=["language", "conversation"]) for p in paths],
                     ignore_index=True)


def read_released_set(path: str | Path, limit: int | None = None) -> pd.DataFrame:
    """A released RIP-filtered jsonl (one json object per line) as a frame; used to compare kept prompts."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if limit is not None and i >= limit:
                break
            if line.strip():
                rows.append(json.loads(line))
    return pd.DataFrame(rows)


MODELS = Path(__file__).with_name("models.csv")  #: the hub models of the paper path (core.hub manifest)


@dataclass(frozen=True)
class LocalModel:
    """A model directory this pipeline wrote itself (a trained policy): loaded from disk, never with remote code."""

    path: str
    repo_id: str = "local"

    def kwargs(self) -> dict[str, Any]:
        return {"trust_remote_code": False}


def resolve_models(paper, names: Sequence[str], *, trust_unpinned: bool = False) -> dict[str, Any]:
    """``{name: ResolvedModel}`` of ``models.csv`` rows ``names`` (config ``paper.*_model`` values); a row with an
    entry in ``paper.model_dirs`` loads from that local directory (the rehearsal's tiny models)."""
    from icml25.core import hub

    rows = hub.read_models(MODELS)
    out = {}
    for name in names:
        if name not in rows:
            raise KeyError(f"rip paper path: model {name!r} is not a row of {MODELS} (rows: {sorted(rows)})")
        out[name] = hub.resolve(rows[name], trust_unpinned=trust_unpinned, local_dir=paper.model_dirs.get(name))
    return out


def sample_vllm(model, prompts: Sequence[str], n: int, *, temperature: float, top_p: float,
                max_new_tokens: int, seed: int, gpus: int) -> list[list[str]]:
    """N responses per prompt with vLLM (chat template applied by vLLM's ``chat``) from ``model`` (a resolved hub
    model or a :class:`LocalModel`) at its recorded revision, without remote code. [untested: needs GPUs]"""
    import gc

    vllm = _need("vllm")
    rev = model.kwargs().get("revision")
    llm = vllm.LLM(model=model.path, revision=rev, tokenizer_revision=rev, trust_remote_code=False,
                   tensor_parallel_size=max(1, gpus), seed=seed)
    params = vllm.SamplingParams(n=n, temperature=temperature, top_p=top_p, max_tokens=max_new_tokens, seed=seed)
    outs = llm.chat([[{"role": "user", "content": p}] for p in prompts], params)
    del llm
    gc.collect()
    return [[c.text for c in o.outputs] for o in outs]


def sample(model, prompts: Sequence[str], n: int, *, temperature: float, top_p: float, max_new_tokens: int,
           seed: int, paper) -> list[list[str]]:
    """N responses per prompt with the configured sampler (``paper.sampler``: ``vllm`` on the cluster, ``hf``:
    transformers ``generate``); temperature 0 is greedy (n = 1)."""
    if paper.sampler == "vllm":
        return sample_vllm(model, prompts, n, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                           seed=seed, gpus=paper.gpus)
    from .hfpolicy import generate, load_causal_lm

    lm, tok = load_causal_lm(model, device=paper.device, dtype=paper.dtype)
    return generate(lm, tok, prompts, n=n, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                    seed=seed, batch=paper.gen_batch)


def armorm_rewards(reward, prompts: Sequence[str], responses: Sequence[Sequence[str]], paper) -> np.ndarray:
    """ArmoRM scores (P, N) float64 of P prompts x N responses (our head on transformers' Llama backbone)."""
    from .rewardmodels import load_armorm, score_armorm

    model, tok = load_armorm(reward, device=paper.device, dtype=paper.dtype)
    n = len(responses[0]) if responses else 0
    if any(len(r) != n for r in responses):
        raise ValueError("armorm_rewards: every prompt needs the same number of responses")
    flat = score_armorm(model, tok, [p for p in prompts for _ in range(n)], [r for rs in responses for r in rs],
                        batch=paper.score_batch)
    return flat.reshape(len(prompts), n)


def reference_logps(seed, prompts: Sequence[str], responses: Sequence[str], paper) -> np.ndarray:
    """Summed log pi_ref(response incl. end-of-turn | prompt) with the chat template, (B,) float64."""
    from .hfpolicy import load_causal_lm, ref_logps

    model, tok = load_causal_lm(seed, device=paper.device, dtype=paper.dtype)
    return ref_logps(model, tok, prompts, responses, batch=paper.score_batch)


def dpo_trl_dataset(pairs: pd.DataFrame) -> dict[str, list]:
    """The kept pairs in TRL's conversational preference format (``prompt``, ``chosen``, ``rejected``; one user
    turn, one assistant answer). No ``ref_*_logps`` columns: TRL precomputes the reference on its own tokens."""
    for col in ("prompt", "chosen", "rejected"):
        if col not in pairs.columns:
            raise KeyError(f"dpo_trl_dataset: pair column {col!r} missing")
    if len(pairs) == 0:
        raise ValueError("dpo_trl_dataset: the arm kept no pairs")
    return {"prompt": [[{"role": "user", "content": p}] for p in pairs["prompt"]],
            "chosen": [[{"role": "assistant", "content": c}] for c in pairs["chosen"]],
            "rejected": [[{"role": "assistant", "content": r}] for r in pairs["rejected"]]}


def dpo_trl_config(out_dir: str | Path, *, beta: float, lr: float, batch: int, epochs: int, seed: int, gpus: int,
                   eval_every: int, max_length: int | None) -> dict[str, Any]:
    """Keyword arguments of TRL's ``DPOConfig`` for one arm and seed (spec "DPO", paper scale).

    One pair per device and step, ``batch / gpus`` accumulation steps (global batch = ``batch``); dropout off;
    the reference log-probs precomputed by TRL for every dataset it is given (see the module docstring); a
    model-only checkpoint every ``eval_every`` steps (the candidates of the early stopping); truncation, if a
    sequence exceeds ``max_length`` tokens, cuts the prompt's start so the answer and its EOS stay.
    """
    devices = max(1, int(gpus))
    if batch % devices:
        raise ValueError(f"paper.batch ({batch}) must be a multiple of paper.gpus ({gpus}): global batch = "
                         "gpus x accumulation steps")
    return {"output_dir": str(out_dir), "beta": float(beta), "learning_rate": float(lr),
            "per_device_train_batch_size": 1, "gradient_accumulation_steps": batch // devices,
            "num_train_epochs": int(epochs), "seed": int(seed), "precompute_ref_log_probs": True,
            "disable_dropout": True, "max_length": max_length, "truncation_mode": "keep_end",
            "save_strategy": "steps", "save_steps": int(eval_every), "save_only_model": True,
            "eval_strategy": "no", "logging_steps": 1, "bf16": True, "report_to": []}


def checkpoint_steps(folder: str | Path) -> dict[int, Path]:
    """``{step: path}`` of the ``checkpoint-<step>`` folders a Trainer wrote under ``folder``."""
    out = {}
    for p in Path(folder).iterdir():
        m = re.fullmatch(r"checkpoint-(\d+)", p.name)
        if m and p.is_dir():
            out[int(m.group(1))] = p
    return dict(sorted(out.items()))


def best_checkpoint(val_rewards: dict[int, float]) -> int:
    """The step with the highest mean validation reward; the earliest step on ties. Raises on no or NaN rewards."""
    if not val_rewards:
        raise ValueError("best_checkpoint: no checkpoint was evaluated")
    bad = {s: r for s, r in val_rewards.items() if not np.isfinite(r)}
    if bad:
        raise ValueError(f"best_checkpoint: non-finite validation reward at steps {sorted(bad)}")
    best = max(val_rewards.values())
    return min(s for s, r in val_rewards.items() if r == best)


def val_reward(model_dir, prompts: Sequence[str], reward, paper) -> float:
    """Mean ArmoRM reward of the greedy answers of the model in ``model_dir`` to the validation prompts."""
    answers = sample(LocalModel(str(model_dir)), prompts, 1, temperature=0.0, top_p=1.0,
                     max_new_tokens=paper.max_new_tokens, seed=0, paper=paper)
    return float(armorm_rewards(reward, prompts, answers, paper).mean())


def dpo_trl_train(model: Any, tokenizer: Any, pairs: pd.DataFrame, config_kwargs: dict[str, Any]) -> dict:
    """One TRL DPO run on the kept pairs (``model``: an id or a loaded causal LM); checkpoints go to
    ``config_kwargs["output_dir"]``. Returns ``train_loss``, ``kept_n``, the first logged DPO loss ``step0_loss``
    (ln 2 when the reference matches the policy's tokens) and ``ref_logp_max_abs_diff`` (TRL's precomputed
    reference vs the pair table's ``ref_logp_*`` columns, where both exist)."""
    import dataclasses

    trl = _need("trl")
    datasets = _need("datasets")
    known = {f.name for f in dataclasses.fields(trl.DPOConfig)}
    missing = sorted(set(config_kwargs) - known)
    if missing:
        raise ImportError(f"rip paper path: the installed trl {trl.__version__} has no DPOConfig field(s) "
                          f"{missing}; install the version of envs/rip-paper.yaml")
    trainer = trl.DPOTrainer(model=model, args=trl.DPOConfig(**config_kwargs),
                             train_dataset=datasets.Dataset.from_dict(dpo_trl_dataset(pairs)),
                             processing_class=tokenizer)
    result = trainer.train()
    record: dict[str, Any] = {"train_loss": float(result.training_loss), "kept_n": int(len(pairs))}
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    if losses and trainer.args.logging_steps == 1:  # the first optimiser step's loss
        record["step0_loss"] = float(losses[0])
    ds = trainer.train_dataset
    if "ref_chosen_logps" in ds.column_names and "ref_logp_chosen" in pairs.columns:
        diff = np.abs(np.concatenate([np.asarray(ds["ref_chosen_logps"]) - pairs["ref_logp_chosen"].to_numpy(),
                                      np.asarray(ds["ref_rejected_logps"]) - pairs["ref_logp_rejected"].to_numpy()]))
        record["ref_logp_max_abs_diff"] = float(diff.max())
    return record


def dpo_trl(seed_model, pairs: pd.DataFrame, out_dir: str | Path, *, val_prompts: Sequence[str],
            reward, paper, beta: float, seed: int) -> dict:
    """DPO with TRL's ``DPOTrainer`` on the kept pairs, then early stopping: the checkpoint with the best mean
    validation reward is copied to ``out_dir`` (the other checkpoints are deleted). [untested on GPUs]"""
    import gc
    import shutil

    transformers = _need("transformers")
    torch = _need("torch")
    out_dir = Path(out_dir)
    ckpt_root = out_dir.with_name(out_dir.name + "_checkpoints")
    kwargs = dpo_trl_config(ckpt_root, beta=beta, lr=paper.lr, batch=paper.batch, epochs=paper.epochs, seed=seed,
                            gpus=paper.gpus, eval_every=paper.eval_every, max_length=paper.max_length)
    policy = transformers.AutoModelForCausalLM.from_pretrained(seed_model.path, torch_dtype=torch.bfloat16,
                                                               **seed_model.kwargs())
    tok = transformers.AutoTokenizer.from_pretrained(seed_model.path, **seed_model.kwargs())
    record = dpo_trl_train(policy, tok, pairs, kwargs)
    gc.collect()
    torch.cuda.empty_cache()
    steps = checkpoint_steps(ckpt_root)
    rewards = {s: val_reward(p, val_prompts, reward, paper) for s, p in steps.items()}
    best = best_checkpoint(rewards)
    from icml25.core.io import atomic_dir

    with atomic_dir(out_dir) as tmp:  # out_dir appears only complete: never a half-copied checkpoint
        shutil.copytree(steps[best], tmp, dirs_exist_ok=True)
    shutil.rmtree(ckpt_root)
    record.update(best_step=best, best_val_reward=rewards[best], val_rewards={str(s): r for s, r in rewards.items()})
    return record


def dpo_torch(seed_model, pairs: pd.DataFrame, out_dir: str | Path, *, val_prompts: Sequence[str], reward, paper,
              beta: float, seed: int, on_log=None) -> dict:
    """DPO without TRL (``paper.dpo_backend: torch``; one device, transformers only): :func:`.hfpolicy.dpo_native`
    from the seed model, early stopping by the mean ArmoRM reward of greedy answers to the validation prompts; the
    best state is saved to ``out_dir`` with ``save_pretrained`` (written beside it and renamed: never half
    written). The same selection rule as :func:`dpo_trl`."""
    from icml25.core.io import atomic_dir

    from .hfpolicy import dpo_native, generate, load_causal_lm
    from .rewardmodels import load_armorm, score_armorm

    policy, tok = load_causal_lm(seed_model, device=paper.device, dtype=paper.dtype)
    rm, rm_tok = load_armorm(reward, device=paper.device, dtype=paper.dtype)

    def val_reward_of(model) -> float:
        answers = [a[0] for a in generate(model, tok, val_prompts, n=1, max_new_tokens=paper.max_new_tokens,
                                          batch=paper.gen_batch)]
        return float(score_armorm(rm, rm_tok, val_prompts, answers, batch=paper.score_batch).mean())

    best_state, rec = dpo_native(policy, tok, pairs, beta=beta, lr=paper.lr, batch=paper.batch,
                                 epochs=paper.epochs, seed=seed, eval_every=paper.eval_every,
                                 val_reward=val_reward_of, on_log=on_log)
    policy.load_state_dict(best_state)
    with atomic_dir(Path(out_dir)) as tmp:
        policy.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
    return rec
