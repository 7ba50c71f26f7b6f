"""One arm x seed end to end in memory: examples, training with validation selection, beam-search inference with
the SPR ensemble, held-out ranks (paper §3.3-§3.4, §4).

Arms (trained): ``fixed_tokens`` (the m feature tokens in category order, no merges; TIGER-style),
``naive_seg`` (the full vocabulary, ``"none"`` segmentation in training and inference), ``spr`` (SPR re-encoded
per draw in training; inference gives (iii) ``spr_q1``, one SPR encoding, and (iv) ``actionpiece``, the fused
q-ensemble, from the same model and the same draws). MovieLens arms ``ml_fixed_tokens`` / ``ml_spr`` are the same
on the MovieLens tables.
"""
from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from .model import IGNORE, beam_search, build_model, seq_loss
from .tokenizer import ActionPieceTokenizer, fuse_rankings

KS = (5, 10, 20)
ARM_MODE = {"fixed_tokens": "none", "naive_seg": "none", "spr": "feature"}


def base_arm(arm: str) -> str:
    return arm[3:] if arm.startswith("ml_") else arm


# --------------------------------------------------------------------------------------------- examples


def train_examples(train: Sequence[Sequence[int]], history: int, max_targets: int | None = None
                   ) -> list[tuple[list[int], int]]:
    """All prefixes of the train parts: (last <= ``history`` item ids before position i, item i), i >= 1; with
    ``max_targets`` only each user's last ``max_targets`` targets."""
    out = []
    for s in train:
        pos = range(1, len(s))
        if max_targets is not None:
            pos = pos[-max_targets:]
        out.extend((list(s[max(0, i - history):i]), s[i]) for i in pos)
    return out


def encode_input(tok: ActionPieceTokenizer, hist: Sequence[tuple[int, ...]], mode: str,
                 rng: np.random.Generator | None) -> list[int]:
    """``[BOS] + encode(history) + [EOS]``."""
    return [tok.bos_id, *tok.encode(hist, mode, rng), tok.eos_id]


def encode_target(tok: ActionPieceTokenizer, item: tuple[int, ...]) -> list[int]:
    """``encode(item, "none") + [EOS]``, padded with -100 to m + 1."""
    t = [*tok.encode([item], "none"), tok.eos_id]
    return t + [IGNORE] * (tok.n_categories + 1 - len(t))


def pad(rows: Sequence[Sequence[int]], value: int = 0) -> torch.Tensor:
    n = max(len(r) for r in rows)
    return torch.tensor([list(r) + [value] * (n - len(r)) for r in rows], dtype=torch.long)


# --------------------------------------------------------------------------------------------- inference


def rank_lists(model: torch.nn.Module, tok: ActionPieceTokenizer, inputs: Sequence[Sequence[int]], beams: int,
               known: set[tuple[int, ...]], chunk: int = 256) -> tuple[list[list[tuple | None]], int, int]:
    """Beam search per encoded input: decoded beams in order (None: invalid, i.e. no item or an unknown tuple);
    also (invalid beams, beams)."""
    out: list[list[tuple | None]] = []
    bad = total = 0
    m, eos = tok.n_categories, tok.eos_id
    model.eval()
    device = next(model.parameters()).device
    for k in range(0, len(inputs), chunk):
        src = pad(inputs[k:k + chunk]).to(device)
        seqs = beam_search(model, src, beams, m + 1, eos, allowed=tok.vocab_size).tolist()
        for row in seqs:
            dec = []
            for b in row:
                cut = b[:b.index(eos)] if eos in b else b[:m]
                it = tok.decode(cut)
                if it is not None and it not in known:
                    it = None
                dec.append(it)
                bad += it is None
                total += 1
            out.append(dec)
    return out, bad, total


def target_ranks(ranked: Sequence[Sequence[tuple]], targets: Sequence[tuple[int, ...]]) -> np.ndarray:
    """1-based rank of each target tuple in its fused list; 0 when absent."""
    r = np.zeros(len(targets), dtype=np.int64)
    for i, (lst, t) in enumerate(zip(ranked, targets)):
        for j, it in enumerate(lst):
            if it == t:
                r[i] = j + 1
                break
    return r


