"""Table III of the paper from the coded workbook (spec "Method: Table III rule" and "Rigour score").

Rule [V] (whitespace stripped, case ignored): {Yes, Partial, TRUE, 1} → Yes; {No, FALSE, 0} → No;
{Unknown/Unreported, N/A, blank} → the item's default if it has one, else Unknown. Percent = 100·count/n rounded
half-up to 2 decimals, n = 115 (``all``) or 7 (``model_card``, columns D..J). Any other code is an error naming
the cell: the rule never guesses.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

import numpy as np
import pandas as pd

from .workbook import (ITEMS_PER_BASELINER_ROW, MODEL_CARD_COLUMNS, STUDY_COLUMNS, TITLE_ROW, VENUE_ROW, YEAR_ROW,
                       is_number)

YES, NO, UNKNOWN = "Yes", "No", "Unknown"
ANSWERS = (YES, NO, UNKNOWN)
SUBSETS = ("all", "model_card")
STAT_COLUMNS = ("yes_n", "no_n", "unknown_n", "yes_pct", "no_pct", "unknown_pct")

_YES = {"yes", "partial", "true", "1"}
_NO = {"no", "false", "0"}
_MISSING = {"unknown/unreported", "n/a", ""}


@dataclass(frozen=True)
class Item:
    """One Table III row: ``key`` (snake_case), checklist ``number`` ("1.8"; "" for test-set equivalence),
    ``label``, workbook ``row`` and imputation ``default`` (None: keeps an Unknown column)."""

    key: str
    number: str
    label: str
    row: int
    default: str | None
    recommendation: str

    @property
    def name(self) -> str:
        """"1.8 Power analysis" (the row label of Table III)."""
        return f"{self.number} {self.label}".strip()


# Table III in table order (spec "Table III rule"); recommendation texts paraphrase the checklist item. [V] rows,
# defaults; [R] the one-line recommendation wording.
ITEMS: tuple[Item, ...] = (
    Item("test_set_equivalence", "", "Test-set equivalence", 15, NO,
         "Give humans and the AI the same test items (or the full test set to both)."),
    Item("iterative_design", "1.6", "Iterative design", 22, None,
         "Pilot and iterate on the baseline design before the main data collection."),
    Item("effort_control", "1.7", "Effort control", 23, None,
         "Control or measure the effort (time, attention) baseliners put into the task."),
    Item("power_analysis", "1.8", "Power analysis", 24, NO,
         "Choose the number of baseliners and items by a power analysis and report it."),
    Item("ethics_review", "1.9", "Ethics review", 26, None,
         "Obtain (and report) ethics/IRB approval or exemption."),
    Item("population_of_interest", "2.1", "Population of interest", 30, NO,
         "Define the human population the baseline should represent."),
    Item("recruitment_qc", "2.3", "Recruitment QC", 34, YES,
         "Pre-qualify or screen baseliners and report the inclusion/exclusion criteria."),
    Item("execution_qc", "3.2", "Execution QC", 51, NO,
         "Clean the data (attention checks, exclusions) and report what was excluded."),
    Item("instruction_equivalence", "3.4", "Instruction equivalence", 57, NO,
         "Give humans and the AI equivalent instructions and examples."),
    Item("tool_access_equivalence", "3.5", "Tool-access equivalence", 59, YES,
         "Give humans and the AI equivalent tool access, or adjust for the difference."),
    Item("explanations", "3.6", "Explanations", 61, NO,
         "Collect explanations/rationales from baseliners."),
    Item("significance_test", "4.1", "Significance test", 64, NO,
         "Test human-AI differences for statistical significance and name the test."),
    Item("uncertainty", "4.2", "Uncertainty", 66, NO,
         "Report uncertainty (interval, distribution) for the human baseline, not only a point estimate."),
    Item("metric_equivalence", "4.3", "Metric equivalence", 68, YES,
         "Measure humans and the AI with the same metric."),
    Item("demographics", "5.1.1", "Demographics", 76, NO,
         "Report baseliner demographics (e.g. age, gender, education, location)."),
    Item("data_availability", "5.2", "Data availability", 81, NO,
         "Release the (anonymised) human baseline data, ideally per baseliner."),
)
ITEMS_BY_KEY = {item.key: item for item in ITEMS}


def normalize_answer(value: object, default: str | None) -> str:
    """Map a cached cell value to "Yes", "No" or "Unknown" by the Table III rule.

    ``default`` ("Yes", "No" or None) replaces Unknown/Unreported, N/A and blank. Raises ValueError for any
    other code (naming it), so a changed coding scheme cannot slip into the table.
    """
    if default not in (YES, NO, None):
        raise ValueError(f"default must be 'Yes', 'No' or None, got {default!r}")
    if value is None:
        return default or UNKNOWN
    if isinstance(value, bool):
        return YES if value else NO
    if isinstance(value, (int, float, np.integer, np.floating)):
        if value == 1:
            return YES
        if value == 0:
            return NO
        raise ValueError(f"unrecognised numeric answer {value!r} (only 1 and 0 are codes)")
    if isinstance(value, str):
        code = value.strip().lower()
        if code in _YES:
            return YES
        if code in _NO:
            return NO
        if code in _MISSING:
            return default or UNKNOWN
        raise ValueError(f"unrecognised answer {value!r} (codes: Yes, Partial, No, Unknown/Unreported, N/A, blank)")
    raise ValueError(f"unrecognised answer of type {type(value).__name__}: {value!r}")


def pct(count: int, n: int) -> float:
    """100·count/n rounded half-up to 2 decimals (exact rational arithmetic, no binary-float ties)."""
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    exact = Fraction(100 * count, n)
    rounded = (Decimal(exact.numerator) / Decimal(exact.denominator)).quantize(Decimal("0.01"), ROUND_HALF_UP)
    return float(rounded)


def study_labels(sheet: pd.DataFrame) -> list[str]:
    """A label per study column: its title (row 1), else the previous title + dataset (row 2), else the column."""
    labels, last = [], ""
    for col in STUDY_COLUMNS:
        title, dataset = sheet.at[TITLE_ROW, col], sheet.at[2, col]
        if isinstance(title, str) and title.strip():
            last = title.strip()
            labels.append(last)
        else:
            labels.append(f"{last} [{dataset}]" if last and dataset else f"column {col}")
    return labels


def long_table(sheet: pd.DataFrame) -> pd.DataFrame:
    """The tidy long table: one row per (study, item) — 115 × 16 rows.

    Columns: study, study_index (0..114), column ("D".."DN"), model_card (bool), year, venue, item (key),
    item_name, row, raw (the cached value as text, None if blank), normalised (rule without default),
    imputed (rule with default), default ("" if none). A value outside the codes raises naming the cell.
    """
    labels = study_labels(sheet)
    records = []
    for i, col in enumerate(STUDY_COLUMNS):
        year = sheet.at[YEAR_ROW, col]
        venue = sheet.at[VENUE_ROW, col]
        for item in ITEMS:
            value = sheet.at[item.row, col]
            try:
                normalised = normalize_answer(value, None)
                imputed = normalize_answer(value, item.default)
            except ValueError as err:
                raise ValueError(f"Final_Data!{col}{item.row} ({item.name}): {err}") from err
            records.append({
                "study": labels[i], "study_index": i, "column": col, "model_card": col in MODEL_CARD_COLUMNS,
                "year": int(year) if is_number(year) else None, "venue": str(venue).strip() if venue else None,
                "item": item.key, "item_name": item.name, "row": item.row,
                "raw": None if value is None else str(value), "normalised": normalised, "imputed": imputed,
                "default": item.default or ""})
    out = pd.DataFrame.from_records(records)
    out["year"] = out["year"].astype("Int64")
    return out


def table_from_long(long: pd.DataFrame) -> pd.DataFrame:
    """Table III from the long table: 16 rows (index = item name, table order); columns MultiIndex
    (subset ∈ {all, model_card}) × (yes_n, no_n, unknown_n, yes_pct, no_pct, unknown_pct). The unknown columns
    are NaN for items with a default (they cannot be Unknown after imputation)."""
    required = {"item", "imputed", "model_card", "study_index"}
    missing = required - set(long.columns)
    if missing:
        raise ValueError(f"long table lacks column(s) {sorted(missing)}")
    rows = []
    for item in ITEMS:
        part = long[long["item"] == item.key]
        values: list[float] = []
        for subset in SUBSETS:
            sub = part if subset == "all" else part[part["model_card"]]
            n = int(sub["study_index"].nunique())
            if n != len(sub):
                raise ValueError(f"item {item.key}: duplicate studies in the long table")
            counts = {a: int((sub["imputed"] == a).sum()) for a in ANSWERS}
            has_unknown = item.default is None
            values += [counts[YES], counts[NO], counts[UNKNOWN] if has_unknown else np.nan,
                       pct(counts[YES], n), pct(counts[NO], n), pct(counts[UNKNOWN], n) if has_unknown else np.nan]
        rows.append(values)
    columns = pd.MultiIndex.from_product([SUBSETS, STAT_COLUMNS], names=["subset", "stat"])
    table = pd.DataFrame(rows, index=pd.Index([it.name for it in ITEMS], name="item"), columns=columns)
    for subset in SUBSETS:
        for stat in ("yes_n", "no_n", "unknown_n"):
            table[(subset, stat)] = table[(subset, stat)].astype("Int64")
    return table


def table_iii(sheet: pd.DataFrame) -> pd.DataFrame:
    """Table III of the paper from :func:`~.workbook.read_workbook`'s sheet (see :func:`table_from_long`)."""
    return table_from_long(long_table(sheet))


