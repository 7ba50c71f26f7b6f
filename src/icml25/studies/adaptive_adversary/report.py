"""Report of the adaptive_adversary study: error against m (adaptive vs oblivious), the phase diagram of the
robust learner's adaptive failure rate against η/c (empirical with 95% Wilson intervals, closed form as lines),
and a markdown page opening with the "own illustration" notice. Inputs: ``metrics/cells.csv`` (from
:func:`.evaluate.cells_report`) and ``claims.json``.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from .evaluate import NOTICE, OBLIVIOUS, SEP_RATIO, wilson_interval
from .method import budget, robust_failure_rate


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def error_vs_m_figure(cells: pd.DataFrame):
    """Mean TV error against m, one panel per c, for η = the largest ratio ≥ 1.5c present: every learner under
    ``adaptive`` (solid) and ``robust`` under each oblivious strategy (dashed); ½ marked. Returns the figure."""
    plt = _plt()
    cs = sorted(cells["c"].unique())
    fig, axes = plt.subplots(1, max(1, len(cs)), figsize=(4.2 * max(1, len(cs)), 3.6), squeeze=False)
    for ax, c in zip(axes[0], cs):
        at_c = cells[(cells["c"] == c) & (cells["eta_over_c"] >= SEP_RATIO - 1e-9)]
        if at_c.empty:
            ax.set_title(f"c = {c:g}: no cell with eta >= 1.5c")
            ax.axis("off")
            continue
        ratio = float(at_c["eta_over_c"].max())
        sel = cells[(cells["c"] == c) & np.isclose(cells["eta_over_c"], ratio)]
        for learner, marker in (("decoder", "s"), ("robust", "o")):
            g = sel[(sel["adversary"] == "adaptive") & (sel["learner"] == learner)].sort_values("m")
            if len(g):
                ax.plot(g["m"], g["mean_err"], marker=marker, label=f"adaptive / {learner}")
        for adv, marker in zip(OBLIVIOUS, "^v<"):
            g = sel[(sel["adversary"] == adv) & (sel["learner"] == "robust")].sort_values("m")
            if len(g):
                ax.plot(g["m"], g["mean_err"], marker=marker, linestyle="--", label=f"{adv} / robust")
        ax.axhline(0.5, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("sample size m")
        ax.set_title(f"c = {c:g}, eta = {ratio:g}c")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("mean TV error (seeds pooled)")
    axes[0][0].legend(fontsize=7, loc="center")
    fig.suptitle("Own illustration: adaptive vs oblivious, same budget", fontsize=9)
    fig.tight_layout()
    return fig


def phase_figure(cells: pd.DataFrame, budget_rule: str = "floor_eta_m"):
    """Failure rate of ``robust`` under ``adaptive`` against η/c, one panel per c and one colour per m: points with
    95% Wilson intervals (seeds pooled) and the closed form ½[F(B)² − F(B)F(0) + F(0)] on a fine η/c grid."""
    plt = _plt()
    ada = cells[(cells["adversary"] == "adaptive") & (cells["learner"] == "robust")]
    cs = sorted(ada["c"].unique())
    fig, axes = plt.subplots(1, max(1, len(cs)), figsize=(4.2 * max(1, len(cs)), 3.6), squeeze=False)
    for ax, c in zip(axes[0], cs):
        at_c = ada[ada["c"] == c]
        top = float(at_c["eta_over_c"].max()) if len(at_c) else 3.0
        fine = np.linspace(0, max(top, 0.5), 241)
        for i, m in enumerate(sorted(at_c["m"].unique())):
            g = at_c[at_c["m"] == m].sort_values("eta_over_c")
            colour = f"C{i}"
            lo_hi = np.array([wilson_interval(int(k), int(n)) for k, n in zip(g["n_fail"], g["n"])]).reshape(-1, 2)
            rate = g["n_fail"] / g["n"]
            yerr = np.clip([rate - lo_hi[:, 0], lo_hi[:, 1] - rate], 0.0, None)  # float noise at rate 0 or 1
            ax.errorbar(g["eta_over_c"], rate, yerr=yerr, fmt="o", ms=3,
                        color=colour, capsize=2, label=f"m = {m}")
            closed = [robust_failure_rate(int(m), float(c), budget(round(r * c, 12), int(m), budget_rule))
                      if r * c < 1 else np.nan for r in fine]
            ax.plot(fine, closed, color=colour, lw=1, alpha=0.8)
        ax.axhline(0.5, color="grey", lw=0.8, ls=":")
        ax.set_xlabel("adversary budget eta / c")
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(f"c = {c:g}")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("robust learner's failure rate")
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.suptitle("Adaptive: points simulated, lines closed form", fontsize=9)
    fig.tight_layout()
    return fig


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def report_markdown(claims_doc: Mapping[str, Any], cells: pd.DataFrame) -> str:
    """The report page: the notice, the verdict table with key numbers, and the adaptive cells at m = max."""
    lines = ["# adaptive_adversary — report", "", f"> **{NOTICE}**", "",
             f"Paper: {claims_doc.get('paper', {}).get('title', '')} ({claims_doc.get('paper', {}).get('ref', '')}).",
             f"Scale `{claims_doc['scale']}`, seeds {claims_doc.get('seeds')}.", "",
             "| id | kind | verdict | key numbers |", "|---|---|---|---|"]
    for c in claims_doc["claims"]:
        numbers = ", ".join(f"{k} = {_fmt(v)}" for k, v in (c.get("key_numbers") or {}).items())
        lines.append(f"| {c['id']} | {c['kind']} | {c['verdict']} | {numbers} |")
    for c in claims_doc["claims"]:
        if c.get("note"):
            lines += ["", f"*{c['id']}*: {c['note']}"]
    ada = cells[(cells["adversary"] == "adaptive")]
    if len(ada):
        m = int(ada["m"].max())
        t = ada[ada["m"] == m].pivot_table(index=["c", "eta_over_c", "budget"], columns="learner",
                                           values="fail_rate").reset_index()
        ana = ada[(ada["m"] == m) & (ada["learner"] == "robust")][["c", "eta_over_c", "robust_fail_analytic",
                                                                  "le_cam_bound"]]
        t = t.merge(ana, on=["c", "eta_over_c"], how="left")
        lines += ["", f"## Adaptive adversary at m = {m} (failure rates, seeds pooled)", "",
                  "| c | eta/c | B | decoder | robust | robust closed form | Le Cam bound |", "|---|---|---|---|---|---|---|"]
        for r in t.itertuples(index=False):
            lines.append(f"| {r.c:g} | {r.eta_over_c:g} | {r.budget} | {getattr(r, 'decoder', np.nan):.3f} | "
                         f"{getattr(r, 'robust', np.nan):.3f} | {r.robust_fail_analytic:.3f} | {r.le_cam_bound:.3f} |")
    lines.append("")
    return "\n".join(lines)
