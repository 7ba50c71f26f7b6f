"""The cross-study claims table: ``claims.md``, ``claims.csv``, ``claims.html`` and ``claims_overview.png`` from every
``claims.json``.

The table is what a reviewer reads. It opens with one picture (:func:`overview_figure`: studies × entries coloured by
verdict, the tier and failed checks marked), then the headline, then two sections of claims with separate counts —
**on the paper's data** and **on stand-in data** (a miniature of the experiment: generators, toy copies, other
datasets) — so a stand-in verdict is never added to the paper headline; then the statements the scale could not
test (``untested``, never counted) and the *checks* (identities and mechanisms that hold by construction). Every
claim row names its deciding numbers, threshold, unit, n, CI method and any failed adequacy gate. Full statistics
stay in each ``claims.json``. ``claims.html`` is the same content for the Snakemake report.
"""
from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from .claims import CHECK, CLAIM, COUNT_KEYS, MIN_UNITS, UNTESTED, load_claims, tier, verdict_counts
from .io import atomic_path, write_text

COLUMNS = ["study", "kind", "claim", "source", "title", "verdict", "status", "holds", "tier", "key_numbers", "threshold",
           "evidence_n", "evidence_unit", "ci_method", "mde", "paper_data", "gates_failed", "testable_at", "scale",
           "seeds", "data_source", "config_hash", "paper", "data", "statement", "note"]
TIER_TITLES = {"paper_data": "On the paper's data",
               "stand_in": "On stand-in data (a miniature of the experiment)"}
KEY_NUMBERS_MAX = 160  # characters of the fallback "deciding numbers" cell when a study gives no key_numbers
NOTE_MAX = 220


def claims_table(paths: Sequence[Path]) -> pd.DataFrame:
    """One row per entry (claims and checks) across studies, in the order given."""
    rows = []
    for path in paths:
        doc = load_claims(path)
        paper = doc.get("paper") or {}
        for c in doc["claims"]:
            ev = c["evidence"]
            rows.append({
                "study": doc["study"], "kind": c["kind"], "claim": c["id"], "source": c["source"],
                "title": c.get("title") or c["statement"], "verdict": c["verdict"],
                "holds": "" if c.get("holds") is None else bool(c["holds"]),
                "tier": "" if c["kind"] == CHECK else tier(c),
                "key_numbers": key_numbers_text(c), "threshold": c["threshold"], "evidence_n": ev["n"],
                "evidence_unit": ev["unit"], "ci_method": c.get("ci_method") or ev.get("ci_method", ""),
                "mde": "" if ev.get("mde") is None else ev["mde"],
                "paper_data": "" if ev["paper_data"] is None else ev["paper_data"],
                "gates_failed": "; ".join(f"{g['name']} = {_fmt(g['value'])} (needs {g['threshold']})"
                                          for g in c.get("gates") or [] if not g["passed"]),
                "testable_at": c.get("testable_at", ""), "status": c.get("status", "tested"),
                "scale": doc["scale"], "seeds": seeds_text(doc.get("seeds") or []),
                "data_source": doc["data_source"], "config_hash": doc.get("config_hash", ""),
                "paper": paper.get("title", ""), "data": c["data"], "statement": c["statement"],
                "note": c.get("note", "")})
    return pd.DataFrame(rows, columns=COLUMNS)


def counts(table: pd.DataFrame, source: str | None = None, tier: str | None = None) -> dict[str, int]:
    """:func:`icml25.core.claims.verdict_counts` over the rows of a claims table."""
    entries = [{"kind": r["kind"], "source": r["source"], "verdict": r["verdict"], "holds": _holds(r["holds"]),
                "status": r["status"],
                "evidence": {"paper_data": r["paper_data"] if isinstance(r["paper_data"], bool) else None}}
               for _, r in table.iterrows()]
    return verdict_counts({"claims": entries}, source=source, tier=tier)


def _count_text(c: Mapping[str, int]) -> str:
    return (f"{c['claims_reproduced']} reproduced · {c['claims_not_reproduced']} not · "
            f"{c['claims_inconclusive']} inconclusive")


def headline(table: pd.DataFrame) -> str:
    """``on the paper's data: paper claims 1 reproduced · 0 not · 2 inconclusive; on stand-in data: paper claims
    ..., our claims ...; untested: 4; checks: 14 of 14 hold``. The tiers are never added together."""
    paper = counts(table, "paper", "paper_data")
    parts = [f"on the paper's data: paper claims {_count_text(paper)}"]
    ours_paper = counts(table, "ours", "paper_data")
    if sum(ours_paper[k] for k in COUNT_KEYS if k.startswith("claims_")):
        parts[-1] += f", our claims {_count_text(ours_paper)}"
    parts.append(f"on stand-in data: paper claims {_count_text(counts(table, 'paper', 'stand_in'))}, "
                 f"our claims {_count_text(counts(table, 'ours', 'stand_in'))}")
    c = counts(table)
    checks = int((table["kind"] == CHECK).sum())
    text = "; ".join(parts) + f"; untested: {c['untested']}; checks: {c['checks_hold']} of {checks} hold"
    if c["checks_failed"]:
        text += f" ({c['checks_failed']} FAIL)"
    return text