def flat_table(table: pd.DataFrame) -> pd.DataFrame:
    """Table III with flat columns ``all_yes_n`` … ``model_card_unknown_pct`` and the item as a column (CSV)."""
    flat = table.copy()
    flat.columns = [f"{subset}_{stat}" for subset, stat in table.columns]
    return flat.reset_index()


def unflatten_table(flat: pd.DataFrame) -> pd.DataFrame:
    """Inverse of :func:`flat_table` (e.g. for a CSV read back); errors name a missing column."""
    names = [f"{s}_{c}" for s in SUBSETS for c in STAT_COLUMNS]
    missing = [c for c in ["item", *names] if c not in flat.columns]
    if missing:
        raise ValueError(f"Table III CSV lacks column(s) {missing}")
    table = flat.set_index("item")[names].astype(float)
    table.columns = pd.MultiIndex.from_product([SUBSETS, STAT_COLUMNS], names=["subset", "stat"])
    return table


def compare_tables(computed: pd.DataFrame, reference: pd.DataFrame) -> list[dict]:
    """Every cell where two Table IIIs differ (NaN equals NaN): ``[{item, subset, stat, computed, reference}]``.

    Items or columns present in one table only are listed as mismatches with the other side None."""
    mismatches = []
    items = list(dict.fromkeys([*computed.index, *reference.index]))
    for item in items:
        for subset in SUBSETS:
            for stat in STAT_COLUMNS:
                a = _cell(computed, item, subset, stat)
                b = _cell(reference, item, subset, stat)
                same = (a is None and b is None) or (a is not None and b is not None and abs(a - b) < 1e-9)
                if not same:
                    mismatches.append({"item": item, "subset": subset, "stat": stat, "computed": a, "reference": b})
    return mismatches


