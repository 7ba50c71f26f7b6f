"""Causal-LM side of the paper path with transformers only (no vLLM, no TRL): sampling, reference log-probs and a
DPO loop. Used where the cluster tools are absent or switched off (``paper.sampler: hf``, ``paper.dpo_backend:
torch``): the rehearsal on CPU, or a single-GPU run. The cluster default stays vLLM + TRL (``paper.py``).

Conventions (paper Section 3, spec "Pair scoring" and "DPO"): one user turn with the model's chat template and the
generation prompt; a response's log-prob is the sum over its tokens *including* the end-of-turn token the template
appends (Llama 3: ``<|eot_id|>``), under π_ref = the seed model M; π_θ starts from M; the DPO loss is the project's
:func:`icml25.studies.rip.train.dpo_loss` (β = 0.1). Early stopping as on the TRL path: the policy is checked every
``eval_every`` steps and at the end by the mean ArmoRM reward of its greedy answers to the validation prompts; the
best state (earliest on ties) is kept.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def load_causal_lm(resolved, *, device: str = "cpu", dtype: str = "float32"):
    """(model, tokenizer) at ``resolved`` (:class:`icml25.core.hub.ResolvedModel`), ``trust_remote_code=False``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(resolved.path, **resolved.kwargs())
    model = AutoModelForCausalLM.from_pretrained(resolved.path, torch_dtype=getattr(torch, dtype),
                                                 **resolved.kwargs())
    return model.to(device).eval(), tok


def prompt_ids(tok, prompt: str) -> list[int]:
    """Token ids of one user turn followed by the assistant header (the generation prompt)."""
    return list(tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                        tokenize=True))


def response_ids(tok, prompt: str, response: str) -> tuple[list[int], list[int]]:
    """(prompt ids, response ids): the response part is what the full conversation adds after the generation
    prompt (the answer and its end-of-turn token). Raises if the template does not extend the prompt."""
    head = prompt_ids(tok, prompt)
    full = list(tok.apply_chat_template([{"role": "user", "content": prompt},
                                         {"role": "assistant", "content": response}], tokenize=True))
    if full[:len(head)] != head or len(full) <= len(head):
        raise ValueError("chat template: the conversation with the answer does not start with the generation prompt")
    return head, full[len(head):]


def _left_pad(seqs: list[list[int]], pad: int, device):
    import torch

    t = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), t), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), t), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, t - len(s):] = torch.tensor(s, dtype=torch.long)
        mask[i, t - len(s):] = 1
    return ids.to(device), mask.to(device)


def generate(model, tok, prompts: Sequence[str], *, n: int, max_new_tokens: int, temperature: float = 0.0,
             top_p: float = 1.0, seed: int = 0, batch: int = 32) -> list[list[str]]:
    """``n`` answers per prompt with ``model.generate`` (temperature 0: greedy, then n must be 1). Left-padded
    batches; the answer is the decoded new tokens without special tokens. Seeded with ``torch.manual_seed``."""
    import torch

    if temperature <= 0 and n != 1:
        raise ValueError("generate: greedy decoding (temperature 0) gives one answer per prompt; got n > 1")
    device = next(model.parameters()).device
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    eos = list({i for i in (tok.eos_token_id, tok.convert_tokens_to_ids("<|eot_id|>")) if isinstance(i, int)
                and i >= 0 and i != tok.unk_token_id})
    out: list[list[str]] = []
    gen = torch.Generator().manual_seed(int(seed))
    for s in range(0, len(prompts), batch):
        chunk = list(prompts[s:s + batch])
        ids, mask = _left_pad([prompt_ids(tok, p) for p in chunk], pad, device)
        kwargs: dict[str, Any] = {"max_new_tokens": int(max_new_tokens), "pad_token_id": pad, "eos_token_id": eos,
                                  "num_return_sequences": int(n)}
        if temperature > 0:
            kwargs.update(do_sample=True, temperature=float(temperature), top_p=float(top_p), top_k=0)
        else:
            kwargs.update(do_sample=False)
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        with torch.no_grad():
            seqs = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        texts = tok.batch_decode(seqs[:, ids.shape[1]:], skip_special_tokens=True)
        out += [texts[i * n:(i + 1) * n] for i in range(len(chunk))]
    return out


