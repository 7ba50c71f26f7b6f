"""Loaders of the paper-scale real data (Sec. 5 of Zheng, Deng & Zhang, ICML 2025): SST-2 as GLUE ships it, CIFAR-10's
python pickle tarball and MNIST's gzipped idx files. Every reader checks the container, member names, header,
dtypes and shapes, and raises :class:`DataError` naming the file and member (or column / row) that is wrong.

* SST-2 (``SST-2.zip`` of the GLUE benchmark): members ``SST-2/train.tsv`` and ``SST-2/dev.tsv`` with the header
  ``sentence<TAB>label`` and labels 0 / 1 (``SST-2/test.tsv`` has no labels and is not read).
* CIFAR-10 (``cifar-10-python.tar.gz``): members ``cifar-10-batches-py/data_batch_1..5`` and ``test_batch``, each a
  pickled dict with byte keys ``b"data"`` (N, 3072) uint8 rows (1024 red, 1024 green, 1024 blue values, row-major
  32 x 32) and ``b"labels"``; pickles are untrusted input and go through :class:`RestrictedUnpickler`.
* MNIST (``{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``): big-endian idx files, magic 2051 (images,
  N x 28 x 28 uint8) and 2049 (labels, N uint8).
"""
from __future__ import annotations

import csv
import gzip
import io
import pickle
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

SST2_MEMBERS = {"train": "SST-2/train.tsv", "dev": "SST-2/dev.tsv"}
SST2_HEADER = ("sentence", "label")
CIFAR10_DIR = "cifar-10-batches-py"
CIFAR10_TRAIN = tuple(f"{CIFAR10_DIR}/data_batch_{k}" for k in range(1, 6))
CIFAR10_TEST = f"{CIFAR10_DIR}/test_batch"
IDX_MAGIC = {"images": 2051, "labels": 2049}


class DataError(ValueError):
    """A real-data file whose container, member, header or content is not what the paper's data has."""


# ---------------------------------------------------------------------------------------------------------- SST-2
def parse_sst2_tsv(text: str, where: str) -> tuple[list[str], np.ndarray]:
    """Sentences and labels (int64 0/1) of one GLUE SST-2 TSV (header ``sentence<TAB>label``). The GLUE files are
    unquoted: a sentence may contain ``"``, so quoting is off."""
    rows = list(csv.reader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or tuple(c.strip() for c in rows[0]) != SST2_HEADER:
        raise DataError(f"{where}: header must be {SST2_HEADER}, got {tuple(rows[0]) if rows else '(empty file)'}")
    sentences, labels = [], []
    for line_no, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != 2:
            raise DataError(f"{where}:{line_no}: expected 2 tab-separated columns (sentence, label), got {len(row)}")
        label = row[1].strip()
        if label not in ("0", "1"):
            raise DataError(f"{where}:{line_no}: column 'label' must be 0 or 1, got {label!r}")
        sentences.append(row[0].strip())
        labels.append(int(label))
    if not sentences:
        raise DataError(f"{where}: no rows")
    return sentences, np.asarray(labels, dtype=np.int64)


def read_sst2(path: str | Path) -> dict[str, tuple[list[str], np.ndarray]]:
    """``{"train": (sentences, labels), "dev": (...)}`` from GLUE's ``SST-2.zip``."""
    path = Path(path)
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise DataError(f"{path}: not a zip archive ({e})") from e
    out = {}
    with zf:
        names = set(zf.namelist())
        for split, member in SST2_MEMBERS.items():
            if member not in names:
                raise DataError(f"{path}: member {member!r} missing (has {sorted(names)[:8]})")
            out[split] = parse_sst2_tsv(zf.read(member).decode("utf-8"), f"{path}:{member}")
    return out


# ------------------------------------------------------------------------------------------------------- CIFAR-10
class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler for the CIFAR python batches: only NumPy's array reconstructors may be loaded (pickles are
    untrusted input; anything else raises ``pickle.UnpicklingError`` naming the global)."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"CIFAR pickle refers to {module}.{name}, which is not allowed")
        return super().find_class(module, name)


