"""Miniature CIFAR archives for the paper-scale rehearsal of fedecado (``icml25.core.rehearsal``).

The real files are the "python version" tarballs ``cifar-10-python.tar.gz`` (members ``cifar-10-batches-py/
data_batch_1..5``, ``test_batch``, ``batches.meta``, ``readme.html``) and ``cifar-100-python.tar.gz``
(``cifar-100-python/train``, ``test``, ``meta``): gzip'd tars of Python-2 pickles (protocol 2) of dicts whose keys
and strings are byte strings (``SHORT_BINSTRING`` / ``BINSTRING`` opcodes, read with ``encoding="bytes"``), with
``data`` a C-ordered uint8 ndarray (n, 3072) — 1024 red, 1024 green, 1024 blue values per row — rebuilt through
``numpy.core.multiarray._reconstruct``, ``labels`` (CIFAR-10) or ``fine_labels``/``coarse_labels`` (CIFAR-100) a
list of ints, ``filenames`` a list of byte strings. The miniatures keep all of that (same members, keys, opcodes,
dtypes; tar and gzip headers with a fixed mtime) with :data:`PER_BATCH` images per training batch and
:data:`N_TEST` test images: a class colour and a bright square plus noise from a fixed seed. Only the content,
the sha256 and the size differ. The bytes are identical to lfss's miniatures (the same code, kept in step by a
test pinning their sha256): both studies' rows share the mirror path ``kriz/cifar-10-python.tar.gz``, and a
rehearsal of several studies at once writes one mirror. The paper scale reads CIFAR-10 (VGG-11); CIFAR-100 (ResNet-34, ``image.dataset: cifar100``) is written too
so that the second grid rehearses with a one-line config change.
"""
from __future__ import annotations

import gzip
import io
import pickle
import struct
import tarfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

PER_BATCH = 52  #: images per CIFAR-10 training batch (5 batches: 260) and in CIFAR-100's ``train`` / 5
N_TEST = 40  #: test images
MTIME = 1243900000  #: fixed mtime of every tar member (June 2009, the archives' era)
CIFAR10_NAMES = (b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse", b"ship", b"truck")


class _Py2Pickler(pickle._Pickler):  # the pure-Python pickler: its dispatch table can be extended
    """Protocol-2 pickler writing ``bytes`` as Python 2 ``str`` (SHORT_BINSTRING / BINSTRING), as in the CIFAR
    files, instead of Python 3's ``_codecs.encode`` call."""

    dispatch = pickle._Pickler.dispatch.copy()

    def save_bytes(self, obj: bytes) -> None:
        n = len(obj)
        self.write(pickle.SHORT_BINSTRING + bytes([n]) + obj if n < 256 else pickle.BINSTRING + struct.pack("<i", n)
                   + obj)
        self.memoize(obj)

    dispatch[bytes] = save_bytes


def py2_pickle(obj: object) -> bytes:
    """``obj`` pickled like Python 2's ``cPickle.dump(obj, f, 2)`` (numpy arrays via numpy.core.multiarray)."""
    buf = io.BytesIO()
    _Py2Pickler(buf, protocol=2).dump(obj)
    return buf.getvalue().replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n")


def _colour_images(rng: np.random.Generator, labels: np.ndarray, n_classes: int, side: int) -> np.ndarray:
    """(n, 3, side, side) uint8: a per-class colour and a bright square plus noise."""
    colours = np.random.default_rng(n_classes).integers(30, 226, size=(n_classes, 3))
    img = colours[labels][:, :, None, None] + rng.normal(0, 20, size=(len(labels), 3, side, side))
    for i, c in enumerate(labels):
        a = int(c) % max(1, side // 4)
        img[i, :, a:a + side // 4, a:a + side // 4] += 60
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def _cifar_batch(rng, n: int, n_classes: int, offset: int, label: str, cifar100: bool) -> dict:
    labels = (np.arange(n) + offset) % n_classes
    out = {b"batch_label": label.encode(),
           b"data": _colour_images(rng, labels, n_classes, 32).reshape(n, 3072),
           b"filenames": [f"miniature_{offset + i:05d}.png".encode() for i in range(n)]}
    if cifar100:
        out[b"fine_labels"] = [int(v) for v in labels]
        out[b"coarse_labels"] = [int(v) % 20 for v in labels]
    else:
        out[b"labels"] = [int(v) for v in labels]
    return out


def tar_gz(members: list[tuple[str, bytes]], top: str) -> bytes:
    """A gzip'd tar with directory ``top`` and ``members`` (name, bytes); fixed mtimes, owner 0, no gzip name."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo(top)
        info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, MTIME
        tar.addfile(info)
        for name, data in members:
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode, info.mtime = len(data), 0o644, MTIME
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def cifar10_archive() -> bytes:
    rng = np.random.default_rng(10)
    members = [("batches.meta", py2_pickle({b"num_cases_per_batch": PER_BATCH, b"label_names": list(CIFAR10_NAMES),
                                            b"num_vis": 3072}))]
    for k in range(1, 6):
        members.append((f"data_batch_{k}", py2_pickle(_cifar_batch(rng, PER_BATCH, 10, (k - 1) * PER_BATCH,
                                                                   f"training batch {k} of 5", False))))
    members.append(("readme.html", b"<meta HTTP-EQUIV=\"REFRESH\" content=\"0; "
                                   b"url=http://www.cs.toronto.edu/~kriz/cifar.html\">\n"))
    members.append(("test_batch", py2_pickle(_cifar_batch(rng, N_TEST, 10, 0, "testing batch 1 of 1", False))))
    return tar_gz(members, "cifar-10-batches-py")


def cifar100_archive() -> bytes:
    rng = np.random.default_rng(100)
    meta = {b"fine_label_names": [f"fine_{k}".encode() for k in range(100)],
            b"coarse_label_names": [f"coarse_{k}".encode() for k in range(20)]}
    members = [("file.txt~", b""), ("meta", py2_pickle(meta)),
               ("test", py2_pickle(_cifar_batch(rng, N_TEST, 100, 0, "testing batch 1 of 1", True))),
               ("train", py2_pickle(_cifar_batch(rng, 5 * PER_BATCH, 100, 0, "training batch 1 of 1", True)))]
    return tar_gz(members, "cifar-100-python")



def _write(path: Path, data: bytes) -> None:
    from icml25.core.io import atomic_path

    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_bytes() != data:
        with atomic_path(path) as tmp:
            Path(tmp).write_bytes(data)


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """Write ``cifar10`` and ``cifar100`` at their manifest ``mirror_path`` under ``root``; return the row names."""
    files = {"cifar10": cifar10_archive(), "cifar100": cifar100_archive()}
    for name, data in files.items():
        _write(Path(root) / manifest[name].mirror_path, data)
    return list(files)
