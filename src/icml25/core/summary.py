"""The cross-study claims table: ``claims.md``, ``claims.csv`` and ``claims.html`` from every ``claims.json``.

The table is what a reviewer reads. Per study: the paper, scale, seeds, data source and config hash; one row per
*claim* (short statement, verdict, the few numbers that decide it, threshold, evidence); the *checks* (identities
and mechanisms that hold by construction) in a compact second table. The headline counts claims and checks
separately (``paper claims: X reproduced · Y not · Z inconclusive; our claims: ...; checks: a of b hold``), so an
identity that could not have failed is never counted as a reproduced claim. Full statistics stay in each
``claims.json``. ``claims.html`` is the same content for the Snakemake report.
"""
from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from .claims import CHECK, CLAIM, COUNT_KEYS, MIN_UNITS, load_claims, verdict_counts
from .io import atomic_path, write_text

COLUMNS = ["study", "kind", "claim", "source", "title", "verdict", "holds", "key_numbers", "threshold",
           "evidence_n", "evidence_unit", "paper_data", "scale", "seeds", "data_source", "config_hash", "paper",
           "data", "statement", "note"]
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
                "key_numbers": key_numbers_text(c), "threshold": c["threshold"], "evidence_n": ev["n"],
                "evidence_unit": ev["unit"], "paper_data": "" if ev["paper_data"] is None else ev["paper_data"],
                "scale": doc["scale"], "seeds": seeds_text(doc.get("seeds") or []),
                "data_source": doc["data_source"], "config_hash": doc.get("config_hash", ""),
                "paper": paper.get("title", ""), "data": c["data"], "statement": c["statement"],
                "note": c.get("note", "")})
    return pd.DataFrame(rows, columns=COLUMNS)


def counts(table: pd.DataFrame, source: str | None = None) -> dict[str, int]:
    """:func:`icml25.core.claims.verdict_counts` over the rows of a claims table."""
    entries = [{"kind": r["kind"], "source": r["source"], "verdict": r["verdict"],
                "holds": _holds(r["holds"])} for _, r in table.iterrows()]
    return verdict_counts({"claims": entries}, source=source)


