"""Report of the coalition_attribution study: R, R', Q per coalition type and arm beside the paper's Table 4
(figure), and a markdown page with the verdicts. Inputs: ``metrics/eval.json`` and ``claims.json``."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .evaluate import METRICS, TABLE4, TYPES

LABELS = {"R": "R", "R_prime": "R'", "Q": "Q"}


def table4_figure(table: Mapping[str, Any]):
    """One panel per metric (R, R', Q): bars per coalition type F / P / U for each arm (pooled means), the
    paper's Table 4 value as a black tick. ``table``: {arm: {type: {metric: {mean, n, table4}}}}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = [a for a in ("oracle", "mlp", "mlp_adam") if a in table]
    fig, axes = plt.subplots(1, len(METRICS), figsize=(11, 3.6), sharey=True)
    x = np.arange(len(TYPES))
    width = 0.8 / max(1, len(arms))
    for ax, m in zip(axes, METRICS):
        for j, arm in enumerate(arms):
            vals = [table[arm][t][m]["mean"] for t in TYPES]
            vals = [np.nan if v is None else v for v in vals]
            ax.bar(x - 0.4 + width * (j + 0.5), vals, width, label=arm, alpha=0.85)
        ax.scatter(x, [TABLE4[t][m] for t in TYPES], marker="_", s=900, color="black", linewidths=2,
                   label="paper (Table 4)", zorder=3)
        ax.set_xticks(x, [f"{t}" for t in TYPES])
        ax.set_title(f"E[{LABELS[m]}]")
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("mean over coalitions (seeds pooled)")
    axes[0].legend(fontsize=8, loc="upper right")
    fig.suptitle("Faithfulness of purely (F), partially (P) and not (U) faithful coalitions", fontsize=10)
    fig.tight_layout()
    return fig


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "—" if v is None else str(v)


def report_markdown(eval_doc: Mapping[str, Any], claims_doc: Mapping[str, Any]) -> str:
    """The report page: verdicts, Table 4 (ours beside the paper's per arm), L1 objectives and MLP fit."""
    lines = ["# coalition_attribution — report", "",
             f"Paper: {claims_doc['paper'].get('title', '')} ({claims_doc['paper'].get('ref', '')}).",
             f"Scale `{claims_doc['scale']}`, seeds {claims_doc.get('seeds')}.", "",
             "| id | kind | verdict | key numbers |", "|---|---|---|---|"]
    for c in claims_doc["claims"]:
        numbers = ", ".join(f"{k} = {_fmt(v)}" for k, v in (c.get("key_numbers") or {}).items())
        lines.append(f"| {c['id']} | {c['kind']} | {c['verdict']} | {numbers} |")
    lines += ["", "## Table 4: ours [paper]", "", "| arm | type | n | R | R' | Q |", "|---|---|---|---|---|---|"]
    for arm, by_type in eval_doc["table"].items():
        for t in TYPES:
            cells = [f"{_fmt(by_type[t][m]['mean'])} [{TABLE4[t][m]:.3f}]" for m in METRICS]
            lines.append(f"| {arm} | {t} | {by_type[t]['R']['n']} | " + " | ".join(cells) + " |")
    l1 = eval_doc.get("l1_objective", {})
    if l1:
        lines += ["", "## Sparsity objective (mean over games)", "", "| arm | at learned gamma | at gamma = v/2 |",
                  "|---|---|---|"]
        lines += [f"| {arm} | {v['mean']:.4f} | {v['mean_at_half_v']:.4f} |" for arm, v in l1.items()]
    if "mlp_fit" in eval_doc:
        f = eval_doc["mlp_fit"]
        lines += ["", f"MLP fit: largest relative train MSE {f['max_rel_mse']:.2e} over {f['n']} networks, "
                      f"{f['n_flagged']} flagged."]
    lines.append("")
    return "\n".join(lines)
