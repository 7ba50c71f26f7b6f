"""Data of the morphing_flow study: the fat-tailed ETT-format generator, the series shipped in the ``pmdarima``
wheel (``msft``, ``taylor``), verified remote CSVs, CSV reading with clear errors, TSLib split borders, the
train-only scaler and sliding windows.

Every array here is ``(T, C)``: T time steps (rows), C channels, float64. Nothing imports torch; pandas and scipy
are imported inside the functions that use them, so the train/evaluate jobs (windows, manifests) never load them.
"""
from __future__ import annotations

import ast
import csv
import hashlib
import importlib.resources
import importlib.util
import io
import tarfile
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from icml25.core import download
from icml25.core.io import atomic_path

from .config import garch_problem

ETT_COLUMNS: tuple[str, ...] = ("HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT")
MSFT_COLUMNS: tuple[str, ...] = ("Date", "Open", "High", "Low", "Close", "Volume", "OpenInt")
MSFT_FEATURES: tuple[str, ...] = ("r_open", "r_high", "r_low", "r_close", "d_log_volume")
#: The Autoformer bundle (Wu et al. 2021): dataset -> (file in ``forecasting/autoformer/``, value columns). Each file
#: is ``date`` + value columns whose last is ``OT``; Electricity, Traffic and Exchange number the others
#: ``0 .. n-2``, Weather names its meteorological quantities (latin-1 units such as W/m\xb2 in some headers).
AUTOFORMER: dict[str, tuple[str, int]] = {
    "Electricity": ("electricity.csv", 321),
    "Traffic": ("traffic.csv", 862),
    "Weather": ("weather.csv", 21),
    "Exchange": ("exchange_rate.csv", 8),
}
AUTOFORMER_ENCODING = "latin-1"  # decodes every byte: Weather's unit characters are not valid UTF-8 everywhere

#: Defaults of the generator; every key is an [R] reconstruction (the paper publishes no generator).
GENERATOR_DEFAULTS: dict[str, Any] = {
    "n_channels": 7,             # ETT layout: 6 loads + OT; fewer keeps the first n-1 loads and OT
    "start": "2016-07-01",       # first hourly timestamp
    "daily_amp": (1.0, 3.0),     # A_d ~ U(lo, hi)
    "weekly_amp": (0.5, 1.5),    # A_w ~ U(lo, hi)
    "ar": 0.7,                   # AR(1) coefficient of the noise e_t
    "nu": 3.0,                   # Student-t degrees of freedom of the (unit-variance) innovations
    "garch": (0.05, 0.10, 0.85),  # (omega, alpha, beta) of the GARCH(1,1) variance sigma_t^2
    "jump_rate": 1 / 500,        # Poisson jump arrivals per hour
    "jump_scale": 3.0,           # Laplace(0, scale) jump sizes
    "jump_half_life": 12.0,      # hours
    "regime_high": 2.5,          # regime multiplier r_t in {1, regime_high}
    "regime_mean_hours": 2000.0,  # mean of the geometric regime durations
    "forced_hours": 1000,        # the last rows are forced into the high regime
    "level_sd": 0.02,            # sd of the random-walk steps of the level
    "ot_weight": 0.5,            # OT = ot_weight * mean(loads) + its own noise
}


# ------------------------------------------------------------------------------------------- generator


