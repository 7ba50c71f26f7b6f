"""Manifest-driven, verified downloads.

Each study lists its remote files in ``manifest.csv`` (columns ``name,url,sha256,size,licence,mirror_path``).
:func:`fetch` downloads one entry over https (or from a mirror), resumes partial transfers with HTTP ranges,
retries transient failures, verifies size and sha256, and renames into place only when everything matches:
a corrupt, truncated or missing file raises :class:`DownloadError` naming the URL and the hashes, and leaves
nothing at the destination.

A *mirror* replaces the origin: either a URL base (``http://127.0.0.1:8000/``) or a local directory; the file
is looked up at ``<mirror>/<mirror_path>``. Tests serve the project's data mirror (``$ICML25_MIRROR``, see
tests/conftest.py) this way, so the real code path runs without internet. Entries with an empty sha256 (large
files whose hash the paper does not publish) are trusted on first verified download and pinned in a
``<dest>.sha256`` file; later downloads must match the pin.
"""
from __future__ import annotations

import csv
import hashlib
import os
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

MANIFEST_COLUMNS = ("name", "url", "sha256", "size", "licence", "mirror_path")
CHUNK = 1 << 20  # bytes read per iteration


class DownloadError(RuntimeError):
    """A download failed or did not verify; nothing was left at the destination."""


@dataclass(frozen=True)
class ManifestEntry:
    """One remote file. ``sha256`` may be "" (pin on first download); ``size`` is bytes or None if unknown."""

    name: str
    url: str
    sha256: str
    size: int | None
    licence: str
    mirror_path: str


def read_manifest(path: str | Path) -> dict[str, ManifestEntry]:
    """Parse a manifest.csv into ``{name: entry}``; a malformed file raises naming the row and column."""
    path = Path(path)
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in MANIFEST_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing}")
        entries: dict[str, ManifestEntry] = {}
        for row_no, row in enumerate(reader, start=2):
            url, digest = row["url"].strip(), row["sha256"].strip().lower()
            if not url.startswith("https://"):
                raise ValueError(f"{path}:{row_no}: column url must be https, got {url!r}")
            if digest and (len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest)):
                raise ValueError(f"{path}:{row_no}: column sha256 is not a sha256 hex digest: {digest!r}")
            size = row["size"].strip()
            if size and not size.isdigit():
                raise ValueError(f"{path}:{row_no}: column size must be an integer, got {size!r}")
            entry = ManifestEntry(row["name"].strip(), url, digest, int(size) if size else None,
                                  row["licence"].strip(), row["mirror_path"].strip())
            if entry.name in entries:
                raise ValueError(f"{path}:{row_no}: duplicate name {entry.name!r}")
            entries[entry.name] = entry
    return entries


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
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


def fetch(entry: ManifestEntry, dest: str | Path, mirror: str | Path | None = None, *,
          retries: int = 4, timeout: float = 60.0, progress: bool = True) -> Path:
    """Download ``entry`` to ``dest`` and verify it; return ``dest``.

    An existing ``dest`` that already verifies is kept (no transfer). Raises :class:`DownloadError` on HTTP
    errors (404 is not retried), on a size or sha256 mismatch, or when retries are exhausted; in every failure
    the partial file is removed and ``dest`` does not exist.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    pin_file = dest.with_name(dest.name + ".sha256")
    expected = entry.sha256 or (pin_file.read_text().strip() if pin_file.exists() else "")
    if dest.exists():
        if expected and sha256_file(dest) == expected:
            return dest
        dest.unlink()
    url = source_url(entry, mirror)
    part = dest.with_name(f".{dest.name}.part")
    try:
        _transfer(url, part, entry.size, retries=retries, timeout=timeout, progress=progress)
        actual_size = part.stat().st_size
        if entry.size is not None and actual_size != entry.size:
            raise DownloadError(f"{url}: size mismatch for {entry.name}: expected {entry.size} bytes, "
                                f"got {actual_size}")
        actual = sha256_file(part)
        if expected and actual != expected:
            raise DownloadError(f"{url}: sha256 mismatch for {entry.name}: expected {expected}, got {actual}")
        os.replace(part, dest)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    if not expected:
        pin_file.write_text(actual + "\n")
    return dest


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
