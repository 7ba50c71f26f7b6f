"""Issue 36.4: a truncated, empty or HTML tarball read by a study's reader gives one DataError naming the file and
the fix, never a raw EOFError / ReadError / KeyError."""
from __future__ import annotations

import io
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest

from icml25.core.datasets import DataError, read_archive


def _cifar_tgz(members: list[str], label_key: str = "labels") -> bytes:
    rng = np.random.default_rng(0)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in members:
            batch = {b"data": rng.integers(0, 256, (20, 3072), dtype=np.uint8),
                     label_key.encode(): list(range(10)) * 2}
            raw = pickle.dumps(batch)
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return buf.getvalue()


def _stl_tgz() -> bytes:
    rng = np.random.default_rng(1)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, raw in (("train_X.bin", rng.integers(0, 256, 2 * 27648, dtype=np.uint8).tobytes()),
                          ("train_y.bin", bytes([1, 2])), ("test_X.bin", bytes(27648)), ("test_y.bin", bytes([3])),
                          ("unlabeled_X.bin", bytes(27648))):
            info = tarfile.TarInfo(f"stl10_binary/{name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return buf.getvalue()


CIFAR10 = [f"cifar-10-batches-py/data_batch_{i}" for i in range(1, 6)] + ["cifar-10-batches-py/test_batch"]
BREAKS = {"truncated": lambda b: b[: len(b) * 2 // 3], "empty": lambda b: b"",
          "html": lambda b: b"<!DOCTYPE html><html><body>Too many requests</body></html>\n"}


def _readers():
    from icml25.studies.fedecado import data as fed
    from icml25.studies.lfss import data as lfss
    from icml25.studies.meta_expert import data as meta

    return {
        "meta_expert.read_cifar10": (lambda p: meta.read_cifar10(p), _cifar_tgz(CIFAR10)),
        "meta_expert.read_stl10": (lambda p: meta.read_stl10(p), _stl_tgz()),
        "lfss.read_cifar_archive": (lambda p: lfss.read_cifar_archive(p, "cifar10"), _cifar_tgz(CIFAR10)),
        "lfss.read_stl10_archive": (lambda p: lfss.read_stl10_archive(p), _stl_tgz()),
        "fedecado.read_cifar_archive": (lambda p: fed.read_cifar_archive(p, "cifar10"), _cifar_tgz(CIFAR10)),
    }


@pytest.mark.parametrize("reader", ["meta_expert.read_cifar10", "meta_expert.read_stl10", "lfss.read_cifar_archive",
                                    "lfss.read_stl10_archive", "fedecado.read_cifar_archive"])
@pytest.mark.parametrize("how", sorted(BREAKS))
def test_a_broken_tarball_gives_one_data_error_naming_the_file(tmp_path, reader, how):
    read, good = _readers()[reader]
    path = tmp_path / "archive.tar.gz"
    path.write_bytes(good)
    read(path)  # the intact archive reads
    path.write_bytes(BREAKS[how](good))
    with pytest.raises(DataError) as err:
        read(path)
    msg = str(err.value)
    assert str(path) in msg and "delete it and download it again" in msg and "\n" not in msg


def test_read_archive_passes_other_errors_through(tmp_path):
    path = tmp_path / "a.tar.gz"
    path.write_bytes(_stl_tgz())
    with pytest.raises(KeyError):
        with read_archive(path) as tar:
            tar.getmember("nope")
    with pytest.raises(DataError, match="zip archive"):
        with read_archive(path, "zip"):
            pass
    assert Path(path).exists()
