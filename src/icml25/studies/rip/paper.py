"""The paper path (spec "Scales: paper"): WildChat preparation, vLLM sampling, ArmoRM scoring and TRL DPO.

UNTESTED HERE: this machine has no GPU and no model hub access. vLLM, transformers and TRL are imported lazily
inside the functions that need them (extra ``rip-paper``, env ``envs/rip-paper.yaml``), so the module imports
without them; a missing package raises an error naming the extra. Only :func:`prepare_wildchat` (pure pandas)
and :func:`read_released_set` are unit-tested.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
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


def sample_vllm(model_id: str, prompts: Sequence[str], n: int, *, temperature: float, top_p: float,
                max_new_tokens: int, seed: int, gpus: int) -> list[list[str]]:
    """N responses per prompt with vLLM (chat template applied by vLLM's ``chat``). [untested]"""
    vllm = _need("vllm")
    llm = vllm.LLM(model=model_id, tensor_parallel_size=gpus, seed=seed)
    params = vllm.SamplingParams(n=n, temperature=temperature, top_p=top_p, max_tokens=max_new_tokens, seed=seed)
    outs = llm.chat([[{"role": "user", "content": p}] for p in prompts], params)
    return [[c.text for c in o.outputs] for o in outs]


def score_armorm(model_id: str, prompts: Sequence[str], responses: Sequence[Sequence[str]],
                 batch: int = 16) -> np.ndarray:
    """ArmoRM preference scores (P, N) float64. [untested]"""
    torch = _need("torch")
    transformers = _need("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(model_id)
    rm = transformers.AutoModelForSequenceClassification.from_pretrained(
        model_id, trust_remote_code=True, torch_dtype=torch.bfloat16, device_map="cuda")
    flat = [(i, j, p, r) for i, (p, rs) in enumerate(zip(prompts, responses)) for j, r in enumerate(rs)]
    out = np.zeros((len(prompts), len(responses[0])), dtype=np.float64)
    with torch.no_grad():
        for s in range(0, len(flat), batch):
            chunk = flat[s:s + batch]
            msgs = [[{"role": "user", "content": p}, {"role": "assistant", "content": r}] for _, _, p, r in chunk]
            ids = tok.apply_chat_template(msgs, return_tensors="pt", padding=True).to("cuda")
            scores = rm(ids).score.float().cpu().numpy().ravel()
            for (i, j, _, _), v in zip(chunk, scores):
                out[i, j] = v
    return out


def ref_logps_hf(model_id: str, prompts: Sequence[str], responses: Sequence[str], batch: int = 8) -> np.ndarray:
    """Summed log π_ref(response incl. EOS | prompt) with the chat template, (B,) float64. [untested]"""
    torch = _need("torch")
    transformers = _need("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(model_id)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_id, torch_dtype=torch.bfloat16,
                                                              device_map="cuda").eval()
    out = []
    with torch.no_grad():
        for p, r in zip(prompts, responses):
            head = tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True)
            full = tok.apply_chat_template([{"role": "user", "content": p}, {"role": "assistant", "content": r}])
            ids = torch.tensor([full], device="cuda")
            logp = torch.log_softmax(model(ids).logits[0, :-1].float(), -1)
            tgt = ids[0, 1:]
            lp = logp.gather(-1, tgt[:, None]).squeeze(-1)[len(head) - 1:]
            out.append(float(lp.sum()))
    return np.asarray(out, dtype=np.float64)


def dpo_trl(model_id: str, pairs: pd.DataFrame, out_dir: str | Path, *, beta: float, lr: float, batch: int,
            epochs: int, seed: int) -> dict:
    """DPO with TRL's ``DPOTrainer`` on the kept pairs (precomputed reference log-probs). [untested]"""
    trl = _need("trl")
    datasets = _need("datasets")
    transformers = _need("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(model_id)
    data = datasets.Dataset.from_dict({
        "prompt": [[{"role": "user", "content": p}] for p in pairs["prompt"]],
        "chosen": [[{"role": "assistant", "content": c}] for c in pairs["chosen"]],
        "rejected": [[{"role": "assistant", "content": r}] for r in pairs["rejected"]],
        "ref_chosen_logps": pairs["ref_logp_chosen"].tolist(),
        "ref_rejected_logps": pairs["ref_logp_rejected"].tolist()})
    args = trl.DPOConfig(output_dir=str(out_dir), beta=beta, learning_rate=lr, per_device_train_batch_size=1,
                         gradient_accumulation_steps=max(1, batch // 8), num_train_epochs=epochs, seed=seed,
                         precompute_ref_log_probs=False, bf16=True, report_to=[])
    trainer = trl.DPOTrainer(model=model_id, args=args, train_dataset=data, processing_class=tok)
    result = trainer.train()
    trainer.save_model(str(out_dir))
    return {"train_loss": float(result.training_loss), "kept_n": int(len(pairs))}
