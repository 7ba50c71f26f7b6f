"""The synthetic workbook [R]: the released file's schema with random codes (spec "Data: Synthetic workbook").

Offline runs and tests use it in place of the real ``lit_review_data.xlsx``. Layout: sheet ``Final_Data``,
dimension A1:DN85, defined names ``AllEvals``/``TopEvals``, placeholder labels carrying the item ids, the
section headers and empty rows of the real file. Table III rows draw Yes 0.25, Partial 0.05, No 0.35,
Unknown/Unreported 0.28, N/A 0.03, blank 0.04, except rows 24 and 64, which get exactly 2 and 10 Yes/Partial at
random columns; numeric rows hold an integer (p = 0.7; log-uniform on [1, 1000]) or ``Unknown/Unreported``;
row 17 copies row 11 with p = 0.5; row 15 is the workbook's formula with its value cached. Every cell type the
reader must handle occurs: shared strings (some rich text with several runs), inline strings, cached formula
strings (HYPERLINK titles), booleans, numbers and an error cell. Codes are sometimes written with odd case or
padding (" yes ").

The planted Table III counts are computed here from the drawn *categories*, independently of the parser and of
:func:`~.table.normalize_answer`, so comparing the two is a real test. The file is written with the standard
library and fixed timestamps: the same seed gives byte-identical files.
"""
from __future__ import annotations

import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

from .table import ITEMS, SUBSETS
from .workbook import (BOOL_ROWS, COLUMNS, DIMENSION, EMPTY_ROWS, HEADER_ROWS, MODEL_CARD_COLUMNS,
                       MODEL_CARD_STUDIES, NUMERIC_ROWS, SHEET, STUDY_COLUMNS, SUB_ROWS, SUBSUB_ROWS)

# Drawn categories of Table III rows and their probabilities (spec).
CATEGORIES = ("Yes", "Partial", "No", "Unknown/Unreported", "N/A", "blank")
PROBS = (0.25, 0.05, 0.35, 0.28, 0.03, 0.04)
PLANTED_YES = {24: 2, 64: 10}  # power analysis, significance test: exactly this many Yes/Partial
VARIANTS = {"Yes": (" yes ", "YES"), "No": ("no", " No"), "Partial": ("partial",),
            "Unknown/Unreported": ("unknown/unreported",), "N/A": ("n/a",)}
HEADERS = {3: "PAPER METADATA", 14: "BASELINE DESIGN & IMPLEMENTATION", 29: "BASELINER RECRUITMENT",
           48: "BASELINE EXECUTION (DATA COLLECTION)", 63: "BASELINE ANALYSIS (DATA ANALYSIS)",
           74: "BASELINE DOCUMENTATION", 75: "Were the following reported?"}
VENUES = ("NeurIPS", "ICML", "ICLR", "ACL", "EMNLP", "CVPR", "Preprint", "TMLR")
FIXED_TIME = "2025-01-01T00:00:00Z"
ZIP_TIME = (2025, 1, 1, 0, 0, 0)


def _bucket(category: str, default: str | None) -> str:
    """Table III bucket of a drawn category (the planted truth, independent of the parser)."""
    if category in ("Yes", "Partial"):
        return "Yes"
    if category == "No":
        return "No"
    return default or "Unknown"


