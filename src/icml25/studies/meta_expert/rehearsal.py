"""Miniature raw files for the paper-scale rehearsal of meta_expert (``icml25.core.rehearsal``).

The real files and the formats the loaders of :mod:`.data` read, kept here exactly; only the content is synthetic
and tiny (class-dependent colour blobs plus noise, from fixed seeds):

* ``cifar-10-python.tar.gz``: a gzip tarball with ``cifar-10-batches-py/`` holding ``data_batch_1`` … ``_5``,
  ``test_batch`` and ``batches.meta``, each a pickled dict with bytes keys (``b'batch_label'``, ``b'labels'`` a list
  of ints, ``b'data'`` uint8 (N, 3072) rows in channel-major R, G, B planes, ``b'filenames'``); 20 train and 10 test
  images per class.
* ``train_32x32.mat`` / ``test_32x32.mat``: MATLAB v5 files (``scipy.io.savemat``) with ``X`` uint8
  (32, 32, 3, N) and ``y`` (N, 1) labels 1..10 (10 = digit 0); the header's creation date is fixed.
* ``stl10_binary.tar.gz``: ``stl10_binary/`` with ``train_X.bin``, ``train_y.bin``, ``test_X.bin``,
  ``test_y.bin``, ``unlabeled_X.bin`` (raw uint8, 96×96×3 per image, column-major per channel; labels 1..10),
  ``class_names.txt`` and ``fold_indices.txt``.

Deterministic bytes: fixed seeds, tar members with mtime 0 and root ownership, gzip header mtime 0, a fixed
MAT-file header text.
"""
from __future__ import annotations

import gzip
import io
import pickle
import tarfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

CIFAR_TRAIN_PER_CLASS, CIFAR_TEST_PER_CLASS = 20, 10
SVHN_TRAIN_PER_CLASS, SVHN_TEST_PER_CLASS = 20, 10
STL_TRAIN_PER_CLASS, STL_TEST_PER_CLASS, STL_UNLABELLED = 8, 5, 60
STL_CLASSES = ("airplane", "bird", "car", "cat", "deer", "dog", "horse", "monkey", "ship", "truck")
CIFAR_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
MAT_HEADER = b"MATLAB 5.0 MAT-file Platform: posix, Created on: icml25 meta_expert rehearsal miniature"


