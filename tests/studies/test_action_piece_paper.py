"""Tests of the action_piece paper path: the Amazon 2014 loaders on hand-made gzip files in the real line formats
(values computed by hand), the item-feature pipeline against independent references (faiss codes = nearest
centroid of the OPQ-rotated residual, whitening = identity covariance), the T5 learner's size against the closed form
of T5's parameter count, the learning-rate schedule, and the paper stages' clear errors."""
from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from icml25.core.datasets import DataError
from icml25.studies.action_piece import amazon as A
from icml25.studies.action_piece import features as F

ROOT = Path(__file__).resolve().parents[2]


def _gz(path: Path, lines: list[str]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in lines))
    return path


def _review(user: str, asin: str, t: int) -> str:
    return json.dumps({"reviewerID": user, "asin": asin, "reviewerName": "X", "helpful": [0, 0],
                       "reviewText": "ok", "overall": 5.0, "summary": "ok", "unixReviewTime": t,
                       "reviewTime": "01 1, 2014"})


# ------------------------------------------------------------------------------------------- reviews


def test_read_reviews_values_and_blank_lines(tmp_path):
    p = _gz(tmp_path / "reviews_X_5.json.gz", [_review("U1", "A1", 30), "", _review("U2", "A1", 10),
                                               _review("U1", "A2", 20)])
    df = A.read_reviews(p)
    assert df["user"].tolist() == ["U1", "U2", "U1"]
    assert df["item"].tolist() == ["A1", "A1", "A2"]
    assert df["time"].tolist() == [30, 10, 20]
    assert df["line"].tolist() == [1, 3, 4]  # the blank line 2 is skipped but counted


@pytest.mark.parametrize("line, match", [
    ('{"reviewerID": "U1", "asin": "A1", "unixReviewTime": 5', r":2: not a JSON object"),
    ('["U1", "A1", 5]', r":2: expected a JSON object, got list"),
    ('{"reviewerID": "U1", "unixReviewTime": 5}', r":2: field 'asin' missing"),
    ('{"reviewerID": "", "asin": "A1", "unixReviewTime": 5}', r":2: field 'reviewerID' must be a non-empty"),
    ('{"reviewerID": "U1", "asin": "A1", "unixReviewTime": "5"}', r":2: field 'unixReviewTime' must be"),
    ('{"reviewerID": "U1", "asin": "A1", "unixReviewTime": true}', r":2: field 'unixReviewTime' must be"),
    # the meta files' Python-literal format is not accepted as a review line
    ("{'reviewerID': 'U1', 'asin': 'A1', 'unixReviewTime': 5}", r":2: not a JSON object"),
])
def test_read_reviews_errors_name_file_line_and_field(tmp_path, line, match):
    p = _gz(tmp_path / "r.json.gz", [_review("U0", "A0", 1), line])
    with pytest.raises(DataError, match=r"r\.json\.gz" + match):
        A.read_reviews(p)


def test_truncated_or_non_gzip_file_names_the_file(tmp_path):
    p = _gz(tmp_path / "r.json.gz", [_review(f"U{i}", "A", i) for i in range(200)])
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(p.read_bytes()[:-30])
    with pytest.raises(DataError, match=r"cut\.json\.gz: not a readable gzip"):
        A.read_reviews(cut)
    plain = tmp_path / "plain.json.gz"
    plain.write_text(_review("U", "A", 1))
    with pytest.raises(DataError, match=r"plain\.json\.gz: not a readable gzip"):
        A.read_reviews(plain)


# ------------------------------------------------------------------------------------------- meta


def test_read_meta_parses_python_literals_and_filters(tmp_path):
    lines = [repr({"asin": "A1", "title": "Tent &amp; <b>stakes</b>", "price": 12.5,
                   "categories": [["Sports & Outdoors", "Camping"]]}),
             repr({"asin": "ZZ", "title": "not reviewed"}),
             "{'asin': 'A2', 'description': \"it's \\\"light\\\"\", 'related': {'also_bought': ['A1']}}"]
    p = _gz(tmp_path / "meta_X.json.gz", lines)
    meta = A.read_meta(p, {"A1", "A2"})
    assert set(meta) == {"A1", "A2"}
    assert meta["A1"]["price"] == 12.5 and meta["A2"]["related"] == {"also_bought": ["A1"]}
    assert set(A.read_meta(p)) == {"A1", "ZZ", "A2"}


