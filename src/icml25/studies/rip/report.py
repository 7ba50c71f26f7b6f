"""Figure and markdown report of the rip study from ``metrics/eval.json``."""
from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ("seed", "none", "rip", "random_same_size", "m1_only", "m2_only", "m3_only", "jaccard")


def reward_figure(doc: dict[str, Any]):
    """Bar chart: mean noise-free test reward per arm with its Student-t 95% CI over DPO seeds."""
    arms = [a for a in ORDER if a in doc["arms"]]
    means = [doc["arms"][a]["test_reward"]["mean"] for a in arms]
    lo = [m - doc["arms"][a]["test_reward"]["ci_low"] for a, m in zip(arms, means)]
    hi = [doc["arms"][a]["test_reward"]["ci_high"] - m for a, m in zip(arms, means)]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    colors = ["0.6" if a == "seed" else ("tab:red" if a == "rip" else "tab:blue") for a in arms]
    ax.bar(arms, means, yerr=[lo, hi], color=colors, capsize=4)
    if "reward_label" in doc:  # paper scale: an unbounded reward-model score from the local judge
        ax.set_ylabel(f"test reward ({doc['reward_label']})")
        span = max(max(means) - min(means), 1e-6)
        ax.set_ylim(min(means) - 0.5 * span, max(means) + 0.5 * span)
        ax.set_title(f"rip ({doc['scale']}): local-judge reward of greedy answers, 95% CI over seeds")
    else:
        ax.set_ylabel("test reward (noise-free judge)")
        ax.set_ylim(min(means) - 0.1, min(1.0, max(means) + 0.05))
        ax.set_title(f"rip ({doc['scale']}): greedy-output reward on clean test prompts, 95% CI over seeds")
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    return fig


def report_markdown(doc: dict[str, Any]) -> str:
    """A short markdown table of arms and claim verdicts."""
    lines = [f"# rip — {doc['scale']}", "", "| arm | kept pairs | test reward | 95% CI | win rate vs seed |",
             "|---|---|---|---|---|"]
    for a in ORDER:
        if a not in doc["arms"]:
            continue
        m = doc["arms"][a]
        tr, wr = m["test_reward"], m.get("win_rate_vs_seed", {})
        lines.append(f"| {a} | {m.get('kept_n', '')} | {tr['mean']:.4f} | [{tr['ci_low']:.4f}, "
                     f"{tr['ci_high']:.4f}] | {wr.get('mean', float('nan')):.3f} |")
    lines += ["", "| claim | verdict |", "|---|---|"]
    lines += [f"| {c['id']} | {c.get('status') or c['verdict']} |" for c in doc["claims"]]
    return "\n".join(lines) + "\n"
