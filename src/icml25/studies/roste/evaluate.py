"""Held-out evaluation of a deployed model and the pure verdict functions of the study's claims and checks.

Metrics (on the SFT test split, with the arm's deployment forward): ``test_loss`` (cross-entropy on the output
tokens, nats/token), ``token_acc`` (teacher-forced argmax accuracy on the output tokens) and ``rougeL`` (ROUGE-L
F1 of the greedy answer against the reference answer, by ``rouge-score``, as in the paper's TL;DR evaluation).

Verdict functions return ``(reproduced, not_reproduced, statistic)`` for a claim and ``(holds, statistic)`` for a
check; thresholds are the spec's and are constants here, not configuration.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import torch
from torch import Tensor

from .method import QuantConfig, no_rotation_bound, row_errors_symmetric
from .model import LINEARS, ModelConfig, decoder_forward
from .train import output_loss

CLAIM1_MARGIN = 0.02   # claim 1: default of eval.c1_margin (mean loss(ste) - loss(roste) must exceed it)
CLAIM2_MARGIN = 0.5    # claim 2: loss(rtn) - loss(roste) must exceed this on every seed
CONTROL_MARGIN = 0.02  # claim 4 (ours): |mean loss(ste_a1) - loss(roste_a1)| below this without outliers
INVARIANCE_TOL = 1e-4  # check 3a: max |Δ logits| in float32 with quantizers off
REL_TOL = 1e-9         # check 3b: relative tolerance of the error sums (float64)


def _tokens_to_text(row: Sequence[int], eos: int) -> str:
    words = []
    for t in row:
        if t == eos:
            break
        words.append(f"t{int(t)}")
    return " ".join(words)


def greedy_answers(params: Mapping[str, Tensor], online: Mapping[str, Tensor | None], cfg: ModelConfig,
                   prompts: Tensor, new_tokens: int, qcfg: QuantConfig | None,
                   teacher: tuple[Tensor, Tensor] | None = None) -> Tensor:
    """Greedy continuation (n, new_tokens) of ``prompts`` (n, P) under the deployment forward (per-token
    quantizers are causal, so recomputing the prefix equals a KV-cached decode).

    ``teacher = (tokens (n, T), logits (n, T, V))``: a forward of sequences that begin with ``prompts``
    (T >= P + new_tokens - 1). While a row's greedy prefix equals its teacher tokens, its next-token logits are
    read from ``logits`` at the prefix's last position instead of recomputed: the forward is causal and acts on
    each row alone, so those are the numbers a forward of the prefix gives; only the rows that have left their
    teacher sequence are run again (the same answers, fewer forward passes).
    """
    n, start = prompts.shape
    x = prompts
    on_teacher = torch.ones(n, dtype=torch.bool) if teacher is not None else torch.zeros(n, dtype=torch.bool)
    with torch.no_grad():
        for j in range(new_tokens):
            nxt = torch.empty(n, 1, dtype=prompts.dtype)
            if teacher is not None and bool(on_teacher.any()):
                nxt[on_teacher] = teacher[1][on_teacher, start + j - 1].argmax(-1, keepdim=True)
            rerun = ~on_teacher
            if bool(rerun.all()):
                nxt = decoder_forward(params, x, cfg, qcfg, online)[:, -1].argmax(-1, keepdim=True)
            elif bool(rerun.any()):
                nxt[rerun] = decoder_forward(params, x[rerun], cfg, qcfg, online)[:, -1].argmax(-1, keepdim=True)
            x = torch.cat([x, nxt], dim=1)
            if teacher is not None and j + 1 < new_tokens:
                on_teacher &= nxt[:, 0] == teacher[0][:, start + j]
    return x[:, start:]


@lru_cache(maxsize=1)
def _scorer() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"])


def rouge_l(predictions: Sequence[str], references: Sequence[str]) -> float:
    """Mean ROUGE-L F1 (rouge-score) of prediction/reference strings; an empty prediction scores 0."""
    scorer = _scorer()
    return float(np.mean([scorer.score(r, p)["rougeL"].fmeasure for p, r in zip(predictions, references)]))


def test_metrics(params: Mapping[str, Tensor], online: Mapping[str, Tensor | None], cfg: ModelConfig,
                 test_tokens: Tensor, out_start: int, qcfg: QuantConfig | None, eos: int) -> dict[str, float]:
    """``{test_loss, token_acc, rougeL}`` of a deployed model on ``test_tokens`` (n, T); answers start at
    ``out_start`` (after SEP) and end with EOS."""
    with torch.no_grad():
        logits = decoder_forward(params, test_tokens, cfg, qcfg, online)
        loss = float(output_loss(logits, test_tokens, out_start))
        acc = float((logits[:, out_start - 1:-1].argmax(-1) == test_tokens[:, out_start:]).float().mean())
    gen = greedy_answers(params, online, cfg, test_tokens[:, :out_start], test_tokens.shape[1] - out_start, qcfg,
                         teacher=(test_tokens, logits))
    preds = [_tokens_to_text(r.tolist(), eos) for r in gen]
    refs = [_tokens_to_text(r.tolist(), eos) for r in test_tokens[:, out_start:]]
    return {"test_loss": loss, "token_acc": acc, "rougeL": rouge_l(preds, refs)}


def bound_check_rows(params: Mapping[str, Tensor], cfg: ModelConfig, bits: int) -> dict[str, Any]:
    """Prop. 4.4's no-rotation bound on every output-channel row of every block linear of ``params``.

    Returns ``{"rows", "violations", "max_ratio"}`` where ratio = error / bound (symmetric, c = 1).
    """
    # (out, in): one row per output channel
    return bound_check_weights((params[f"l{i}_{n}"].T for i in range(cfg.n_layers) for n in LINEARS), bits)


def bound_check_weights(weights: Iterable[Tensor], bits: int) -> dict[str, Any]:
    """Prop. 4.4's no-rotation bound on every row of every ``(out, in)`` weight of ``weights`` (float64):
    ``{"rows", "violations", "max_ratio"}``."""
    rows, viol, ratio = 0, 0, 0.0
    for w in weights:
        w = w.detach().to(torch.float64)
        err, bnd = row_errors_symmetric(w, bits), no_rotation_bound(w, bits)
        rows += w.shape[0]
        viol += int((err > bnd * (1 + REL_TOL) + 1e-300).sum())
        ratio = max(ratio, float((err / bnd.clamp_min(1e-300)).max()))
    return {"rows": rows, "violations": viol, "max_ratio": ratio}


# ------------------------------------------------------------------------------------------ verdicts


def decide_claim1(loss_ste: Sequence[float], loss_roste: Sequence[float], margin: float = CLAIM1_MARGIN
                  ) -> tuple[bool, bool, dict[str, Any]]:
    """Claim 1 (paper Table 1): d_s = loss(ste) - loss(roste) per seed. Reproduced: mean d > ``margin`` (the
    effect-size floor, config ``eval.c1_margin``, default 0.02) and every d_s > 0; not reproduced: mean d <= 0;
    otherwise inconclusive."""
    d = np.asarray(loss_ste, float) - np.asarray(loss_roste, float)
    if d.size == 0:
        return False, False, {"d": [], "mean_d": None}
    mean = float(d.mean())
    return (mean > margin and bool((d > 0).all())), mean <= 0, {
        "d": d.tolist(), "mean_d": mean, "all_positive": bool((d > 0).all()), "margin": margin}


def decide_claim2(loss_rtn: Sequence[float], loss_roste: Sequence[float], loss_fp: Sequence[float]
                  ) -> tuple[bool, bool, dict[str, Any]]:
    """Claim 2 (paper Table 1): per seed, loss(rtn) - loss(roste) > 0.5 and loss(fp_sft) < loss(roste).
    Reproduced only if every seed passes; not reproduced if any seed fails."""
    rtn, ro, fp = (np.asarray(v, float) for v in (loss_rtn, loss_roste, loss_fp))
    if not (rtn.size == ro.size == fp.size) or ro.size == 0:
        return False, False, {"error": "unequal or empty per-seed samples"}
    gap = rtn - ro
    passes = (gap > CLAIM2_MARGIN) & (fp < ro)
    return bool(passes.all()), bool((~passes).any()), {
        "rtn_minus_roste": gap.tolist(), "fp_minus_roste": (fp - ro).tolist(), "seed_passes": passes.tolist(),
        "margin": CLAIM2_MARGIN}


def decide_control(loss_ste_a1: Sequence[float], loss_roste_a1: Sequence[float]) -> tuple[bool, bool, dict[str, Any]]:
    """Claim 4 (ours): without outliers (α = 1) adaptive rotation changes little: |mean(ste_a1 - roste_a1)| <
    0.02 reproduces, otherwise not reproduced."""
    d = np.asarray(loss_ste_a1, float) - np.asarray(loss_roste_a1, float)
    if d.size == 0:
        return False, False, {"d": [], "mean_d": None}
    mean = float(d.mean())
    return abs(mean) < CONTROL_MARGIN, abs(mean) >= CONTROL_MARGIN, {"d": d.tolist(), "mean_d": mean,
                                                                    "margin": CONTROL_MARGIN}


def decide_invariance(max_abs_diff: Sequence[float]) -> tuple[bool, dict[str, Any]]:
    """Check 3a: with quantizers off every rotation configuration reproduces the unrotated logits (max |Δ| <=
    1e-4 in float32)."""
    m = np.asarray(max_abs_diff, float)
    worst = float(m.max()) if m.size else float("nan")
    return bool(m.size and np.isfinite(m).all() and worst <= INVARIANCE_TOL), {
        "max_abs_diff": worst, "configurations": int(m.size), "tolerance": INVARIANCE_TOL}


def decide_search(records: Sequence[Mapping[str, Any]]) -> tuple[bool, dict[str, Any]]:
    """Check 3b: per search record, the choices are the per-slot argmins (ties → I), E(R*) = Σ_i min(E_i(I),
    E_i(H)) <= min(E(all-I), E(all-H)), and E measured in a separate pass of the chosen configuration equals Σ min.

    A record: ``{"choices": {slot: bool}, "errors": {slot: [E_I, E_H]}, "measured": E(R*) of its own pass}``.
    """
    worst_rel, ok, n = 0.0, bool(records), 0
    for r in records:
        errs = {s: tuple(v) for s, v in r["errors"].items() if s != "r1"}
        argmin = all(bool(r["choices"][s]) == (e[1] < e[0]) for s, e in errs.items())
        sum_min = sum(min(e) for e in errs.values())
        all_i, all_h = sum(e[0] for e in errs.values()), sum(e[1] for e in errs.values())
        rel = abs(r["measured"] - sum_min) / max(abs(sum_min), 1e-300)
        worst_rel = max(worst_rel, rel)
        ok &= argmin and sum_min <= min(all_i, all_h) * (1 + REL_TOL) and rel <= 1e-6
        n += 1
    return ok, {"records": n, "max_rel_gap_measured_vs_sum_min": worst_rel}


def decide_bound(rows: int, violations: int) -> tuple[bool, dict[str, Any]]:
    """Check 3c: every roste weight row satisfies Prop. 4.4's no-rotation bound (symmetric, c = 1)."""
    return bool(rows > 0 and violations == 0), {"rows": rows, "violations": violations}
