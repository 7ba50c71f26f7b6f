"""Miniature (Fashion-)MNIST IDX files for the paper-scale rehearsal of ntk_dfl (``icml25.core.rehearsal``).

The real files are the four gzip'd IDX files of each dataset (``train-images-idx3-ubyte.gz``,
``train-labels-idx1-ubyte.gz``, ``t10k-images-idx3-ubyte.gz``, ``t10k-labels-idx1-ubyte.gz``): big-endian headers
(magic 2051, n, 28, 28 for images; 2049, n for labels) followed by uint8 pixels / labels 0..9. The miniatures keep
that exact layout (gzip with the uncompressed name in the header and mtime 0) with :data:`N_TRAIN` training and
:data:`N_TEST` test images: a class-dependent stroke plus noise from a fixed seed. Only the content, the sha256,
the md5 and the size differ. The paper scale reads Fashion-MNIST; MNIST (``data.source: mnist``, the paper's second
dataset) is written too, so it rehearses with a one-line config change.

FEMNIST (the paper's third dataset, ``data.extra_sources: [femnist]``) has no download: LEAF's preprocessing is run
by hand and its output placed at ``data.femnist_root``. :func:`write_manual` writes a miniature of that tree in
LEAF's exact format: ``train/*.json`` and ``test/*.json`` (two train files, as LEAF splits writers over files), each
``{"users": [...], "num_samples": [...], "user_data": {writer: {"x": [[784 floats]], "y": [labels]}}}`` with
LEAF's writer names (``f0123_45``), pixels k/255 (1.0 = white paper) and labels 0..61 (a few letters among the
digits, so the digits-only filter acts).
"""
from __future__ import annotations

import gzip
import io
import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np

N_TRAIN = 300  #: training images (30 a class)
N_TEST = 100  #: test images
DATASETS = {"fmnist": 301, "mnist": 302}  #: manifest prefix -> seed of its pixels


def idx_bytes(array: np.ndarray) -> bytes:
    """The uncompressed IDX encoding of a uint8 array: (n, 28, 28) -> magic 2051, (n,) -> magic 2049."""
    array = np.asarray(array, dtype=np.uint8)
    magic = {3: 2051, 1: 2049}[array.ndim]
    return struct.pack(">" + "i" * (1 + array.ndim), magic, *array.shape) + array.tobytes()


def gz(data: bytes, name: str) -> bytes:
    """gzip of ``data`` with ``name`` in the header and mtime 0 (deterministic)."""
    out = io.BytesIO()
    with gzip.GzipFile(filename=name, mode="wb", fileobj=out, mtime=0, compresslevel=9) as fh:
        fh.write(data)
    return out.getvalue()


def _split(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    labels = (np.arange(n) % 10).astype(np.uint8)
    yy, xx = np.mgrid[0:28, 0:28]
    imgs = np.empty((n, 28, 28))
    for i, c in enumerate(labels):
        angle = np.pi * c / 10 + rng.normal(0, 0.1)
        d = np.abs((yy - 14) * np.cos(angle) - (xx - 14) * np.sin(angle))  # distance from a line through the centre
        imgs[i] = 255 * np.exp(-d ** 2 / 8) * (np.hypot(yy - 14, xx - 14) < 11)
    imgs += rng.normal(0, 15, imgs.shape)
    imgs[imgs < 25] = 0
    return np.clip(np.round(imgs), 0, 255).astype(np.uint8), labels


def dataset_files(prefix: str) -> dict[str, bytes]:
    """``{manifest row name: gzip'd IDX bytes}`` of one dataset's four miniature files."""
    rng = np.random.default_rng(DATASETS[prefix])
    (Xtr, ytr), (Xte, yte) = _split(rng, N_TRAIN), _split(rng, N_TEST)
    arrays = {"train-images-idx3-ubyte": Xtr, "train-labels-idx1-ubyte": ytr, "t10k-images-idx3-ubyte": Xte,
              "t10k-labels-idx1-ubyte": yte}
    return {f"{prefix}/{name}.gz": gz(idx_bytes(a), name) for name, a in arrays.items()}


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """Write the eight IDX files at their manifest ``mirror_path`` under ``root``; return the row names."""
    from icml25.core.io import atomic_path

    names = []
    for prefix in DATASETS:
        for name, data in dataset_files(prefix).items():
            path = Path(root) / manifest[name].mirror_path
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.is_file() or path.read_bytes() != data:
                with atomic_path(path) as tmp:
                    Path(tmp).write_bytes(data)
            names.append(name)
    return names


FEMNIST_WRITERS = 8  #: writers of the miniature (the rehearsal federates 6 of them)
FEMNIST_TRAIN, FEMNIST_TEST = 16, 4  #: samples per writer (3 of the 16 training samples are letters)
FEMNIST_SEED = 303


def _femnist_writer(rng: np.random.Generator, k: int) -> tuple[list, list]:
    """(x, y) of ``FEMNIST_TRAIN + FEMNIST_TEST`` images of writer k: digit strokes in ink (low values) on white,
    every 5th training sample a letter (labels 10, 36, 61 in turn)."""
    n = FEMNIST_TRAIN + FEMNIST_TEST
    labels = [(k + i) % 10 for i in range(n)]
    for j, i in enumerate(range(4, FEMNIST_TRAIN, 5)):
        labels[i] = (10, 36, 61)[j % 3]
    imgs, _ = _split(rng, n)
    xs = []
    for img, c in zip(imgs, labels):
        ink = np.roll(img, shift=(c % 7) - 3, axis=1)  # the class moves the stroke; the writer's noise stays
        xs.append([round(v / 255, 6) for v in (255 - ink.reshape(-1)).tolist()])
    return xs, labels


def leaf_files() -> dict[str, bytes]:
    """``{relative path: json bytes}`` of the miniature LEAF FEMNIST tree (train/ and test/)."""
    import json

    rng = np.random.default_rng(FEMNIST_SEED)
    writers = [f"f{1000 + 37 * k:04d}_{(13 * k) % 100:02d}" for k in range(FEMNIST_WRITERS)]
    data = {w: _femnist_writer(rng, k) for k, w in enumerate(writers)}
    files: dict[str, bytes] = {}
    groups = {"all_data_0_niid_0_keep_0": writers[:5], "all_data_1_niid_0_keep_0": writers[5:]}
    for split, sl in (("train", slice(0, FEMNIST_TRAIN)), ("test", slice(FEMNIST_TRAIN, None))):
        for stem, ws in groups.items():
            doc = {"users": ws, "num_samples": [len(data[w][1][sl]) for w in ws],
                   "user_data": {w: {"x": data[w][0][sl], "y": data[w][1][sl]} for w in ws}}
            files[f"{split}/{stem}_{split}_9.json"] = json.dumps(doc).encode()
    return files


def write_manual(root: Path) -> None:
    """The hand-placed FEMNIST tree of the rehearsal (LEAF layout, :func:`leaf_files`) under ``root``."""
    from icml25.core.io import atomic_path

    for rel, data in leaf_files().items():
        path = Path(root) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_bytes() != data:
            with atomic_path(path) as tmp:
                Path(tmp).write_bytes(data)
