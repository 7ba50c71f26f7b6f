"""The McAuley Amazon 2014 product data of the paper (Sports_and_Outdoors, Beauty, CDs_and_Vinyl; paper §4.1) read
from the publisher's files, and the paper's preprocessing up to the item texts.

Files (``manifest.csv``; formats as published at snap.stanford.edu/data/amazon/productGraph):

* ``reviews_<Category>_5.json.gz``: gzip, one JSON object per line (strict JSON, double quotes), e.g.
  ``{"reviewerID": "A2SUAM1J3GNN3B", "asin": "0000013714", "reviewerName": "J. McDonald", "helpful": [2, 3],
  "reviewText": "...", "overall": 5.0, "summary": "...", "unixReviewTime": 1252800000, "reviewTime": "09 13,
  2009"}``. Only ``reviewerID``, ``asin`` and ``unixReviewTime`` are used.
* ``meta_<Category>.json.gz``: gzip, one *Python dict literal* per line (single quotes; not JSON), e.g.
  ``{'asin': '0000031852', 'title': '...', 'price': 3.17, 'imUrl': '...', 'related': {...}, 'salesRank': {...},
  'brand': '...', 'categories': [['Sports & Outdoors', 'Other Sports']]}``. Parsed with :func:`ast.literal_eval`
  (literals only; never ``eval``).

Preprocessing (paper §4.1 and the authors' released pipeline): iterative 5-core on (user, item) interactions (the
``_5`` files are 5-core by construction, so on the real files this removes nothing; it is applied and logged so a
file that is not 5-core is handled as the paper describes), each user's items in chronological order (ties keep
the file order), users and items numbered in order of first appearance, leave-last-out split (:func:`.data.split`),
and one text per item from its metadata fields ``title, price, brand, feature, categories, description`` (in that
order; :func:`meta_sentence`).

Every error names the file, the line and the field.
"""
from __future__ import annotations

import ast
import gzip
import html
import json
import re
import zlib
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from icml25.core.datasets import DataError

from .data import k_core

REVIEW_FIELDS = ("reviewerID", "asin", "unixReviewTime")
META_FIELDS = ("title", "price", "brand", "feature", "categories", "description")  # the item text, in this order
MAX_FIELD_CHARS = 2000  # a cleaned field this long or longer is dropped (the authors' text cleaning) [R]
_ASIN = re.compile(r"""['"]asin['"]\s*:\s*['"]([^'"]*)['"]""")
_TAG = re.compile(r"</?\w+[^>]*>")
_DROP = re.compile(r'["\n\r]')


def _lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) of a gzip text file; a corrupt or truncated gzip raises naming the file."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            yield from enumerate(fh, start=1)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
        raise DataError(f"{path}: not a readable gzip text file ({err})") from None


def read_reviews(path: str | Path) -> pd.DataFrame:
    """The interactions of a ``reviews_*_5.json.gz``: columns ``user`` (reviewerID), ``item`` (asin), ``time``
    (unixReviewTime, int seconds) and ``line`` (1-based line in the file), in file order. Blank lines are skipped;
    a line that is not a JSON object, lacks a field or has a field of the wrong type raises :class:`DataError`
    naming file, line and field."""
    users, items, times, lines = [], [], [], []
    for no, text in _lines(path):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{no}: not a JSON object ({err.msg} at column {err.colno})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{no}: expected a JSON object, got {type(obj).__name__}")
        for field in REVIEW_FIELDS:
            if field not in obj:
                raise DataError(f"{path}:{no}: field {field!r} missing")
        for field in ("reviewerID", "asin"):
            if not isinstance(obj[field], str) or not obj[field]:
                raise DataError(f"{path}:{no}: field {field!r} must be a non-empty string, got {obj[field]!r}")
        t = obj["unixReviewTime"]
        if isinstance(t, bool) or not isinstance(t, int) or t < 0:
            raise DataError(f"{path}:{no}: field 'unixReviewTime' must be a non-negative integer, got {t!r}")
        users.append(obj["reviewerID"])
        items.append(obj["asin"])
        times.append(t)
        lines.append(no)
    if not users:
        raise DataError(f"{path}: no reviews")
    return pd.DataFrame({"user": users, "item": items, "time": pd.array(times, dtype="int64"),
                         "line": pd.array(lines, dtype="int64")})