def _draw_workbook(seed: int) -> tuple[dict[tuple[int, str], tuple[str, object]], dict]:
    """Cells ``{(row, column): (kind, value)}`` with kind ∈ {s, rich, inline, str, n, b, e} and planted counts."""
    rng = np.random.Generator(np.random.PCG64(seed))
    cells: dict[tuple[int, str], tuple[str, object]] = {}
    item_rows = {it.row: it for it in ITEMS}
    # Labels: A questions, B sub-questions, C sub-sub-questions, section headers.
    for row in range(1, 86):
        if row in EMPTY_ROWS:
            continue
        if row in HEADER_ROWS:
            cells[(row, "A")] = ("s", HEADERS[row])
        elif row in SUBSUB_ROWS:
            cells[(row, "C")] = ("s", f"Sub-sub-question row {row} [synthetic placeholder]")
        elif row in SUB_ROWS:
            label = f"{item_rows[row].name} [synthetic placeholder]" if row in item_rows else \
                f"Sub-question row {row} [synthetic placeholder]"
            cells[(row, "B")] = ("s", label)
        else:
            label = f"{item_rows[row].name} [synthetic placeholder]" if row in item_rows else \
                f"Question row {row} [synthetic placeholder]"
            cells[(row, "A")] = ("rich" if row == 1 else "s", label)
    n = len(STUDY_COLUMNS)
    # Titles: model-card studies by name; every third as a cached HYPERLINK formula, some rich text, some inline.
    for i, col in enumerate(STUDY_COLUMNS):
        title = f"{MODEL_CARD_STUDIES[i]}: synthetic study {i}" if i < len(MODEL_CARD_STUDIES) else \
            f"Synthetic study {i}: a benchmark with a human baseline"
        kind = "str" if i % 3 == 0 else ("rich" if i % 3 == 1 else "s")
        cells[(1, col)] = (kind, title)
        if i % 4 == 0:
            cells[(2, col)] = ("inline", f"dataset {i}")
        cells[(4, col)] = ("n", int(rng.integers(2019, 2026)))
        cells[(5, col)] = ("s", VENUES[int(rng.integers(len(VENUES)))])
    # Numeric rows: an integer (p = 0.7) or Unknown/Unreported; row 17 = row 11 with p = 0.5.
    numeric: dict[tuple[int, str], object] = {}
    for row in NUMERIC_ROWS:
        for col in STUDY_COLUMNS:
            # log-uniform on [1, 1000] (median ≈ 30, like reported baseliner counts) [R]
            numeric[(row, col)] = int(np.exp(rng.uniform(0, np.log(1000)))) if rng.random() < 0.7 \
                else "Unknown/Unreported"
    for col in STUDY_COLUMNS:
        if rng.random() < 0.5:
            numeric[(17, col)] = numeric[(11, col)]
    for (row, col), value in numeric.items():
        cells[(row, col)] = ("n", value) if isinstance(value, int) else ("s", value)
    # Answer rows: every other labelled row that is not numeric, boolean or a header gets a random code.
    drawn: dict[int, list[str]] = {}
    written: dict[tuple[int, str], str] = {}
    answer_rows = [r for r in range(6, 86) if r not in (*EMPTY_ROWS, *HEADER_ROWS, *NUMERIC_ROWS, *BOOL_ROWS)]
    for row in answer_rows:
        cats = list(rng.choice(CATEGORIES, size=n, p=PROBS))
        if row in PLANTED_YES:
            k = PLANTED_YES[row]
            others = np.array(PROBS[2:]) / sum(PROBS[2:])
            cats = list(rng.choice(CATEGORIES[2:], size=n, p=others))
            for j in rng.choice(n, size=k, replace=False):
                cats[j] = CATEGORIES[int(rng.integers(2))]  # Yes or Partial
        drawn[row] = cats
        for j, (col, cat) in enumerate(zip(STUDY_COLUMNS, cats)):
            if cat == "blank":
                continue
            text = cat
            if cat in VARIANTS and rng.random() < 0.1:
                text = VARIANTS[cat][int(rng.integers(len(VARIANTS[cat])))]
            kind = "inline" if (row * 7 + j) % 23 == 0 else "s"
            cells[(row, col)] = (kind, text)
            written[(row, col)] = text
    # An error cell in a free-text row (cached #N/A; the reader maps it to None).
    cells[(65, STUDY_COLUMNS[5])] = ("e", "#N/A")
    # Row 55: GUI flag, row 15: test-set equivalence by the workbook's formula, cached.
    for col in STUDY_COLUMNS:
        cells[(55, col)] = ("b", bool(rng.random() < 0.3))
    tse = {}
    for col in STUDY_COLUMNS:
        r11, r17 = numeric[(11, col)], numeric[(17, col)]
        r69 = written.get((69, col))  # None if blank
        if r17 == "Unknown/Unreported" and isinstance(r11, int):
            tse[col] = True
        elif isinstance(r17, int) and isinstance(r11, int):
            tse[col] = r17 == r11
        else:
            tse[col] = r69 is not None and r69.lower() == "yes"  # LOWER() does not strip: " yes " is FALSE
        cells[(15, col)] = ("b", tse[col])
    planted = _planted(drawn, tse)
    return cells, planted


def _planted(drawn: dict[int, list[str]], tse: dict[str, bool]) -> dict:
    """``{item_key: {subset: {"Yes": n, "No": n, "Unknown": n}}}`` from the drawn categories."""
    planted: dict = {}
    for item in ITEMS:
        if item.row == 15:
            buckets = ["Yes" if tse[c] else "No" for c in STUDY_COLUMNS]
        else:
            buckets = [_bucket(cat, item.default) for cat in drawn[item.row]]
        entry = {}
        for subset in SUBSETS:
            part = buckets if subset == "all" else buckets[:len(MODEL_CARD_COLUMNS)]
            entry[subset] = {a: sum(b == a for b in part) for a in ("Yes", "No", "Unknown")}
        planted[item.key] = entry
    return planted


