"""Miniature files for the paper-scale rehearsal of action_piece (``icml25.core.rehearsal``).

The two Amazon 2014 files of the first category of ``paper.categories`` (Sports_and_Outdoors), in the publisher's
exact line formats (see :mod:`.amazon`); only the content is synthetic:

* ``reviews_Sports_and_Outdoors_5.json.gz``: gzip, one JSON object per line with the real keys in the real order
  (``reviewerID, asin, reviewerName, helpful, reviewText, overall, summary, unixReviewTime, reviewTime``), lines
  sorted by asin as in the published files (so the loader must restore each user's chronology). 300 users × 7
  reviews over 320 items (each item reviewed 6-7 times: 5-core), plus rows the 5-core filter removes (a user with 3
  reviews, an item with 2) and same-day reviews (ties keep the file order).
* ``meta_Sports_and_Outdoors.json.gz``: gzip, one Python dict literal per line (``repr`` of a dict, single quotes,
  as published): ``asin, title, price, imUrl, related, salesRank, brand, categories, description``; some fields
  missing on some items, one reviewed item without a meta line, HTML entities in titles, and meta lines of items
  nobody reviewed.

``write_manual`` writes ``sentence_t5/``: a tiny sentence-transformers model with sentence-T5's module stack
(T5 encoder, mean pooling, bias-free Dense, Normalize) from a fixed seed, with a word-level tokenizer over the
miniature's words; the rehearsal yaml points ``paper.encoder_dir`` at it (its revision is recorded as
``local:<sha256>``).

Deterministic bytes: fixed seeds, gzip header mtime 0 and no file name.
"""
from __future__ import annotations

import gzip
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

CATEGORY = "Sports_and_Outdoors"
N_ITEMS, N_USERS, PER_USER, N_GROUPS = 320, 300, 7, 16
SEED = 20250713
GROUPS = ("Cycling", "Camping", "Running", "Fishing", "Climbing", "Golf", "Tennis", "Swimming", "Hunting", "Boating",
          "Skating", "Yoga", "Boxing", "Archery", "Hiking", "Rowing")
BRANDS = ("Trailmark", "Northpeak", "Riverline", "Stonebay", "Ashford", "Kestrel", "Lumen", "Orca")
NOUNS = ("bottle", "glove", "helmet", "bag", "lamp", "rope", "mat", "jacket", "pump", "knife")
ADJ = ("light", "durable", "compact", "waterproof", "classic", "padded", "foldable", "quick-dry")
WORDS = sorted({w.lower() for w in (*GROUPS, *BRANDS, *NOUNS, *ADJ, "sports", "outdoors", "&", "for", "with",
                                    "and", "the", "a", "pro", "edition", "set", "of", "great", "use", "product")})


def _gzip(text: str) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as gz:
        gz.write(text.encode("utf-8"))
    return out.getvalue()


def _asin(i: int) -> str:
    return f"{i:010d}" if i % 5 == 0 else f"B00{i:07d}"  # ISBN-like and B00... asins, as in the real files


