"""Report of the data_remix study: routing fractions over epochs, accuracy by arm (figures) and a markdown page with
the claims and the accuracy table. Input: ``metrics/eval.json`` only."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REMIX_ARMS = ("remix", "remix_code_lr")
#: metrics of parts an arm never trains (a unimodal head without loss, the other modality's encoder): not shown
UNTRAINED = {"joint_noaux": ("head_a_acc", "head_v_acc"), "solo_a": ("head_v_acc", "probe_v"),
             "solo_v": ("head_a_acc", "probe_a")}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def routing_figure(doc: Mapping[str, Any]):
    """Per dataset, for the Remix arms (mean over seeds, x = epoch): the share of the training set routed to the
    audio subset D_a, and on synth-AV the fractions of audio-corrupt rows in D_a and of visual-corrupt rows in D_v;
    the warm-up epochs (no routing) are shaded."""
    plt = _plt()
    datasets = list(doc.get("datasets", []))
    fig, axes = plt.subplots(1, max(1, len(datasets)), figsize=(5.0 * max(1, len(datasets)), 3.6), squeeze=False)
    for ax, ds in zip(axes[0], datasets):
        for arm in REMIX_ARMS:
            c = doc["curves"].get(ds, {}).get(arm)
            if not c:
                continue
            epochs = list(range(len(c["share_a"])))
            style = "-" if arm == "remix" else "--"
            ax.plot(epochs, [float("nan") if v is None else v for v in c["share_a"]], style, label=f"{arm}: |D_a|/N")
            for key, lab in (("route_a_given_acorrupt", "a-corrupt → D_a"), ("route_v_given_vcorrupt", "v-corrupt → D_v")):
                vals = [float("nan") if v is None else v for v in c[key]]
                if any(v == v for v in vals):
                    ax.plot(epochs, vals, style, label=f"{arm}: {lab}")
        ax.axvspan(-0.5, doc.get("warmup", 0) - 0.5, color="grey", alpha=0.15, label="warm-up")
        ax.set_ylim(-0.02, 1.05)
        ax.set_xlabel("epoch")
        ax.set_ylabel("fraction of training samples")
        ax.set_title(f"{ds}: routing (mean over {len(doc.get('seeds', []))} seeds)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="center right")
    return fig


def accuracy_figure(doc: Mapping[str, Any]):
    """Final test accuracy by arm (mean ± sd over seeds): fused head and the weak modality's linear probe, one
    panel per dataset."""
    plt = _plt()
    datasets = list(doc.get("datasets", []))
    fig, axes = plt.subplots(1, max(1, len(datasets)), figsize=(5.5 * max(1, len(datasets)), 3.6), squeeze=False)
    for ax, ds in zip(axes[0], datasets):
        arms = list(doc["summary"].get(ds, {}))
        for k, (key, lab) in enumerate((("fused_acc", "fused"), ("probe_v", "probe v (weak)"))):
            m = [None if key in UNTRAINED.get(a, ()) else doc["summary"][ds][a][key]["mean"] for a in arms]
            sd = [doc["summary"][ds][a][key]["sd"] for a in arms]
            xs = [i + (k - 0.5) * 0.38 for i in range(len(arms))]
            ax.bar(xs, [100 * (v if v is not None else float("nan")) for v in m], width=0.38,
                   yerr=[100 * s for s in sd], capsize=2, label=lab)
        ax.set_xticks(range(len(arms)), arms, rotation=30, fontsize=8)
        ax.set_ylabel("test accuracy (%)")
        ax.set_ylim(0, 105)
        ax.set_title(f"{ds}: accuracy by arm", fontsize=10)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7, loc="lower right")
    return fig


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def report_markdown(doc: Mapping[str, Any]) -> str:
    """The study's ``report.md``: claims, then the final test accuracies (%) of every arm per dataset (parts an arm
    never trains shown as "(untrained)"; for the solo arms "fused" is the fusion head with the other modality
    zeroed)."""
    lines = [f"# data_remix report (scale `{doc.get('scale', '?')}`, seeds {doc.get('seeds')})", "", "## Claims", "",
             "| entry | kind | verdict | statistic |", "|---|---|---|---|"]
    for c in doc.get("claims", []):
        s = c.get("statistic") or {}
        if "datasets" in s:
            txt = "; ".join(f"{ds}: d = {v['mean_pt']:+.2f} pt [{v['ci_low_pt']:+.2f}, {v['ci_high_pt']:+.2f}]"
                            for ds, v in s["datasets"].items())
        else:
            txt = ", ".join(f"{k} = {_fmt(v)}" for k, v in s.items() if not isinstance(v, list))
        lines.append(f"| {c['id']} | {c['kind']} | {c['verdict']} | {txt} |")
    for ds in doc.get("datasets", []):
        lines += ["", f"## {ds} (final test accuracy, %, mean ± sd over seeds)", "",
                  "| arm | fused | head a | head v | probe a | probe v |", "|---|---|---|---|---|---|"]
        for arm, m in doc["summary"].get(ds, {}).items():
            cells = []
            for key in ("fused_acc", "head_a_acc", "head_v_acc", "probe_a", "probe_v"):
                v = m[key]
                if key in UNTRAINED.get(arm, ()):
                    cells.append("(untrained)")
                else:
                    cells.append("–" if v["mean"] is None else f"{100 * v['mean']:.2f} ± {100 * v['sd']:.2f}")
            lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