def _sheet_xml(cells: dict[tuple[int, str], tuple[str, object]], shared_index: dict[tuple[str, str], int]) -> str:
    col_pos = {c: i for i, c in enumerate(COLUMNS)}
    rows: dict[int, list[str]] = {}
    for (row, col) in sorted(cells, key=lambda rc: (rc[0], col_pos[rc[1]])):
        kind, value = cells[(row, col)]
        ref = f"{col}{row}"
        if kind in ("s", "rich"):
            xml = f'<c r="{ref}" t="s"><v>{shared_index[(kind, value)]}</v></c>'
        elif kind == "inline":
            xml = f'<c r="{ref}" t="inlineStr"><is><t xml:space="preserve">{escape(value)}</t></is></c>'
        elif kind == "str":
            link = f"https://example.org/synthetic/{col}"
            formula = escape(f'HYPERLINK("{link}","{value}")')
            xml = f'<c r="{ref}" t="str"><f>{formula}</f><v>{escape(value)}</v></c>'
        elif kind == "b":
            formula = ("<f>IF(AND(OR(LOWER({c}17)=\"unknown/unreported\",ISBLANK({c}17)),ISNUMBER({c}11)),TRUE,"
                       "IF(AND(ISNUMBER({c}17),ISNUMBER({c}11)),IF({c}17={c}11,TRUE,FALSE),"
                       "IF(LOWER({c}69)=\"yes\",TRUE,FALSE)))</f>").format(c=col) if row == 15 else ""
            xml = f'<c r="{ref}" t="b">{formula}<v>{int(value)}</v></c>'
        elif kind == "e":
            xml = f'<c r="{ref}" t="e"><f>NA()</f><v>{escape(value)}</v></c>'
        else:  # number
            xml = f'<c r="{ref}"><v>{value}</v></c>'
        rows.setdefault(row, []).append(xml)
    body = "".join(f'<row r="{r}">{"".join(cs)}</row>' for r, cs in sorted(rows.items()))
    return ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
            '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
            'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
            f'<dimension ref="{DIMENSION}"/><sheetData>{body}</sheetData></worksheet>')


def _shared_xml(strings: list[tuple[str, str]]) -> str:
    items = []
    for kind, text in strings:
        if kind == "rich" and len(text) > 4:  # split into two runs, the second in bold
            cut = len(text) // 2
            items.append(f'<si><r><t xml:space="preserve">{escape(text[:cut])}</t></r>'
                         f'<r><rPr><b/></rPr><t xml:space="preserve">{escape(text[cut:])}</t></r></si>')
        else:
            items.append(f'<si><t xml:space="preserve">{escape(text)}</t></si>')
    return ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
            '<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
            f'count="{len(items)}" uniqueCount="{len(items)}">{"".join(items)}</sst>')


_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/xl/workbook.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
    '<Override PartName="/xl/worksheets/sheet1.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
    '<Override PartName="/xl/sharedStrings.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/>'
    '<Override PartName="/xl/styles.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.styles+xml"/>'
    '<Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/>'
    '</Types>')
_ROOT_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
    'Target="xl/workbook.xml"/>'
    '<Relationship Id="rId2" '
    'Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" '
    'Target="docProps/core.xml"/></Relationships>')
_WORKBOOK_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" '
    'Target="worksheets/sheet1.xml"/>'
    '<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings" '
    'Target="sharedStrings.xml"/>'
    '<Relationship Id="rId3" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" '
    'Target="styles.xml"/></Relationships>')
_STYLES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
    '<fonts count="1"><font><sz val="11"/><name val="Calibri"/></font></fonts>'
    '<fills count="1"><fill><patternFill patternType="none"/></fill></fills>'
    '<borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders>'
    '<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>'
    '<cellXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/></cellXfs>'
    '<cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles>'
    '</styleSheet>')


def _workbook_xml(sheet: str) -> str:
    return ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
            '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
            'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
            f'<sheets><sheet name="{escape(sheet)}" sheetId="1" r:id="rId1"/></sheets>'
            f'<definedNames><definedName name="AllEvals">{escape(sheet)}!$D:$DN</definedName>'
            f'<definedName name="TopEvals">{escape(sheet)}!$D:$J</definedName></definedNames></workbook>')


def _core_xml() -> str:
    return ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
            '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
            '<dc:creator>icml25 synthetic generator</dc:creator>'
            f'<dcterms:created xsi:type="dcterms:W3CDTF">{FIXED_TIME}</dcterms:created>'
            f'<dcterms:modified xsi:type="dcterms:W3CDTF">{FIXED_TIME}</dcterms:modified>'
            '</cp:coreProperties>')


def write_xlsx(path: str | Path, cells: dict[tuple[int, str], tuple[str, object]], sheet: str = SHEET) -> Path:
    """Write ``cells`` (kinds s, rich, inline, str, n, b, e) as a one-sheet xlsx with fixed timestamps."""
    strings = list(dict.fromkeys((k, v) for k, v in cells.values() if k in ("s", "rich")))
    index = {s: i for i, s in enumerate(strings)}
    parts = {"[Content_Types].xml": _CONTENT_TYPES, "_rels/.rels": _ROOT_RELS, "docProps/core.xml": _core_xml(),
             "xl/workbook.xml": _workbook_xml(sheet), "xl/_rels/workbook.xml.rels": _WORKBOOK_RELS,
             "xl/styles.xml": _STYLES, "xl/sharedStrings.xml": _shared_xml(strings),
             "xl/worksheets/sheet1.xml": _sheet_xml(cells, index)}
    path = Path(path)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, text in parts.items():
            info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, text.encode("utf-8"))
    return path


def make_synthetic_workbook(path: str | Path, seed: int = 0) -> dict:
    """Write the synthetic workbook to ``path`` and return the planted Table III counts
    ``{item_key: {"all"|"model_card": {"Yes": n, "No": n, "Unknown": n}}}`` (Unknown is 0 for items with a
    default). Deterministic: the same seed gives a byte-identical file."""
    cells, planted = _draw_workbook(seed)
    write_xlsx(path, cells)
    return planted