def sequence_logps(model, tok, prompts: Sequence[str], responses: Sequence[str], *, grad: bool = False):
    """Summed log π(response incl. end-of-turn | prompt) per pair, (B,) float tensor (with grad when ``grad``)."""
    import torch

    device = next(model.parameters()).device
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    rows = [response_ids(tok, p, r) for p, r in zip(prompts, responses)]
    t = max(len(h) + len(r) for h, r in rows)
    ids = torch.full((len(rows), t), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), t), dtype=torch.long)
    target = torch.zeros((len(rows), t), dtype=torch.bool)  # True at response tokens
    for i, (h, r) in enumerate(rows):
        ids[i, :len(h) + len(r)] = torch.tensor(h + r)
        mask[i, :len(h) + len(r)] = 1
        target[i, len(h):len(h) + len(r)] = True
    ids, mask, target = ids.to(device), mask.to(device), target.to(device)
    with torch.set_grad_enabled(grad):
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
        lp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        return (lp * target[:, 1:]).sum(dim=1)


def ref_logps(model, tok, prompts: Sequence[str], responses: Sequence[str], *, batch: int = 8) -> np.ndarray:
    """Reference log-probs (B,) float64, batched, no grad."""
    out = [sequence_logps(model, tok, prompts[s:s + batch], responses[s:s + batch]).double().cpu().numpy()
           for s in range(0, len(prompts), batch)]
    return np.concatenate(out) if out else np.zeros(0)


def dpo_native(policy, tok, pairs, *, beta: float, lr: float, batch: int, epochs: int, seed: int, eval_every: int,
               val_reward: Callable[[Any], float], on_log: Callable[[int, dict], None] | None = None
               ) -> tuple[dict, dict]:
    """DPO of ``policy`` (a copy of M; M itself is the frozen reference, through precomputed log-probs) on the kept
    pairs (columns prompt, chosen, rejected). AdamW at ``lr``; minibatches of ``batch`` pairs from a seeded
    permutation per epoch; ``val_reward(model) -> float`` at every ``eval_every`` steps and at the end.
    Returns (best state_dict, record with step0_loss, best_step, best_val_reward, val_rewards, kept_n)."""
    import copy

    import torch

    from .train import dpo_loss

    if len(pairs) == 0:
        raise ValueError("dpo_native: the arm kept no pairs")
    prompts, chosen, rejected = list(pairs["prompt"]), list(pairs["chosen"]), list(pairs["rejected"])
    policy.eval()  # dropout off (as TRL's disable_dropout)
    device = next(policy.parameters()).device
    ref_c = torch.tensor(ref_logps(policy, tok, prompts, chosen), device=device)
    ref_r = torch.tensor(ref_logps(policy, tok, prompts, rejected), device=device)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=lr)
    rng = np.random.default_rng([seed, 11])
    steps_per_epoch = math.ceil(len(prompts) / batch)
    total = steps_per_epoch * epochs
    checks = sorted({s for s in range(eval_every, total + 1, eval_every)} | {total})
    rec: dict[str, Any] = {"kept_n": len(prompts), "val_rewards": {}}
    best_state, best = None, -math.inf
    step = 0
    for _ in range(epochs):
        order = rng.permutation(len(prompts))
        for b in range(steps_per_epoch):
            idx = order[b * batch:(b + 1) * batch]
            at = torch.as_tensor(idx, device=device)
            pc = sequence_logps(policy, tok, [prompts[i] for i in idx], [chosen[i] for i in idx], grad=True)
            pr = sequence_logps(policy, tok, [prompts[i] for i in idx], [rejected[i] for i in idx], grad=True)
            loss, cr, rr = dpo_loss(pc.double(), pr.double(), ref_c[at], ref_r[at], beta=beta)
            if step == 0:
                rec["step0_loss"] = float(loss.detach())
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if on_log:
                on_log(step, {"dpo_loss": float(loss.detach()), "reward_margin": float((cr - rr).mean())})
            if step in checks:
                v = float(val_reward(policy))
                rec["val_rewards"][str(step)] = v
                if on_log:
                    on_log(step, {"val_reward": v})
                if v > best:
                    best, best_state, rec["best_step"] = v, copy.deepcopy(policy.state_dict()), step
    rec["best_val_reward"] = best
    return best_state, rec