def parse_cifar_batch(raw: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 python batch -> (x (N, 3, 32, 32) uint8, y (N,) int64); keys are bytes as the real files
    have them."""
    try:
        doc = RestrictedUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError) as e:
        raise DataError(f"{where}: not a CIFAR python batch ({e})") from e
    if not isinstance(doc, dict):
        raise DataError(f"{where}: expected a dict, got {type(doc).__name__}")
    for key in (b"data", b"labels"):
        if key not in doc:
            raise DataError(f"{where}: key {key!r} missing (keys: {sorted(map(repr, doc))})")
    data = np.asarray(doc[b"data"])
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise DataError(f"{where}: b'data' must be (N, 3072) uint8, got {data.shape} {data.dtype}")
    y = np.asarray(doc[b"labels"], dtype=np.int64)
    if y.shape != (data.shape[0],) or (y.size and (y.min() < 0 or y.max() > 9)):
        raise DataError(f"{where}: b'labels' must hold {data.shape[0]} classes in 0..9")
    return data.reshape(-1, 3, 32, 32), y


def read_cifar10(path: str | Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{"train": (x, y), "test": (x, y)}`` from ``cifar-10-python.tar.gz`` (train = data_batch_1..5 in order)."""
    path = Path(path)
    try:
        tf = tarfile.open(path, "r:gz")
    except (tarfile.TarError, OSError) as e:
        raise DataError(f"{path}: not a gzipped tar archive ({e})") from e
    with tf:
        members = {m.name: m for m in tf.getmembers() if m.isfile()}

        def batch(name: str) -> tuple[np.ndarray, np.ndarray]:
            if name not in members:
                raise DataError(f"{path}: member {name!r} missing")
            return parse_cifar_batch(tf.extractfile(members[name]).read(), f"{path}:{name}")

        parts = [batch(n) for n in CIFAR10_TRAIN]
        test = batch(CIFAR10_TEST)
    return {"train": (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])), "test": test}


# ---------------------------------------------------------------------------------------------------------- MNIST
def parse_idx(raw: bytes, kind: str, where: str) -> np.ndarray:
    """An idx file's array: ``kind`` "images" -> (N, rows, cols) uint8, "labels" -> (N,) int64."""
    magic = IDX_MAGIC[kind]
    if len(raw) < 8 or int.from_bytes(raw[:4], "big") != magic:
        raise DataError(f"{where}: idx magic must be {magic} ({kind})")
    ndim = 3 if kind == "images" else 1
    header = 4 + 4 * ndim
    dims = [int.from_bytes(raw[4 + 4 * k: 8 + 4 * k], "big") for k in range(ndim)]
    if len(raw) != header + int(np.prod(dims)):
        raise DataError(f"{where}: {len(raw) - header} data bytes for dimensions {dims}")
    arr = np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)
    return arr.copy() if kind == "images" else arr.astype(np.int64)


def read_mnist(paths: dict[str, str | Path]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{"train": (x (N, 28, 28) uint8, y), "test": ...}`` from the four gzipped idx files; ``paths`` keys:
    train_images, train_labels, test_images, test_labels."""
    out = {}
    for split in ("train", "test"):
        arrays = []
        for kind in ("images", "labels"):
            p = Path(paths[f"{split}_{kind}"])
            try:
                raw = gzip.decompress(p.read_bytes())
            except (OSError, EOFError) as e:
                raise DataError(f"{p}: not a gzip file ({e})") from e
            arrays.append(parse_idx(raw, kind, str(p)))
        if arrays[0].shape[0] != arrays[1].shape[0]:
            raise DataError(f"MNIST {split}: {arrays[0].shape[0]} images but {arrays[1].shape[0]} labels")
        out[split] = (arrays[0], arrays[1])
    return out
