"""The reward models of the paper path, loaded with transformers' own classes (never ``trust_remote_code``).

**ArmoRM** (``RLHFlow/ArmoRM-Llama3-8B-v0.1``, the paper's scorer, Section 3: "we use ArmoRM to score the N
responses"). Its hub repository ships custom code (class ``LlamaForRewardModelWithGating``); we do not run it. The
checkpoint is a Llama-3 backbone (``model.*``, loaded by transformers' ``LlamaModel``) plus a small head whose
tensors are (inventory of the released safetensors, ArmoRM tech report arXiv:2406.12845 Section 3):

* ``regression_layer.weight`` (K, d), K = 19 objectives, no bias: the objective rewards r = W h_last, read at the
  sequence's last token;
* ``gating.layers.{0..L}.{weight,bias}``: an MLP on the hidden state h_g of the token that starts the assistant
  header (the last occurrence of ``<|eot_id|><|start_header_id|>assistant<|end_header_id|>\\n\\n`` in the ids;
  the prompt's embedding), ReLU between layers, the last layer emits K logits; ``gating.logit_scale`` (1,);
  gate g = softmax(logits / T) · logit_scale with T = ``gating_temperature`` of config.json (10 if absent);
* ``reward_transform_matrix`` (K, K): the verbosity de-correlation, r' = r M.

Score s = Σ_k g_k r'_k. :class:`ArmoRMScorer` is our own ``LlamaPreTrainedModel`` with exactly those parameter names,
so ``from_pretrained`` reads the released weights into it; a missing or unexpected tensor is an error (never a
silently random head). The gating-pattern ids come from the tokenizer (for Llama 3: 128009, 128006, 78191, 128007,
271), so a tiny rehearsal tokenizer works the same way.

**The local judge** (evaluation): an open reward model with a standard ``LlamaForSequenceClassification`` head
(``Skywork/Skywork-Reward-Llama-3.1-8B-v0.2`` at a pinned commit, ``models.csv`` row ``judge``): one logit read at
the last non-pad token. It is *not* ArmoRM, so the evaluation does not score with the reward that chose the pairs.

torch and transformers are imported lazily; the module imports without them.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

GATING_TEXT = "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"  #: ArmoRM gates on this pattern


def find_last(ids: Sequence[int], pattern: Sequence[int]) -> int:
    """Start index of the last occurrence of ``pattern`` in ``ids``; raises ValueError naming the pattern."""
    ids, pattern = list(ids), list(pattern)
    m = len(pattern)
    if m == 0:
        raise ValueError("find_last: empty pattern")
    for j in range(len(ids) - m, -1, -1):
        if ids[j:j + m] == pattern:
            return j
    raise ValueError(f"ArmoRM: gating token pattern {pattern} not found in the input ids (is the chat template "
                     "Llama 3's?)")


def last_token_index(attention_mask) -> Any:
    """(B,) index of the last attended token of each right-padded row of a (B, T) 0/1 mask."""
    import torch

    t = attention_mask.shape[1]
    pos = torch.arange(t, device=attention_mask.device).expand_as(attention_mask)
    return (pos * attention_mask.long()).max(dim=1).values


def gate_numpy(h: np.ndarray, weights: Sequence[np.ndarray], biases: Sequence[np.ndarray | None],
               temperature: float, logit_scale: float) -> np.ndarray:
    """Reference of ArmoRM's gate in float64 numpy, for tests: (B, d) → (B, K)."""
    x = np.asarray(h, np.float64)
    for i, (w, b) in enumerate(zip(weights, biases)):
        x = x @ np.asarray(w, np.float64).T + (0.0 if b is None else np.asarray(b, np.float64))
        if i < len(weights) - 1:
            x = np.maximum(x, 0.0)
    z = x / temperature
    z = np.exp(z - z.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True) * logit_scale


def _classes():
    import torch
    from torch import nn
    from transformers import LlamaModel, LlamaPreTrainedModel

    class Gating(nn.Module):
        """ArmoRM's gating MLP: ``layers`` = n_hidden Linear(+bias) with ReLU between, then Linear → K logits."""

        def __init__(self, d: int, k: int, hidden: int, n_hidden: int, temperature: float):
            super().__init__()
            self.temperature = float(temperature)
            self.logit_scale = nn.Parameter(torch.ones(1))
            dims = [d] + [hidden] * n_hidden
            self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:])]
                                        + [nn.Linear(dims[-1], k)])

        def forward(self, x):
            for i, layer in enumerate(self.layers):
                x = layer(x)
                if i < len(self.layers) - 1:
                    x = torch.relu(x)
            return torch.softmax(x / self.temperature, dim=-1) * self.logit_scale[0]

    class ArmoRMScorer(LlamaPreTrainedModel):
        """Our own module with the released ArmoRM tensor names (see the module docstring)."""

        def __init__(self, config):
            super().__init__(config)
            extra = config.to_dict()
            self.num_objectives = int(extra.get("num_objectives", 19))
            self.model = LlamaModel(config)
            self.regression_layer = nn.Linear(config.hidden_size, self.num_objectives, bias=False)
            self.reward_transform_matrix = nn.Parameter(torch.eye(self.num_objectives), requires_grad=False)
            self.gating = Gating(config.hidden_size, self.num_objectives, int(extra.get("gating_hidden_dim", 1024)),
                                 int(extra.get("gating_n_hidden", 3)), float(extra.get("gating_temperature", 10)))
            self.post_init()

        def forward(self, input_ids, attention_mask, gate_positions):
            """Scores (B,) of right-padded ``input_ids`` (B, T); ``gate_positions`` (B,) the gating token's index.
            Also returns the objective rewards (B, K) and the gate (B, K)."""
            h = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            rows = torch.arange(h.shape[0], device=h.device)
            rewards = self.regression_layer(h[rows, last_token_index(attention_mask)])
            gate = self.gating(h[rows, gate_positions])
            score = (gate * (rewards @ self.reward_transform_matrix)).sum(dim=-1)
            return score, rewards, gate

    return ArmoRMScorer


