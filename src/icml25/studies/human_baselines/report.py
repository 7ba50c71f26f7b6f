"""Figures and report.md of the human_baselines study (spec "Stages: report").

* ``checklist_share.png``: share of the 115 reviewed studies meeting each Table III item (after imputation),
  all studies vs the 7 model-card studies.
* ``power_vs_baseliners.png``: simulated power (ours) against the number of baseliners, one curve per δ.
* ``rigor_by_year.png``: the descriptive rigour score by publication year.
"""
from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .table import SUBSETS  # noqa: E402

ATTRIBUTION = (
    "Data: literature-review workbook of Wei, Paskov, Dev, Byun, Reuel, Roberts-Gaal, Calcott, Coxon, Deshpande, "
    "*Position: Human Baselines in Model Evaluations Need Rigor and Transparency (With Recommendations & "
    "Reporting Checklist)*, ICML 2025 (arXiv 2506.13776), https://github.com/kevinlwei/human-baselines "
    "(commit 46d4b1b9099d32f3580d19e5671ee3c865aaddbe, `data/lit_review_data.xlsx`). Licence CC BY-NC-SA 4.0: "
    "non-commercial use only; the tables derived here carry the same licence.")


def checklist_figure(flat: pd.DataFrame):
    """Horizontal bars: % Yes per item for all studies and the model-card subset."""
    fig, ax = plt.subplots(figsize=(7.5, 6))
    y = np.arange(len(flat))
    ax.barh(y - 0.2, flat["all_yes_pct"], height=0.4, label="all 115 studies")
    ax.barh(y + 0.2, flat["model_card_yes_pct"], height=0.4, label="7 model-card studies")
    ax.set_yticks(y, flat["item"])
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("studies meeting the item (% Yes after imputation)")
    ax.legend(loc="lower right")
    ax.set_title("Reporting checklist: share of reviewed human baselines meeting each item")
    return fig


def power_figure(power: pd.DataFrame, target: float):
    """Power vs number of baseliners (log x), one marker set per δ; main setting, mean over seeds. Ours [R]."""
    main = power[power["setting"] == "main"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for delta, part in main.groupby("delta"):
        agg = part.groupby("study_index").agg(B=("B", "first"), power=("power", "mean")).sort_values("B")
        ax.scatter(agg["B"], agg["power"], s=14, alpha=0.7, label=f"δ = {delta * 100:g} points")
    ax.axhline(target, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_xlabel("number of baseliners B (row 16)")
    ax.set_ylabel("power (paired t-test, α = 0.05)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Our illustration (not the paper's): could each study detect a δ-point gap?")
    ax.legend()
    return fig


def rigor_figure(scores: pd.DataFrame):
    """Rigour score per study by publication year (points) and the yearly mean (line)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    known = scores[scores["year"].notna()]
    years = known["year"].astype(int)
    ax.scatter(years + np.random.default_rng(0).uniform(-0.15, 0.15, len(known)), known["score"], s=12, alpha=0.6)
    mean = known.groupby(years)["score"].mean()
    ax.plot(mean.index, mean.to_numpy(), color="black", marker="o", label="mean")
    ax.set_xlabel("publication year")
    ax.set_ylabel("rigour score (share of 16 items = Yes)")
    ax.set_ylim(0, 1)
    ax.set_title("Descriptive rigour score of reviewed human baselines [R]")
    ax.legend()
    return fig


def _md_table(flat: pd.DataFrame) -> list[str]:
    head = ["item"] + [f"{s} {a}" for s in SUBSETS for a in ("Yes", "No", "Unknown")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in flat.iterrows():
        cells = [r["item"]]
        for s in SUBSETS:
            for a in ("yes", "no", "unknown"):
                n, p = r[f"{s}_{a}_n"], r[f"{s}_{a}_pct"]
                cells.append("–" if pd.isna(n) else f"{int(n)} ({p:.2f}%)")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def report_markdown(eval_doc: dict[str, Any], flat: pd.DataFrame, figures: dict[str, str]) -> str:
    """report.md: attribution, data provenance, Table III, claims, figures."""
    src = eval_doc["source"]
    lines = ["# human_baselines — Human Baselines in Model Evaluations Need Rigor and Transparency (ICML 2025)", "",
             ATTRIBUTION, "",
             f"**Workbook used:** {eval_doc['data']} — source `{src['source']}`, sha256 `{src['sha256']}`, "
             f"licence: {src['licence']}.", ""]
    if src["source"] == "synthetic":
        lines += ["> This run used the **synthetic** workbook (same schema, random codes): the table below is NOT "
                  "the paper's Table III. Run with `data_source=remote` (and a `mirror`) for the real data.", ""]
    lines += ["## Table III (recomputed)", "", "Counts (percent of n = 115 or 7) after the spec's imputation rule; "
              "– = the item has a default and no Unknown column.", "", *_md_table(flat), "", "## Claims", "",
              "| claim | source | verdict | note |", "|---|---|---|---|"]
    for c in eval_doc["claims"]:
        lines.append(f"| {c['id']} | {c['source']} | **{c['verdict']}** | {c.get('note', '').replace('|', '/')} |")
    lines += ["", "## Figures", ""] + [f"![{name}]({path})" for name, path in figures.items()]
    lines += ["", "The power simulation and the rigour score are our own illustrations [R]; the paper contains no "
              "such computation.", ""]
    return "\n".join(lines)
