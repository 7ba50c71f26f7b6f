"""ImageNet-1k from the Hugging Face shards of ``ILSVRC/imagenet-1k`` (``data/train_images_{0..4}.tar.gz``,
``data/val_images.tar.gz``; gated, ImageNet terms), the data of MaGNeTS' class-conditional ImageNet-256 setting.

Layout (the dataset's loading script ``imagenet-1k.py``: "image filepath format: <IMAGE_FILENAME>_<SYNSET_ID>.JPEG"):
each shard is a gzip'd tar of JPEG members whose base name ends in ``_<wnid>.JPEG``, e.g.
``n01440764_10026_n01440764.JPEG`` (train) and ``ILSVRC2012_val_00000001_n01751748.JPEG`` (val); the label is
the index of the wnid in the dataset's class list, which is the 1000 ILSVRC-2012 wnids in sorted order (class 0 =
n01440764). Test members (``ILSVRC2012_test_00000001.JPEG``) carry no wnid and are refused here.

Images: RGB (grey and CMYK JPEGs converted), shorter side resized to ``size`` with bicubic filtering, then the
centre ``size``×``size`` crop [R: the centre-crop convention of MaskGIT's ImageNet pipeline].
"""
from __future__ import annotations

import io
import re
import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from icml25.core.datasets import DataError

WNID = re.compile(r"n\d{8}")
N_CLASSES = 1000


def member_wnid(name: str) -> str:
    """The wnid of a shard member (``.../<anything>_<wnid>.JPEG``); :class:`DataError` for any other name."""
    base = name.rsplit("/", 1)[-1]
    stem, dot, ext = base.rpartition(".")
    if not dot or ext.upper() != "JPEG":
        raise DataError(f"member {name!r}: not a .JPEG image")
    head, sep, wnid = stem.rpartition("_")
    if not sep or not head or not WNID.fullmatch(wnid):
        raise DataError(f"member {name!r}: no '_<wnid>' before .JPEG (test images have no label)")
    return wnid


def centre_crop(img, size: int) -> np.ndarray:
    """PIL image → (size, size, 3) uint8: RGB, shorter side to ``size`` (bicubic), centre crop."""
    from PIL import Image

    img = img.convert("RGB")
    w, h = img.size
    s = size / min(w, h)
    nw, nh = max(size, round(w * s)), max(size, round(h * s))
    img = img.resize((nw, nh), Image.BICUBIC)
    left, top = (nw - size) // 2, (nh - size) // 2
    return np.asarray(img.crop((left, top, left + size, top + size)), dtype=np.uint8)


def iter_shard(path: str | Path, size: int) -> Iterator[tuple[str, str, np.ndarray]]:
    """Stream a shard: ``(member name, wnid, image (size, size, 3) uint8)`` per JPEG member, in archive order
    (directories skipped; any other member, an unreadable image or a truncated archive raises naming it)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with tarfile.open(path, mode="r|gz") as tar:
            for m in tar:
                if m.isdir():
                    continue
                if not m.isfile():
                    raise DataError(f"{path}: member {m.name!r} is not a regular file")
                wnid = member_wnid(m.name)
                data = tar.extractfile(m).read()
                try:
                    img = Image.open(io.BytesIO(data))
                    img.load()
                except (UnidentifiedImageError, OSError) as err:
                    raise DataError(f"{path}: member {m.name!r} is not a readable image ({err})") from None
                yield m.name, wnid, centre_crop(img, size)
    except (tarfile.TarError, EOFError, OSError) as err:  # a truncated or corrupt archive
        raise DataError(f"{path}: not a readable tar.gz shard ({type(err).__name__}: {err})") from None


def batches(paths: Sequence[str | Path], size: int, batch: int
            ) -> Iterator[tuple[list[str], np.ndarray]]:
    """(wnids, images (b, size, size, 3) uint8) in batches of ``batch`` over the shards in order."""
    wnids: list[str] = []
    imgs: list[np.ndarray] = []
    for p in paths:
        for _, wnid, img in iter_shard(p, size):
            wnids.append(wnid)
            imgs.append(img)
            if len(imgs) == batch:
                yield wnids, np.stack(imgs)
                wnids, imgs = [], []
    if imgs:
        yield wnids, np.stack(imgs)


def class_index(wnids: Sequence[str], n_classes: int, where: str) -> dict[str, int]:
    """wnid → label: the sorted distinct wnids of the training shards (= the dataset's class order when all
    ``n_classes`` appear); a different count raises naming ``where``."""
    classes = sorted(set(wnids))
    if len(classes) != n_classes:
        raise DataError(f"{where}: {len(classes)} distinct wnids in the training shards, paper.n_classes = "
                        f"{n_classes}")
    return {w: i for i, w in enumerate(classes)}


def labels_of(wnids: Sequence[str], index: dict[str, int], where: str) -> np.ndarray:
    """Labels (n,) int64 of ``wnids``; a wnid outside the training classes raises naming it and ``where``."""
    unknown = sorted(set(wnids) - set(index))
    if unknown:
        raise DataError(f"{where}: wnids {unknown[:5]} are not among the training classes")
    return np.asarray([index[w] for w in wnids], dtype=np.int64)
