"""Figures and report.md of the unisoma study (from metrics/eval.json)."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np


def error_figure(doc: Mapping[str, Any]):
    """Left: true vs predicted final shapes (first test sample, first seed) per arm. Right: per-sample test
    relative L2 of final positions per arm (all seeds pooled)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = list(doc["example"]["pred"])
    fig, axes = plt.subplots(1, len(arms) + 1, figsize=(4.2 * (len(arms) + 1), 3.4))
    for ax, arm in zip(axes, arms):
        for m, (true, pred) in enumerate(zip(doc["example"]["truth"], doc["example"]["pred"][arm])):
            t, p = np.asarray(true), np.asarray(pred)
            ax.scatter(t[:, 0], t[:, 1], s=6, c="k", label="true" if m == 0 else None)
            ax.scatter(p[:, 0], p[:, 1], s=6, c="tab:red" if m == 0 else "tab:blue", alpha=0.6,
                       label=f"predicted {('metal', 'rubber')[m]}" if m < 2 else None)
        ax.set_title(f"{arm}: final shape, test sample 0")
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        ax.legend(fontsize=7)
    ax = axes[-1]
    data = [np.concatenate([np.asarray(v["rel_l2_pos"]) for v in doc["per_sample"][arm].values()]) for arm in arms]
    ax.boxplot(data)
    ax.set_xticks(range(1, len(arms) + 1), arms)
    ax.set_ylabel("test relative L2 of final positions")
    ax.set_title("per-sample error, seeds pooled")
    fig.tight_layout()
    return fig


def report_markdown(doc: Mapping[str, Any]) -> str:
    lines = [f"# unisoma ({doc['scale']}), seeds {doc['seeds']}", "",
             "| arm | params | " + " | ".join(doc["summary"][next(iter(doc["summary"]))]) + " |",
             "|---|---|" + "---|" * len(doc["summary"][next(iter(doc["summary"]))])]
    for arm, ms in doc["summary"].items():
        cells = [f"{m['mean']:.4f} [{m['ci_low']:.4f}, {m['ci_high']:.4f}]" for m in ms.values()]
        lines.append(f"| {arm} | {doc['params'].get(arm, '')} | " + " | ".join(cells) + " |")
    lines += ["", "| id | kind | verdict | statistic |", "|---|---|---|---|"]
    lines += [f"| {c['id']} | {c['kind']} | {c['verdict']} | {c['statistic']} |" for c in doc["claims"]]
    return "\n".join(lines) + "\n"
