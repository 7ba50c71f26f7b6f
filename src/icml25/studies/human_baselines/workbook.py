"""Reading the literature-review workbook with the standard library (spec "Method: Workbook schema").

The released file ``data/lit_review_data.xlsx`` of kevinlwei/human-baselines has one sheet ``Final_Data``
(dimension A1:DN85): column A holds the question, B a sub-question, C a sub-sub-question, and columns D..DN the
115 reviewed studies (D..J: the 7 studies behind industry model cards). An xlsx file is a zip of XML parts; this
module reads the *cached* value of every cell (formulas are never evaluated) so the result does not depend on a
spreadsheet engine:

* ``t="s"``: shared string (all ``<t>`` runs of the ``<si>`` concatenated; phonetic runs skipped)
* ``t="str"``: cached formula string; ``t="inlineStr"``: inline string; ``t="b"``: boolean (0/1)
* ``t="n"`` or no type: number (int unless the text has ``.``/``e``), ``t="e"``: error → None

:func:`check_schema` then verifies the layout (section headers, sub-question rows, empty rows, boolean rows) and
raises :class:`WorkbookSchemaError` naming the sheet, cell, row or column that differs.
"""
from __future__ import annotations

import posixpath
import re
import zipfile
import zlib
from pathlib import Path
from xml.etree import ElementTree as ET

import pandas as pd

SHEET = "Final_Data"
DIMENSION = "A1:DN85"
N_ROWS = 85
N_COLS = 118  # A..DN
FIRST_STUDY_COL = 4  # D
MODEL_CARD_COLS = 7  # D..J
N_STUDIES = N_COLS - FIRST_STUDY_COL + 1  # 115
MODEL_CARD_STUDIES = ("MMMU", "GPQA", "MATH", "DROP", "H-ARC", "ConceptARC", "EgoSchema")

HEADER_ROWS = (3, 14, 29, 48, 63, 74, 75)
EMPTY_ROWS = (13, 28, 47, 62, 73)
SUB_ROWS = (18, 25, 31, 33, 35, 36, 40, 41, 44, 45, 50, 52, 53, 55, 56, 58, 60, 65, 67, 76, 77, 78, 79, 80, 82, 83)
SUBSUB_ROWS = (42, 46)
BOOL_ROWS = (15, 55)  # test-set equivalence (cached formula), GUI flag
NUMERIC_ROWS = (10, 11, 12, 16, 17, 19, 20, 49, 53, 80)  # numbers or text (mostly Unknown/Unreported)
TITLE_ROW, YEAR_ROW, VENUE_ROW = 1, 4, 5
BASELINERS_ROW, ITEMS_PER_BASELINER_ROW = 16, 20

_NS = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
       "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
       "pr": "http://schemas.openxmlformats.org/package/2006/relationships"}
_M = "{%s}" % _NS["m"]
_CELL_REF = re.compile(r"^([A-Z]{1,3})(\d+)$")


class WorkbookSchemaError(ValueError):
    """The workbook does not have the layout of the released file; the message names sheet, cell, row or column."""


# Caps on what one workbook may expand to (the released file: 67 KB zipped, under 2 MB unzipped); a zip bomb
# stops at the cap instead of filling memory.
MAX_PART_BYTES = 64 << 20
MAX_TOTAL_BYTES = 256 << 20


def col_letter(index: int) -> str:
    """1 → "A", 26 → "Z", 27 → "AA", 118 → "DN"."""
    if index < 1:
        raise ValueError(f"column index must be >= 1, got {index}")
    out = ""
    while index:
        index, rem = divmod(index - 1, 26)
        out = chr(65 + rem) + out
    return out


def col_index(letters: str) -> int:
    """"A" → 1, "DN" → 118."""
    n = 0
    for ch in letters:
        if not "A" <= ch <= "Z":
            raise ValueError(f"not a column name: {letters!r}")
        n = n * 26 + ord(ch) - 64
    return n


COLUMNS = tuple(col_letter(i) for i in range(1, N_COLS + 1))
STUDY_COLUMNS = COLUMNS[FIRST_STUDY_COL - 1:]
MODEL_CARD_COLUMNS = STUDY_COLUMNS[:MODEL_CARD_COLS]


def _text_runs(elem: ET.Element) -> str:
    """Concatenate the ``<t>`` of a string item: direct ``<t>`` and ``<r><t>`` runs (phonetic ``<rPh>`` skipped)."""
    parts = []
    for child in elem:
        if child.tag == _M + "t":
            parts.append(child.text or "")
        elif child.tag == _M + "r":
            parts.extend(t.text or "" for t in child.findall("m:t", _NS))
    return "".join(parts)


