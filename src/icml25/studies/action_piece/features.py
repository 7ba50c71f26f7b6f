"""Item features of the paper scale (paper §4.1, "Item features"; the authors' released tokenizer): each item's text
is embedded by sentence-T5, the embeddings are reduced by a whitened PCA, and faiss's OPQ + product quantiser
(``OPQ<M>,IVF1,PQ<M>x<bits>``, inner-product metric, trained on the items of the training sequences) turns each item
into M codes; a last feature ("hash") tells apart items whose M codes collide. The item is the set of those M + 1
features (category k = position k).

Shapes: ``texts`` n strings -> embeddings (n, d_enc) float32 -> PCA (n, pca_dim) float32 -> codes (n, M) int64 in
0..2**bits - 1 -> features (n, M + 1).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from icml25.core.datasets import DataError


def embed_texts(texts: Sequence[str], model_path: str, load_kwargs: dict[str, Any], *, device: str = "cpu",
                batch_size: int = 512) -> np.ndarray:
    """Sentence embeddings (n, d) float32 of ``texts`` by the sentence-transformers model at ``model_path`` (a hub
    id with ``load_kwargs`` = ``revision``/``trust_remote_code=False`` from :mod:`icml25.core.hub`, or a local
    directory). Not normalised beyond what the model's own modules do (sentence-T5 ends with a Normalize module)."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as err:  # pragma: no cover - the extra is missing
        raise RuntimeError("the paper scale's item features need sentence-transformers: pip install "
                           "'icml25[action_piece-paper]'") from err
    model = SentenceTransformer(model_path, device=device, **load_kwargs)
    emb = model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    return np.ascontiguousarray(emb, dtype=np.float32)


def pca_whiten(x: np.ndarray, dim: int, seed: int = 0) -> np.ndarray:
    """Whitened PCA to ``dim`` components, fit on all rows (the authors' ``PCA(n_components, whiten=True)``);
    (n, d) -> (n, dim) float32. ``dim`` must not exceed min(n, d)."""
    from sklearn.decomposition import PCA

    n, d = x.shape
    if dim > min(n, d):
        raise DataError(f"features.pca_dim {dim} exceeds min(items, embedding width) = {min(n, d)}")
    return np.ascontiguousarray(PCA(n_components=dim, whiten=True, random_state=seed).fit_transform(x),
                                dtype=np.float32)


def unpack_codes(packed: np.ndarray, m: int, bits: int) -> np.ndarray:
    """faiss's packed product-quantiser codes (n, code_size) uint8 -> (n, m) int64: code j of a row occupies bits
    j*bits .. (j+1)*bits - 1 of the row's bit string, least significant bit first."""
    packed = np.ascontiguousarray(packed, dtype=np.uint8)
    bitstr = np.unpackbits(packed, axis=1, bitorder="little")[:, :m * bits].reshape(len(packed), m, bits)
    return (bitstr.astype(np.int64) << np.arange(bits)).sum(-1)


def opq_codes(x: np.ndarray, train_mask: np.ndarray, m: int = 4, bits: int = 8, threads: int = 1
              ) -> np.ndarray:
    """The (n, m) product-quantisation codes of every row of ``x`` (n, d) float32 from the faiss index
    ``OPQ<m>,IVF1,PQ<m>x<bits>`` (inner-product metric) trained on ``x[train_mask]`` (paper: the items that occur
    in training sequences), read from the single inverted list in insertion order.

    faiss's OPQ trains an internal 8-bit quantiser, so it needs at least 256 training rows whatever ``bits``."""
    import faiss

    x = np.ascontiguousarray(x, dtype=np.float32)
    n, d = x.shape
    if d % m:
        raise DataError(f"features: embedding width {d} is not a multiple of pq_codebooks {m}")
    n_train = int(np.count_nonzero(train_mask))
    if n_train < max(256, 2 ** bits):
        raise DataError(f"features: faiss OPQ/PQ needs at least {max(256, 2 ** bits)} training items, got "
                        f"{n_train}")
    faiss.omp_set_num_threads(int(threads))
    index = faiss.index_factory(d, f"OPQ{m},IVF1,PQ{m}x{bits}", faiss.METRIC_INNER_PRODUCT)
    index.train(x[np.asarray(train_mask, bool)])
    index.add(x)
    ivf = faiss.downcast_index(faiss.extract_index_ivf(index))
    lists = ivf.invlists
    size, code_size = lists.list_size(0), lists.code_size
    if size != n:
        raise RuntimeError(f"faiss: {size} codes in the inverted list for {n} items")
    ids = faiss.rev_swig_ptr(lists.get_ids(0), size).copy()
    packed = faiss.rev_swig_ptr(lists.get_codes(0), size * code_size).reshape(size, code_size).copy()
    codes = np.empty((n, m), dtype=np.int64)
    codes[ids] = unpack_codes(packed, m, bits)
    return codes


def hash_feature(codes: np.ndarray, buckets: int, rng: np.random.Generator) -> np.ndarray:
    """The disambiguating last feature (the authors' hashed feature): every distinct code tuple draws a random
    permutation of 0..buckets-1 (in order of first occurrence), and the j-th item with that tuple (in item order)
    takes entry j; more than ``buckets`` items on one tuple raises (increase ``features.hash_buckets``)."""
    perms: dict[tuple[int, ...], np.ndarray] = {}
    seen: dict[tuple[int, ...], int] = {}
    out = np.empty(len(codes), dtype=np.int64)
    for i, row in enumerate(np.asarray(codes)):
        t = tuple(int(v) for v in row)
        if t not in perms:
            perms[t] = rng.permutation(buckets)
        j = seen.get(t, 0)
        if j >= buckets:
            raise DataError(f"features: more than {buckets} items share the codes {t}; increase "
                            "features.hash_buckets")
        seen[t] = j + 1
        out[i] = perms[t][j]
    return out


def item_features(emb: np.ndarray, train_mask: np.ndarray, *, pca_dim: int, m: int, bits: int, buckets: int,
                  seed: int = 0, threads: int = 1) -> tuple[np.ndarray, dict[str, Any]]:
    """Embeddings (n, d) -> item features (n, m + 1): PCA -> OPQ/PQ codes -> + hash. Also returns statistics
    (distinct code tuples, largest collision group)."""
    z = pca_whiten(emb, pca_dim, seed)
    codes = opq_codes(z, train_mask, m, bits, threads)
    h = hash_feature(codes, buckets, np.random.default_rng(seed))
    _, counts = np.unique(codes, axis=0, return_counts=True)
    stats = {"items": int(len(codes)), "distinct_codes": int(len(counts)), "largest_collision": int(counts.max()),
             "train_items": int(np.count_nonzero(train_mask)), "pca_dim": pca_dim, "codebooks": m, "bits": bits}
    return np.concatenate([codes, h[:, None]], axis=1), stats
