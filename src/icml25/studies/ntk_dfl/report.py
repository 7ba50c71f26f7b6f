"""Figures of the ntk_dfl study, drawn from ``metrics/eval.json``.

* :func:`accuracy_figure` — test accuracy of the aggregated model (mean of all client weights) per round, mean over
  seeds, per arm; the claim-1 rounds to target are in the legend.
* :func:`t_star_figure` — how often each candidate evolution step was selected as t*, and the mean t* per round.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"ntk_dfl": "NTK-DFL", "dpsgd": "D-PSGD", "dfedavg": "DFedAvg", "dfedavgm": "DFedAvgM",
          "ntk_dfl_static": "NTK-DFL, static graph", "ntk_dfl_linsel": "NTK-DFL, t* on linearised outputs",
          "ntk_dfl_iid": "NTK-DFL, IID data"}


def accuracy_figure(doc: Mapping[str, Any]) -> Any:
    """Aggregated test accuracy (%) per round of every arm in ``doc["arms"]``."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for arm, m in doc.get("arms", {}).items():
        curve = m["curve_agg_acc"]
        r = ["-" if x is None else str(x) for x in m.get("rounds_to_target", [])]
        claim_arm = arm in ("ntk_dfl", "dpsgd", "dfedavg")  # the ablations are dashed
        ax.plot(range(1, len(curve) + 1), [100 * v for v in curve], "-" if claim_arm else "--",
                lw=2 if arm == "ntk_dfl" else 1.2, label=f"{LABELS.get(arm, arm)} (rounds to target: {', '.join(r)})")
    ax.set_xlabel("round")
    ax.set_ylabel("aggregated-model test accuracy (%), mean over seeds")
    ax.set_title("Decentralized FL under Dirichlet label skew (target = 0.95 x DFedAvg's final)", fontsize=9)
    if doc.get("arms"):
        ax.legend(fontsize=7)
    return fig


def t_star_figure(doc: Mapping[str, Any]) -> Any:
    """Selected evolution steps t* of the NTK-DFL arms: counts over client-rounds (left), mean per round (right)."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.6))
    drawn = False
    for arm, m in doc.get("arms", {}).items():
        if not m.get("t_star_counts"):
            continue
        counts = m["t_star_counts"]
        ts = sorted(counts, key=int)
        a1.bar([f"{arm}\n{t}" if len(doc["arms"]) > 3 else t for t in ts], [counts[t] for t in ts],
               label=LABELS.get(arm, arm), alpha=0.7)
        a2.plot(range(1, len(m["t_star_mean_per_round"]) + 1), m["t_star_mean_per_round"], label=LABELS.get(arm, arm))
        drawn = True
    a1.set_xlabel("t* (Euler steps)")
    a1.set_ylabel("client-rounds")
    a2.set_xlabel("round")
    a2.set_ylabel("mean t* over clients and seeds")
    if drawn:
        a1.legend(fontsize=7)
        a2.legend(fontsize=7)
    else:
        a1.text(0.5, 0.5, "no NTK-DFL arm in this run", ha="center", va="center", transform=a1.transAxes)
    fig.suptitle("NTK-DFL: selected evolution time t* (candidates: the config's ntk.t_cand)", fontsize=9)
    return fig
