"""Miniature CSVs for the paper-scale rehearsal of morphing_flow (``icml25.core.rehearsal``).

The paper scale downloads eight files through ``manifest.csv`` and reads them with :func:`.data.read_raw`:

* ETTh1/ETTh2/ETTm1/ETTm2 (``zhouhaoyi/ETDataset``, ``ETT-small/<name>.csv``): header
  ``date,HUFL,HULL,MUFL,MULL,LUFL,LULL,OT``, dates ``2016-07-01 00:00:00`` hourly (ETTh) or every 15 min (ETTm),
  values float32 numbers written as their float64 repr (``5.827000141143799``). ETTh1 keeps the paper's TSLib
  borders (``split: etth`` needs at least 14,400 rows; the real file has 17,420), so the miniature has exactly
  14,400 rows and the border code runs on its real borders. ETTh2, ETTm1 and ETTm2 have 300 rows and the rehearsal
  yaml splits them 70/10/20 (``split: ratio``): the ``ettm`` borders need 57,600 rows, whose stride-1 test windows
  alone would cost more than the whole rehearsal budget (the borders are unit-tested in test_morphing_flow.py).
* the Autoformer bundle (``AutonLab/Timeseries-PILE``, ``forecasting/autoformer/``): ``date`` + value columns ending
  in ``OT``; Electricity (321 values, ``0 .. 319, OT``) and Traffic (862 values) hourly from ``2016-07-01
  02:00:00``, Weather (21 named quantities, latin-1 units ``W/m\\xb2``, ``\\xb5mol/m\\xb2/s``) every 10 min from
  ``2020-01-01 00:10:00``, Exchange (8 values) daily in the bundle's own date format ``1990/1/1 0:00``. Same
  headers, column counts, encodings and date formats as the real files; only the row counts (300 instead of
  7,588-52,696; the 70/10/20 split needs only L + H rows per split) and the numbers differ.

Values: a daily (or, for Exchange, weekly) sine per channel plus Student-t(3) noise from a fixed seed (fat-tailed
like the real series, so the Flow has something to slim). Same bytes on every call.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from .data import AUTOFORMER, AUTOFORMER_ENCODING, ETT_COLUMNS

ETT_ROWS = {"ETTh1": 14400, "ETTh2": 300, "ETTm1": 300, "ETTm2": 300}  #: ETTh1: the etth borders' minimum
AUTOFORMER_ROWS = 300  #: the 70/10/20 split's validation part must hold L + H = 72 rows
WEATHER_COLUMNS = ("p (mbar)", "T (degC)", "Tpot (K)", "Tdew (degC)", "rh (%)", "VPmax (mbar)", "VPact (mbar)",
                   "VPdef (mbar)", "sh (g/kg)", "H2OC (mmol/mol)", "rho (g/m**3)", "wv (m/s)", "max. wv (m/s)",
                   "wd (deg)", "rain (mm)", "raining (s)", "SWDR (W/m\xb2)", "PAR (\xb5mol/m\xb2/s)",
                   "max. PAR (\xb5mol/m\xb2/s)", "Tlog (degC)", "OT")
#: dataset -> (first timestamp, step, period of the sine in rows, seed)
CLOCK = {"ETTh1": ("2016-07-01 00:00:00", "h", 24, 1), "ETTh2": ("2016-07-01 00:00:00", "h", 24, 2),
         "ETTm1": ("2016-07-01 00:00:00", "15min", 96, 3), "ETTm2": ("2016-07-01 00:00:00", "15min", 96, 4),
         "Electricity": ("2016-07-01 02:00:00", "h", 24, 5), "Traffic": ("2016-07-01 02:00:00", "h", 24, 6),
         "Weather": ("2020-01-01 00:10:00", "10min", 144, 7), "Exchange": ("1990-01-01", "D", 7, 8)}


def _values(n: int, c: int, period: int, seed: int) -> np.ndarray:
    """(n, c) float32: level + amplitude * sin(2 pi t / period + phase) + 0.3 * Student-t(3) noise."""
    rng = np.random.default_rng([20250614, seed])
    t = np.arange(n)[:, None]
    level, amp = rng.uniform(1, 20, c), rng.uniform(0.5, 3, c)
    phase = rng.uniform(0, 2 * np.pi, c)
    x = level + amp * np.sin(2 * np.pi * t / period + phase) + 0.3 * rng.standard_t(3, (n, c))
    return np.round(x, 3).astype(np.float32)


def _dates(name: str, n: int) -> list[str]:
    start, step, _, _ = CLOCK[name]
    idx = pd.date_range(start, periods=n, freq=step)
    if name == "Exchange":  # the bundle's exchange_rate.csv writes "1990/1/1 0:00"
        return [f"{d.year}/{d.month}/{d.day} 0:00" for d in idx]
    return list(idx.strftime("%Y-%m-%d %H:%M:%S"))


def csv_bytes(name: str, n: int | None = None) -> bytes:
    """The miniature file of dataset ``name`` (a manifest row name) with ``n`` rows (default: the module's)."""
    if name in ETT_ROWS:
        columns, encoding = ("date", *ETT_COLUMNS), "utf-8"
        n = n or ETT_ROWS[name]
    elif name in AUTOFORMER:
        k = AUTOFORMER[name][1]
        values = WEATHER_COLUMNS if name == "Weather" else (*map(str, range(k - 1)), "OT")
        columns, encoding = ("date", *values), AUTOFORMER_ENCODING
        n = n or AUTOFORMER_ROWS
    else:
        raise ValueError(f"morphing_flow rehearsal: no miniature for {name!r}")
    x = _values(n, len(columns) - 1, CLOCK[name][2], CLOCK[name][3])
    cells = np.vectorize(lambda v: repr(float(v)), otypes=[object])(x)  # float32 values as float64 reprs
    lines = [",".join(columns)]
    lines += [d + "," + ",".join(row) for d, row in zip(_dates(name, n), cells.tolist())]
    return ("\n".join(lines) + "\n").encode(encoding)


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """Write every paper dataset's miniature at its manifest ``mirror_path`` under ``root``; return the rows."""
    names = [*ETT_ROWS, *AUTOFORMER]
    for name in names:
        dest = Path(root) / manifest[name].mirror_path
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".tmp")
        tmp.write_bytes(csv_bytes(name))
        tmp.replace(dest)
    return names