def ranking_metrics(ranks: np.ndarray, ks: Sequence[int] = KS) -> dict[str, float]:
    """Recall@K and NDCG@K with one relevant item at rank r (0 = absent): NDCG = 1/log2(r + 1) if 1 <= r <= K."""
    r = np.asarray(ranks)
    hit = r > 0
    out = {}
    for k in ks:
        ok = hit & (r <= k)
        out[f"recall{k}"] = float(ok.mean()) if r.size else 0.0
        out[f"ndcg{k}"] = float(np.where(ok, 1.0 / np.log2(np.maximum(r, 1) + 1), 0.0).mean()) if r.size else 0.0
    return out


def utilisation(tok: ActionPieceTokenizer, encodings: Sequence[Sequence[int]]) -> float:
    """Share of the merge tokens that appear in ``encodings`` (paper §4.4.2, token utilisation)."""
    n = len(tok.merges)
    if n == 0:
        return 0.0
    used = {t for e in encodings for t in e if tok.n_init <= t < tok.vocab_size}
    return len(used) / n


def evaluate_cases(model, tok, cases, items, mode: str, q: int, beams: int, rng: np.random.Generator
                   ) -> dict[str, Any]:
    """Ranks of the held-out cases ``[(history ids, target id)]``: for ``"none"`` one variant; for ``"feature"``
    ``q`` SPR variants, ranks of variant 0 alone (``q1``) and of the fused ensemble (``fused``)."""
    known = set(items)
    hists = [[items[i] for i in h] for h, _ in cases]
    targets = [items[t] for _, t in cases]
    n_var = 1 if mode == "none" else q
    enc = [[encode_input(tok, h, mode, rng) for h in hists] for _ in range(n_var)]
    lists, bad, total = [], 0, 0
    for v in range(n_var):
        lv, b, t = rank_lists(model, tok, enc[v], beams, known)
        lists.append(lv)
        bad += b
        total += t
    q1 = target_ranks([fuse_rankings([lists[0][i]]) for i in range(len(cases))], targets)
    fused = target_ranks([fuse_rankings([lists[v][i] for v in range(n_var)]) for i in range(len(cases))], targets)
    return {"q1": q1, "fused": fused, "invalid_rate": bad / max(total, 1),
            "utilisation_q1": utilisation(tok, [e[1:-1] for e in enc[0]])}


# --------------------------------------------------------------------------------------------- run


