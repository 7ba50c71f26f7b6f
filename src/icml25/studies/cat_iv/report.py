"""Report of the cat_iv study: F1 against n per arm (figure) and a markdown page with the claims, the F1 table and
the real-data selections. Input: ``metrics/eval.json`` only."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .evaluate import CLAIM_SETTING


def f1_figure(eval_doc: Mapping[str, Any], setting: str = CLAIM_SETTING):
    """Mean F1 (95% Student-t CI over the simulated datasets as error bars) against n, one line per arm; returns a
    matplotlib figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    arms = eval_doc.get("synthetic", {}).get(setting, {})
    markers, all_n = "os^Dvx<>", set()
    for i, (arm, by_n) in enumerate(sorted(arms.items())):
        ns = sorted(by_n, key=int)
        all_n.update(int(n) for n in ns)
        mean = [by_n[n]["f1"]["mean"] for n in ns]
        low = [m - by_n[n]["f1"]["ci_low"] for m, n in zip(mean, ns)]
        high = [by_n[n]["f1"]["ci_high"] - m for m, n in zip(mean, ns)]
        dodge = 1 + 0.025 * (i - (len(arms) - 1) / 2)  # separate overlapping arms horizontally
        ax.errorbar([int(n) * dodge for n in ns], mean, yerr=[low, high], marker=markers[i % len(markers)],
                    capsize=3, label=arm, alpha=0.85)
    ax.set_xscale("log")
    if all_n:
        ax.set_xticks(sorted(all_n), [str(n) for n in sorted(all_n)])
        ax.minorticks_off()
    ax.set_xlabel("sample size n")
    ax.set_ylabel("F1 of the selected IV set")
    ax.set_ylim(-0.02, 1.05)
    ax.set_title(f"{setting}: F1 vs n (mean, 95% t CI over datasets)")
    ax.grid(alpha=0.3)
    if arms:
        ax.legend(fontsize=8, loc="lower right")
    return fig


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, dict):
        return "; ".join(f"{k}={_fmt(x)}" for k, x in v.items())
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def report_markdown(eval_doc: Mapping[str, Any]) -> str:
    """The study's ``report.md``: claims, F1/exact table per setting, real-data selection table."""
    lines = [f"# cat_iv report (scale `{eval_doc.get('scale', '?')}`)", "", "## Claims", "",
             "| claim | verdict | statistic | note |", "|---|---|---|---|"]
    for c in eval_doc.get("claims", []):
        lines.append(f"| {c['id']} | **{c['verdict']}** | {_fmt(c['statistic'])} | {c.get('note', '')} |")
    for setting, arms in eval_doc.get("synthetic", {}).items():
        lines += ["", f"## {setting}: mean F1 / exact recovery (seeds)", "", "| arm | n | F1 (95% CI) | exact | "
                  "runtime s | seeds |", "|---|---|---|---|---|---|"]
        for arm, by_n in sorted(arms.items()):
            for n in sorted(by_n, key=int):
                m = by_n[n]
                lines.append(f"| {arm} | {n} | {m['f1']['mean']:.3f} ({m['f1']['ci_low']:.3f}, "
                             f"{m['f1']['ci_high']:.3f}) | {m['exact']['mean']:.3f} | {m['runtime_s']:.3f} | "
                             f"{len(m['seeds'])} |")
    real = eval_doc.get("real", {})
    if real:
        lines += ["", "## Real data: selections (K = 2 for known-K arms) and post-selection 2SLS", "",
                  "| arm | dataset | rows | selected | 2SLS effect of educ on lwage |", "|---|---|---|---|---|"]
        for arm, by_ds in sorted(real.items()):
            for ds, r in sorted(by_ds.items()):
                lines.append(f"| {arm} | {ds} | {r['n_rows']} | {', '.join(r['selected_names']) or '(none)'} | "
                             f"{_fmt(r['beta_2sls'])} |")
    lines += ["", "![F1 vs n](figures/f1_vs_n.png)", ""]
    return "\n".join(lines)
