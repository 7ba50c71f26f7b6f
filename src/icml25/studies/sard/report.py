"""Report of the sard study: the held-out deferral loss against the attack budget ε (figure, one panel per dataset)
and a markdown page with the claims and the metric table. Input: ``metrics/eval.json`` only."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _eps_key(eps: float) -> str:
    return f"eps{float(eps):g}"


def def_loss_figure(doc: Mapping[str, Any]):
    """Mean ± sd over seeds of the adversarial deferral loss (untargeted PGD) at each ε, one line per arm and one
    panel per dataset, with the oracle deferral loss E[min_j c_j] as a dotted line; returns a matplotlib figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(doc.get("datasets", []))
    fig, axes = plt.subplots(1, max(1, len(datasets)), figsize=(5.0 * max(1, len(datasets)), 3.8), squeeze=False)
    markers = "os^Dv"
    for ax, ds in zip(axes[0], datasets):
        arms = doc["summary"].get(ds, {})
        eps = [float(e) for e in doc["eps"]]
        for i, (arm, m) in enumerate(arms.items()):
            mean = [m[f"def_loss_adv_{_eps_key(e)}"]["mean"] for e in eps]
            sd = [m[f"def_loss_adv_{_eps_key(e)}"]["sd"] for e in eps]
            dodge = (i - (len(arms) - 1) / 2) * 0.003
            ax.errorbar([e + dodge for e in eps], mean, yerr=sd, marker=markers[i % len(markers)], capsize=3,
                        label=arm, alpha=0.85)
        oracle = [v for k, v in doc.get("per_seed", {}).items() if k.startswith(f"{ds}/")]
        if oracle:
            level = sum(v["agents/oracle_def_loss"] for v in oracle) / len(oracle)
            ax.axhline(level, ls=":", color="grey", label="oracle E[min c]")
        ax.set_xlabel("attack budget ε (ℓ∞)")
        ax.set_ylabel("test deferral loss under attack")
        ax.set_title(f"{ds} (mean ± sd, {len(doc.get('seeds', []))} seeds)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    return fig


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def report_markdown(doc: Mapping[str, Any]) -> str:
    """The study's ``report.md``: claims (with the secondary sard_ce analysis), then per dataset the held-out
    metrics of every arm (mean ± sd over seeds)."""
    lines = [f"# sard report (scale `{doc.get('scale', '?')}`, seeds {doc.get('seeds')})", "", "## Claims", "",
             "| entry | kind | verdict | d (sard − clean_l2d) | 95% CI (t over seeds) | gates failed | sard_ce (secondary) "
             "| note |",
             "|---|---|---|---|---|---|---|---|"]
    for c in doc.get("claims", []):
        s = c.get("statistic") or {}
        d = s.get("mean_diff")
        ci = f"[{_fmt(s.get('ci_low'))}, {_fmt(s.get('ci_high'))}]" if "ci_low" in s else "–"
        sec = s.get("secondary_sard_ce")
        sec_txt = (f"{sec['verdict']}, d = {_fmt(sec.get('mean_diff'))}" if sec else "–")
        lines.append(f"| {c['id']} | {c['kind']} | {c['verdict']} | {_fmt(d)} | {ci} | "
                     f"{', '.join(c.get('gates_failed') or []) or '–'} | {sec_txt} | {c.get('note') or ''} |")
    eps = [float(e) for e in doc.get("eps", [])]
    for ds in doc.get("datasets", []):
        arms = doc["summary"].get(ds, {})
        t = doc.get("targets", {}).get(ds)
        lines += ["", f"## {ds}", "",
                  "| arm | clean | " + " | ".join(f"ε = {e:g}" for e in eps) + f" | targeted → {t} | routed to g |",
                  "|---|---|" + "---|" * len(eps) + "---|---|"]
        for arm, m in arms.items():
            def ms(key: str) -> str:
                v = m.get(key, {})
                return "–" if v.get("mean") is None else f"{v['mean']:.3f} ± {v['sd']:.3f}"
            lines.append(f"| {arm} | {ms('def_loss_clean')} | "
                         + " | ".join(ms(f"def_loss_adv_{_eps_key(e)}") for e in eps)
                         + f" | {ms(f'targeted_success_{t}')} | {ms('alloc_rate_0')} |")
    ident = doc.get("identities", {})
    if ident:
        lines += ["", "## Claim-4 identities", "", f"- surrogate bound: min gap comp-sum "
                  f"{_fmt(ident.get('min_gap_comp_sum'))}, ρ-margin {_fmt(ident.get('min_gap_rho_margin'))} "
                  f"over {ident.get('n')} rows",
                  f"- Bayes allocation: max |grad| at log τ {_fmt(ident.get('bayes_max_abs_grad'))}, argmax = "
                  f"argmin cost on a fraction {_fmt(ident.get('bayes_argmax_is_argmin_cost'))} of rows"]
    return "\n".join(lines) + "\n"