def read_meta(path: str | Path, asins: Collection[str] | None = None) -> dict[str, dict[str, Any]]:
    """``{asin: metadata dict}`` of a ``meta_*.json.gz`` (one Python dict literal per line, parsed with
    :func:`ast.literal_eval`). With ``asins``, lines whose ``'asin'`` (found by a regular expression before
    parsing) is not among them are skipped unparsed (the meta files hold many items without 5-core reviews); a line
    without a recognisable asin is parsed and checked. A line that is not a dict literal, has no string ``asin`` or
    repeats an asin raises :class:`DataError` naming file, line and field."""
    want = None if asins is None else set(asins)
    out: dict[str, dict[str, Any]] = {}
    for no, text in _lines(path):
        if not text.strip():
            continue
        m = _ASIN.search(text)
        if want is not None and m is not None and m.group(1) not in want:
            continue
        try:
            obj = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError) as err:
            raise DataError(f"{path}:{no}: not a Python dict literal ({type(err).__name__}: {err})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{no}: expected a dict literal, got {type(obj).__name__}")
        asin = obj.get("asin")
        if not isinstance(asin, str) or not asin:
            raise DataError(f"{path}:{no}: field 'asin' missing or not a non-empty string ({asin!r})")
        if want is not None and asin not in want:
            continue
        if asin in out:
            raise DataError(f"{path}:{no}: field 'asin' {asin!r} repeats an earlier line")
        for field in META_FIELDS:
            if field in obj:
                _check_meta_field(obj[field], path, no, field)
        out[asin] = obj
    return out


def _check_meta_field(value: Any, path: str | Path, no: int, field: str) -> None:
    """The types the text builder accepts: a number (price), a string, a list of strings or a list of lists of
    strings (categories)."""
    ok = (isinstance(value, (int, float, str)) and not isinstance(value, bool)) or (
        isinstance(value, list) and (all(isinstance(v, str) for v in value)
                                     or all(isinstance(v, list) and all(isinstance(s, str) for s in v)
                                            for v in value)))
    if not ok:
        raise DataError(f"{path}:{no}: field {field!r} has an unsupported value {str(value)[:80]!r} (expected a "
                        "number, a string, a list of strings or a list of lists of strings)")


def sequences(df: pd.DataFrame) -> tuple[list[str], list[str], list[list[int]]]:
    """``(user ids, item asins, per-user item-index lists)``: users in order of first appearance in the file, each
    user's interactions sorted by ``time`` (stable: ties keep the file order), items numbered 0.. in order of first
    appearance when the users' sorted sequences are read one after the other (the authors' numbering, 0-based
    here because PAD is a token, not an item)."""
    order = df.sort_values(["time", "line"], kind="stable")
    first = {u: i for i, u in enumerate(dict.fromkeys(df["user"]))}
    grouped: dict[str, list[str]] = {u: [] for u in first}
    for u, it in zip(order["user"], order["item"]):
        grouped[u].append(it)
    item_idx: dict[str, int] = {}
    seqs = []
    for u in first:
        s = []
        for it in grouped[u]:
            s.append(item_idx.setdefault(it, len(item_idx)))
        seqs.append(s)
    return list(first), list(item_idx), seqs


def clean_text(raw: str) -> str:
    """One metadata string as text [R: our rendering of the authors' cleaning]: HTML entities unescaped, tags,
    double quotes and line breaks removed, surrounding blanks stripped, trailing dots collapsed to exactly one
    ``.``; a result of :data:`MAX_FIELD_CHARS` characters or more becomes ``""``."""
    text = html.unescape(str(raw).strip())
    text = _DROP.sub("", _TAG.sub("", text)).strip()
    text = text.rstrip(".") + "."
    return "" if len(text) >= MAX_FIELD_CHARS else text


def field_sentence(value: Any) -> str:
    """One field's sentence (followed by a space): a number ``"<value>."``; a list of lists (categories) the
    cleaned inner strings without their final dot, joined by ``", "``, then ``"."``; a list of strings their
    cleaned texts concatenated; a string its cleaned text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        s = f"{value}."
    elif isinstance(value, list) and value and isinstance(value[0], list):
        s = ", ".join(clean_text(v)[:-1] for inner in value for v in inner) + "."
    elif isinstance(value, list):
        s = "".join(clean_text(v) for v in value)
    else:
        s = clean_text(value)
    return s + " "


def meta_sentence(meta: Mapping[str, Any] | None) -> str:
    """The item text: :func:`field_sentence` of ``title, price, brand, feature, categories, description`` in that
    order, for the fields present; ``""`` for an item without metadata."""
    if not meta:
        return ""
    return "".join(field_sentence(meta[f]) for f in META_FIELDS if f in meta)


def load_category(reviews_path: str | Path, meta_path: str | Path, k: int = 5) -> dict[str, Any]:
    """Reviews → k-core → chronological sequences; metadata of the kept items → item texts.

    Returns ``{"users", "asins", "seqs", "texts", "stats"}``: ``texts[i]`` is the text of item ``i`` (``asins[i]``);
    ``stats`` counts interactions before/after the k-core, users, items and items without metadata."""
    reviews = read_reviews(reviews_path)
    kept = k_core(reviews, k)
    if kept.empty:
        raise DataError(f"{reviews_path}: nothing left after the {k}-core filter ({len(reviews)} interactions)")
    users, asins, seqs = sequences(kept)
    meta = read_meta(meta_path, set(asins))
    texts = [meta_sentence(meta.get(a)) for a in asins]
    stats = {"interactions_raw": len(reviews), "interactions": len(kept), "users": len(users), "items": len(asins),
             "items_without_meta": sum(a not in meta for a in asins), "k_core": k}
    return {"users": users, "asins": asins, "seqs": seqs, "texts": texts, "stats": stats}