def images(rng: np.random.Generator, labels: np.ndarray, size: int) -> np.ndarray:
    """uint8 (N, size, size, 3): a class-coloured disc whose position depends on the class, on a noisy grey
    background (learnable, so the rehearsal's training sees a signal)."""
    n = len(labels)
    yy, xx = np.mgrid[0:size, 0:size] / size
    out = np.empty((n, size, size, 3), dtype=np.uint8)
    for i, c in enumerate(labels):
        hue = np.array([(c * 37) % 256, (c * 91 + 60) % 256, (c * 151 + 120) % 256], dtype=float)
        cy, cx = 0.3 + 0.4 * ((c // 3) / 3), 0.3 + 0.4 * ((c % 3) / 2)
        disc = ((yy - cy) ** 2 + (xx - cx) ** 2 < 0.05)[..., None]
        img = np.where(disc, hue, 110.0) + rng.normal(0, 20, (size, size, 3))
        out[i] = np.clip(np.round(img), 0, 255).astype(np.uint8)
    return out


def _labels(per_class: int, rng: np.random.Generator) -> np.ndarray:
    return rng.permutation(np.repeat(np.arange(10), per_class))


def _tar_gz(members: Mapping[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def cifar10_tarball(seed: int = 20250701) -> bytes:
    """The CIFAR-10 python tarball in miniature (5 train batches + test batch + batches.meta)."""
    rng = np.random.default_rng(seed)
    y_train, y_test = _labels(CIFAR_TRAIN_PER_CLASS, rng), _labels(CIFAR_TEST_PER_CLASS, rng)
    x_train, x_test = images(rng, y_train, 32), images(rng, y_test, 32)

    def batch(label: str, x: np.ndarray, y: np.ndarray, start: int) -> bytes:
        rows = x.transpose(0, 3, 1, 2).reshape(len(x), 3072)  # R plane, G plane, B plane, each row-major
        d = {b"batch_label": label.encode(), b"labels": [int(v) for v in y], b"data": np.ascontiguousarray(rows),
             b"filenames": [f"img_{start + i:05d}.png".encode() for i in range(len(y))]}
        return pickle.dumps(d, protocol=2)

    members: dict[str, bytes] = {}
    per = len(y_train) // 5
    for b in range(5):
        sl = slice(b * per, (b + 1) * per)
        members[f"cifar-10-batches-py/data_batch_{b + 1}"] = batch(
            f"training batch {b + 1} of 5", x_train[sl], y_train[sl], b * per)
    members["cifar-10-batches-py/test_batch"] = batch("testing batch 1 of 1", x_test, y_test, 0)
    members["cifar-10-batches-py/batches.meta"] = pickle.dumps(
        {b"num_cases_per_batch": per, b"label_names": [c.encode() for c in CIFAR_CLASSES], b"num_vis": 3072},
        protocol=2)
    members["cifar-10-batches-py/readme.html"] = b"<meta HTTP-EQUIV=\"REFRESH\" content=\"0; " \
        b"URL=http://www.cs.toronto.edu/~kriz/cifar.html\">\n"
    return _tar_gz(members)


def svhn_mat(per_class: int, seed: int) -> bytes:
    """An SVHN ``*_32x32.mat`` in miniature: X uint8 (32, 32, 3, N), y (N, 1) uint8 in 1..10 (10 = digit 0)."""
    from scipy.io import savemat

    rng = np.random.default_rng(seed)
    digits = _labels(per_class, rng)
    x = images(rng, digits, 32)
    y = np.where(digits == 0, 10, digits).astype(np.uint8).reshape(-1, 1)
    buf = io.BytesIO()
    savemat(buf, {"X": np.ascontiguousarray(x.transpose(1, 2, 3, 0)), "y": y}, format="5")
    data = bytearray(buf.getvalue())
    data[:116] = MAT_HEADER.ljust(116, b" ")  # the description text carries a timestamp: fix it
    return bytes(data)


def stl10_tarball(seed: int = 20250703) -> bytes:
    """The STL-10 binary tarball in miniature (train / test / unlabelled, 96×96 column-major images)."""
    rng = np.random.default_rng(seed)
    y_train, y_test = _labels(STL_TRAIN_PER_CLASS, rng), _labels(STL_TEST_PER_CLASS, rng)
    x_train, x_test = images(rng, y_train, 96), images(rng, y_test, 96)
    x_unl = images(rng, rng.integers(0, 10, STL_UNLABELLED), 96)

    def col_major(x: np.ndarray) -> bytes:  # (N, H, W, C) -> per image C planes, each stored column by column
        return np.ascontiguousarray(x.transpose(0, 3, 2, 1)).tobytes()

    members = {
        "stl10_binary/class_names.txt": ("\n".join(STL_CLASSES) + "\n").encode(),
        "stl10_binary/fold_indices.txt": "".join(
            " ".join(str(i) for i in range(f, len(y_train), 10)) + " \n" for f in range(10)).encode(),
        "stl10_binary/test_X.bin": col_major(x_test),
        "stl10_binary/test_y.bin": (y_test + 1).astype(np.uint8).tobytes(),
        "stl10_binary/train_X.bin": col_major(x_train),
        "stl10_binary/train_y.bin": (y_train + 1).astype(np.uint8).tobytes(),
        "stl10_binary/unlabeled_X.bin": col_major(x_unl),
    }
    return _tar_gz(members)


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """Write the four paper files at their manifest ``mirror_path`` under ``root``; return the row names."""
    files = {"cifar-10-python.tar.gz": cifar10_tarball(),
             "train_32x32.mat": svhn_mat(SVHN_TRAIN_PER_CLASS, 20250702),
             "test_32x32.mat": svhn_mat(SVHN_TEST_PER_CLASS, 20250712),
             "stl10_binary.tar.gz": stl10_tarball()}
    for name, data in files.items():
        dest = Path(root) / manifest[name].mirror_path
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".tmp")  # always rewritten: a file of an older script is never served
        tmp.write_bytes(data)
        tmp.replace(dest)
    return list(files)
