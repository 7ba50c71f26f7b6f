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
import io
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .table import ITEMS, UNKNOWN, YES, Item, normalize_answer

_SYNONYMS = {"unknown": "Unknown/Unreported", "unreported": "Unknown/Unreported", "na": "N/A",
             "not applicable": "N/A", "y": "Yes", "n": "No", "true": "Yes", "false": "No"}


class ChecklistError(ValueError):
    """Bad checklist input; the message names the file, item or answer."""


MAX_INPUT_BYTES = 1 << 20  # a checklist is 16 short answers; anything bigger is not one
_SHOW = 60  # characters of a user value shown in a message


def _short(value: Any, n: int = _SHOW) -> str:
    """``repr(value)`` cut to ``n`` characters (a 50 MB answer is not echoed whole)."""
    try:
        text = repr(value) if not isinstance(value, int) else str(value)
    except ValueError:  # an int too long to print (sys.get_int_max_str_digits)
        return f"<integer of about {int(value.bit_length() * 0.30103) + 1} digits>"
    return text if len(text) <= n else f"{text[:n]}... ({len(text)} characters)"


def _read_text(path: Path) -> str:
    """The file as UTF-8 text, at most :data:`MAX_INPUT_BYTES`; errors name the file."""
    size = path.stat().st_size
    if size > MAX_INPUT_BYTES:
        raise ChecklistError(f"{path}: {size} bytes, more than a checklist can be ({MAX_INPUT_BYTES} bytes)")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise ChecklistError(f"{path}: not UTF-8 text (byte {err.start}); a checklist is a .yaml or .csv text "
                             f"file") from None


def _safe_yaml(path: Path, text: str) -> Any:
    """``yaml.safe_load`` refusing aliases (an alias bomb expands a few hundred bytes into gigabytes)."""
    import yaml

    try:
        if any(isinstance(ev, yaml.AliasEvent) for ev in yaml.parse(text, Loader=yaml.SafeLoader)):
            raise ChecklistError(f"{path}: YAML aliases (*name) are not allowed in a checklist")
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ChecklistError(f"{path}: not valid YAML: {str(err)[:300]}") from None
    except ValueError as err:  # e.g. an integer of more than 4,300 digits
        raise ChecklistError(f"{path}: unreadable value: {str(err)[:200]}") from None


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
    item = _lookup().get(name.strip().lower()) if isinstance(name, str) else None
    if item is None:
        raise ChecklistError(f"unknown checklist item {_short(name)}; use one of: "
                             f"{', '.join(i.key for i in ITEMS)}")
    return item


def load_answers(path: str | Path) -> dict[str, Any]:
    """``{item_key: raw answer}`` from a YAML or CSV file (by extension; ``.yml``/``.yaml``/``.csv``)."""
    path = Path(path)
    if not path.is_file():
        raise ChecklistError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".csv"):
        raise ChecklistError(f"{path}: unsupported extension {_short(suffix)} (use .yaml, .yml or .csv)")
    text = _read_text(path)
    if suffix in (".yaml", ".yml"):
        raw = _safe_yaml(path, text)
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
    else:
        if "\0" in text:
            raise ChecklistError(f"{path}: binary data (NUL bytes), not a CSV text file")
        try:
            reader = csv.DictReader(io.StringIO(text, newline=""))
            missing = [c for c in ("item", "answer") if c not in (reader.fieldnames or [])]
            if missing:
                raise ChecklistError(f"{path}: missing column(s) {missing} (need item,answer)")
            pairs = [(row["item"], row["answer"]) for row in reader]
        except csv.Error as err:
            raise ChecklistError(f"{path}: not a valid CSV file: {str(err)[:200]}") from None
    answers: dict[str, Any] = {}
    for name, answer in pairs:
        try:
            item = resolve_item(name)
        except ChecklistError as err:
            raise ChecklistError(f"{path}: {err}") from None
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
    except (ValueError, TypeError) as err:
        raise ChecklistError(f"item {item.key} ({item.name}): answer {_short(answer)} is not one of Yes, "
                             f"Partial, No, Unknown/Unreported, N/A ({str(err)[:80]})") from None


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


def _csv_rows(path: Path, need: Sequence[str], hint: str) -> list[dict[str, str]]:
    if not path.is_file():
        raise ChecklistError(f"{path}: no such file ({hint})")
    text = _read_text(path) if path.stat().st_size <= MAX_INPUT_BYTES else None
    if text is None or "\0" in text:
        raise ChecklistError(f"{path}: not a small CSV text file ({hint})")
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        if not set(need) <= set(reader.fieldnames or []):
            raise ChecklistError(f"{path}: need column(s) {list(need)} ({hint})")
        return list(reader)
    except csv.Error as err:
        raise ChecklistError(f"{path}: not a valid CSV file: {str(err)[:200]}") from None


def _number(path: Path, row_no: int, column: str, text: str | None) -> float:
    try:
        value = float(text or "")
    except ValueError:
        raise ChecklistError(f"{path}:{row_no}: column {column}: not a number: {_short(text)}") from None
    if value != value:
        raise ChecklistError(f"{path}:{row_no}: column {column}: NaN")
    return value


def _literature(path: Path) -> dict[str, float]:
    rows = _csv_rows(path, ("item", "all_yes_pct"), "metrics/table_iii.csv")
    return {row["item"]: _number(path, i, "all_yes_pct", row["all_yes_pct"]) for i, row in enumerate(rows, 2)}


def _rigor(path: Path) -> list[float]:
    rows = _csv_rows(path, ("score",), "models/rigor_score/chunk0.csv")
    return [_number(path, i, "score", row["score"]) for i, row in enumerate(rows, 2)]


def _share(text: str) -> float:
    """``--min-score``: a number in [0, 1] (NaN would pass every comparison as False)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {_short(text)}") from None
    if not 0.0 <= value <= 1.0:  # also false for NaN
        raise argparse.ArgumentTypeError(f"must be a share in [0, 1], got {_short(text)}")
    return value


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
    parser.add_argument("--min-score", type=_share, default=None,
                        help="exit 1 if the share of items met (0..1) is below this")
    parser.add_argument("--json", type=Path, help="also write the result as JSON here")
    args = parser.parse_args(argv)
    if args.template:
        sys.stdout.write(template(args.template))
        return 0
    if not args.checklist:
        parser.error("a checklist file is required (or --template yaml|csv)")
    try:
        answers = load_answers(args.checklist)
        literature = _literature(args.literature) if args.literature else None
        rigor = _rigor(args.rigor) if args.rigor else None
        try:
            result = score_checklist(answers, literature, rigor)
        except ChecklistError as err:
            raise ChecklistError(f"{args.checklist}: {err}") from None
    except ChecklistError as err:
        print(f"error: {str(err)[:500]}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"error: {err.filename or ''}: {err.strerror or err}"[:500], file=sys.stderr)
        return 2
    if args.json:
        from icml25.core.io import write_json

        try:
            write_json(args.json, result)
        except (OSError, TypeError, ValueError) as err:
            print(f"error: --json {args.json}: cannot write: {getattr(err, 'strerror', None) or err}"[:500],
                  file=sys.stderr)
            return 2
    print(format_report(result))
    if args.min_score is not None and result["score"] < args.min_score:
        print(f"score {result['score']:.3f} below --min-score {args.min_score}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
