"""Training: SFT of the seed model M on the demonstrations, and DPO (spec "DPO"; Rafailov et al. 2023) of each
arm on its kept pairs, with the best checkpoint chosen by mean judge reward on clean validation prompts.
"""
from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from .judge import judge_reward
from .model import Decoder, greedy_responses, pack_sequences, sequence_logps

log = logging.getLogger("icml25.rip")


def dpo_loss(policy_chosen_logps: torch.Tensor, policy_rejected_logps: torch.Tensor,
             ref_chosen_logps: torch.Tensor, ref_rejected_logps: torch.Tensor, beta: float = 0.1
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DPO loss L = −mean log σ(β[(π_w − ref_w) − (π_l − ref_l)]) of (B,) summed log-probs.

    Returns ``(loss, chosen_rewards, rejected_rewards)`` with rewards β(π − ref), (B,) each, detached.
    Policy = reference gives ln 2 and gradient ∓β/(2B) on each policy log-prob.
    """
    shapes = {t.shape for t in (policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps)}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"dpo_loss: inputs must be four (B,) tensors of one shape, got {shapes}")
    chosen = policy_chosen_logps - ref_chosen_logps
    rejected = policy_rejected_logps - ref_rejected_logps
    loss = -F.logsigmoid(beta * (chosen - rejected)).mean()
    return loss, beta * chosen.detach(), beta * rejected.detach()


def mean_reward(model: Decoder, prompts: Sequence[str], targets: Sequence[str], max_new_tokens: int
                ) -> tuple[float, list[float], list[str]]:
    """Mean noise-free judge reward of greedy outputs; also per-prompt rewards and the outputs."""
    outs = greedy_responses(model, prompts, max_new_tokens)
    rewards = [judge_reward(y, t) for y, t in zip(outs, targets)]
    return float(np.mean(rewards)), rewards, outs


def train_sft(model: Decoder, prompts: Sequence[str], demos: Sequence[str], *, steps: int, batch: int,
              lr: float, seed: int, on_step: Callable[[int, float], None] | None = None) -> Decoder:
    """Next-token cross-entropy on the demonstration tokens (+EOS) only; AdamW, ``steps`` minibatches."""
    torch.manual_seed(seed)
    rng = np.random.default_rng([seed, 11])
    ids, mask = pack_sequences(prompts, demos)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    for step in tqdm(range(steps), desc="sft", mininterval=2.0):
        b = torch.from_numpy(rng.integers(0, len(prompts), size=batch))
        x, m = ids[b], mask[b]
        logits, _ = model(x[:, :-1])
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="none")
        loss = (ce * m.reshape(-1)).sum() / m.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if on_step is not None:
            on_step(step, float(loss.detach()))
    model.eval()
    return model


def train_dpo(seed_model: Decoder, pairs: dict, *, beta: float, lr: float, batch: int, steps: int,
              eval_every: int, val_prompts: Sequence[str], val_targets: Sequence[str], max_new_tokens: int,
              seed: int, on_log: Callable[[int, dict], None] | None = None) -> tuple[Decoder, dict]:
    """DPO of a copy of ``seed_model`` (π_θ initialised from M = π_ref) on the kept pairs.

    ``pairs``: prompts, chosen, rejected (lists) and ref_logp_chosen, ref_logp_rejected ((K,) float64).
    Minibatches are drawn from reshuffled epochs of the kept set with ``default_rng([seed, 13])``. The
    validation reward is checked every ``eval_every`` steps and at the end; the best checkpoint is returned.
    Returns (best model, record with ``step0_loss``, ``best_step``, ``best_val_reward``, ``val_rewards``).
    ``on_log(step, metrics)`` gets ``loss`` (the DPO loss), ``reward_margin`` and, on validation steps,
    ``val_reward`` after every step.
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng([seed, 13])
    policy = copy.deepcopy(seed_model)
    policy.train()
    K = len(pairs["prompts"])
    if K == 0:
        raise ValueError("train_dpo: the arm kept no pairs")
    ids_w, mask_w = pack_sequences(pairs["prompts"], pairs["chosen"])
    ids_l, mask_l = pack_sequences(pairs["prompts"], pairs["rejected"])
    L = max(ids_w.shape[1], ids_l.shape[1])  # common width: chosen and rejected go through one forward
    ids_w, ids_l = _pad_to(ids_w, L), _pad_to(ids_l, L)
    mask_w, mask_l = _pad_mask(mask_w, L - 1), _pad_mask(mask_l, L - 1)
    ref_w = torch.as_tensor(pairs["ref_logp_chosen"], dtype=torch.float64)
    ref_l = torch.as_tensor(pairs["ref_logp_rejected"], dtype=torch.float64)
    opt = torch.optim.AdamW(policy.parameters(), lr=lr, weight_decay=0.0)
    bsz = min(batch, K)
    order, cursor = rng.permutation(K), 0
    record: dict = {"kept_n": K, "val_rewards": {}, "losses": []}
    best_state, best_val, best_step = None, -np.inf, 0
    for step in tqdm(range(steps), desc=f"dpo seed{seed}", mininterval=2.0):
        if cursor + bsz > K:
            order, cursor = rng.permutation(K), 0
        b = torch.from_numpy(order[cursor:cursor + bsz])
        cursor += bsz
        lp = sequence_logps(policy, torch.cat([ids_w[b], ids_l[b]]), torch.cat([mask_w[b], mask_l[b]]))
        pw, pl = lp[: len(b)], lp[len(b):]
        loss, rw, rl = dpo_loss(pw.double(), pl.double(), ref_w[b], ref_l[b], beta)
        loss_v = float(loss.detach())
        if step == 0:
            record["step0_loss"] = loss_v
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        record["losses"].append(loss_v)
        metrics = {"loss": loss_v, "reward_margin": float((rw - rl).mean())}  # loss: the DPO loss
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            policy.eval()
            val, _, _ = mean_reward(policy, val_prompts, val_targets, max_new_tokens)
            policy.train()
            record["val_rewards"][step + 1] = val
            metrics["val_reward"] = val
            if val > best_val:
                best_val, best_step = val, step + 1
                best_state = copy.deepcopy(policy.state_dict())
        if on_log is not None:
            on_log(step, metrics)
    policy.load_state_dict(best_state)
    policy.eval()
    record.update(best_step=best_step, best_val_reward=float(best_val))
    return policy, record


def _pad_to(ids: torch.Tensor, L: int) -> torch.Tensor:
    from .data import PAD

    if ids.shape[1] >= L:
        return ids
    return F.pad(ids, (0, L - ids.shape[1]), value=PAD)


def _pad_mask(mask: torch.Tensor, L: int) -> torch.Tensor:
    return mask if mask.shape[1] >= L else F.pad(mask, (0, L - mask.shape[1]), value=0.0)
