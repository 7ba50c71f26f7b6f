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

import numpy as np

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


# ---------------------------------------------------------------------------------------------- the unpacked tree

#: GenImage subsets (paper scale): config key -> (generator folder of the published release, subset directory =
#: archive stem). Each archive holds ``<subset>/{train,val}/{ai,nature}/<image>``: ``ai`` the generator's images
#: (label 1), ``nature`` the ImageNet photos of the same classes (label 0).
SUBSETS: dict[str, tuple[str, str]] = {
    "sdv14": ("stable_diffusion_v_1_4", "imagenet_ai_0419_sdv4"),
    "sdv15": ("stable_diffusion_v_1_5", "imagenet_ai_0424_sdv5"),
    "midjourney": ("Midjourney", "imagenet_midjourney"),
    "adm": ("ADM", "imagenet_ai_0508_adm"),
    "glide": ("glide", "imagenet_glide"),
    "wukong": ("wukong", "imagenet_ai_0424_wukong"),
    "vqdm": ("VQDM", "imagenet_ai_0419_vqdm"),
    "biggan": ("BigGAN", "imagenet_ai_0419_biggan"),
}
SPLITS = ("train", "val")
CLASSES = {"nature": 0, "ai": 1}  #: folder -> label (1 = generated)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")  #: compared case-insensitively (ImageNet ships ``.JPEG``)
#: Pillow modes converted to RGB by :func:`load_image` [R]: ImageNet holds a few grey and CMYK JPEGs and some
#: generators write RGBA or palette PNGs; converting (not dropping) keeps GenImage's file lists intact.
CONVERTED_MODES = ("L", "LA", "P", "PA", "RGBA", "CMYK", "YCbCr")


def archive_name(subset: str) -> str:
    """Manifest row name (and file name) of a subset's archive: ``<subset directory>.zip``."""
    return f"{SUBSETS[subset][1]}.zip"


def subset_files(unpacked: str | Path, subset: str) -> dict[tuple[str, str], list[Path]]:
    """The image files of an unpacked subset: {(split, class folder): sorted paths} for split in train/val and class
    in ai/nature, read from ``unpacked/<subset directory>/<split>/<class>/`` (recursively; other files ignored).
    A missing or image-less folder raises :class:`icml25.core.datasets.DataError` naming it."""
    if subset not in SUBSETS:
        raise DataError(f"GenImage subset {subset!r} unknown; known: {sorted(SUBSETS)}")
    root = Path(unpacked) / SUBSETS[subset][1]
    out = {}
    for split in SPLITS:
        for cls in CLASSES:
            d = root / split / cls
            if not d.is_dir():
                raise DataError(f"{d}: missing (GenImage layout <subset>/{{train,val}}/{{ai,nature}}/ expected in "
                                f"the archive of {subset})")
            files = sorted(p for p in d.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
            if not files:
                raise DataError(f"{d}: no image files ({', '.join(IMAGE_SUFFIXES)})")
            out[(split, cls)] = files
    return out


def load_image(path: str | Path) -> np.ndarray:
    """A GenImage file as (H, W, 3) uint8 RGB, never resized; the modes of CONVERTED_MODES become RGB [R], other
    modes (16-bit, float) and undecodable files raise DataError naming the file."""
    from PIL import Image
    try:
        with Image.open(path) as img:
            img.load()
            if img.mode not in ("RGB", *CONVERTED_MODES):
                raise DataError(f"{path}: unsupported image mode {img.mode} (expected 8-bit RGB, grey, palette, "
                                "RGBA or CMYK)")
            arr = np.asarray(img if img.mode == "RGB" else img.convert("RGB"))
    except DataError:
        raise
    except Exception as err:  # noqa: BLE001 -- Pillow raises many types for corrupt files
        raise DataError(f"{path}: cannot decode image ({err})") from None
    return np.ascontiguousarray(arr, dtype=np.uint8)


def crop_or_pad(img: np.ndarray, size: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """A size x size window of ``img`` (H, W, 3) uint8: zero-padded at the bottom/right first where H or W < size
    [R] ("pad if smaller"), then cut at a random offset (``rng``: rows then columns) or at the centre (``rng`` None:
    offset (H - size) // 2). An exact slice: nothing is resampled."""
    h, w = img.shape[:2]
    if h < size or w < size:
        pad = np.zeros((max(h, size), max(w, size), 3), dtype=np.uint8)
        pad[:h, :w] = img
        img, (h, w) = pad, pad.shape[:2]
    if rng is None:
        y0, x0 = (h - size) // 2, (w - size) // 2
    else:
        y0, x0 = int(rng.integers(0, h - size + 1)), int(rng.integers(0, w - size + 1))
    return np.ascontiguousarray(img[y0:y0 + size, x0:x0 + size])