def _cast_number(text: str) -> int | float:
    return float(text) if any(c in text for c in ".eE") else int(text)


def _read_part(z: zipfile.ZipFile, name: str, what: Path) -> bytes:
    """The decompressed bytes of one part, at most :data:`MAX_PART_BYTES` (counted while inflating: the sizes a
    zip declares can lie); errors name the file and the part."""
    try:
        info = z.getinfo(name)
    except KeyError:
        raise WorkbookSchemaError(f"{what}: missing part {name!r}; not an xlsx workbook?") from None
    if info.file_size > MAX_PART_BYTES:
        raise WorkbookSchemaError(f"{what}: part {name!r} declares {info.file_size} bytes unzipped, more than "
                                  f"{MAX_PART_BYTES} (zip bomb?)")
    try:
        with z.open(info) as fh:
            data = fh.read(MAX_PART_BYTES + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, NotImplementedError) as err:
        raise WorkbookSchemaError(f"{what}: part {name!r} is corrupt: {type(err).__name__}: "
                                  f"{str(err)[:200]}") from None
    if len(data) > MAX_PART_BYTES:
        raise WorkbookSchemaError(f"{what}: part {name!r} inflates beyond {MAX_PART_BYTES} bytes (zip bomb?)")
    return data


def _part(z: zipfile.ZipFile, name: str, what: Path) -> ET.Element:
    data = _read_part(z, name, what)
    if b"<!DOCTYPE" in data[:4096] or b"<!ENTITY" in data:
        raise WorkbookSchemaError(f"{what}: part {name!r} declares a DTD or entities, which xlsx parts never do")
    try:
        return ET.fromstring(data)
    except ET.ParseError as err:
        raise WorkbookSchemaError(f"{what}: part {name!r} is not well-formed XML: {err}") from None


def _open_zip(path: Path) -> zipfile.ZipFile:
    """The workbook as a zip whose parts together declare at most :data:`MAX_TOTAL_BYTES`; errors name the file."""
    if not zipfile.is_zipfile(path):
        raise WorkbookSchemaError(f"{path}: not an xlsx (zip) file")
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as err:
        raise WorkbookSchemaError(f"{path}: corrupt zip: {err}") from None
    total = sum(i.file_size for i in z.infolist())
    if total > MAX_TOTAL_BYTES:
        z.close()
        raise WorkbookSchemaError(f"{path}: its parts declare {total} bytes unzipped, more than {MAX_TOTAL_BYTES} "
                                  f"(zip bomb?)")
    return z


def _rels(z: zipfile.ZipFile, part: str, path: Path) -> dict[str, tuple[str, str]]:
    """``{rId: (type suffix, absolute target)}`` of a part's relationships."""
    folder, name = posixpath.split(part)
    rels_name = posixpath.join(folder, "_rels", name + ".rels")
    if rels_name not in z.namelist():
        return {}
    out = {}
    for rel in _part(z, rels_name, path).findall("pr:Relationship", _NS):
        target = rel.get("Target", "")
        target = target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join(folder, target))
        out[rel.get("Id")] = (rel.get("Type", "").rsplit("/", 1)[-1], target)
    return out


def sheet_names(path: str | Path) -> list[str]:
    """Names of the workbook's sheets, in order."""
    with _open_zip(Path(path)) as z:
        book = _part(z, "xl/workbook.xml", Path(path))
        return [s.get("name") for s in book.findall("m:sheets/m:sheet", _NS)]


