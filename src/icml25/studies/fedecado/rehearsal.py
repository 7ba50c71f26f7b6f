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
the sha256 and the size differ. The archives come from :mod:`icml25.core.miniatures` (lfss rehearses the same
files). The paper scale reads CIFAR-10 (VGG-11); CIFAR-100 (ResNet-34, ``image.dataset: cifar100``) is written too
so that the second grid rehearses with a one-line config change.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from icml25.core.miniatures import N_TEST, PER_BATCH, cifar10_archive, cifar100_archive, py2_pickle  # noqa: F401


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
