"""Figures of the meta_expert study from ``metrics/eval.json``: per-interval accuracy of each expert and of the
DEA aggregate, the DEA weight matrix, and the mean test top-1 curves of the arms."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _empty(title: str, why: str):
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.text(0.5, 0.5, why, ha="center", va="center")
    ax.set_axis_off()
    ax.set_title(title)
    return fig


def interval_accuracy_figure(doc: Mapping[str, Any]):
    """Grouped bars: head / medium / tail test accuracy of E1, E2, E3 and the DEA aggregate (Meta-Expert)."""
    title = "Meta-Expert: test accuracy per interval"
    acc = doc.get("expert_interval_acc")
    if not acc:
        return _empty(title, "meta_expert arm not run")
    names, intervals = list(acc), doc["intervals"]
    x = np.arange(len(intervals))
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for i, name in enumerate(names):
        ax.bar(x + (i - (len(names) - 1) / 2) * width, acc[name], width, label=name)
    ax.set_xticks(x, intervals)
    ax.set_ylabel("test accuracy (mean over runs)")
    ax.set_ylim(0, 1.18)  # room for the legend
    ax.set_title(title)
    ax.legend(fontsize=8, ncol=len(names))
    fig.tight_layout()
    return fig


def dea_weight_figure(doc: Mapping[str, Any]):
    """Heat map of the mean DEA weight (rows: true interval of the test sample; columns: expert)."""
    title = "DEA weight per interval"
    wm = doc.get("routing_matrix")
    if wm is None:
        return _empty(title, "meta_expert arm not run")
    wm = np.asarray(wm)
    fig, ax = plt.subplots(figsize=(4.2, 3.5))
    im = ax.imshow(wm, vmin=0, vmax=max(0.6, float(wm.max())), cmap="viridis")
    for i in range(3):
        for k in range(3):
            ax.text(k, i, f"{wm[i, k]:.3f}", ha="center", va="center", color="w" if wm[i, k] < 0.4 else "k")
    ax.set_xticks(range(3), ["E1 (τ=0)", "E2", "E3"])
    ax.set_yticks(range(3), doc["intervals"])
    ax.set_xlabel("expert")
    ax.set_ylabel("true interval")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    return fig


def top1_curve_figure(doc: Mapping[str, Any]):
    """Mean test top-1 of the EMA model against the iteration, one line per arm."""
    curves = doc.get("curves") or {}
    if not curves:
        return _empty("test top-1", "no curves")
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for arm, c in sorted(curves.items()):
        it = [int(k) for k in c]
        ax.plot(it, list(c.values()), marker="o", ms=3, label=arm)
    ax.set_xlabel("iteration")
    ax.set_ylabel("test top-1 (EMA, mean over runs)")
    ax.set_title("test top-1 during training")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