def run(settings: Mapping[str, Any], arm: str, seed: int, items: Sequence[tuple[int, ...]],
        splits: Mapping[str, list], tok: ActionPieceTokenizer, *, log=None) -> dict[str, Any]:
    """Train ``arm`` (fixed_tokens | naive_seg | spr, ``ml_`` prefix allowed) with ``seed`` and evaluate it.

    ``settings``: ``model`` (backend, d_model, d_ff, n_heads, n_enc, n_dec, d_kv, dropout), ``train`` (history,
    batch, lr, weight_decay, epochs, max_targets, val_users: the first ``val_users`` validation users select the
    epoch, None = all), ``infer`` (beams, q). ``tok`` is the arm's tokenizer (no merges
    for fixed_tokens). ``log(name, value, step)`` receives ``train_loss`` per step and ``val_ndcg10`` per epoch.
    Returns curves, the selected epoch, the state dict and test ranks (``test_q1``, ``test_fused``), invalid rate
    and utilisation."""
    t0 = time.perf_counter()
    mode = ARM_MODE[base_arm(arm)]
    tr, inf, mc = settings["train"], settings["infer"], settings["model"]
    torch.manual_seed(seed)
    rng = np.random.default_rng([seed, 1])
    ex = train_examples(splits["train"], tr["history"], tr.get("max_targets"))
    if not ex:
        raise ValueError(f"{arm}: no training examples (sequences too short)")
    hist_items = [[items[i] for i in h] for h, _ in ex]
    tgts = pad([encode_target(tok, items[t]) for _, t in ex], IGNORE)
    fixed_inputs = [encode_input(tok, h, "none", None) for h in hist_items] if mode == "none" else None
    max_len = tr["history"] * tok.n_categories + 2
    device = torch.device(tr.get("device") or "cpu")
    model = build_model(tok.vocab_size + 2, mc, max_len).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=tr["lr"], weight_decay=tr["weight_decay"])
    steps_per_epoch = -(-len(ex) // tr["batch"])
    sched = lr_schedule(opt, tr.get("schedule", "constant"), tr.get("warmup_steps", 0), steps_per_epoch * tr["epochs"])
    every, patience = tr.get("eval_every", 1), tr.get("patience")
    valid = [(h[-tr["history"]:], t) for h, t in splits["valid"]][:tr.get("val_users") or None]
    losses, val, val_epochs, best, best_state, step = [], [], [], -1.0, None, 0
    for epoch in range(tr["epochs"]):
        model.train()
        order = rng.permutation(len(ex))
        for k in range(0, len(order), tr["batch"]):
            idx = order[k:k + tr["batch"]]
            if fixed_inputs is not None:
                src = pad([fixed_inputs[i] for i in idx])
            else:  # SPR: a fresh permutation of every set at every draw
                src = pad([encode_input(tok, hist_items[i], "feature", rng) for i in idx])
            loss = seq_loss(model, src.to(device), tgts[idx].to(device))
            opt.zero_grad()
            loss.backward()
            if tr.get("clip"):
                torch.nn.utils.clip_grad_norm_(model.parameters(), tr["clip"])
            opt.step()
            if sched is not None:
                sched.step()
            losses.append(loss.item())
            if log:
                log("train_loss", losses[-1], step)
            step += 1
        if (epoch + 1) % every and epoch + 1 < tr["epochs"]:
            continue
        ev = evaluate_cases(model, tok, valid, items, mode, 1, inf["beams"], np.random.default_rng([seed, 2]))
        v = ranking_metrics(ev["q1"])["ndcg10"]
        val.append(v)
        val_epochs.append(epoch)
        if log:
            log("val_ndcg10", v, epoch)
        if v > best:
            best, best_state = v, {k: t.detach().cpu().clone() for k, t in model.state_dict().items()}
        elif patience is not None and epoch - val_epochs[int(np.argmax(val))] >= patience:
            break
    model.load_state_dict(best_state)
    test = [(h[-tr["history"]:], t) for h, t in splits["test"]]
    ev = evaluate_cases(model, tok, test, items, mode, inf["q"], inf["beams"], np.random.default_rng([seed, 3]))
    return {"arm": arm, "seed": seed, "loss": losses, "val_ndcg10": val, "best_epoch": int(val_epochs[int(np.argmax(val))]),
            "state": best_state, "test_q1": ev["q1"], "test_fused": ev["fused"], "invalid_rate": ev["invalid_rate"],
            "utilisation_q1": ev["utilisation_q1"], "n_examples": len(ex), "seconds": time.perf_counter() - t0}


def lr_schedule(opt: torch.optim.Optimizer, kind: str, warmup: int, total: int):
    """None for a constant rate; ``"cosine"``: linear warm-up over ``warmup`` steps, then cosine decay to 0 at
    step ``total`` (the authors' trainer: transformers' cosine schedule with warm-up)."""
    if kind == "constant":
        return None
    if kind != "cosine":
        raise ValueError(f"train.schedule: unknown {kind!r}")

    def factor(s: int) -> float:
        if s < warmup:
            return s / max(1, warmup)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * (s - warmup) / max(1, total - warmup))))

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


def no_merge_tokenizer(tok: ActionPieceTokenizer) -> ActionPieceTokenizer:
    """The fixed-token baseline's tokenizer: the same features, no merges."""
    return ActionPieceTokenizer(tok.n_categories, list(tok.features))


def ndcg_at(r: int, k: int = 10) -> float:
    return 1.0 / math.log2(r + 1) if 1 <= r <= k else 0.0