@pytest.mark.parametrize("line, match", [
    ("{'asin': 'A1', 'title': __import__('os').getcwd()}", r":2: not a Python dict literal"),  # never evaluated
    ("{'asin': 'A1', 'title': 'x'", r":2: not a Python dict literal"),
    ("['A1']", r":2: expected a dict literal, got list"),
    ("{'title': 'no asin'}", r":2: field 'asin' missing"),
    ("{'asin': 'A0', 'title': 'again'}", r":2: field 'asin' 'A0' repeats"),
    ("{'asin': 'A1', 'categories': [['a', 3]]}", r":2: field 'categories' has an unsupported value"),
    ("{'asin': 'A1', 'price': True}", r":2: field 'price' has an unsupported value"),
])
def test_read_meta_errors_name_file_line_and_field(tmp_path, line, match):
    p = _gz(tmp_path / "m.json.gz", [repr({"asin": "A0"}), line])
    with pytest.raises(DataError, match=r"m\.json\.gz" + match):
        A.read_meta(p, {"A0", "A1"} if "asin" in line else None)


def test_read_meta_never_evaluates_code(tmp_path):
    marker = tmp_path / "pwned"
    p = _gz(tmp_path / "m.json.gz", [f"{{'asin': 'A1', 'title': open({str(marker)!r}, 'w')}}"])
    with pytest.raises(DataError):
        A.read_meta(p, {"A1"})
    assert not marker.exists()


# ------------------------------------------------------------------------------------------- preprocessing


def test_k_core_cascades_by_hand():
    """k = 2. Item C has one interaction (u3): it goes, leaving u3 with one (B), so u3 goes, leaving B with one
    (u1), so B goes, leaving u1 with one (A): u1 goes. What stays: u2 and u4 on items A and D (2 each)."""
    rows = [("u1", "A"), ("u1", "B"), ("u2", "A"), ("u2", "D"), ("u3", "B"), ("u3", "C"), ("u4", "A"),
            ("u4", "D")]
    df = pd.DataFrame(rows, columns=["user", "item"])
    kept = A.k_core(df, 2)
    assert list(map(tuple, kept[["user", "item"]].to_numpy())) == [("u2", "A"), ("u2", "D"), ("u4", "A"),
                                                                    ("u4", "D")]
    assert len(A.k_core(df, 1)) == len(df)


def test_sequences_are_chronological_with_ties_in_file_order():
    df = pd.DataFrame({"user": ["b", "a", "b", "a", "b", "a"], "item": ["X", "Y", "Y", "Z", "Z", "X"],
                       "time": [5, 9, 5, 1, 2, 9], "line": [1, 2, 3, 4, 5, 6]})
    users, asins, seqs = A.sequences(df)
    # users by first appearance: b (line 1), a (line 2); b: Z (t2), X (t5, line 1), Y (t5, line 3);
    # a: Z (t1), Y (t9, line 2), X (t9, line 6); items numbered along b then a: Z 0, X 1, Y 2
    assert users == ["b", "a"]
    assert asins == ["Z", "X", "Y"]
    assert seqs == [[0, 1, 2], [0, 2, 1]]


def test_clean_text_and_meta_sentence_by_hand():
    assert A.clean_text("  Tent &amp; <b>stakes</b>... ") == "Tent & stakes."
    assert A.clean_text('He said "go"\nnow') == "He said gonow."
    assert A.clean_text("x" * 2500) == ""
    meta = {"description": "Light.", "title": "Tent", "price": 12.5, "brand": "Acme",
            "categories": [["Sports & Outdoors", "Camping"], ["Tents"]], "imUrl": "http://x"}
    # fields in the order title, price, brand, feature, categories, description; each followed by a space
    assert A.meta_sentence(meta) == "Tent. 12.5. Acme. Sports & Outdoors, Camping, Tents. Light. "
    assert A.meta_sentence({"feature": ["Strong", "Light."]}) == "Strong.Light. "
    assert A.meta_sentence(None) == ""


