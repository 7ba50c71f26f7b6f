"""Report of the magnets study: the FD–FLOPs figure over every decoding arm, sample grids per arm, report.md."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .data import decode_images


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def fd_flops_figure(table: pd.DataFrame):
    """FD (mean ± std over seeds) against decoding GFLOPs per sample, one point per arm."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for arm, g in table.groupby("arm", sort=False):
        x = float(g["flops_total"].iloc[0]) / 1e9
        ax.errorbar(x, g["fd"].mean(), yerr=g["fd"].std(ddof=1) if len(g) > 1 else 0, fmt="o", capsize=3,
                    label=arm)
        ax.annotate(arm, (x, g["fd"].mean()), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("decoding GFLOPs per sample (analytic)")
    ax.set_ylabel("FD to real test images (lower is better)")
    ax.set_title("magnets: quality vs decoding compute")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def samples_figure(samples: Mapping[str, np.ndarray], arms: Sequence[str], per_arm: int = 20):
    """One row of decoded samples per arm (first seed), images from the tokens through the codebook."""
    plt = _plt()
    cb, pool, patch = samples["codebook"], int(samples["pool"]), int(samples["patch"])
    arms = [a for a in arms if f"tokens_{a}" in samples]
    fig, axes = plt.subplots(max(1, len(arms)), 1, figsize=(per_arm * 0.5, 0.7 * max(1, len(arms))), squeeze=False)
    for ax, arm in zip(axes[:, 0], arms):
        imgs = decode_images(samples[f"tokens_{arm}"][:per_arm], cb, pool, patch).reshape(-1, 28, 28)
        ax.imshow(np.concatenate(list(imgs), axis=1), cmap="gray", vmin=0, vmax=1)
        ax.set_yticks([])
        ax.set_xticks([])
        ax.set_ylabel(arm, rotation=0, ha="right", fontsize=7)
    fig.tight_layout()
    return fig


def image_grid_figure(samples: Mapping[str, np.ndarray], arms: Sequence[str]):
    """Paper scale: one row of decoded RGB samples (uint8 (n, H, W, 3)) per arm (first seed)."""
    plt = _plt()
    arms = [a for a in arms if f"images_{a}" in samples]
    fig, axes = plt.subplots(max(1, len(arms)), 1, figsize=(8, 1.2 * max(1, len(arms))), squeeze=False)
    for ax, arm in zip(axes[:, 0], arms):
        ax.imshow(np.concatenate(list(samples[f"images_{arm}"]), axis=1))
        ax.set_yticks([])
        ax.set_xticks([])
        ax.set_ylabel(arm, rotation=0, ha="right", fontsize=7)
    fig.tight_layout()
    return fig


def report_markdown(doc: Mapping[str, Any], table: pd.DataFrame) -> str:
    """Verdict table and the per-arm metrics (means over seeds)."""
    lines = ["# magnets — report", "", f"Paper: {doc.get('paper', {}).get('title', '')} "
             f"({doc.get('paper', {}).get('ref', '')}). Scale `{doc['scale']}`, seeds {doc.get('seeds')}.", "",
             "| id | kind | verdict | key numbers |", "|---|---|---|---|"]
    for c in doc["claims"]:
        nums = ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}"
                         for k, v in (c.get("key_numbers") or {}).items())
        lines.append(f"| {c['id']} | {c['kind']} | {c['verdict']} | {nums} |")
    lines += ["", "| arm | FD | class acc | FLOPs/sample | ms/sample |", "|---|---|---|---|---|"]
    for arm, g in table.groupby("arm", sort=False):
        lines.append(f"| {arm} | {g['fd'].mean():.3f} | {g['class_acc'].mean():.3f} | "
                     f"{int(g['flops_total'].iloc[0])} | {g['wall_ms_per_sample'].mean():.3f} |")
    return "\n".join(lines) + "\n"
