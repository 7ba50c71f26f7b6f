"""Report of the kernel_adaptation study: test discrepancy ε, spike ratio r and fitted rescaling u against χ
(means over the (task, seed) pairs, one line per arm), and a markdown page with the verdicts. Inputs:
``metrics/eval.json`` and ``claims.json``."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

YLABEL = {"eps": "eps_test(arm) - eps_test(Langevin)", "r": "spike ratio r along the label direction",
          "u": "fitted kernel rescaling u"}


def curve_figure(eval_doc: Mapping[str, Any], what: str):
    """``what`` = "eps" (ε_test of each arm minus the Langevin ensembles' ε_test: 0 = the theory matches the
    networks), "r" (r_label per arm) or "u" (u of the two rescaling arms) against χ; the mean over seeds (thick)
    and each seed (thin), one panel per task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = eval_doc["pairs"]
    tasks = sorted({p["task"] for p in pairs})
    fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(4.6 * max(1, len(tasks)), 3.6), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        sel = [p for p in pairs if p["task"] == task]
        chi = np.asarray(sel[0]["chi"])
        if what == "u":
            series = {arm: [p.get(f"u_{arm}") for p in sel] for arm in ("rescaling", "rescaling_langevin")}
        elif what == "eps":
            series = {arm: [np.subtract(p["eps_test"][arm], p["eps_test"]["langevin"]) for p in sel]
                      for arm in sel[0]["eps_test"] if arm != "langevin"}
            ax.axhline(0.0, color="black", lw=0.8)
        else:
            series = {arm: [p["r_label"][arm] for p in sel] for arm in sel[0]["r_label"]}
        for arm, rows in sorted(series.items()):
            if not rows or any(r is None for r in rows):
                continue
            vals = np.asarray(rows, dtype=float)
            style = "--" if arm.startswith("rescaling") else "-"  # rescaling coincides with adaptive_tree (check 3a)
            line, = ax.plot(chi, vals.mean(axis=0), marker="o", ms=3, lw=2, ls=style, label=arm)
            for row in vals:
                ax.plot(chi, row, color=line.get_color(), lw=0.7, alpha=0.35)
        ax.set_xscale("log")
        ax.set_xlabel("scaling chi (1 = standard, N = mean field)")
        ax.set_title(f"{task} ({len(sel)} seeds)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(YLABEL[what])
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "—" if v is None else str(v)


def report_markdown(eval_doc: Mapping[str, Any], claims_doc: Mapping[str, Any]) -> str:
    """Verdicts with key numbers, then the per-pair table (d_N, ρ and r(N) of both kernels, rescaling errors)."""
    lines = ["# kernel_adaptation — report", "",
             f"Paper: {claims_doc['paper'].get('title', '')} ({claims_doc['paper'].get('ref', '')}).",
             f"Scale `{claims_doc['scale']}`, seeds {claims_doc.get('seeds')}.", "",
             "| id | kind | verdict | key numbers |", "|---|---|---|---|"]
    for c in claims_doc["claims"]:
        numbers = ", ".join(f"{k} = {_fmt(v)}" for k, v in (c.get("key_numbers") or {}).items())
        lines.append(f"| {c['id']} | {c['kind']} | {c['verdict']} | {numbers} |")
    for c in claims_doc["claims"]:
        if c.get("note"):
            lines += ["", f"*{c['id']}*: {c['note']}"]
    lines += ["", "## Pairs", "", "| pair | d_N | rho_L | r_L(N) | rho_AD | r_AD(N) | rescaling err (theory) | "
              "\\|eps_rescL - eps_L\\|/eps_L |", "|---|---|---|---|---|---|---|---|"]
    for p in eval_doc["pairs"]:
        lines.append(f"| {p['task']} s{p['seed']} | {p['d_N']:+.4f} | {_fmt(p['rho_L'])} | {p['r_L_N']:.3f} | "
                     f"{_fmt(p['rho_AD'])} | {p['r_AD_N']:.3f} | {p['rescale_err_max']:.2e} | "
                     f"{_fmt(p.get('rescale_langevin_rel_max'))} |")
    sweep = eval_doc.get("width_sweep")
    if sweep:  # claim c5: |eps_AD - eps_L| at chi = N per width, and the per-pair slope on log-log axes
        widths = sweep["pairs"][0]["widths"]
        lines += ["", "## Width sweep (chi = N)", "",
                  "| pair | " + " | ".join(f"\\|eps_AD - eps_L\\| N={w}" for w in widths) + " | slope |",
                  "|---|" + "---|" * (len(widths) + 1)]
        for p in sweep["pairs"]:
            gaps = [abs(a - b) for a, b in zip(p["eps_AD"], p["eps_L"])]
            lines.append(f"| {p['task']} s{p['seed']} | " + " | ".join(f"{g:.3g}" for g in gaps)
                         + f" | {_fmt(p.get('slope'))} |")
    lines.append("")
    return "\n".join(lines)