def test_load_category_on_the_rehearsal_miniatures(tmp_path):
    """The rehearsal's files (real line formats): the 5-core removes exactly the 3-review user and the 2-review item
    (5 rows), one reviewed item has no meta line, every user keeps 7 chronological actions."""
    from icml25.studies.action_piece import rehearsal as R

    rv = tmp_path / "r.json.gz"
    mt = tmp_path / "m.json.gz"
    rv.write_bytes(R.reviews_file())
    mt.write_bytes(R.meta_file())
    d = A.load_category(rv, mt)
    assert d["stats"] == {"interactions_raw": R.N_USERS * R.PER_USER + 5, "interactions": R.N_USERS * R.PER_USER,
                          "users": R.N_USERS, "items": R.N_ITEMS, "items_without_meta": 1, "k_core": 5}
    assert all(len(s) == R.PER_USER for s in d["seqs"])
    assert sum(t == "" for t in d["texts"]) == 1
    assert R.reviews_file() == R.reviews_file() and R.meta_file() == R.meta_file()  # deterministic bytes


# ------------------------------------------------------------------------------------------- features


def test_unpack_codes_by_hand():
    # two 3-bit codes per row, LSB first: row 0 codes (5, 3) -> bits 101 110 -> byte 0b00011101 = 29
    assert F.unpack_codes(np.array([[29]], np.uint8), 2, 3).tolist() == [[5, 3]]
    # 8-bit codes are the bytes themselves
    assert F.unpack_codes(np.array([[7, 200, 0]], np.uint8), 3, 8).tolist() == [[7, 200, 0]]


@pytest.mark.parametrize("bits", [4, 8])
def test_opq_codes_equal_nearest_centroid_of_the_rotated_residual(bits):
    """Independent reference: rotate by the trained OPQ matrix, subtract the single IVF centroid, and take the
    nearest PQ centroid per sub-vector (squared L2)."""
    import faiss

    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 16)).astype(np.float32)
    train = np.arange(300) < 280
    codes = F.opq_codes(x, train, m=4, bits=bits)
    # the same trained index, built again (faiss training is deterministic) to read its parts
    index = faiss.index_factory(16, f"OPQ4,IVF1,PQ4x{bits}", faiss.METRIC_INNER_PRODUCT)
    index.train(x[train])
    ivf = faiss.downcast_index(faiss.extract_index_ivf(index))
    opq = faiss.downcast_VectorTransform(index.chain.at(0))
    pq = ivf.pq
    r = opq.apply_py(x) - ivf.quantizer.reconstruct(0)
    cent = faiss.vector_to_array(pq.centroids).reshape(pq.M, pq.ksub, pq.dsub)
    ref = np.stack([((r[:, j * pq.dsub:(j + 1) * pq.dsub][:, None] - cent[j][None]) ** 2).sum(-1).argmin(1)
                    for j in range(pq.M)], axis=1)
    assert codes.shape == (300, 4) and codes.max() < 2 ** bits
    np.testing.assert_array_equal(codes, ref)


def test_opq_codes_refuse_too_few_training_items():
    x = np.zeros((300, 8), np.float32)
    with pytest.raises(DataError, match="needs at least 256 training items, got 100"):
        F.opq_codes(x, np.arange(300) < 100, m=4, bits=4)
    with pytest.raises(DataError, match="not a multiple of pq_codebooks 3"):
        F.opq_codes(x, np.ones(300, bool), m=3, bits=4)


def test_pca_whiten_gives_identity_covariance():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((500, 12)) @ rng.standard_normal((12, 12))
    z = F.pca_whiten(x.astype(np.float32), 5)
    assert z.shape == (500, 5)
    np.testing.assert_allclose(np.cov(z, rowvar=False), np.eye(5), atol=1e-3)
    with pytest.raises(DataError, match="pca_dim 13 exceeds"):
        F.pca_whiten(x.astype(np.float32), 13)


def test_hash_feature_by_hand():
    codes = np.array([[1, 2], [3, 4], [1, 2], [1, 2]])
    rng = np.random.default_rng(7)
    p12, p34 = np.random.default_rng(7).permutation(5), None
    h = F.hash_feature(codes, 5, rng)
    assert [h[0], h[2], h[3]] == [p12[0], p12[1], p12[2]]  # j-th item of a tuple takes entry j
    assert len({h[0], h[2], h[3]}) == 3 and p34 is None
    with pytest.raises(DataError, match=r"more than 2 items share the codes \(1, 2\)"):
        F.hash_feature(codes, 2, np.random.default_rng(0))


