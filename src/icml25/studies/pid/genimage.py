"""GenImage archives (paper scale): verification before unpacking and extraction that never leaves its target.

GenImage (https://github.com/GenImage-Dataset/GenImage) ships one zip archive per generator subset, laid out as
``<subset>/{train,val}/{ai,nature}/<image>``. Its archives sit behind Google Drive / Baidu links, so the download
stage reads them from a ``mirror`` directory where they were placed by hand, through
:func:`icml25.core.download.fetch`, with :func:`archive_check` as the format check: an archive is accepted (and its
sha256 recorded, pinned on first use) only when every member's CRC verifies and every member name is safe.

:func:`unpack` (one CPU job per archive; a SLURM array at paper scale) re-checks the archive against the sha256
recorded at download, refuses any member that would land outside the target directory (absolute path, ``..``,
drive letter, symlink or other special entry), extracts into a hidden sibling directory, and renames it into place
only when everything is written: a half-extracted subset never looks complete.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from icml25.core.datasets import DataError
from icml25.core.download import check_recorded

DONE = ".unpacked.json"  #: written last inside an unpacked directory: member count and bytes
#: Caps against decompression bombs (GenImage members are JPEG/PNG images of at most a few MB, which barely
#: compress): a member declaring more than MAX_MEMBER_BYTES, a zip member whose declared size exceeds
#: MAX_RATIO x its compressed size (members of at least RATIO_FLOOR bytes), or an archive whose members declare
#: more than MAX_RATIO x the archive's own size (or MAX_TOTAL_BYTES) is refused, naming the member.
MAX_MEMBER_BYTES = 256 << 20
MAX_TOTAL_BYTES = 1 << 40
MAX_RATIO = 100
RATIO_FLOOR = 1 << 20


class ArchiveError(DataError):
    """An archive is corrupt, of an unknown kind, or holds a member that would escape its target directory."""


def unsafe_member(name: str) -> str | None:
    """Why member ``name`` may not be extracted (absolute, drive letter, ``..`` component, empty), else None."""
    n = name.replace("\\", "/")
    if not n or n.startswith("/"):
        return "absolute or empty path"
    if len(n) > 1 and n[1] == ":":
        return "drive-letter path"
    if ".." in PurePosixPath(n).parts:
        return "parent-directory component '..'"
    return None


def _members(path: Path) -> list[tuple[str, bool, int]]:
    """(name, is_dir, size) of every member; ArchiveError naming the archive and member for unsafe entries."""
    out = []
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                mode = info.external_attr >> 16
                if mode and stat.S_ISLNK(mode):
                    raise ArchiveError(f"{path}: member {info.filename!r} is a symbolic link; refusing the archive")
                out.append((info.filename, info.is_dir(), info.file_size))
                if info.file_size >= RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
                    raise ArchiveError(f"{path}: member {info.filename!r} declares {info.file_size} bytes from "
                                       f"{info.compress_size} compressed (ratio > {MAX_RATIO}): a decompression "
                                       "bomb? refusing the archive")
    elif tarfile.is_tarfile(path):
        with tarfile.open(path) as tf:
            for m in tf.getmembers():
                if not (m.isfile() or m.isdir()):
                    raise ArchiveError(f"{path}: member {m.name!r} is a link or special file; refusing the archive")
                out.append((m.name, m.isdir(), m.size))
    else:
        raise ArchiveError(f"{path}: neither a zip nor a tar archive")
    total = 0
    for name, _, size in out:
        if size > MAX_MEMBER_BYTES:
            raise ArchiveError(f"{path}: member {name!r} declares {size} bytes, more than the cap of "
                               f"{MAX_MEMBER_BYTES} for one image; refusing the archive")
        total += size
        if total > min(MAX_TOTAL_BYTES, MAX_RATIO * max(path.stat().st_size, RATIO_FLOOR)):
            raise ArchiveError(f"{path}: the members up to {name!r} declare {total} bytes, more than "
                               f"{MAX_RATIO} x the archive's {path.stat().st_size} bytes (or {MAX_TOTAL_BYTES}): a "
                               "decompression bomb? refusing the archive")
    for name, _, _ in out:
        why = unsafe_member(name)
        if why:
            raise ArchiveError(f"{path}: member {name!r} would be extracted outside the target directory ({why}); "
                               "refusing the archive")
    return out


def archive_check(path: str | Path) -> None:
    """Format check for :func:`icml25.core.download.fetch`: every member name safe and (zip) every CRC valid, (tar)
    every member readable to the end. Raises :class:`ArchiveError` (a ValueError) naming the archive."""
    path = Path(path)
    _members(path)
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as zf:
                bad = zf.testzip()
        except (zipfile.BadZipFile, OSError, EOFError) as err:
            raise ArchiveError(f"{path}: corrupt zip archive ({err})") from None
        if bad is not None:
            raise ArchiveError(f"{path}: member {bad!r} fails its CRC check")
    else:
        try:
            with tarfile.open(path) as tf:
                for m in tf.getmembers():
                    if m.isfile():
                        fh = tf.extractfile(m)
                        while fh.read(1 << 20):
                            pass
        except (tarfile.TarError, OSError, EOFError) as err:
            raise ArchiveError(f"{path}: corrupt tar archive ({err})") from None


def unpack(archive: str | Path, target: str | Path) -> dict:
    """Unpack a verified ``archive`` into the directory ``target`` (an existing one is replaced); return the summary
    written to ``target/.unpacked.json`` ({"archive", "sha256", "files", "bytes"}).

    The archive must match the sha256 recorded when it was downloaded (:func:`check_recorded`), pass
    :func:`archive_check`, and every extracted path must resolve inside the target; otherwise nothing is left at
    ``target``.
    """
    archive, target = Path(archive), Path(target)
    digest = check_recorded(archive)
    archive_check(archive)
    members = _members(archive)
    if target.exists():
        shutil.rmtree(target)
    tmp = target.with_name(f".{target.name}.part")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    root = tmp.resolve()
    try:
        for name, _, _ in members:
            dest = (root / name.replace("\\", "/")).resolve()
            if dest != root and root not in dest.parents:
                raise ArchiveError(f"{archive}: member {name!r} resolves outside {target}; refusing the archive")
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(root)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(root, filter="data")
        files = [(n, s) for n, d, s in members if not d]
        summary = {"archive": archive.name, "sha256": digest, "files": len(files), "bytes": sum(s for _, s in files)}
        (root / DONE).write_text(json.dumps(summary, indent=1) + "\n")
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return summary
