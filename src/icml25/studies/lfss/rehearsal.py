"""Miniature data for the paper-scale rehearsal of lfss (``icml25.core.rehearsal``): every paper source in its exact
real format, with a few images of synthetic content from fixed seeds (only the content, the hashes and the sizes
differ from the real files).

* ``cifar10`` / ``cifar20`` (``cifar-10-python.tar.gz``, ``cifar-100-python.tar.gz``): gzip'd tars of Python-2
  protocol-2 pickles (``SHORT_BINSTRING``/``BINSTRING`` byte strings, ``data`` a uint8 (n, 3072) ndarray through
  ``numpy.core.multiarray._reconstruct``, labels as lists of ints), members ``cifar-10-batches-py/data_batch_1..5,
  test_batch, batches.meta, readme.html`` and ``cifar-100-python/train, test, meta``.
* ``stl10`` (``stl10_binary.tar.gz``): ``stl10_binary/{train,test}_{X,y}.bin``, ``unlabeled_X.bin``,
  ``class_names.txt``, ``fold_indices.txt``; images 3 x 96 x 96 bytes each, every channel column-major (the
  publisher's MATLAB order), labels one byte 1..10.
* ``tiny_imagenet`` (``tiny-imagenet-200.zip``): ``tiny-imagenet-200/wnids.txt`` (200 wnids), ``words.txt``,
  ``train/<wnid>/images/<wnid>_<k>.JPEG`` + ``train/<wnid>/<wnid>_boxes.txt``, ``val/images/val_<k>.JPEG`` +
  ``val/val_annotations.txt``, ``test/images/test_<k>.JPEG``; 64 x 64 RGB JPEGs; fixed zip timestamps.
* :func:`write_manual`: the ImageNet-10 subset as it is placed by hand on a cluster (``<root>/<wnid>/*.JPEG`` of
  the ten ILSVRC2012 classes, images of varying sizes as in ILSVRC2012's train directory).

The paper scale reads CIFAR-10 (the DAG the rehearsal runs); the other sources are written so that each rehearses
with a one-line override of ``data.dataset`` (the ImageNet subset: ``data.imagenet_root`` already points at the
manual tree), and the unit tests read every one of them through the study's loaders.
"""
from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from icml25.core.miniatures import N_TEST, PER_BATCH, cifar10_archive, cifar100_archive, py2_pickle  # noqa: F401
from icml25.core.miniatures import colour_images as _colour_images
from icml25.core.miniatures import tar_gz

STL_COUNTS = {"train": 20, "test": 10, "unlabeled": 5}
TINY_VAL, TINY_TEST = 10, 4  #: Tiny-ImageNet val / test images (train: one per class of 200)
IMAGENET_PER_CLASS = 3
ZIP_TIME = (2015, 2, 9, 0, 0, 0)  #: fixed zip timestamp
IMAGENET10 = ("n02056570", "n02085936", "n02128757", "n02690373", "n02692877",
              "n03095699", "n04254680", "n04285008", "n04467665", "n07747607")  #: the subset's folders (data.py)

def stl10_archive() -> bytes:
    rng = np.random.default_rng(11)
    members = [("class_names.txt", b"".join(n + b"\n" for n in (b"airplane", b"bird", b"car", b"cat", b"deer",
                                                                  b"dog", b"horse", b"monkey", b"ship", b"truck")))]
    for split in ("test", "train", "unlabeled"):
        n = STL_COUNTS[split]
        labels = np.arange(n) % 10
        x = _colour_images(rng, labels, 10, 96)
        members.append((f"{split}_X.bin", np.ascontiguousarray(x.transpose(0, 1, 3, 2)).tobytes()))  # column-major
        if split != "unlabeled":
            members.append((f"{split}_y.bin", (labels + 1).astype(np.uint8).tobytes()))
    members.append(("fold_indices.txt", b"".join(" ".join(str(i) for i in range(k, STL_COUNTS["train"], 10)).encode()
                                                 + b"\n" for k in range(10))))
    return tar_gz(sorted(members), "stl10_binary")


def jpeg(img: np.ndarray) -> bytes:
    """(3, H, W) uint8 -> JPEG bytes (quality 90; deterministic for a given libjpeg)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(img.transpose(1, 2, 0))).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def tiny_imagenet_zip() -> bytes:
    rng = np.random.default_rng(12)
    wnids = [f"n{1440000 + 7 * k:08d}" for k in range(200)]
    files: list[tuple[str, bytes]] = [("wnids.txt", "".join(w + "\n" for w in wnids).encode()),
                                      ("words.txt", "".join(f"{w}\tminiature class {k}\n"
                                                            for k, w in enumerate(wnids)).encode())]
    train = _colour_images(rng, np.arange(200), 200, 64)
    for k, w in enumerate(wnids):
        files.append((f"train/{w}/{w}_boxes.txt", f"{w}_0.JPEG\t8\t8\t56\t56\n".encode()))
        files.append((f"train/{w}/images/{w}_0.JPEG", jpeg(train[k])))
    val_labels = np.arange(TINY_VAL) * 7 % 200
    val = _colour_images(rng, val_labels, 200, 64)
    files.append(("val/val_annotations.txt", "".join(f"val_{i}.JPEG\t{wnids[c]}\t0\t0\t63\t63\n"
                                                     for i, c in enumerate(val_labels)).encode()))
    files += [(f"val/images/val_{i}.JPEG", jpeg(val[i])) for i in range(TINY_VAL)]
    test = _colour_images(rng, np.zeros(TINY_TEST, dtype=int), 200, 64)
    files += [(f"test/images/test_{i}.JPEG", jpeg(test[i])) for i in range(TINY_TEST)]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        for name, data in files:
            info = zipfile.ZipInfo(f"tiny-imagenet-200/{name}", date_time=ZIP_TIME)
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return out.getvalue()


def _write(path: Path, data: bytes) -> None:
    from icml25.core.io import atomic_path

    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_bytes() != data:
        with atomic_path(path) as tmp:
            Path(tmp).write_bytes(data)


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """Write the four paper archives at their manifest ``mirror_path`` under ``root``; return the row names."""
    files = {"cifar10": cifar10_archive(), "cifar20": cifar100_archive(), "stl10": stl10_archive(),
             "tiny_imagenet": tiny_imagenet_zip()}
    for name, data in files.items():
        _write(Path(root) / manifest[name].mirror_path, data)
    return list(files)


def write_manual(root: Path) -> None:
    """The hand-placed ImageNet-10 subset: ``root/<wnid>/<wnid>_<k>.JPEG`` for its ten ILSVRC2012 classes, images
    of varying sizes (the loader resizes the shorter side and centre-crops)."""
    rng = np.random.default_rng(13)
    for c, w in enumerate(IMAGENET10):
        for k in range(IMAGENET_PER_CLASS):
            h, wd = 100 + 12 * k, 130 - 10 * k
            img = _colour_images(rng, np.array([c]), 10, max(h, wd))[0][:, :h, :wd]
            _write(Path(root) / w / f"{w}_{k}.JPEG", jpeg(img))