def _items() -> list[dict[str, Any]]:
    """Metadata dicts of the 320 items (group = i mod 16), in the published key order."""
    rng = np.random.default_rng(SEED)
    out = []
    for i in range(N_ITEMS):
        g = i % N_GROUPS
        brand, noun, adj = BRANDS[(i // N_GROUPS) % len(BRANDS)], NOUNS[i % len(NOUNS)], ADJ[(3 * i) % len(ADJ)]
        meta: dict[str, Any] = {"asin": _asin(i), "title": f"{brand} {adj} {GROUPS[g]} {noun} &amp; set {i}"}
        if i % 7:
            meta["price"] = round(float(rng.uniform(3, 120)), 2)
        meta["imUrl"] = f"http://ecx.images-amazon.com/images/I/41{i:06d}L._SY300_.jpg"
        meta["related"] = {"also_bought": [_asin((i + k) % N_ITEMS) for k in (16, 32)],
                           "bought_together": [_asin((i + 48) % N_ITEMS)]}
        meta["salesRank"] = {"Sports &amp; Outdoors": int(rng.integers(1, 500000))}
        if i % 4:
            meta["brand"] = brand
        meta["categories"] = [["Sports & Outdoors", "Outdoor Recreation", GROUPS[g]], ["Sports & Outdoors"]]
        if i % 3:
            meta["description"] = f"A {adj} {noun} for {GROUPS[g].lower()}.<br />Great use with the {brand} set."
        out.append(meta)
    return out


def _reviews() -> list[dict[str, Any]]:
    """Review dicts (real key order), not yet sorted. User u belongs to group u mod 16 and reviews 7 of its
    group's 20 items in rotation (each item 6-7 times), one day apart with a same-day pair; plus a 3-review user and
    a 2-review item that the 5-core filter removes."""
    rng = np.random.default_rng(SEED + 1)
    rows = []

    def row(user: str, item: int, t: int, name: str) -> dict[str, Any]:
        stars = float(rng.integers(1, 6))
        return {"reviewerID": user, "asin": _asin(item), "reviewerName": name,
                "helpful": [int(rng.integers(0, 3)), int(rng.integers(3, 6))],
                "reviewText": f"Review of {_asin(item)}: works as described.", "overall": stars,
                "summary": "Five Stars" if stars == 5 else "Good", "unixReviewTime": t,
                "reviewTime": _review_time(t)}

    count = [0] * N_GROUPS
    for u in range(N_USERS):
        g = u % N_GROUPS
        members = [i for i in range(N_ITEMS) if i % N_GROUPS == g]
        j = count[g]
        count[g] += 1
        start = 1300000000 + int(rng.integers(0, 2000)) * 86400
        for t in range(PER_USER):
            day = start + (t if t != PER_USER - 1 else t - 1) * 86400  # the last two share a day
            rows.append(row(f"A{u:05d}XQ{u % 97:02d}", members[(j * PER_USER + t) % len(members)], day, f"User {u}"))
    for t in range(3):  # a user with 3 reviews: removed by the 5-core
        rows.append(row("AZZZ00SHORT", t, 1400000000 + t * 86400, "Short"))
    for u in (0, 1):  # an item reviewed twice: removed by the 5-core (its reviewers keep 7 reviews)
        rows.append(row(f"A{u:05d}XQ{u % 97:02d}", N_ITEMS, 1500000000 + u, f"User {u}"))
    return rows


def _review_time(t: int) -> str:
    import datetime

    d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    return f"{d.month:02d} {d.day}, {d.year}"


def reviews_file() -> bytes:
    """``reviews_Sports_and_Outdoors_5.json.gz``: JSON lines sorted by asin (stable)."""
    rows = sorted(_reviews(), key=lambda r: r["asin"])
    return _gzip("".join(json.dumps(r) + "\n" for r in rows))


def meta_file() -> bytes:
    """``meta_Sports_and_Outdoors.json.gz``: Python dict literals; item 1 (reviewed) has no line, and ten items
    nobody reviewed do."""
    metas = [m for i, m in enumerate(_items()) if i != 1]
    extra = [{"asin": _asin(N_ITEMS + 1 + k), "title": f"Unreviewed thing {k}", "categories": [["Sports & Outdoors"]]}
             for k in range(10)]
    return _gzip("".join(repr(m) + "\n" for m in [*metas, *extra]))


def write_miniatures(root: Path, manifest: Mapping[str, Any]) -> list[str]:
    """The first category's review and meta files at their ``mirror_path`` under ``root``."""
    root = Path(root)
    files = {f"reviews_{CATEGORY}_5": reviews_file(), f"meta_{CATEGORY}": meta_file()}
    for name, data in files.items():
        dest = root / manifest[name].mirror_path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    return list(files)


def write_manual(root: Path) -> None:
    """``root/sentence_t5``: a tiny sentence-T5 (T5 encoder 2 layers, d_model 32; mean pooling; Dense 32 -> 32
    without bias; Normalize) with a word-level tokenizer, saved with ``SentenceTransformer.save``."""
    import tempfile

    import torch
    from sentence_transformers import SentenceTransformer, models
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast, T5Config, T5EncoderModel

    out = Path(root) / "sentence_t5"
    vocab = {w: i for i, w in enumerate(["<pad>", "</s>", "<unk>", *WORDS])}
    tk = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tk.normalizer = normalizers.Lowercase()
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                  model_max_length=128, model_input_names=["input_ids", "attention_mask"])
    torch.manual_seed(SEED)
    enc = T5EncoderModel(T5Config(vocab_size=len(vocab), d_model=32, d_ff=64, num_layers=2, num_heads=2, d_kv=16,
                                  feed_forward_proj="relu", pad_token_id=0, eos_token_id=1))
    with tempfile.TemporaryDirectory() as tmp:
        enc.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        transformer = models.Transformer(tmp, max_seq_length=128)
        pooling = models.Pooling(32, pooling_mode="mean")
        dense = models.Dense(32, 32, bias=False, activation_function=torch.nn.Identity())
        st = SentenceTransformer(modules=[transformer, pooling, dense, models.Normalize()], device="cpu")
        out.mkdir(parents=True, exist_ok=True)
        st.save(str(out))
