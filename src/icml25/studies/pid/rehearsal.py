"""Miniature GenImage for the paper-scale rehearsal of pid (``icml25.core.rehearsal``).

GenImage is placed by hand (Google Drive / Baidu links, no download URL): one zip per generator subset in its
generator folder, ``<generator folder>/<subset>.zip`` (e.g. ``stable_diffusion_v_1_4/imagenet_ai_0419_sdv4.zip``;
split volumes merged first, see the README), each holding ``<subset>/{train,val}/{ai,nature}/<image>`` with
directory entries: ``nature`` ImageNet JPEGs named like ``n01440764_10026.JPEG`` (train) and
``ILSVRC2012_val_00000293.JPEG`` (val), ``ai`` the generator's PNGs (``000_sdv4_00001.png``). The miniatures keep
exactly that: the same folders, archive names, member names, file formats (8-bit RGB baseline JPEG, RGB PNG; one
grey JPEG and one RGBA PNG per subset, as ImageNet and some generators have) and sizes around the 32-pixel
rehearsal window, some smaller so the zero-padding branch runs. Content is synthetic: smooth colour fields with
fine noise for "nature", the same fields upsampled x2 (a generator-like periodic trace) for "ai".

:func:`write_manual` writes that hand-placed tree (the rehearsal yaml points ``data.genimage_dir`` at it);
:func:`write_miniatures` writes the same bytes at each manifest row's ``mirror_path`` of the mirror, from which the
rehearsal manifest takes their sha256 and size, so the download stage verifies the hand-placed archives against
pinned hashes exactly as it will once the real ones are pinned. Deterministic: fixed seeds, fixed zip timestamps and
attributes, stored (uncompressed) members, Pillow writes no time chunk.
"""
from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .genimage import SUBSETS

#: images per (split, class) in each miniature subset; only the training subset's train split is read in full
COUNTS = {"train": 12, "val": 4}
OTHER_TRAIN = 2  #: train images per class of the subsets that are only tested (the layout must still be there)
TRAIN_SUBSET = "sdv14"
DATE = (1980, 1, 1, 0, 0, 0)


def _image(rng: np.random.Generator, ai: bool, h: int, w: int) -> np.ndarray:
    """(h, w, 3) uint8: a smooth colour field plus noise ("nature"), or the field at half resolution repeated x2
    with weaker noise ("ai")."""
    base = rng.uniform(40, 215, size=(2, 2, 3))
    yy, xx = np.meshgrid(np.linspace(0, 1, (h + 1) // 2 if ai else h), np.linspace(0, 1, (w + 1) // 2 if ai else w),
                         indexing="ij")
    field = (base[0, 0] * (1 - yy)[..., None] * (1 - xx)[..., None] + base[0, 1] * (1 - yy)[..., None] * xx[..., None]
             + base[1, 0] * yy[..., None] * (1 - xx)[..., None] + base[1, 1] * (yy * xx)[..., None])
    if ai:
        field = np.repeat(np.repeat(field, 2, axis=0), 2, axis=1)[:h, :w]
    noise = rng.normal(0, 3.0 if ai else 9.0, size=field.shape)
    return np.clip(np.round(field + noise), 0, 255).astype(np.uint8)


def _encode(arr: np.ndarray, fmt: str, mode: str = "RGB") -> bytes:
    from PIL import Image
    img = Image.fromarray(arr)
    if mode != "RGB":
        img = img.convert(mode)
    buf = io.BytesIO()
    if fmt == "JPEG":
        img.save(buf, format="JPEG", quality=90)
    else:
        img.save(buf, format="PNG")
    return buf.getvalue()


def _members(subset: str) -> list[tuple[str, bytes]]:
    """(member name, bytes) of one miniature subset archive, in archive order (directories first)."""
    key = list(SUBSETS).index(subset)
    stem = SUBSETS[subset][1]
    rng = np.random.default_rng([34, key])
    out: list[tuple[str, bytes]] = [(f"{stem}/", b"")]
    for split in ("train", "val"):
        out.append((f"{stem}/{split}/", b""))
        for cls in ("ai", "nature"):
            out.append((f"{stem}/{split}/{cls}/", b""))
            n = COUNTS[split] if (split == "val" or subset == TRAIN_SUBSET) else OTHER_TRAIN
            for i in range(n):
                h, w = (int(v) for v in rng.integers(26, 49, size=2))  # some below the 32-pixel window: padded
                arr = _image(rng, cls == "ai", h, w)
                if cls == "ai":
                    name = f"{i:03d}_{subset}_{i + 1:05d}.png"
                    data = _encode(arr, "PNG", "RGBA" if i == 1 else "RGB")
                else:
                    name = (f"n0144{key:04d}_{1000 + i}.JPEG" if split == "train"
                            else f"ILSVRC2012_val_{key * 100 + i + 1:08d}.JPEG")
                    data = _encode(arr, "JPEG", "L" if i == 1 else "RGB")
                out.append((f"{stem}/{split}/{cls}/{name}", data))
    return out


def archive_bytes(subset: str) -> bytes:
    """The miniature zip of ``subset`` (deterministic bytes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in _members(subset):
            info = zipfile.ZipInfo(name, date_time=DATE)
            info.external_attr = ((0o40755 if name.endswith("/") else 0o100644) << 16) | (0x10 if name.endswith("/")
                                                                                          else 0)
            info.compress_type = zipfile.ZIP_STORED
            zf.writestr(info, data)
    return buf.getvalue()


def _write(root: Path, rel: str, data: bytes) -> None:
    path = Path(root) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_bytes() != data:
        path.write_bytes(data)


def _by_row() -> dict[str, tuple[str, str]]:
    """{manifest row name: (subset key, mirror_path)}."""
    return {f"{stem}.zip": (key, f"{folder}/{stem}.zip") for key, (folder, stem) in SUBSETS.items()}


def write_manual(root: Path) -> None:
    """The hand-placed GenImage tree at ``root``: ``<generator folder>/<subset>.zip`` for all eight subsets."""
    for key, rel in _by_row().values():
        _write(root, rel, archive_bytes(key))


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """The same archives at each manifest row's ``mirror_path`` under ``root`` (their sha256/size go into the
    rehearsal manifest); returns the row names."""
    rows = _by_row()
    names = []
    for name, entry in manifest.items():
        if name not in rows:
            raise ValueError(f"pid rehearsal: manifest row {name!r} is not a GenImage subset archive")
        key, rel = rows[name]
        if entry.mirror_path != rel:
            raise ValueError(f"pid rehearsal: row {name} has mirror_path {entry.mirror_path!r}, expected {rel!r}")
        _write(root, rel, archive_bytes(key))
        names.append(name)
    return names
