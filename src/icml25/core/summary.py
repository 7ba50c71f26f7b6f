"""The cross-study claims table: ``results/claims.md`` and ``results/claims.csv`` from every ``claims.json``."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from .claims import VERDICTS, load_claims
from .io import atomic_path, write_text

COLUMNS = ["study", "claim", "source", "data", "verdict", "statistic", "test", "threshold", "scale",
           "data_source", "statement"]


def claims_table(paths: Sequence[Path]) -> pd.DataFrame:
    """One row per claim across studies, in the order given."""
    rows = []
    for path in paths:
        doc = load_claims(path)
        for c in doc["claims"]:
            rows.append({"study": doc["study"], "claim": c["id"], "source": c["source"], "data": c["data"],
                         "verdict": c["verdict"], "statistic": _fmt(c["statistic"]), "test": c["test"],
                         "threshold": c["threshold"], "scale": doc["scale"], "data_source": doc["data_source"],
                         "statement": c["statement"]})
    return pd.DataFrame(rows, columns=COLUMNS)


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return "; ".join(f"{k}={_fmt(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return "" if value is None else str(value)


def to_markdown(table: pd.DataFrame) -> str:
    """The claims table as markdown: counts per verdict, then one section per study."""
    counts = table["verdict"].value_counts()
    lines = ["# Claims", "", "Computed by each study's evaluate stage from held-out metrics over seeds; "
             "see `results/<study>/claims.json` for per-arm means and CIs.", "",
             " · ".join(f"**{v}**: {int(counts.get(v, 0))}" for v in VERDICTS), ""]
    for study, part in table.groupby("study", sort=False):
        first = part.iloc[0]
        lines += [f"## {study}", "", f"scale `{first['scale']}`, data source `{first['data_source']}`", "",
                  "| claim | source | data | verdict | statistic | test | threshold |",
                  "|---|---|---|---|---|---|---|"]
        for _, r in part.iterrows():
            cells = [r["claim"], r["source"], r["data"], f"**{r['verdict']}**", r["statistic"], r["test"],
                     r["threshold"]]
            lines.append("| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)


def run_summary(paths: Sequence[Path], md: Path, csv: Path, results_dir: Path, track: bool = True) -> pd.DataFrame:
    """Write claims.md and claims.csv atomically and log them to the ``icml25/summary`` experiment."""
    table = claims_table(paths)
    write_text(md, to_markdown(table))
    with atomic_path(csv) as tmp:
        table.to_csv(tmp, index=False)
    if track:
        from .tracking import stage_run

        with stage_run("summary", "summary", results_dir=results_dir) as run:
            for verdict in VERDICTS:
                run.log_metric(f"claims/{verdict.replace(' ', '_')}", int((table["verdict"] == verdict).sum()))
            run.log_artifact(md)
            run.log_artifact(csv)
    return table
