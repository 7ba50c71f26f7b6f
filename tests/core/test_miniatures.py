"""core.miniatures: the shared real-format miniatures of the paper rehearsals (CIFAR python tarballs)."""
from __future__ import annotations

import io
import pickle
import pickletools
import tarfile

import numpy as np

from icml25.core import miniatures as M


def test_py2_pickle_writes_python2_byte_strings_and_numpy_core_arrays():
    """Like the real CIFAR batches: byte strings as SHORT_BINSTRING / BINSTRING (not Python 3's _codecs.encode),
    arrays through numpy.core.multiarray, and read back exactly with encoding="bytes"."""
    obj = {b"data": np.arange(6, dtype=np.uint8).reshape(2, 3), b"labels": [3, 7], b"k" * 300: b"v"}
    raw = M.py2_pickle(obj)
    ops = {op.name for op, _, _ in pickletools.genops(raw)}
    assert {"SHORT_BINSTRING", "BINSTRING"} <= ops and b"_codecs" not in raw
    assert b"cnumpy.core.multiarray\n" in raw and b"numpy._core" not in raw
    back = pickle.loads(raw, encoding="bytes")
    assert back[b"labels"] == [3, 7] and back[b"k" * 300] == b"v"
    assert back[b"data"].dtype == np.uint8 and back[b"data"].tolist() == [[0, 1, 2], [3, 4, 5]]


def test_cifar10_archive_has_the_real_members_and_is_deterministic():
    a, b = M.cifar10_archive(), M.cifar10_archive()
    assert a == b
    with tarfile.open(fileobj=io.BytesIO(a), mode="r:gz") as tar:
        names = tar.getnames()
        assert names[0] == "cifar-10-batches-py"
        assert {f"cifar-10-batches-py/data_batch_{k}" for k in range(1, 6)} | {
            "cifar-10-batches-py/test_batch", "cifar-10-batches-py/batches.meta"} <= set(names)
        assert {m.mtime for m in tar.getmembers()} == {M.MTIME}
        batch = pickle.loads(tar.extractfile("cifar-10-batches-py/data_batch_3").read(), encoding="bytes")
    assert batch[b"data"].shape == (M.PER_BATCH, 3072) and batch[b"data"].dtype == np.uint8
    assert batch[b"labels"] == [(2 * M.PER_BATCH + i) % 10 for i in range(M.PER_BATCH)]
    with tarfile.open(fileobj=io.BytesIO(M.cifar100_archive()), mode="r:gz") as tar:
        train = pickle.loads(tar.extractfile("cifar-100-python/train").read(), encoding="bytes")
    assert train[b"coarse_labels"] == [v % 20 for v in train[b"fine_labels"]]