def _cfg(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    out = dict(GENERATOR_DEFAULTS)
    if cfg:
        unknown = set(cfg) - set(out)
        if unknown:
            raise KeyError(f"make_fat_tailed_ett: unknown generator key(s) {sorted(unknown)}; "
                           f"expected a subset of {sorted(out)}")
        out.update(cfg)
    if not 2 <= int(out["n_channels"]) <= len(ETT_COLUMNS):
        raise ValueError(f"make_fat_tailed_ett: n_channels must be in [2, 7], got {out['n_channels']}")
    if out["nu"] <= 2:
        raise ValueError(f"make_fat_tailed_ett: nu must exceed 2 for unit-variance innovations, got {out['nu']}")
    return out


def channel_names(n_channels: int) -> list[str]:
    """ETT column names for ``n_channels`` channels: the first n-1 loads and ``OT``."""
    return [*ETT_COLUMNS[: n_channels - 1], "OT"]


def _regime(n: int, rng: np.random.Generator, c: Mapping[str, Any]) -> np.ndarray:
    """r_t in {1, high}: alternating geometric durations (mean ``regime_mean_hours``), start low, last
    ``forced_hours`` forced high."""
    r = np.empty(n)
    t, high = 0, False
    while t < n:
        d = int(rng.geometric(1.0 / c["regime_mean_hours"]))
        r[t:t + d] = c["regime_high"] if high else 1.0
        t, high = t + d, not high
    r[max(n - int(c["forced_hours"]), 0):] = c["regime_high"]
    return r


def _garch_t_noise(n: int, k: int, rng: np.random.Generator, c: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(sigma_t, e_t), both (n, k): GARCH(1,1) volatility driven by unit-variance Student-t shocks eta_t,
    sigma_t^2 = omega + alpha (sigma_{t-1} eta_{t-1})^2 + beta sigma_{t-1}^2, and the AR(1) noise
    e_t = ar e_{t-1} + eta_t."""
    from scipy.signal import lfilter

    nu = c["nu"]
    eta = rng.standard_t(nu, size=(n, k)) * np.sqrt((nu - 2.0) / nu)
    omega, alpha, beta = c["garch"]
    if (problem := garch_problem((omega, alpha, beta))) is not None:
        raise ValueError(f"generator garch: {problem}")
    var = np.empty((n, k))
    v = np.full(k, omega / max(1.0 - alpha - beta, 1e-6))  # start at the unconditional variance
    for t in range(n):
        var[t] = v
        v = omega + alpha * v * eta[t] ** 2 + beta * v
    e = lfilter([1.0], [1.0, -c["ar"]], eta, axis=0)
    return np.sqrt(var), e


def make_fat_tailed_ett(n_rows: int, seed: int, cfg: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """A synthetic ETT-format table: ``date`` (hourly from ``cfg['start']``) and ETT channel columns.

    Per channel: x_t = l_t + A_d sin(2 pi t/24 + phi) + A_w sin(2 pi t/168 + psi) + r_t sigma_t e_t + J_t with a
    random-walk level l_t, AR(1) noise e_t driven by unit-variance Student-t(nu) shocks, GARCH(1,1) volatility
    sigma_t, Poisson jumps of Laplace size decaying with a half-life, and a shared regime multiplier r_t that is
    forced high over the last ``forced_hours``. ``OT = ot_weight * mean(loads) + its own r_t sigma_t e_t``.
    Deterministic in ``seed`` (numpy ``default_rng``). ``cfg`` overrides :data:`GENERATOR_DEFAULTS` keys."""
    import pandas as pd
    from scipy.signal import lfilter

    c = _cfg(cfg)
    n, k = int(n_rows), int(c["n_channels"])
    if n < 2:
        raise ValueError(f"make_fat_tailed_ett: n_rows must be at least 2, got {n_rows}")
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=np.float64)[:, None]
    a_d = rng.uniform(*c["daily_amp"], size=k)
    a_w = rng.uniform(*c["weekly_amp"], size=k)
    phi, psi = rng.uniform(0, 2 * np.pi, size=k), rng.uniform(0, 2 * np.pi, size=k)
    level = np.cumsum(rng.normal(0.0, c["level_sd"], size=(n, k)), axis=0)
    seasonal = a_d * np.sin(2 * np.pi * t / 24 + phi) + a_w * np.sin(2 * np.pi * t / 168 + psi)
    r = _regime(n, rng, c)[:, None]
    sigma, e = _garch_t_noise(n, k, rng, c)
    arrivals = rng.poisson(c["jump_rate"], size=(n, k)).astype(np.float64)
    sizes = rng.laplace(0.0, c["jump_scale"], size=(n, k))
    decay = 0.5 ** (1.0 / c["jump_half_life"])
    jumps = lfilter([1.0], [1.0, -decay], arrivals * sizes, axis=0)
    x = level + seasonal + r * sigma * e + jumps
    # OT: weighted mean of the loads plus its own noise (the OT column's r sigma e)
    x[:, -1] = c["ot_weight"] * x[:, :-1].mean(axis=1) + (r * sigma * e)[:, -1]
    dates = pd.date_range(c["start"], periods=n, freq="h")
    df = pd.DataFrame(x, columns=channel_names(k))
    df.insert(0, "date", dates.strftime("%Y-%m-%d %H:%M:%S"))
    return df


# --------------------------------------------------------------------------------------------- CSV I/O


def write_csv(df: pd.DataFrame, path: str | Path) -> Path:
    """Write ``df`` atomically as CSV (no index; floats at full precision, so the round trip is exact)."""
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, float_format="%.17g")
    return Path(path)


def read_series_csv(path: str | Path | io.IOBase, columns: Sequence[str], *, date_col: str = "date",
                    min_rows: int = 1, encoding: str = "utf-8") -> pd.DataFrame:
    """Read a time-indexed CSV and validate it; returns the frame with ``date_col`` parsed to datetimes.

    Raises ValueError naming the file and the column or row for: a missing or extra column (``columns`` lists
    the value columns, in any order), a non-numeric or missing value, an unparsable, unsorted or duplicated
    timestamp, fewer than ``min_rows`` rows. ``path`` may also be an open binary/text buffer; ``encoding`` is the
    file's text encoding."""
    import pandas as pd

    source = path
    if isinstance(path, (str, Path)):
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: file not found")
    else:
        path = getattr(path, "name", None) or "<buffer>"
    df = pd.read_csv(source, dtype=str, keep_default_na=False, encoding=encoding)
    expected = [date_col, *columns]
    missing = [c for c in expected if c not in df.columns]
    extra = [c for c in df.columns if c not in expected]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}")
    if extra:
        raise ValueError(f"{path}: unexpected column(s) {extra}; expected {expected}")
    if len(df) < min_rows:
        raise ValueError(f"{path}: {len(df)} rows, need at least {min_rows} (lookback + horizon)")
    out = pd.DataFrame({date_col: pd.to_datetime(df[date_col], errors="coerce")})
    bad = out[date_col].isna().to_numpy()
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{path}: column {date_col!r}, row {i + 2}: unparsable timestamp {df[date_col].iloc[i]!r}")
    diffs = out[date_col].diff().iloc[1:]
    if (diffs == pd.Timedelta(0)).any():
        i = int(np.argmax((diffs == pd.Timedelta(0)).to_numpy())) + 1
        raise ValueError(f"{path}: column {date_col!r}, row {i + 2}: duplicated timestamp {df[date_col].iloc[i]!r}")
    if (diffs < pd.Timedelta(0)).any():
        i = int(np.argmax((diffs < pd.Timedelta(0)).to_numpy())) + 1
        raise ValueError(f"{path}: column {date_col!r}, row {i + 2}: timestamps not sorted ({df[date_col].iloc[i]!r} "
                         f"after {df[date_col].iloc[i - 1]!r})")
    numeric = {}
    for col in columns:
        values = pd.to_numeric(df[col], errors="coerce")
        bad = (values.isna() | ~np.isfinite(values)).to_numpy()
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{path}: column {col!r}, row {i + 2}: non-numeric value {df[col].iloc[i]!r}")
        numeric[col] = values.astype(np.float64)
    return pd.concat([out, pd.DataFrame(numeric, index=out.index)], axis=1)  # one block: no per-column inserts


def read_ett_csv(path: str | Path, n_channels: int = 7, min_rows: int = 1) -> pd.DataFrame:
    """An ETT-format CSV (``date`` + the ETT channel columns for ``n_channels``) read and validated."""
    return read_series_csv(path, channel_names(n_channels), min_rows=min_rows)


def autoformer_columns(path: str | Path, name: str) -> list[str]:
    """The value columns of an Autoformer-bundle CSV ``name`` (Electricity, Traffic, Weather, Exchange), read from its
    header and validated: first column ``date``, then exactly the dataset's number of value columns, the last one
    ``OT``; for the numbered datasets the others are ``0 .. n-2`` in order. Raises ValueError naming the file and
    the column."""
    if name not in AUTOFORMER:
        raise ValueError(f"{path}: {name!r} is not an Autoformer-bundle dataset; expected one of {sorted(AUTOFORMER)}")
    n_values = AUTOFORMER[name][1]
    with open(path, newline="", encoding=AUTOFORMER_ENCODING) as fh:
        header = [h.strip() for h in next(csv.reader([fh.readline()]), [])]
    if not header or header[0] != "date":
        raise ValueError(f"{path}: first column must be 'date', got {header[:1]}")
    values = header[1:]
    if len(values) != n_values:
        raise ValueError(f"{path}: {name} has {n_values} value columns (the last 'OT'), the header has "
                         f"{len(values)}")
    if values[-1] != "OT":
        raise ValueError(f"{path}: the last column must be 'OT', got {values[-1]!r}")
    if name != "Weather":
        for i, col in enumerate(values[:-1]):
            if col != str(i):
                raise ValueError(f"{path}: column {i + 2} must be named {str(i)!r}, got {col!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"{path}: duplicated column name(s) in the header")
    return values


def read_autoformer_csv(path: str | Path, name: str, min_rows: int = 1) -> pd.DataFrame:
    """An Autoformer-bundle CSV (``date`` + value columns ending in ``OT``) read and validated like every other
    series: header shape (:func:`autoformer_columns`), numeric values, sorted unique timestamps, row count."""
    return read_series_csv(path, autoformer_columns(path, name), min_rows=min_rows, encoding=AUTOFORMER_ENCODING)


# ------------------------------------------------------------------------------------- packaged series


def packaged() -> dict[str, dict[str, str]]:
    """Rows of the study's ``packaged.csv``: files shipped in the ``pmdarima`` wheel with their sha256."""
    text = importlib.resources.files(__package__).joinpath("packaged.csv").read_text()
    return {row["name"]: row for row in csv.DictReader(text.splitlines())}


def _package_file(row: Mapping[str, str]) -> Path:
    """Path of a file inside an installed package, found without importing it (pmdarima's import is heavy)."""
    spec = importlib.util.find_spec(row["package"])
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"{row['name']}: package {row['package']}=={row['version']} is not installed "
                                f"(pip install 'icml25[morphing_flow]')")
    path = Path(next(iter(spec.submodule_search_locations)), row["path"])
    if not path.is_file():
        raise FileNotFoundError(f"{row['name']}: {path} not found in the installed {row['package']}")
    return path


def _check_sha(name: str, where: str, blob: bytes, expected: str) -> None:
    got = hashlib.sha256(blob).hexdigest()
    if got != expected:
        raise ValueError(f"{name}: {where} has sha256 {got}, packaged.csv pins {expected}")


def msft_csv_bytes() -> bytes:
    """The bytes of ``msft.csv`` from the verified ``pmdarima`` tarball (both hashes checked)."""
    rows = packaged()
    tar_row, csv_row = rows["msft_tarball"], rows["msft"]
    path = _package_file(tar_row)
    blob = path.read_bytes()
    _check_sha("msft", str(path), blob, tar_row["sha256"])
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        member = tar.extractfile(csv_row["member"])
        if member is None:
            raise ValueError(f"msft: {path} has no member {csv_row['member']!r}")
        data = member.read()
    _check_sha("msft", f"{path}:{csv_row['member']}", data, csv_row["sha256"])
    return data


def extract_msft(dest: str | Path) -> Path:
    """Write the verified ``msft.csv`` atomically to ``dest``; returns ``dest``."""
    data = msft_csv_bytes()
    with atomic_path(dest) as tmp:
        tmp.write_bytes(data)
    return Path(dest)


def read_msft_csv(path: str | Path | io.IOBase, min_rows: int = 2) -> pd.DataFrame:
    """``msft.csv`` (Date/Open/High/Low/Close/Volume/OpenInt) read and validated; prices must be positive."""
    df = read_series_csv(path, MSFT_COLUMNS[1:], date_col="Date", min_rows=min_rows)
    for col in ("Open", "High", "Low", "Close"):
        bad = (df[col] <= 0).to_numpy()
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{path}: column {col!r}, row {i + 2}: price must be positive, got {df[col].iloc[i]}")
    if (df["Volume"] < 0).any():
        i = int(np.argmax((df["Volume"] < 0).to_numpy()))
        raise ValueError(f"{path}: column 'Volume', row {i + 2}: negative volume")
    return df


def msft_features(df: pd.DataFrame) -> pd.DataFrame:
    """Five stationarised channels (T-1 rows): log-returns of Open/High/Low/Close and the difference of
    log(Volume + 1); the ``date`` column is the later date of each difference."""
    import pandas as pd

    prices = np.log(df[["Open", "High", "Low", "Close"]].to_numpy(np.float64))
    vol = np.log(df["Volume"].to_numpy(np.float64) + 1.0)
    values = np.column_stack([np.diff(prices, axis=0), np.diff(vol)])
    out = pd.DataFrame(values, columns=list(MSFT_FEATURES))
    out.insert(0, "date", pd.to_datetime(df["Date"]).iloc[1:].to_numpy())
    return out


def load_taylor() -> np.ndarray:
    """Half-hourly England & Wales electricity demand, 5 Jun - 27 Aug 2000 (4,032 values, MW), parsed from the
    array literal in the verified ``pmdarima/datasets/taylor.py`` without importing pmdarima."""
    row = packaged()["taylor"]
    path = _package_file(row)
    text = path.read_bytes()
    _check_sha("taylor", str(path), text, row["sha256"])
    tree = ast.parse(text.decode("utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "array" and node.args:
            values = np.asarray(ast.literal_eval(node.args[0]), dtype=np.float64)
            if values.size > 1000:
                return values
    raise ValueError(f"taylor: no array literal found in {path}")


TAYLOR_START = "2000-06-05 00:00:00"  # first half-hour of the taylor series (5 Jun - 27 Aug 2000)


def taylor_frame() -> pd.DataFrame:
    """The taylor series as a table: ``date`` (half-hourly from 5 Jun 2000) and ``demand`` (MW)."""
    import pandas as pd

    values = load_taylor()
    dates = pd.date_range(TAYLOR_START, periods=len(values), freq="30min")
    return pd.DataFrame({"date": dates.strftime("%Y-%m-%d %H:%M:%S"), "demand": values})


def read_raw(name: str, path: str | Path, n_channels: int = 7, min_rows: int = 1) -> np.ndarray:
    """The (T, C) float64 values of a raw dataset file, read and validated by its reader: ``synth`` (ETT columns
    for ``n_channels``), ``msft`` (prices -> the five return channels), ``taylor`` (demand), ETT (7 columns), the
    Autoformer bundle (:data:`AUTOFORMER`: its value columns, ``OT`` last).
    Errors name the file and the column or row."""
    if name == "synth":
        return read_ett_csv(path, n_channels, min_rows).iloc[:, 1:].to_numpy(np.float64)
    if name == "msft":
        return msft_features(read_msft_csv(path, min_rows + 1)).iloc[:, 1:].to_numpy(np.float64)
    if name == "taylor":
        return read_series_csv(path, ["demand"], min_rows=min_rows).iloc[:, 1:].to_numpy(np.float64)
    if name.startswith("ETT"):
        return read_ett_csv(path, len(ETT_COLUMNS), min_rows).iloc[:, 1:].to_numpy(np.float64)
    if name in AUTOFORMER:
        return read_autoformer_csv(path, name, min_rows).iloc[:, 1:].to_numpy(np.float64)
    raise ValueError(f"{path}: unknown dataset {name!r}")


# ------------------------------------------------------------------------------------------- downloads


def mirror_path_for(url: str) -> str:
    """Where a remote file lives under a mirror base (URL or directory): the origin URL with its revision dropped.

    ``https://raw.githubusercontent.com/{owner}/{repo}/{ref}/{path}`` -> ``{owner}/{repo}/{path}`` and
    ``https://huggingface.co/datasets/{owner}/{repo}/resolve/{rev}/{path}`` -> ``{owner}/{repo}/{path}``; the
    manifest's ``mirror_path`` column holds this (tested), and :func:`icml25.core.download.source_url` joins it to the
    mirror base. Any other URL raises ValueError naming it."""
    parsed = urllib.parse.urlparse(url)
    parts = [p for p in parsed.path.split("/") if p]
    if parsed.scheme == "https" and parsed.netloc == "raw.githubusercontent.com" and len(parts) >= 4:
        owner, repo, _ref, *rest = parts
        return "/".join([owner, repo, *rest])
    if (parsed.scheme == "https" and parsed.netloc == "huggingface.co" and len(parts) >= 6 and parts[0] == "datasets"
            and parts[3] == "resolve"):
        _, owner, repo, _, _rev, *rest = parts
        return "/".join([owner, repo, *rest])
    raise ValueError(f"mirror_path_for: no mirror rule for {url!r} (raw.githubusercontent.com or huggingface.co "
                     f"datasets .../resolve/<rev>/... expected)")


def url_revision(url: str) -> str:
    """The revision a remote URL names: the ``{ref}`` of ``raw.githubusercontent.com/{owner}/{repo}/{ref}/...`` or
    the ``{rev}`` of ``huggingface.co/datasets/{owner}/{repo}/resolve/{rev}/...`` (a 40-hex commit in every row of
    ``manifest.csv``, tested). Any other URL raises ValueError naming it (the rule of :func:`mirror_path_for`)."""
    mirror_path_for(url)  # the same two URL forms, or the same error
    parts = [p for p in urllib.parse.urlparse(url).path.split("/") if p]
    return parts[2] if parts[0] != "datasets" else parts[4]


def data_files(rows: Sequence[Mapping[str, Any]], entries: Mapping[str, download.ManifestEntry]) -> dict[str, dict]:
    """The ``data_files`` block of the paper-scale ``claims.json`` (and the MLflow params of the download stage):
    for every remote dataset among ``rows`` (the download stage's ``raw/manifest.csv``: name, source, bytes,
    sha256), the URL, the revision it names (:func:`url_revision`), the bytes and sha256 that were read, and
    ``pin``: ``manifest`` when ``manifest.csv`` pins the hash (the download was checked against it) or
    ``trusted_first_download`` when the row is ``UNPINNED`` and the hash was accepted under ``trust_unpinned`` (a
    later run compares against this record). Rows of local datasets (synth, msft, taylor) are left out."""
    out: dict[str, dict] = {}
    for row in rows:
        name = str(row["name"])
        if name not in entries:
            continue
        entry = entries[name]
        if str(row["source"]) != entry.url:
            raise ValueError(f"data_files: {name} was read from {row['source']!r}, manifest.csv says {entry.url!r}")
        out[name] = {"url": entry.url, "revision": url_revision(entry.url), "sha256": str(row["sha256"]),
                     "bytes": int(row["bytes"]), "pin": "manifest" if entry.sha256 else "trusted_first_download"}
    return out


def remote_manifest() -> dict[str, download.ManifestEntry]:
    """The study's ``manifest.csv`` of remote CSVs (paper scale), parsed by :func:`icml25.core.download.read_manifest`."""
    with importlib.resources.as_file(importlib.resources.files(__package__).joinpath("manifest.csv")) as path:
        return download.read_manifest(path)


def fetch_remote(name: str, dest: str | Path, mirror: str | Path | None = None, *, trust_unpinned: bool = False,
                 progress: bool = False) -> Path:
    """Download the manifest entry ``name`` to ``dest`` with :func:`icml25.core.download.fetch` (from ``mirror`` if
    given: a URL base or a directory laid out as ``<owner>/<repo>/<path>``): size, sha256 and the ETT CSV header
    are verified before the file is renamed into place. Entries marked ``UNPINNED`` are refused unless
    ``trust_unpinned`` (then their hash is pinned in ``<dest>.sha256`` on the first verified download). Every
    failure raises :class:`~icml25.core.download.DownloadError` and leaves no file at ``dest``."""
    entries = remote_manifest()
    if name not in entries:
        raise KeyError(f"morphing_flow manifest.csv has no entry {name!r}; has {sorted(entries)}")
    if name.startswith("ETT"):
        check = download.csv_check(["date", *ETT_COLUMNS])
    elif name in AUTOFORMER:
        check = _autoformer_check(name)
    else:
        check = None
    return download.fetch(entries[name], dest, mirror, progress=progress, trust_unpinned=trust_unpinned,
                          check=check)


def _autoformer_check(name: str):
    """Download-time format check of an Autoformer-bundle file: the header of :func:`autoformer_columns`, then the
    whole file read row by row (:func:`icml25.core.download.csv_check`): every row complete, the file ending with a
    newline and holding at least one data row (an HTML error page or a transfer cut inside a row fails before the
    file is accepted and its hash pinned; a cut exactly at a row boundary needs the row count or the size)."""
    whole = download.csv_check((), encoding=AUTOFORMER_ENCODING)

    def check(path: Path) -> None:
        autoformer_columns(path, name)
        whole(path)
    return check


# -------------------------------------------------------------------------------------- splits, scaling


def split_borders(n_rows: int, seq_len: int, scheme: str = "ratio") -> tuple[list[int], list[int]]:
    """TSLib split borders ``(border1s, border2s)`` for train / val / test; split i covers rows
    ``[border1s[i], border2s[i])`` and the val/test splits start ``seq_len`` rows early (lookback overlap).

    ``etth``: [0, 8640 - L, 11520 - L] to [8640, 11520, 14400] (12/4/4 months of hours); ``ettm``: the same x4
    (15-min rows); ``ratio``: 70/10/20 by time, ``n_train = int(0.7 n)``, ``n_test = int(0.2 n)``."""
    L = int(seq_len)
    if scheme in ("etth", "ettm"):
        f = 1 if scheme == "etth" else 4
        b1 = [0, 12 * 30 * 24 * f - L, 16 * 30 * 24 * f - L]
        b2 = [12 * 30 * 24 * f, 16 * 30 * 24 * f, 20 * 30 * 24 * f]
        if n_rows < b2[2]:
            raise ValueError(f"split {scheme!r} needs at least {b2[2]} rows, got {n_rows}")
    elif scheme == "ratio":
        n_train, n_test = int(n_rows * 0.7), int(n_rows * 0.2)
        n_val = n_rows - n_train - n_test
        b1 = [0, n_train - L, n_rows - n_test - L]
        b2 = [n_train, n_train + n_val, n_rows]
    else:
        raise ValueError(f"unknown split scheme {scheme!r}; expected etth | ettm | ratio")
    if min(b1) < 0:
        raise ValueError(f"split {scheme!r}: lookback {L} exceeds the training rows of a {n_rows}-row series")
    return b1, b2


def fit_scaler(values: np.ndarray, border1s: Sequence[int], border2s: Sequence[int]) -> dict[str, np.ndarray]:
    """Per-channel mean and sd (ddof 0, as sklearn's StandardScaler) of the training rows only,
    ``values[border1s[0]:border2s[0]]``. A constant channel gets sd 1."""
    train = np.asarray(values, dtype=np.float64)[border1s[0]:border2s[0]]
    mean, sd = train.mean(axis=0), train.std(axis=0)
    return {"mean": mean, "std": np.where(sd > 0, sd, 1.0)}


def apply_scaler(values: np.ndarray, scaler: Mapping[str, np.ndarray]) -> np.ndarray:
    """z-score ``values`` (T, C) with a fitted scaler."""
    return (np.asarray(values, dtype=np.float64) - scaler["mean"]) / scaler["std"]


def window_starts(border1: int, border2: int, seq_len: int, pred_len: int) -> np.ndarray:
    """Start rows s of the windows of one split: input rows [s, s+L), target rows [s+L, s+L+H), all inside
    [border1, border2). Raises if the split holds no window."""
    n = border2 - border1 - seq_len - pred_len + 1
    if n <= 0:
        raise ValueError(f"split [{border1}, {border2}) has {border2 - border1} rows, fewer than lookback "
                         f"{seq_len} + horizon {pred_len}")
    return np.arange(border1, border1 + n)


def windows(data: np.ndarray, starts: np.ndarray, seq_len: int, pred_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) = (data[s:s+L], data[s+L:s+L+H]) for every start: shapes (N, L, C) and (N, H, C) (views copied)."""
    idx = np.asarray(starts)[:, None] + np.arange(seq_len + pred_len)[None, :]
    block = np.asarray(data)[idx]
    return block[:, :seq_len].copy(), block[:, seq_len:].copy()


def prepare(values: np.ndarray, seq_len: int, pred_len: int, scheme: str = "ratio") -> dict[str, Any]:
    """Split borders, train-only scaler and the scaled series of a (T, C) array."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2:
        raise ValueError(f"prepare: values must be (T, C), got shape {values.shape}")
    b1, b2 = split_borders(len(values), seq_len, scheme)
    for name, lo, hi in zip(("train", "val", "test"), b1, b2):
        window_starts(lo, hi, seq_len, pred_len)  # raises naming the split if it is too short
    scaler = fit_scaler(values, b1, b2)
    return {"data": apply_scaler(values, scaler), "border1s": b1, "border2s": b2, "scaler": scaler}
