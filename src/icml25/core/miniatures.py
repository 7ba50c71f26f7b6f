"""Deterministic miniatures of public dataset formats that several studies' paper rehearsals need
(``icml25.core.rehearsal``): written from fixed seeds with fixed tar/gzip headers, so the same call gives the same
bytes. A study's ``rehearsal.py`` builds its files from these (a study never imports another study).

* CIFAR-10 / CIFAR-100 "python version" tarballs (:func:`cifar10_archive`, :func:`cifar100_archive`): gzip'd tars of
  Python-2 protocol-2 pickles (byte strings as ``SHORT_BINSTRING``/``BINSTRING``, ``data`` a C-ordered uint8
  (n, 3072) ndarray rebuilt through ``numpy.core.multiarray._reconstruct``, labels as lists of ints), the real member
  names, :data:`PER_BATCH` images per training batch and :data:`N_TEST` test images of synthetic content (a class
  colour and a bright square plus noise).
* :func:`tar_gz` (a gzip'd tar with one top directory), :func:`py2_pickle`, :func:`colour_images`.
"""
from __future__ import annotations

import gzip
import io
import pickle
import struct
import tarfile

import numpy as np

PER_BATCH = 52  #: images per CIFAR-10 training batch (5 batches: 260) and in CIFAR-100's ``train`` / 5
N_TEST = 40  #: CIFAR test images
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


def colour_images(rng: np.random.Generator, labels: np.ndarray, n_classes: int, side: int) -> np.ndarray:
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
           b"data": colour_images(rng, labels, n_classes, 32).reshape(n, 3072),
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