def seeds_text(seeds: Sequence[int]) -> str:
    """``0–19 (20)``, ``0, 2, 5 (3)``, ``0 (1)`` or ``""``."""
    s = sorted(set(int(x) for x in seeds))
    if not s:
        return ""
    if len(s) > 2 and s == list(range(s[0], s[-1] + 1)):
        return f"{s[0]}–{s[-1]} ({len(s)})"
    return f"{', '.join(map(str, s))} ({len(s)})"


def key_numbers_text(entry: Mapping[str, Any]) -> str:
    """The deciding numbers of an entry: its ``key_numbers`` (``k = v; ...``), else its statistic, shortened."""
    text = _fmt(entry.get("key_numbers") or entry.get("statistic"))
    return _shorten(text, KEY_NUMBERS_MAX)


def _fmt(value: Any) -> str:
    from .claims import format_numbers

    return format_numbers(value)


def _shorten(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _holds(value: Any) -> bool | None:
    """The ``holds`` cell as True / False / None ("" in the table means not a check or not computed)."""
    return None if isinstance(value, str) or value is None else bool(value)


def _check_result(row: Mapping[str, Any]) -> str:
    return {True: "hold", False: "FAIL", None: "not computed"}[_holds(row["holds"])]


def _evidence_cell(r: Mapping[str, Any]) -> str:
    text = f"{r['evidence_n']} {r['evidence_unit']}"
    if r["ci_method"]:
        text += f"; CI: {r['ci_method']}"
    if isinstance(r["mde"], float):
        text += f"; MDE {r['mde']:.3g}"
    return text


def _claim_row(r: Mapping[str, Any]) -> list[Any]:
    note = r["note"]
    if r["gates_failed"] and "adequacy gate" not in note:
        note = f"gate failed: {r['gates_failed']}; {note}"
    return [f"{r['claim']}: {r['title']}", r["source"], r["verdict"], r["key_numbers"], r["threshold"],
            _evidence_cell(r), _shorten(note, NOTE_MAX)]


def _study_meta(first: Mapping[str, Any]) -> list[tuple[str, str]]:
    return [("scale", first["scale"]), ("seeds", first["seeds"] or "–"), ("data source", first["data_source"]),
            ("config hash", first["config_hash"] or "–")]


CLAIM_HEADER = ["claim", "source", "verdict", "deciding numbers", "threshold", "evidence (unit, n, CI, MDE)", "note"]


def sections(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The document as data (shared by the markdown and HTML writers): per tier (paper's data, stand-in) the
    studies with claims in it and their rows; then the untested statements; then per study the checks."""
    out = []
    is_claim = (table["kind"] == CLAIM) & (table["status"] != UNTESTED)
    for tier_key, title in TIER_TITLES.items():
        part = table[is_claim & (table["tier"] == tier_key)]
        c_paper, c_ours = counts(part, "paper"), counts(part, "ours")
        studies = []
        for study, rows in part.groupby("study", sort=False):
            first = table[table["study"] == study].iloc[0]
            studies.append({"study": study, "paper": first["paper"], "meta": _study_meta(first),
                            "rows": [_claim_row(r) for _, r in rows.iterrows()]})
        out.append({"kind": "tier", "tier": tier_key, "title": title,
                    "count_line": f"paper claims: {_count_text(c_paper)}; our claims: {_count_text(c_ours)}",
                    "header": CLAIM_HEADER, "studies": studies})
    unt = table[table["status"] == UNTESTED]
    out.append({"kind": "untested", "title": "Untested at this scale (never counted)",
                "header": ["study", "claim", "source", "would be tested at", "why not here"],
                "rows": [[r["study"], f"{r['claim']}: {r['title']}", r["source"], r["testable_at"],
                          _shorten(r["note"], NOTE_MAX)] for _, r in unt.iterrows()]})
    checks = []
    for study, part in table[table["kind"] == CHECK].groupby("study", sort=False):
        failed = [r["claim"] for _, r in part.iterrows() if _holds(r["holds"]) is False]
        n_hold = sum(_holds(r["holds"]) is True for _, r in part.iterrows())
        checks.append({"study": study,
                       "line": f"{n_hold} of {len(part)} hold" + (f"; FAIL: {', '.join(failed)}" if failed else ""),
                       "rows": [[f"{r['claim']}: {r['title']}", _check_result(r), r["key_numbers"]]
                                for _, r in part.iterrows()]})
    out.append({"kind": "checks", "title": "Checks (identities and mechanisms: a failure is a bug)",
                "header": ["check", "result", "numbers"], "studies": checks})
    return out


INTRO = ("Computed by each study's evaluate stage from held-out metrics; full statistics (per-arm means, intervals, "
         "per-unit values) are in each study's `claims.json`. A *claim* is something a paper states (or our "
         "illustration of it). It is reproduced or not only with at least {n} independent units (training seeds, "
         "simulated datasets, images, series) and when its adequacy gates pass (the testbed can show the effect at "
         "all); otherwise it is inconclusive and the note names the rule or the gate. Claims decided **on the "
         "paper's data** and **on stand-in data** (a miniature of the experiment) are counted apart: a stand-in "
         "verdict says the method behaves as claimed on the miniature, not that the paper's table holds. "
         "*Untested* statements need a larger scale and are never counted. A *check* is an identity or mechanism "
         "that must hold by construction; a failing check is a bug, not a finding.").format(n=MIN_UNITS)
FIGURE_NAME = "claims_overview.png"


def to_markdown(table: pd.DataFrame, figure: str | None = None) -> str:
    """The claims table as markdown: overview figure (if given), headline, tier sections, untested, checks."""
    lines = ["# Claims", ""]
    if figure:
        lines += [f"![studies × claims, coloured by verdict]({figure})", ""]
    lines += [f"**{headline(table)}**", "", INTRO, ""]
    for sec in sections(table):
        lines += [f"## {sec['title']}", ""]
        if sec["kind"] == "tier":
            lines += [f"**{sec['count_line']}**", ""]
            for st in sec["studies"]:
                lines += [f"### {st['study']}" + (f" — {st['paper']}" if st["paper"] else ""), "",
                          " · ".join(f"{k} `{v}`" for k, v in st["meta"]), ""]
                lines += _md_table(sec["header"], st["rows"], bold_col=2) + [""]
            if not sec["studies"]:
                lines += ["(none at this scale)", ""]
        elif sec["kind"] == "untested":
            lines += (_md_table(sec["header"], sec["rows"]) if sec["rows"] else ["(none)"]) + [""]
        else:
            for st in sec["studies"]:
                lines += [f"### {st['study']} — checks: {st['line']}", ""]
                lines += _md_table(sec["header"], st["rows"]) + [""]
    return "\n".join(lines)


def _md_cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _md_table(header: list[str], rows: list[list[Any]], bold_col: int | None = None) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [f"**{c}**" if i == bold_col else c for i, c in enumerate(row)]
        out.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    return out


def to_html(table: pd.DataFrame, figure_b64: str | None = None) -> str:
    """The same content as :func:`to_markdown`, as a self-contained HTML fragment (for the Snakemake report); the
    overview figure is embedded (base64 PNG) so the report's first page shows all studies at a glance."""
    e = html.escape
    parts = ['<div class="icml25-claims" style="max-width: 100%; overflow-x: auto;">', "<h1>Claims</h1>"]
    if figure_b64:
        parts.append(f'<img alt="studies × claims, coloured by verdict" style="max-width: 100%;" '
                     f'src="data:image/png;base64,{figure_b64}"/>')
    parts += [f"<p><strong>{e(headline(table))}</strong></p>", f"<p>{e(INTRO.replace('`', '').replace('**', ''))}</p>"]
    for sec in sections(table):
        parts.append(f"<h2>{e(sec['title'])}</h2>")
        if sec["kind"] == "tier":
            parts.append(f"<p><strong>{e(sec['count_line'])}</strong></p>")
            for st in sec["studies"]:
                parts.append(f"<h3>{e(st['study'])}" + (f" — {e(st['paper'])}" if st["paper"] else "") + "</h3>")
                parts.append("<p>" + " · ".join(f"{e(k)} <code>{e(str(v))}</code>" for k, v in st["meta"]) + "</p>")
                parts.append(_html_table(sec["header"], st["rows"]))
        elif sec["kind"] == "untested":
            parts.append(_html_table(sec["header"], sec["rows"]) if sec["rows"] else "<p>(none)</p>")
        else:
            for st in sec["studies"]:
                parts.append(f"<h3>{e(st['study'])} — checks: {e(st['line'])}</h3>")
                parts.append(_html_table(sec["header"], st["rows"]))
    parts.append("</div>")
    return "\n".join(parts) + "\n"


def _html_table(header: list[str], rows: list[list[Any]]) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table border="1"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


VERDICT_COLOURS = {"reproduced": "#3a9d5d", "not reproduced": "#d0473d", "inconclusive": "#e8c547",
                   "untested": "#ffffff", "hold": "#9ec5e8", "FAIL": "#111111", "not computed": "#cccccc"}


def overview_figure(table: pd.DataFrame, path: Path) -> Path:
    """One picture of every study: a row per study, a cell per entry (claims first, then checks), coloured by
    verdict (checks: light blue when they hold, black when they FAIL); claims on the paper's data are solid,
    stand-in claims hatched, untested cells white with a dashed edge. Written atomically as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    from .io import save_figure

    studies = list(dict.fromkeys(table["study"]))
    order = {CLAIM: 0, CHECK: 1}
    width = max((int((table["study"] == s).sum()) for s in studies), default=1)
    fig, ax = plt.subplots(figsize=(2.2 + 0.55 * width, 0.8 + 0.38 * max(len(studies), 1)))
    for i, study in enumerate(studies):
        rows = table[table["study"] == study]
        rows = rows.assign(_k=rows["kind"].map(order)).sort_values("_k", kind="stable")
        for j, (_, r) in enumerate(rows.iterrows()):
            if r["kind"] == CHECK:
                key, hatch, edge, ls = _check_result(r), None, "#555555", "-"
            else:
                key = UNTESTED if r["status"] == UNTESTED else r["verdict"]
                hatch = "////" if (r["tier"] == "stand_in" and key != UNTESTED) else None
                edge, ls = ("#888888", "--") if key == UNTESTED else ("#333333", "-")
            ax.add_patch(Rectangle((j, len(studies) - 1 - i), 0.92, 0.86, facecolor=VERDICT_COLOURS[key],
                                   hatch=hatch, edgecolor=edge, linestyle=ls, linewidth=0.8))
            label = str(r["claim"])[:6]
            ax.text(j + 0.46, len(studies) - 1 - i + 0.43, label, ha="center", va="center", fontsize=5.5,
                    color="white" if key in ("FAIL", "not reproduced") else "black")
    ax.set_xlim(-0.1, width + 0.1)
    ax.set_ylim(-0.1, len(studies))
    ax.set_yticks([len(studies) - 1 - i + 0.43 for i in range(len(studies))], studies, fontsize=8)
    ax.set_xticks([])
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    handles = [Patch(facecolor=VERDICT_COLOURS[k], edgecolor="#333333", label=k)
               for k in ("reproduced", "not reproduced", "inconclusive")]
    handles += [Patch(facecolor="#ffffff", edgecolor="#333333", hatch="////", label="stand-in data"),
                Patch(facecolor="#ffffff", edgecolor="#888888", linestyle="--", label="untested"),
                Patch(facecolor=VERDICT_COLOURS["hold"], edgecolor="#555555", label="check holds"),
                Patch(facecolor=VERDICT_COLOURS["FAIL"], edgecolor="#555555", label="check FAILS")]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=4, fontsize=7, frameon=False)
    ax.set_title("Claims at a glance: studies × claims (then checks), coloured by verdict; solid = paper's data",
                 fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return path


def run_summary(paths: Sequence[Path], md: Path, csv: Path, results_dir: Path, track: bool = True,
                html_out: Path | None = None, figure: Path | None = None) -> pd.DataFrame:
    """Write claims.md, claims.csv (and claims.html, and the overview figure ``figure``, by default
    ``claims_overview.png`` beside ``md``) atomically; log the verdict counts (:func:`summary_metrics`) and the
    files to the ``icml25/summary`` experiment."""
    import base64

    table = claims_table(paths)
    figure = Path(figure) if figure is not None else md.parent / FIGURE_NAME
    overview_figure(table, figure)
    write_text(md, to_markdown(table, figure=figure.name))
    if html_out is not None:
        write_text(html_out, to_html(table, base64.b64encode(figure.read_bytes()).decode("ascii")))
    with atomic_path(csv) as tmp:
        table.to_csv(tmp, index=False)
    if track:
        from .tracking import stage_run

        with stage_run("summary", "summary", results_dir=results_dir) as run:
            run.log_metrics(summary_metrics(table))
            run.set_tags({"headline": headline(table)})
            for path in (md, csv, html_out, figure):
                if path is not None:
                    run.log_artifact(path)
            from .mlflow_native import log_claims_table

            log_claims_table(run, table)  # the table the artifact view renders (issue 40)
    return table


def summary_metrics(table: pd.DataFrame) -> dict[str, int]:
    """``verdicts/<key>`` over all entries, ``verdicts/<source>/claims_*`` per claim source, and
    ``verdicts/<tier>/<source>/claims_*`` per tier (paper_data, stand_in) and source."""
    out = {f"verdicts/{k}": v for k, v in counts(table).items()}
    for source in ("paper", "ours"):
        c = counts(table, source)
        out |= {f"verdicts/{source}/{k}": c[k] for k in COUNT_KEYS if k.startswith("claims_")}
        for tier_key in TIER_TITLES:
            c = counts(table, source, tier_key)
            out |= {f"verdicts/{tier_key}/{source}/{k}": c[k] for k in COUNT_KEYS if k.startswith("claims_")}
    return out