def headline(table: pd.DataFrame) -> str:
    """``paper claims: 3 reproduced · 2 not · 1 inconclusive; our claims: ...; checks: 14 of 14 hold``."""
    parts = []
    for source, label in (("paper", "paper claims"), ("ours", "our claims")):
        c = counts(table, source)
        parts.append(f"{label}: {c['claims_reproduced']} reproduced · {c['claims_not_reproduced']} not · "
                     f"{c['claims_inconclusive']} inconclusive")
    c = counts(table)
    checks = int((table["kind"] == CHECK).sum())
    text = "; ".join(parts) + f"; checks: {c['checks_hold']} of {checks} hold"
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
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, Mapping):
        return "; ".join(f"{k} = {_fmt(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return "" if value is None else str(value)


def _shorten(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _holds(value: Any) -> bool | None:
    """The ``holds`` cell as True / False / None ("" in the table means not a check or not computed)."""
    return None if isinstance(value, str) or value is None else bool(value)


def _check_result(row: Mapping[str, Any]) -> str:
    return {True: "hold", False: "FAIL", None: "not computed"}[_holds(row["holds"])]


def sections(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The document as data (shared by the markdown and HTML writers): headline, then per study its header
    fields, claim rows and check rows."""
    out = []
    for study, part in table.groupby("study", sort=False):
        first = part.iloc[0]
        claims = part[part["kind"] == CLAIM]
        checks = part[part["kind"] == CHECK]
        failed = [r["claim"] for _, r in checks.iterrows() if _holds(r["holds"]) is False]
        n_hold = sum(_holds(r["holds"]) is True for _, r in checks.iterrows())
        out.append({
            "study": study, "paper": first["paper"],
            "meta": [("scale", first["scale"]), ("seeds", first["seeds"] or "–"),
                     ("data source", first["data_source"]), ("config hash", first["config_hash"] or "–")],
            "claim_header": ["claim", "source", "verdict", "deciding numbers", "threshold", "evidence", "note"],
            "claims": [[f"{r['claim']}: {r['title']}", r["source"], r["verdict"], r["key_numbers"], r["threshold"],
                        f"{r['evidence_n']} {r['evidence_unit']}" + (
                            "" if r["paper_data"] == "" else
                            (", paper's data" if r["paper_data"] else ", stand-in data")),
                        _shorten(r["note"], NOTE_MAX)] for _, r in claims.iterrows()],
            "checks_line": (f"checks: {n_hold} of {len(checks)} hold" + (f"; FAIL: {', '.join(failed)}"
                                                                          if failed else "")) if len(checks) else "",
            "check_header": ["check", "result", "numbers"],
            "checks": [[f"{r['claim']}: {r['title']}", _check_result(r), r["key_numbers"]]
                       for _, r in checks.iterrows()],
        })
    return out


INTRO = ("Computed by each study's evaluate stage from held-out metrics; full statistics (per-arm means, bootstrap "
         "CIs, per-seed values) are in each study's `claims.json`. A *claim* is something a paper states (or our "
         "illustration of it); it can be reproduced or not only with at least {n} independent units (seeds, "
         "functions, windows, runs) and, when it is about the paper's data, on the paper's data; otherwise it is "
         "inconclusive and the note names the rule. A *check* is an identity or mechanism that must hold by "
         "construction; a failing check is a bug, not a finding.").format(n=MIN_UNITS)


def to_markdown(table: pd.DataFrame) -> str:
    """The claims table as markdown: headline, then one section per study (claims table, checks table)."""
    lines = ["# Claims", "", f"**{headline(table)}**", "", INTRO, ""]
    for sec in sections(table):
        lines += [f"## {sec['study']}" + (f" — {sec['paper']}" if sec["paper"] else ""), "",
                  " · ".join(f"{k} `{v}`" for k, v in sec["meta"]), ""]
        if sec["claims"]:
            lines += _md_table(sec["claim_header"], sec["claims"], bold_col=2) + [""]
        if sec["checks"]:
            lines += [f"**{sec['checks_line']}**", ""] + _md_table(sec["check_header"], sec["checks"]) + [""]
    return "\n".join(lines)


def _md_cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _md_table(header: list[str], rows: list[list[Any]], bold_col: int | None = None) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [f"**{c}**" if i == bold_col else c for i, c in enumerate(row)]
        out.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    return out


def to_html(table: pd.DataFrame) -> str:
    """The same content as :func:`to_markdown`, as a self-contained HTML fragment (for the Snakemake report)."""
    e = html.escape
    parts = ['<div class="icml25-claims">', "<h1>Claims</h1>", f"<p><strong>{e(headline(table))}</strong></p>",
             f"<p>{e(INTRO.replace('`', ''))}</p>"]
    for sec in sections(table):
        parts.append(f"<h2>{e(sec['study'])}" + (f" — {e(sec['paper'])}" if sec["paper"] else "") + "</h2>")
        parts.append("<p>" + " · ".join(f"{e(k)} <code>{e(str(v))}</code>" for k, v in sec["meta"]) + "</p>")
        if sec["claims"]:
            parts.append(_html_table(sec["claim_header"], sec["claims"]))
        if sec["checks"]:
            parts.append(f"<p><strong>{e(sec['checks_line'])}</strong></p>")
            parts.append(_html_table(sec["check_header"], sec["checks"]))
    parts.append("</div>")
    return "\n".join(parts) + "\n"


def _html_table(header: list[str], rows: list[list[Any]]) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table border="1"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def run_summary(paths: Sequence[Path], md: Path, csv: Path, results_dir: Path, track: bool = True,
                html_out: Path | None = None) -> pd.DataFrame:
    """Write claims.md, claims.csv (and claims.html) atomically; log the verdict counts (``verdicts/<key>``
    over all studies, ``verdicts/paper/<key>`` and ``verdicts/ours/<key>`` for the claims of each source) and
    the files to the ``icml25/summary`` experiment."""
    table = claims_table(paths)
    write_text(md, to_markdown(table))
    if html_out is not None:
        write_text(html_out, to_html(table))
    with atomic_path(csv) as tmp:
        table.to_csv(tmp, index=False)
    if track:
        from .tracking import stage_run

        with stage_run("summary", "summary", results_dir=results_dir) as run:
            run.log_metrics(summary_metrics(table))
            run.set_tags({"headline": headline(table)})
            for path in (md, csv, html_out):
                if path is not None:
                    run.log_artifact(path)
    return table


def summary_metrics(table: pd.DataFrame) -> dict[str, int]:
    """``verdicts/<key>`` over all entries, plus ``verdicts/<source>/claims_*`` per claim source."""
    out = {f"verdicts/{k}": v for k, v in counts(table).items()}
    for source in ("paper", "ours"):
        c = counts(table, source)
        out |= {f"verdicts/{source}/{k}": c[k] for k in COUNT_KEYS if k.startswith("claims_")}
    return out

