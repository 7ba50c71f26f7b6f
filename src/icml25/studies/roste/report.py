"""Report of the roste study from ``metrics/eval.json``: E(W) during SFT (paper Fig. 4), held-out loss per arm,
and a markdown page with the claims and the metric table."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def e_w_figure(doc: Mapping[str, Any]):
    """Weight quantization error E(W) against the SFT step, mean over seeds, one line per trained arm."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for arm, by_seed in sorted(doc.get("curves", {}).items()):
        runs = [np.asarray(c["e_w"], float) for c in by_seed.values() if c["e_w"]]
        if not runs:
            continue
        steps, vals = runs[0][:, 0], np.mean([r[:, 1] for r in runs], axis=0)
        ax.plot(steps, vals, marker="o", label=arm)
    ax.set_xlabel("SFT step")
    ax.set_ylabel("E(W) = Σ ||Q_w(W) - W||²")
    ax.set_title("weight quantization error during fine-tuning")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def loss_figure(doc: Mapping[str, Any]):
    """Held-out test loss per arm: mean over seeds and the seeds' values."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    arms = list(doc.get("per_seed", {}))
    for i, arm in enumerate(arms):
        vals = [m["test_loss"] for m in doc["per_seed"][arm].values()]
        ax.bar(i, float(np.mean(vals)), color="C0", alpha=0.5)
        ax.plot([i] * len(vals), vals, "k.", ms=6)
    ax.set_xticks(range(len(arms)), arms, rotation=30, ha="right")
    ax.set_ylabel("test loss (nats / answer token)")
    ax.set_title("held-out SFT loss, deployment forward (W4A4KV4; fp_sft in FP)")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def report_markdown(doc: Mapping[str, Any]) -> str:
    """``report.md``: claims, then mean test_loss / token_acc / rougeL per arm."""
    lines = [f"# roste report (scale `{doc.get('scale', '?')}`)", "", "## Claims and checks", "",
             "| id | kind | verdict | note |", "|---|---|---|---|"]
    for c in doc.get("claims", []):
        lines.append(f"| {c['id']} | {c['kind']} | {c['verdict']} | {c.get('note', '')} |")
    lines += ["", "## Held-out metrics (mean over seeds)", "", "| arm | seeds | test_loss | token_acc | rougeL |",
              "|---|---|---|---|---|"]
    for arm, runs in doc.get("per_seed", {}).items():
        m = {k: float(np.mean([r[k] for r in runs.values()])) for k in ("test_loss", "token_acc", "rougeL")}
        lines.append(f"| {arm} | {len(runs)} | {m['test_loss']:.4f} | {m['token_acc']:.4f} | {m['rougeL']:.4f} |")
    return "\n".join(lines) + "\n"
