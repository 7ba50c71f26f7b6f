"""Score a new study's filled-in checklist against the paper's recommendations (the 16 Table III items).

For researchers who want to check their own human baseline before publishing::

    python -m icml25.studies.human_baselines.checklist --template yaml > my_study.yaml   # fill it in
    python -m icml25.studies.human_baselines.checklist my_study.yaml \
        [--literature results/default/human_baselines/metrics/table_iii.csv] \
        [--rigor results/default/human_baselines/models/rigor_score/chunk0.csv] [--min-score 0.5] [--json out.json]

Input: YAML (a mapping ``item: answer``, or a list of ``{item, answer}``) or CSV (columns ``item,answer``).
Items are named by key (``power_analysis``), checklist number (``1.8``) or label (``Power analysis``); answers
are Yes, Partial, No, Unknown/Unreported (also "unknown", "unreported"), N/A or blank. Scoring follows the Table
III rule *without* the reviewers' defaults: an item counts as met only if answered Yes or Partial (Partial is
flagged), because a study scoring itself should report what it did rather than rely on imputation. The score is
the share of the 16 items met — the same scale as the descriptive rigour score of the 115 reviewed studies, to
which it is compared if ``--rigor`` is given. Exit status 1 if ``--min-score`` is not reached, 2 on bad input.
"""
from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .table import ITEMS, UNKNOWN, YES, Item, normalize_answer

_SYNONYMS = {"unknown": "Unknown/Unreported", "unreported": "Unknown/Unreported", "na": "N/A",
             "not applicable": "N/A", "y": "Yes", "n": "No", "true": "Yes", "false": "No"}


class ChecklistError(ValueError):
    """Bad checklist input; the message names the file, item or answer."""


def _lookup() -> dict[str, Item]:
    table: dict[str, Item] = {}
    for item in ITEMS:
        for name in (item.key, item.label, item.name, item.number):
            if name:
                table[name.strip().lower()] = item
    table["tse"] = ITEMS[0]
    return table


def resolve_item(name: str) -> Item:
    """The checklist item named by key, number or label (case-insensitive); error lists the valid keys."""
    item = _lookup().get(str(name).strip().lower())
    if item is None:
        raise ChecklistError(f"unknown checklist item {name!r}; use one of: {', '.join(i.key for i in ITEMS)}")
    return item


def load_answers(path: str | Path) -> dict[str, Any]:
    """``{item_key: raw answer}`` from a YAML or CSV file (by extension; ``.yml``/``.yaml``/``.csv``)."""
    path = Path(path)
    if not path.is_file():
        raise ChecklistError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        import yaml

        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as err:
            raise ChecklistError(f"{path}: not valid YAML: {err}") from err
        if isinstance(raw, Mapping):
            pairs = list(raw.items())
        elif isinstance(raw, list):
            pairs = []
            for i, entry in enumerate(raw):
                if not isinstance(entry, Mapping) or "item" not in entry:
                    raise ChecklistError(f"{path}: entry {i} must be a mapping with keys item and answer")
                pairs.append((entry["item"], entry.get("answer")))
        else:
            raise ChecklistError(f"{path}: expected a mapping item: answer or a list of {{item, answer}}")
    elif suffix == ".csv":
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in ("item", "answer") if c not in (reader.fieldnames or [])]
            if missing:
                raise ChecklistError(f"{path}: missing column(s) {missing} (need item,answer)")
            pairs = [(row["item"], row["answer"]) for row in reader]
    else:
        raise ChecklistError(f"{path}: unsupported extension {suffix!r} (use .yaml, .yml or .csv)")
    answers: dict[str, Any] = {}
    for name, answer in pairs:
        item = resolve_item(name)
        if item.key in answers:
            raise ChecklistError(f"{path}: item {item.key!r} answered twice")
        answers[item.key] = answer
    return answers


def _normalise(item: Item, answer: Any) -> tuple[str, bool]:
    """(Yes/No/Unknown without defaults, partial?) for one answer; error names the item."""
    if isinstance(answer, str):
        answer = _SYNONYMS.get(answer.strip().lower(), answer)
    try:
        return normalize_answer(answer, None), isinstance(answer, str) and answer.strip().lower() == "partial"
    except ValueError as err:
        raise ChecklistError(f"item {item.key} ({item.name}): {err}") from err