# ------------------------------------------------------------------------------------------- learner


def test_t5_learner_has_the_closed_form_parameter_count_at_paper_size():
    """transformers T5ForConditionalGeneration from a config at the paper's size (vocabulary 40k + BOS/EOS, d_model
    128, d_ff 1024, 6 heads x d_kv 64, 4 + 4 layers; tied embeddings) vs the count by hand."""
    from icml25.studies.action_piece.model import build_model

    V, d, ff, h, kv, L = 40002, 128, 1024, 6, 64, 4
    cfg = {"backend": "t5", "d_model": d, "d_ff": ff, "n_heads": h, "d_kv": kv, "n_enc": L, "n_dec": L,
           "dropout": 0.1}
    model = build_model(V, cfg, 0)
    attn = 4 * d * h * kv  # q, k, v, o without biases
    ffn = 2 * d * ff
    enc_layer = attn + ffn + 2 * d  # two RMS norms
    dec_layer = 2 * attn + ffn + 3 * d
    rel_bias = 32 * h  # relative position buckets, first layer of each stack
    want = V * d + L * enc_layer + d + rel_bias + L * dec_layer + d + rel_bias
    assert sum(p.numel() for p in model.parameters()) == want
    assert model.t5.config.eos_token_id == V - 1 and model.t5.config.decoder_start_token_id == 0


def test_t5_backend_beam_search_returns_known_shapes_and_eos_handling():
    import torch

    from icml25.studies.action_piece.model import beam_search, build_model

    torch.manual_seed(0)
    model = build_model(12, {"backend": "t5", "d_model": 16, "d_ff": 32, "n_heads": 2, "d_kv": 8, "n_enc": 1,
                             "n_dec": 1, "dropout": 0.0}, 0).eval()
    src = torch.tensor([[10, 3, 4, 11], [10, 5, 11, 0]])
    out = beam_search(model, src, beams=4, steps=3, eos=11, allowed=10)
    assert out.shape == (2, 4, 3)
    flat = out.reshape(-1, 3).tolist()
    assert all(t not in (0, 10) for row in flat for t in row[:row.index(11) if 11 in row else 3])
    for row in flat:  # after EOS only PAD
        if 11 in row:
            assert all(t == 0 for t in row[row.index(11) + 1:])


def test_cosine_schedule_with_warmup_by_hand():
    import torch

    from icml25.studies.action_piece.experiment import lr_schedule

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = lr_schedule(opt, "cosine", 4, 12)
    lrs = []
    for _ in range(12):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    want = [0.0, 0.25, 0.5, 0.75] + [0.5 * (1 + math.cos(math.pi * k / 8)) for k in range(8)]
    np.testing.assert_allclose(lrs, want, atol=1e-12)
    assert lr_schedule(opt, "constant", 4, 12) is None


# ------------------------------------------------------------------------------------------- stages


def test_paper_download_refuses_unpinned_files_without_the_opt_in(tmp_path):
    """The Amazon files are UNPINNED in manifest.csv: the download names the row and the opt-in, leaves nothing."""
    from icml25.core.download import DownloadError
    from icml25.studies.action_piece.__main__ import main

    outs = [tmp_path / "r.json.gz", tmp_path / "m.json.gz"]
    with pytest.raises(DownloadError, match=r"reviews_Sports_and_Outdoors_5: the manifest pins no sha256.*"
                                            r"trust_unpinned"):
        main(["download", "--scale", "paper", "--no-track", "--results", str(tmp_path), "--data-source", "remote",
              "--mirror", str(tmp_path / "mirror"), "--out", *map(str, outs)])
    assert not any(p.exists() for p in outs) and not list(tmp_path.glob("*.sha256"))


def test_models_csv_names_the_encoder_and_no_trust_remote_code():
    from icml25.core import hub

    rows = hub.read_models(ROOT / "src/icml25/studies/action_piece/models.csv")
    assert rows["sentence_t5"].repo_id == "sentence-transformers/sentence-t5-base"
    src = "".join(p.read_text() for p in (ROOT / "src/icml25/studies/action_piece").glob("*.py"))
    assert "trust_remote_code=True" not in src
    with pytest.raises(hub.HubError, match="no pinned revision"):
        hub.resolve(rows["sentence_t5"])
