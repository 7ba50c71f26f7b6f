"""Report of the action_piece study from ``metrics/eval.json``: test NDCG@10 per arm and a markdown page."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def ndcg_figure(doc: Mapping[str, Any]):
    """Test NDCG@10 per arm: bars = mean over seeds, dots = seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    arms = list(doc.get("per_seed", {}))
    for i, arm in enumerate(arms):
        vals = [m["ndcg10"] for m in doc["per_seed"][arm].values()]
        ax.bar(i, float(np.mean(vals)), color="C1" if arm.startswith("ml_") else "C0", alpha=0.5)
        ax.plot([i] * len(vals), vals, "k.", ms=6)
    ax.set_xticks(range(len(arms)), arms, rotation=30, ha="right")
    ax.set_ylabel("test NDCG@10")
    ax.set_title("held-out next-item NDCG@10 (world: blue, MovieLens: orange)")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def report_markdown(doc: Mapping[str, Any]) -> str:
    lines = [f"# action_piece report (scale `{doc.get('scale', '?')}`)", "", "## Claims and checks", "",
             "| id | kind | verdict | note |", "|---|---|---|---|"]
    for c in doc.get("claims", []):
        lines.append(f"| {c['id']} | {c['kind']} | {c['verdict']} | {c.get('note', '')} |")
    lines += ["", "## Test metrics (mean over seeds)", "", "| arm | seeds | NDCG@10 | Recall@10 | NDCG@20 |",
              "|---|---|---|---|---|"]
    for arm, runs in doc.get("per_seed", {}).items():
        m = {k: float(np.mean([r[k] for r in runs.values()])) for k in ("ndcg10", "recall10", "ndcg20")}
        lines.append(f"| {arm} | {len(runs)} | {m['ndcg10']:.4f} | {m['recall10']:.4f} | {m['ndcg20']:.4f} |")
    return "\n".join(lines) + "\n"