def score_checklist(answers: Mapping[str, Any], literature: Mapping[str, float] | None = None,
                    rigor: Sequence[float] | None = None) -> dict[str, Any]:
    """Score answers ``{item_key: answer}`` (missing items = not reported).

    Returns ``{"items": [...], "score", "met", "n_items", "missing", "percentile"}``; each item has key, name,
    answer, status (met | partial | not met | not reported), recommendation and, with ``literature``
    (``{item name: % Yes among the reviewed studies}``), that share. ``percentile``: share of the reviewed
    studies' rigour scores strictly below this score (None without ``rigor``)."""
    unknown = [k for k in answers if k not in {i.key for i in ITEMS}]
    if unknown:
        raise ChecklistError(f"unknown item key(s) {unknown}")
    rows, met = [], 0
    for item in ITEMS:
        raw = answers.get(item.key)
        value, partial = _normalise(item, raw)
        status = {YES: "partial" if partial else "met", UNKNOWN: "not reported"}.get(value, "not met")
        met += value == YES
        row = {"key": item.key, "name": item.name, "answer": raw, "status": status,
               "recommendation": item.recommendation}
        if literature is not None:
            row["literature_yes_pct"] = literature.get(item.name)
        rows.append(row)
    score = met / len(ITEMS)
    percentile = None
    if rigor is not None and len(rigor):
        percentile = 100.0 * sum(r < score for r in rigor) / len(rigor)
    return {"items": rows, "score": score, "met": met, "n_items": len(ITEMS),
            "missing": [r["key"] for r in rows if r["answer"] is None], "percentile": percentile}


def format_report(result: Mapping[str, Any]) -> str:
    """Human-readable summary: one line per item (status, what to do), then the score."""
    lines = []
    for r in result["items"]:
        mark = {"met": "[x]", "partial": "[~]", "not met": "[ ]", "not reported": "[?]"}[r["status"]]
        lit = f"  ({r['literature_yes_pct']:.1f}% of reviewed studies)" if r.get("literature_yes_pct") is not None \
            else ""
        lines.append(f"{mark} {r['name']:<30} {r['status']:<13}{lit}")
        if r["status"] != "met":
            lines.append(f"      → {r['recommendation']}")
    lines.append("")
    lines.append(f"score: {result['met']}/{result['n_items']} items met ({100 * result['score']:.1f}%)")
    if result["percentile"] is not None:
        lines.append(f"higher than {result['percentile']:.1f}% of the reviewed human baselines' rigour scores")
    if result["missing"]:
        lines.append(f"not answered (counted as not reported): {', '.join(result['missing'])}")
    return "\n".join(lines)


def template(fmt: str) -> str:
    """A blank checklist in ``yaml`` or ``csv`` listing every item with its recommendation."""
    if fmt == "csv":
        return "item,answer\n" + "".join(f"{i.key},\n" for i in ITEMS)
    lines = ["# Human-baseline reporting checklist (Wei et al., ICML 2025): answer Yes, Partial, No, "
             "Unknown/Unreported or N/A."]
    for i in ITEMS:
        lines += [f"# {i.name}: {i.recommendation}", f"{i.key}: "]
    return "\n".join(lines) + "\n"


def _literature(path: Path) -> dict[str, float]:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if not {"item", "all_yes_pct"} <= set(reader.fieldnames or []):
            raise ChecklistError(f"{path}: need columns item, all_yes_pct (metrics/table_iii.csv)")
        return {row["item"]: float(row["all_yes_pct"]) for row in reader}


def _rigor(path: Path) -> list[float]:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if "score" not in (reader.fieldnames or []):
            raise ChecklistError(f"{path}: need a column score (models/rigor_score/chunk0.csv)")
        return [float(row["score"]) for row in reader]


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: score a filled-in checklist, or print a blank template."""
    parser = argparse.ArgumentParser(
        prog="python -m icml25.studies.human_baselines.checklist",
        description="Score a human baseline's filled-in reporting checklist (YAML or CSV) against the 16 Table III "
                    "items of Wei et al. (ICML 2025).", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("checklist", nargs="?",
                        help="filled-in checklist: .yaml/.yml (item: answer) or .csv (item,answer)")
    parser.add_argument("--template", choices=["yaml", "csv"], help="print a blank checklist and exit")
    parser.add_argument("--literature", type=Path,
                        help="metrics/table_iii.csv: show each item's share among reviewed studies")
    parser.add_argument("--rigor", type=Path,
                        help="models/rigor_score/chunk0.csv: compare the score with the reviewed studies")
    parser.add_argument("--min-score", type=float, default=None, help="exit 1 if the share of items met is below this")
    parser.add_argument("--json", type=Path, help="also write the result as JSON here")
    args = parser.parse_args(argv)
    if args.template:
        sys.stdout.write(template(args.template))
        return 0
    if not args.checklist:
        parser.error("a checklist file is required (or --template yaml|csv)")
    try:
        answers = load_answers(args.checklist)
        result = score_checklist(answers, _literature(args.literature) if args.literature else None,
                                 _rigor(args.rigor) if args.rigor else None)
    except (ChecklistError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(format_report(result))
    if args.json:
        from icml25.core.io import write_json

        write_json(args.json, result)
    if args.min_score is not None and result["score"] < args.min_score:
        print(f"score {result['score']:.3f} below --min-score {args.min_score}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
