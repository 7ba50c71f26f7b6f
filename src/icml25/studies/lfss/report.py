"""Report of the lfss study: stability of correctly vs wrongly clustered samples (figure), ACC and NMI per epoch
against the adequacy gate (figure), and a markdown page with the gate, the claims and the per-seed table.

Inputs: ``metrics/eval.json`` and the stability records of the train outputs.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

ARM_ORDER = ("base", "lfss", "lfss_no_ss", "lfss_no_proto")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def stability_figure(stability: Mapping[tuple[str, int, int], Mapping[str, np.ndarray]]):
    """Per arm: histograms of the stability s at the last recorded epoch, pooled over seeds, for samples whose
    Hungarian-mapped k-means label is correct and for misclustered ones (claim 1 says the latter sit lower)."""
    plt = _plt()
    arms = [a for a in ARM_ORDER if any(k[0] == a for k in stability)]
    fig, axes = plt.subplots(1, max(len(arms), 1), figsize=(4.6 * max(len(arms), 1), 3.4), squeeze=False)
    for ax, arm in zip(axes[0], arms):
        last = {s: max(e for (a, s2, e) in stability if a == arm and s2 == s) for (a, s, _) in stability if a == arm}
        s_all = np.concatenate([stability[arm, s, e]["s"] for s, e in last.items()]).astype(float)
        c_all = np.concatenate([stability[arm, s, e]["correct"] for s, e in last.items()]).astype(bool)
        lo = float(np.quantile(s_all, 0.005)) if s_all.size else 0.0
        bins = np.linspace(min(lo, 0.99), 1.0, 41)
        for mask, label in ((c_all, "correct"), (~c_all, "misclustered")):
            if mask.any():
                ax.hist(np.clip(s_all[mask], bins[0], 1.0), bins=bins, density=True, alpha=0.55,
                        label=f"{label} ({mask.sum()})")
        ax.set_title(f"{arm}: stability at the last epoch (seeds {sorted(last)})", fontsize=9)
        ax.set_xlabel("s = cos(previous, current feature)")
        ax.set_ylabel("density")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def curves_figure(eval_doc: Mapping[str, Any]):
    """ACC and NMI of the per-epoch k-means (seed 0 of k-means) per arm, mean over seeds with the seeds' range,
    and the gate threshold 0.9 x the PCA-50 k-means ACC."""
    plt = _plt()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.6))
    for arm in [a for a in ARM_ORDER if a in eval_doc.get("arms", {})]:
        curves = eval_doc["arms"][arm]["curves"]
        for axis, metric in ((ax, "acc"), (bx, "nmi")):
            vals = np.array([[c[metric] for c in cs] for cs in curves.values()])
            epochs = [c["epoch"] for c in next(iter(curves.values()))]
            line, = axis.plot(epochs, vals.mean(axis=0), label=arm)
            axis.fill_between(epochs, vals.min(axis=0), vals.max(axis=0), color=line.get_color(), alpha=0.15)
    gate = eval_doc.get("gate", {})
    if "threshold" in gate:
        ax.axhline(gate["threshold"], color="k", ls="--", lw=0.8, label="gate: 0.9 x PCA-50 k-means ACC")
    for axis, name in ((ax, "ACC"), (bx, "NMI")):
        axis.set_xlabel("epoch")
        axis.set_ylabel(f"k-means {name} (training images)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    ax.set_title("clustering accuracy per epoch (mean, range over seeds)", fontsize=9)
    bx.set_title("NMI per epoch", fontsize=9)
    fig.tight_layout()
    return fig


def report_markdown(eval_doc: Mapping[str, Any]) -> str:
    """The gate, the claims and per arm x seed the final ACC/NMI/ARI (mean of the k-means runs) and claim-1
    statistics."""
    gate = eval_doc.get("gate", {})
    lines = [f"# lfss — {eval_doc.get('scale', '?')} scale", "", "## Adequacy gate", ""]
    if "threshold" in gate:
        lines.append(f"{'passes' if gate['passes'] else 'fails'}: base final ACC {gate['base_final_acc_mean']:.3f} "
                     f"vs threshold {gate['threshold']:.3f} (0.9 x PCA-50 k-means ACC {gate['reference_acc']:.3f}); "
                     f"largest drop from the best epoch {100 * gate['max_drop']:.1f} pts (limit 5).")
    lines += ["", "## Claims", "", "| id | verdict | key numbers | note |", "|---|---|---|---|"]
    for c in eval_doc.get("claims", []):
        key = "; ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                        for k, v in (c.get("key_numbers") or {}).items())
        lines.append(f"| {c['id']} ({c['kind']}) | {c['verdict']} | {key} | {c.get('note', '')} |")
    lines += ["", "## Per arm and seed", "", "| arm | seed | ACC | NMI | ARI | AUROC(s→c) | gap |",
              "|---|---|---|---|---|---|---|"]
    for arm in [a for a in ARM_ORDER if a in eval_doc.get("arms", {})]:
        d = eval_doc["arms"][arm]
        for seed in sorted(d["final"], key=int):
            f, c1 = d["final"][seed], d["claim1"][seed]
            lines.append(f"| {arm} | {seed} | {f['acc']:.3f} | {f['nmi']:.3f} | {f['ari']:.3f} | {c1['auroc']:.3f} | "
                         f"{c1['gap']:.3f} |")
    refs = eval_doc.get("references", {})
    if refs:
        lines += ["", "PCA-50 cosine k-means reference ACC per seed: "
                  + ", ".join(f"{s}: {r['acc']:.3f}" for s, r in sorted(refs.items(), key=lambda t: int(t[0])))]
    return "\n".join(lines) + "\n"
