"""Report of the morphing_flow study: the distributions the backbone sees (figure), the learned splines (figure),
example forecasts (figure) and a markdown page with the claims and the metric table.

Inputs: ``metrics/eval.json`` and the train records (the first seed's histograms, curves and example forecast).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .evaluate import FLOW_GRID, HIST_EDGES, PAPER_CLAIM_DATASET

ARM_ORDER = ("revin_linear", "mof_flow", "mof_linear", "mof_linear_nonll", "dishts_linear", "san_linear", "fan_linear")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _first_seed(records: list[dict[str, Any]], dataset: str) -> dict[str, dict[str, Any]]:
    """{arm: record} of ``dataset`` on the Linear backbone (else any), shortest horizon, smallest seed."""
    rs = [r for r in records if r["dataset"] == dataset]
    if any(r["backbone"] == "linear" for r in rs):
        rs = [r for r in rs if r["backbone"] == "linear"]
    if not rs:
        return {}
    h = min(r["pred_len"] for r in rs)
    out: dict[str, dict[str, Any]] = {}
    for r in sorted((r for r in rs if r["pred_len"] == h), key=lambda r: r["seed"]):
        out.setdefault(r["arm"], r)
    return out


def _datasets(records: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(r["dataset"] for r in records))


def kurtosis_figure(records: list[dict[str, Any]], eval_doc: Mapping[str, Any]):
    """Left: density (log scale) of the backbone inputs on the test windows of the claim dataset (first seed):
    x~ after instance norm for revin_linear, z after Flow for the MoF arms, with N(0, 1) for reference. Right:
    mean per-channel excess kurtosis of the backbone inputs per arm and dataset (mean over seeds)."""
    plt = _plt()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 3.8))
    ds = PAPER_CLAIM_DATASET if any(r["dataset"] == PAPER_CLAIM_DATASET for r in records) else _datasets(records)[0]
    first = _first_seed(records, ds)
    centers, width = (HIST_EDGES[1:] + HIST_EDGES[:-1]) / 2, np.diff(HIST_EDGES)
    for arm in ARM_ORDER:
        if arm in first:
            counts = np.asarray(first[arm]["figure"]["hist_z"], dtype=float)
            dens = counts / max(counts.sum(), 1) / width
            k = first[arm]["metrics"]["kurtosis_in"]
            label = f"{arm} ({'x~' if arm == 'revin_linear' else 'z'}; kurtosis {k:.2f})"
            ax.plot(centers, np.where(dens > 0, dens, np.nan), label=label, lw=1.2)
    ax.plot(centers, np.exp(-centers ** 2 / 2) / np.sqrt(2 * np.pi), "k--", lw=0.8, label="N(0, 1)")
    ax.set_yscale("log")
    ax.set_xlabel("backbone input value")
    ax.set_ylabel("density")
    ax.set_title(f"{ds}: what the backbone sees (test windows, seed {min((r['seed'] for r in first.values()), default=0)})")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    cells = eval_doc.get("cells", {})
    names = list(cells)
    arms = [a for a in ARM_ORDER if any(a in cells[c] for c in names)]
    w = 0.8 / max(len(arms), 1)
    for i, arm in enumerate(arms):
        vals = [cells[c].get(arm, {}).get("kurtosis_in", {}).get("mean", np.nan) for c in names]
        bx.bar(np.arange(len(names)) + (i - (len(arms) - 1) / 2) * w, vals, w, label=arm)
    bx.set_xticks(range(len(names)), names, rotation=20 if len(names) > 3 else 0, fontsize=8)
    bx.set_ylabel("excess kurtosis of backbone inputs")
    bx.set_title("mean over seeds and channels")
    bx.legend(fontsize=7)
    bx.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig


def flow_figure(records: list[dict[str, Any]]):
    """The learned (unmodulated) spline z = Flow(x~) per channel of mof_flow and mof_linear on each dataset (first
    seed), with the identity for reference: slopes below 1 in the tails compress extremes."""
    plt = _plt()
    datasets = [d for d in _datasets(records) if any(r["figure"]["flow_curve"] for r in records if r["dataset"] == d)]
    arms = [a for a in ARM_ORDER if a != "revin_linear"]
    fig, axes = plt.subplots(max(len(datasets), 1), len(arms), figsize=(3.4 * len(arms), 3.0 * max(len(datasets), 1)),
                             squeeze=False)
    for i, ds in enumerate(datasets):
        first = _first_seed(records, ds)
        for j, arm in enumerate(arms):
            ax = axes[i, j]
            ax.plot(FLOW_GRID, FLOW_GRID, "k:", lw=0.8)
            if arm in first and first[arm]["figure"]["flow_curve"]:
                for c, curve in enumerate(first[arm]["figure"]["flow_curve"]):
                    ax.plot(FLOW_GRID, curve, lw=1, label=f"ch {c}" if c < 8 else None)
            ax.set_title(f"{ds} · {arm}", fontsize=9)
            ax.set_xlabel("x~ (instance-normalised)")
            ax.set_ylabel("z = Flow(x~)")
            ax.grid(alpha=0.3)
        axes[i, 0].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return fig


def forecast_figure(records: list[dict[str, Any]]):
    """The last test window of each dataset (last channel; synth: inside the forced high-variance regime):
    lookback, truth and each arm's forecast (first seed), in z-scored units."""
    plt = _plt()
    datasets = _datasets(records)
    fig, axes = plt.subplots(len(datasets), 1, figsize=(9, 3.0 * len(datasets)), squeeze=False)
    for ax, ds in zip(axes[:, 0], datasets):
        first = _first_seed(records, ds)
        if not first:
            continue
        ex = next(iter(first.values()))["figure"]["example"]
        L, H = len(ex["x"]), len(ex["y"])
        ax.plot(range(L), ex["x"], color="0.5", lw=1, label="lookback")
        ax.plot(range(L, L + H), ex["y"], color="k", lw=1.4, label="truth")
        for arm in ARM_ORDER:
            if arm in first:
                ax.plot(range(L, L + H), first[arm]["figure"]["example"]["y_hat"], lw=1.1, label=arm)
        ax.axvline(L - 0.5, color="0.7", lw=0.8)
        ax.set_title(f"{ds}: last test window, last channel")
        ax.set_xlabel("time step")
        ax.set_ylabel("z-scored value")
        ax.legend(fontsize=7, ncol=3)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def report_markdown(eval_doc: Mapping[str, Any]) -> str:
    """Claims (verdict and key numbers) and, per cell, each arm's test MSE, MAE, input kurtosis and relative MSE
    change against revin_linear (means over seeds)."""
    lines = [f"# morphing_flow — {eval_doc.get('scale', '?')} scale", "", "## Claims", "",
             "| id | verdict | key numbers | note |", "|---|---|---|---|"]
    for c in eval_doc.get("claims", []):
        key = "; ".join(f"{k} {_fmt(v)}" for k, v in (c.get("key_numbers") or {}).items())
        lines.append(f"| {c['id']} ({c['kind']}) | {c['verdict']} | {key} | {c.get('note', '')} |")
    lines += ["", "## Test metrics (mean over seeds)", "",
              "| cell | arm | test MSE | test MAE | kurtosis of backbone inputs | MSE vs revin_linear | "
              "forced-regime MSE | epochs |", "|---|---|---|---|---|---|---|---|"]
    for cell, arms in eval_doc.get("cells", {}).items():
        for arm in [a for a in ARM_ORDER if a in arms]:
            m = arms[arm]
            rel = m.get("rel_mse_vs_revin", {}).get("mean")
            seg = m.get("segment_mse", {}).get("mean")
            lines.append(f"| {cell} | {arm} | {m['test_mse']['mean']:.4f} | {m['test_mae']['mean']:.4f} | "
                         f"{m['kurtosis_in']['mean']:.3f} | {'' if rel is None else f'{100 * rel:+.2f} %'} | "
                         f"{'' if seg is None else f'{seg:.4f}'} | {m['epochs_run']['mean']:.1f} |")
    return "\n".join(lines) + "\n"