@functools.cache
def armorm_class():
    """The :class:`ArmoRMScorer` class (built lazily: it subclasses transformers' ``LlamaPreTrainedModel``)."""
    return _classes()


def _check_loading(info: dict, what: str) -> None:
    bad = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    if bad:
        raise ValueError(f"{what}: the checkpoint does not match the module ({bad}); refusing a partly random model")


def load_armorm(resolved, *, device: str = "cpu", dtype: str = "float32"):
    """(scorer, tokenizer) of an ArmoRM checkpoint at ``resolved`` (a :class:`icml25.core.hub.ResolvedModel`)."""
    import torch
    from transformers import AutoTokenizer

    cls = armorm_class()
    model, info = cls.from_pretrained(resolved.path, torch_dtype=getattr(torch, dtype), output_loading_info=True,
                                      **resolved.kwargs())
    _check_loading(info, f"ArmoRM {resolved.repo_id}")
    tok = AutoTokenizer.from_pretrained(resolved.path, **resolved.kwargs())
    return model.to(device).eval(), tok


def load_judge(resolved, *, device: str = "cpu", dtype: str = "float32"):
    """(classifier, tokenizer) of a standard one-logit sequence-classification reward model (the local judge)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model, info = AutoModelForSequenceClassification.from_pretrained(
        resolved.path, torch_dtype=getattr(torch, dtype), num_labels=1, output_loading_info=True,
        **resolved.kwargs())
    _check_loading(info, f"judge {resolved.repo_id}")
    tok = AutoTokenizer.from_pretrained(resolved.path, **resolved.kwargs())
    if model.config.pad_token_id is None:
        if tok.pad_token_id is None:
            raise ValueError(f"judge {resolved.repo_id}: neither the model nor the tokenizer has a pad token")
        model.config.pad_token_id = tok.pad_token_id
    return model.to(device).eval(), tok


def _conversations(tok, prompts: Sequence[str], responses: Sequence[str]) -> list[list[int]]:
    return [tok.apply_chat_template([{"role": "user", "content": p}, {"role": "assistant", "content": r}],
                                    tokenize=True) for p, r in zip(prompts, responses)]


def _pad_right(seqs: list[list[int]], pad: int, device: str):
    import torch

    t = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), t), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), t), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, :len(s)] = 1
    return ids.to(device), mask.to(device)


def score_armorm(model, tok, prompts: Sequence[str], responses: Sequence[str], *, batch: int = 16) -> np.ndarray:
    """ArmoRM scores (B,) float64 of (prompt, response) pairs, one user turn and one assistant answer each."""
    import torch

    if len(prompts) != len(responses):
        raise ValueError(f"score_armorm: {len(prompts)} prompts but {len(responses)} responses")
    pattern = tok.encode(GATING_TEXT, add_special_tokens=False)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    device = next(model.parameters()).device
    out = np.empty(len(prompts), dtype=np.float64)
    with torch.no_grad():
        for s in range(0, len(prompts), batch):
            seqs = _conversations(tok, prompts[s:s + batch], responses[s:s + batch])
            ids, mask = _pad_right(seqs, pad, device)
            gates = torch.tensor([find_last(q, pattern) for q in seqs], device=device)
            out[s:s + len(seqs)] = model(ids, mask, gates)[0].float().cpu().numpy()
    return out


def score_judge(model, tok, prompts: Sequence[str], responses: Sequence[str], *, batch: int = 16) -> np.ndarray:
    """Local-judge rewards (B,) float64: the classifier's single logit at the last non-pad token."""
    import torch

    if len(prompts) != len(responses):
        raise ValueError(f"score_judge: {len(prompts)} prompts but {len(responses)} responses")
    device = next(model.parameters()).device
    pad = model.config.pad_token_id
    out = np.empty(len(prompts), dtype=np.float64)
    with torch.no_grad():
        for s in range(0, len(prompts), batch):
            ids, mask = _pad_right(_conversations(tok, prompts[s:s + batch], responses[s:s + batch]), pad, device)
            out[s:s + len(ids)] = model(input_ids=ids, attention_mask=mask).logits[:, 0].float().cpu().numpy()
    return out
