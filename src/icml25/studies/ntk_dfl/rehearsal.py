"""Miniature (Fashion-)MNIST IDX files for the paper-scale rehearsal of ntk_dfl (``icml25.core.rehearsal``).

The real files are the four gzip'd IDX files of each dataset (``train-images-idx3-ubyte.gz``,
``train-labels-idx1-ubyte.gz``, ``t10k-images-idx3-ubyte.gz``, ``t10k-labels-idx1-ubyte.gz``): big-endian headers
(magic 2051, n, 28, 28 for images; 2049, n for labels) followed by uint8 pixels / labels 0..9. The miniatures keep
that exact layout (gzip with the uncompressed name in the header and mtime 0) with :data:`N_TRAIN` training and
:data:`N_TEST` test images: a class-dependent stroke plus noise from a fixed seed. Only the content, the sha256,
the md5 and the size differ. The paper scale reads Fashion-MNIST; MNIST (``data.source: mnist``, the paper's second
dataset) is written too, so it rehearses with a one-line config change.
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