def _cell(table: pd.DataFrame, item: str, subset: str, stat: str) -> float | None:
    if item not in table.index or (subset, stat) not in table.columns:
        return None
    value = table.at[item, (subset, stat)]
    return None if pd.isna(value) else float(value)


def recompute_test_set_equivalence(sheet: pd.DataFrame) -> dict[str, bool]:
    """Row 15 recomputed from rows 11, 17 and 69 by the workbook's formula (spec, [V]):
    TRUE if row 17 is blank or "Unknown/Unreported" and row 11 is a number; else, if both are numbers,
    row 17 = row 11; else row 69 = "yes" (case-insensitive). Returns ``{column: bool}``."""
    out = {}
    for col in STUDY_COLUMNS:
        r11, r17, r69 = sheet.at[11, col], sheet.at[17, col], sheet.at[69, col]
        r17_unknown = r17 is None or (isinstance(r17, str) and r17.lower() == "unknown/unreported")
        if r17_unknown and is_number(r11):
            out[col] = True
        elif is_number(r17) and is_number(r11):
            out[col] = bool(r17 == r11)
        else:
            out[col] = isinstance(r69, str) and r69.lower() == "yes"
    return out


def rigor_scores(long: pd.DataFrame) -> pd.DataFrame:
    """Per-study rigour score [R]: mean of 1[imputed = Yes] over the 16 items (descriptive only).

    Returns one row per study: study, study_index, column, model_card, year, venue, n_yes, n_items, score."""
    yes = long.assign(is_yes=(long["imputed"] == YES).astype(int))
    keys = ["study_index", "study", "column", "model_card", "year", "venue"]
    grouped = yes.groupby("study_index", sort=True)
    out = grouped[keys[1:]].first().reset_index()
    out["n_yes"] = grouped["is_yes"].sum().to_numpy()
    out["n_items"] = grouped["is_yes"].size().to_numpy()
    out["score"] = out["n_yes"] / out["n_items"]
    return out


def rigor_summary(scores: pd.DataFrame, by: str) -> pd.DataFrame:
    """Mean, median and count of the rigour score by ``year`` or ``venue`` (missing values grouped as "unknown")."""
    if by not in ("year", "venue"):
        raise ValueError(f"by must be 'year' or 'venue', got {by!r}")
    key = scores[by].astype("string").fillna("unknown")
    return (scores.assign(group=key).groupby("group")["score"].agg(["mean", "median", "count"])
            .rename_axis(by).reset_index())


def study_design(sheet: pd.DataFrame, default_items: int = 20, max_items: int = 200) -> pd.DataFrame:
    """Per study, the simulator's inputs (spec "Underpowering simulator"): B = row 16 if numeric (else NaN) and
    m = row 20 if numeric else ``default_items``, capped at ``max_items`` (and at least 1).

    Returns columns study_index, column, B (float, NaN if unreported), m (int), m_reported (bool)."""
    rows = []
    for i, col in enumerate(STUDY_COLUMNS):
        b, m = sheet.at[16, col], sheet.at[ITEMS_PER_BASELINER_ROW, col]
        m_ok = is_number(m)
        m_val = int(min(max(round(float(m)), 1), max_items)) if m_ok else int(min(default_items, max_items))
        rows.append({"study_index": i, "column": col, "B": float(b) if is_number(b) else np.nan, "m": m_val,
                     "m_reported": m_ok})
    return pd.DataFrame(rows)