def read_cells(path: str | Path, sheet: str = SHEET) -> tuple[dict[tuple[int, int], object], str]:
    """Cached values of a sheet as ``{(row, col): value}`` (1-based) plus its declared dimension ("A1:DN85").

    Raises :class:`WorkbookSchemaError` naming the file and sheet if the sheet is absent or a cell is malformed.
    """
    path = Path(path)
    with _open_zip(path) as z:
        book = _part(z, "xl/workbook.xml", path)
        sheets = {s.get("name"): s.get("{%s}id" % _NS["r"]) for s in book.findall("m:sheets/m:sheet", _NS)}
        if sheet not in sheets:
            raise WorkbookSchemaError(f"{path}: no sheet {sheet!r} (sheets: {list(sheets)})")
        rels = _rels(z, "xl/workbook.xml", path)
        if sheets[sheet] not in rels:
            raise WorkbookSchemaError(f"{path}: sheet {sheet!r} has no relationship {sheets[sheet]!r}")
        sheet_part = rels[sheets[sheet]][1]
        shared_part = next((t for kind, t in rels.values() if kind == "sharedStrings"), None)
        shared = ([_text_runs(si) for si in _part(z, shared_part, path).findall("m:si", _NS)]
                  if shared_part and shared_part in z.namelist() else [])
        root = _part(z, sheet_part, path)
    dim = root.find("m:dimension", _NS)
    dimension = dim.get("ref") if dim is not None else ""
    cells: dict[tuple[int, int], object] = {}
    for c in root.iterfind("m:sheetData/m:row/m:c", _NS):
        ref = c.get("r", "")
        match = _CELL_REF.match(ref)
        if not match:
            raise WorkbookSchemaError(f"{path}: sheet {sheet!r}: cell without a valid reference {ref[:40]!r}")
        key = (int(match.group(2)), col_index(match.group(1)))
        kind = c.get("t", "n")
        v = c.find("m:v", _NS)
        text = v.text if v is not None else None
        try:
            if kind == "inlineStr":
                is_ = c.find("m:is", _NS)
                value: object = _text_runs(is_) if is_ is not None else None
            elif text is None:
                value = None
            elif kind == "s":
                value = shared[int(text)]
            elif kind == "str":
                value = text
            elif kind == "b":
                value = bool(int(text))
            elif kind == "n":
                value = _cast_number(text)
            elif kind == "e":
                value = None
            else:
                raise ValueError(f"unsupported cell type t={kind!r}")
        except (ValueError, IndexError) as err:
            raise WorkbookSchemaError(f"{path}: sheet {sheet!r}: cell {ref}: {str(err)[:100]} "
                                      f"(t={kind[:20]!r}, v={(text or '')[:60]!r})") from err
        cells[key] = value
    return cells, dimension


def read_workbook(path: str | Path, sheet: str = SHEET) -> pd.DataFrame:
    """The sheet as a DataFrame: index = Excel rows 1..85, columns "A".."DN"; values str, int, float, bool or None.

    Raises :class:`WorkbookSchemaError` if the sheet is missing or its dimension is not A1:DN85.
    """
    cells, dimension = read_cells(path, sheet)
    if dimension != DIMENSION:
        raise WorkbookSchemaError(f"{path}: sheet {sheet!r} has dimension {dimension!r}, expected {DIMENSION!r}")
    outside = [(r, c) for r, c in cells if r > N_ROWS or c > N_COLS]
    if outside:
        r, c = outside[0]
        raise WorkbookSchemaError(f"{path}: sheet {sheet!r}: cell {col_letter(c)}{r} lies outside {DIMENSION}")
    data = [[cells.get((r, c)) for c in range(1, N_COLS + 1)] for r in range(1, N_ROWS + 1)]
    frame = pd.DataFrame(data, index=pd.RangeIndex(1, N_ROWS + 1, name="row"), columns=list(COLUMNS), dtype=object)
    return frame


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def check_schema(sheet: pd.DataFrame, where: str = SHEET) -> None:
    """Verify the released layout (spec "Workbook schema"); raise :class:`WorkbookSchemaError` naming the first
    cell, row or column that differs. ``sheet`` is the output of :func:`read_workbook`."""
    if list(sheet.columns) != list(COLUMNS):
        raise WorkbookSchemaError(f"{where}: columns must be A..DN ({N_COLS}), got {len(sheet.columns)}")
    if list(sheet.index) != list(range(1, N_ROWS + 1)):
        raise WorkbookSchemaError(f"{where}: rows must be 1..{N_ROWS}, got {len(sheet.index)}")
    for r in HEADER_ROWS:
        if _blank(sheet.at[r, "A"]):
            raise WorkbookSchemaError(f"{where}!A{r}: section header expected, cell is empty")
    for r in EMPTY_ROWS:
        filled = [c for c in COLUMNS if not _blank(sheet.at[r, c])]
        if filled:
            raise WorkbookSchemaError(f"{where}: row {r} must be empty, {filled[0]}{r} = {sheet.at[r, filled[0]]!r}")
    for r in SUB_ROWS:
        if _blank(sheet.at[r, "B"]) or not _blank(sheet.at[r, "A"]):
            raise WorkbookSchemaError(f"{where}: row {r} must hold a sub-question in column B (A empty)")
    for r in SUBSUB_ROWS:
        if _blank(sheet.at[r, "C"]) or not (_blank(sheet.at[r, "A"]) and _blank(sheet.at[r, "B"])):
            raise WorkbookSchemaError(f"{where}: row {r} must hold a sub-sub-question in column C (A, B empty)")
    for r in BOOL_ROWS:
        for c in STUDY_COLUMNS:
            if not isinstance(sheet.at[r, c], bool):
                raise WorkbookSchemaError(f"{where}!{c}{r}: boolean expected in row {r}, got {sheet.at[r, c]!r}")


def is_number(value: object) -> bool:
    """Excel's ISNUMBER on a cached value: int or float, not bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
