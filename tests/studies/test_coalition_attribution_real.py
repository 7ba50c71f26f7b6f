"""coalition_attribution at paper scale (issue 34): the real-data loaders on hand-made files with hand-computed
values, the paper's networks, the games' masking, the text models' commits (models.csv through core.hub), the claims
entries of the real-data experiments and the untested Go entry, the rehearsal's miniatures read by the real loaders
and a rehearsal-style train_real whose commit reaches claims.json's models block."""
from __future__ import annotations

import gzip
import io
import pickle
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from icml25.studies.coalition_attribution.realdata import DataError, parse_cifar_batch, parse_idx, \
    parse_sst2_tsv, read_cifar10, read_mnist, read_sst2

ROOT = Path(__file__).resolve().parents[2]
YAML = ROOT / "config" / "studies" / "coalition_attribution.yaml"


# --------------------------------------------------------------------------------------------------------- SST-2
def _zip(members: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for k, v in members.items():
            zf.writestr(k, v)
    return buf.getvalue()


def test_sst2_tsv_as_glue_ships_it(tmp_path):
    train = 'sentence\tlabel\nhide new secretions from the parental units \t0\nthe "greatest" film \t1\n'
    dev = "sentence\tlabel\nit 's a charming and often affecting journey . \t1\n"
    p = tmp_path / "SST-2.zip"
    p.write_bytes(_zip({"SST-2/train.tsv": train, "SST-2/dev.tsv": dev, "SST-2/test.tsv": "index\tsentence\n0\tx\n"}))
    d = read_sst2(p)
    assert d["train"][0] == ["hide new secretions from the parental units", 'the "greatest" film']
    np.testing.assert_array_equal(d["train"][1], [0, 1])
    assert d["dev"][0] == ["it 's a charming and often affecting journey ."] and d["dev"][1].tolist() == [1]


def test_sst2_bad_rows_name_file_line_and_column(tmp_path):
    with pytest.raises(DataError, match=r"f.tsv:3: column 'label' must be 0 or 1, got '2'"):
        parse_sst2_tsv("sentence\tlabel\ngood \t1\nbad \t2\n", "f.tsv")
    with pytest.raises(DataError, match="header must be"):
        parse_sst2_tsv("index\tsentence\n0\tx\n", "f.tsv")
    with pytest.raises(DataError, match=r"f.tsv:2: expected 2 tab-separated columns"):
        parse_sst2_tsv("sentence\tlabel\na\tb\t1\n", "f.tsv")
    p = tmp_path / "SST-2.zip"
    p.write_bytes(_zip({"SST-2/train.tsv": "sentence\tlabel\na \t1\n"}))
    with pytest.raises(DataError, match="member 'SST-2/dev.tsv' missing"):
        read_sst2(p)


# ------------------------------------------------------------------------------------------------------ CIFAR-10
def test_cifar_batch_decoded_pixel_exact():
    rows = np.arange(2 * 3072, dtype=np.int64).reshape(2, 3072) % 251
    raw = pickle.dumps({b"batch_label": b"x", b"labels": [3, 9], b"data": rows.astype(np.uint8)}, protocol=2)
    x, y = parse_cifar_batch(raw, "b")
    assert x.shape == (2, 3, 32, 32) and x.dtype == np.uint8 and y.tolist() == [3, 9]
    # row layout: 1024 red (row-major 32 x 32), then 1024 green, then 1024 blue
    assert x[0, 0, 0, 1] == 1 and x[0, 0, 1, 0] == 32 and x[0, 1, 0, 0] == 1024 % 251
    assert x[1, 2, 31, 31] == (3072 + 3071) % 251


def test_cifar_pickle_is_restricted_and_checked():
    class Evil:
        def __reduce__(self):
            import os
            return (os.system, ("true",))

    with pytest.raises(DataError, match="posix.system|os.system|not allowed"):
        parse_cifar_batch(pickle.dumps({b"data": Evil()}, protocol=2), "evil")
    raw = pickle.dumps({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, protocol=2)
    with pytest.raises(DataError, match=r"b'data' must be \(N, 3072\) uint8"):
        parse_cifar_batch(raw, "b")
    raw = pickle.dumps({b"data": np.zeros((2, 3072), np.uint8)}, protocol=2)
    with pytest.raises(DataError, match="key b'labels' missing"):
        parse_cifar_batch(raw, "b")


# --------------------------------------------------------------------------------------------------------- MNIST
def test_idx_files_by_hand(tmp_path):
    img = np.arange(2 * 28 * 28, dtype=np.int64).reshape(2, 28, 28) % 256
    raw = (2051).to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in (2, 28, 28)) + img.astype(np.uint8).tobytes()
    x = parse_idx(raw, "images", "f")
    assert x.shape == (2, 28, 28) and x[1, 0, 0] == 784 % 256 and x[0, 1, 2] == 30
    lab = (2049).to_bytes(4, "big") + (2).to_bytes(4, "big") + bytes([7, 1])
    assert parse_idx(lab, "labels", "f").tolist() == [7, 1]
    with pytest.raises(DataError, match="idx magic must be 2051"):
        parse_idx(lab, "images", "f")
    with pytest.raises(DataError, match="data bytes for dimensions"):
        parse_idx(lab[:-1], "labels", "f")
    paths = {}
    for k, data in {"train_images": raw, "train_labels": lab, "test_images": raw, "test_labels": lab[:9]}.items():
        paths[k] = tmp_path / k
        paths[k].write_bytes(gzip.compress(data))
    with pytest.raises(DataError, match="data bytes"):
        read_mnist(paths)


# ------------------------------------------------------------------------------------------------------- networks
def test_paper_networks():
    import torch

    from icml25.studies.coalition_attribution.realnets import ResNet20, VGG11

    net = ResNet20()
    weighted = [m for m in net.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    assert len(weighted) == 20  # 1 + 3 stages x 3 blocks x 2 convs + 1 linear
    assert 0.26e6 < sum(p.numel() for p in net.parameters()) < 0.28e6  # He et al. (2016), Table 6: 0.27M
    vgg = VGG11(in_channels=1)
    convs = [m for m in vgg.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [c.out_channels for c in convs] == [64, 128, 256, 256, 512, 512, 512, 512]
    assert net(torch.zeros(2, 3, 32, 32)).shape == (2, 10) and vgg(torch.zeros(2, 1, 32, 32)).shape == (2, 10)


def test_masked_images_regions_and_baseline():
    from icml25.studies.coalition_attribution.realnets import masked_images, to_32

    x = np.ones((1, 32, 32), dtype=np.float32)
    out = masked_images(x, [0, 5], baseline=-2.0)
    assert out.shape == (4, 1, 32, 32)
    np.testing.assert_array_equal(out[3], x)                                  # both present
    assert (out[0, 0, :8, :8] == -2).all() and (out[0, 0, 8:16, 8:16] == -2).all()
    assert (out[1, 0, :8, :8] == 1).all() and (out[1, 0, 8:16, 8:16] == -2).all()   # bit 0 = region 0 present
    assert (out[2, 0, :8, :8] == -2).all() and (out[2, 0, 8:16, 8:16] == 1).all()
    assert out[0].sum() == 32 * 32 - 2 * 64 * 3                              # every other region untouched
    padded = to_32(np.full((1, 28, 28), 255, np.uint8))
    assert padded.shape == (1, 1, 32, 32) and padded[0, 0, 0, 0] == 0 and padded[0, 0, 2, 2] == 1


def test_log_odds_and_variable_choice():
    from icml25.studies.coalition_attribution.realexp import choose_variables
    from icml25.studies.coalition_attribution.realtext import log_odds

    z = np.array([[1.0, 2.0, -0.5], [0.3, -4.0, 2.0]])
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    np.testing.assert_allclose(log_odds(z, [1, 0]), np.log(p[[0, 1], [1, 0]] / (1 - p[[0, 1], [1, 0]])), rtol=1e-12)
    assert log_odds(np.array([[0.0, 3.0]]), 1)[0] == pytest.approx(3.0)
    assert choose_variables(1.0, np.array([0.9, -1.0, 1.0, 3.0, 0.5]), 3) == [1, 3, 4]


def test_analyse_game_on_a_unanimity_game():
    from icml25.studies.coalition_attribution.realexp import analyse_game

    v = np.zeros(2 ** 4)
    v[0b0011 | 0b0100] = 0.0
    v[[m for m in range(16) if m & 0b0011 == 0b0011]] = 2.0       # v(S) = 2 * 1[{0,1} ⊆ S]
    g = analyse_game(v, (2, 2), 1e-9)
    assert g["shapley"] == pytest.approx([1.0, 1.0, 0.0, 0.0], abs=1e-9)
    k = g["coalitions"]["mask"].index(0b0011)
    assert g["coalitions"]["Q"][k] == pytest.approx(1.0) and g["coalitions"]["R"][k] == pytest.approx(1.0)
    assert max(g["identity_errors"].values()) < 1e-12 and g["l1_objective"] == pytest.approx(2.0)
    assert len(g["coalitions"]["mask"]) == 6


# ----------------------------------------------------------------------------------------------------- text model
C1 = "0123456789abcdef0123456789abcdef01234567"
BERT_COMMIT = "6da4b6a26a1877e173fca3225479512db81a5e5b"


class _Spy:
    """Stands in for a transformers Auto class: records ``from_pretrained``'s arguments."""

    def __init__(self, make):
        self.calls, self.make = [], make

    def from_pretrained(self, path, **kwargs):
        self.calls.append((path, kwargs))
        return self.make()


def test_models_csv_pins_bert_and_leaves_llama_unpinned():
    from icml25.core import hub
    from icml25.studies.coalition_attribution.realtext import MODELS_CSV, hub_model

    rows = hub.read_models(MODELS_CSV)
    assert {m.repo_id: m.revision for m in rows.values()} == {"google-bert/bert-large-uncased": BERT_COMMIT,
                                                               "meta-llama/Llama-2-7b-hf": hub.UNPINNED}
    assert hub_model("meta-llama/Llama-2-7b-hf", C1).revision == C1  # real.<experiment>.revision replaces it
    with pytest.raises(hub.HubError, match="not one of"):
        hub_model("someone/else")
    with pytest.raises(hub.HubError, match="not a 40-hex commit"):
        hub_model("meta-llama/Llama-2-7b-hf", "abc")


def test_pinned_row_passes_its_commit_and_unpinned_needs_the_opt_in(monkeypatch):
    """BERT-large reaches from_pretrained at its models.csv commit with trust_remote_code=False; LLaMA (UNPINNED) is
    refused before any network call without trust_unpinned, and with it loads at the one commit resolved."""
    import types

    transformers = pytest.importorskip("transformers")
    from icml25.core import hub
    from icml25.studies.coalition_attribution.realtext import load_model, resolve_model

    tok = _Spy(lambda: types.SimpleNamespace(pad_token=None, eos_token=None, unk_token="<unk>", pad_token_id=7))
    net = _Spy(lambda: types.SimpleNamespace(config=types.SimpleNamespace(pad_token_id=None)))
    monkeypatch.setattr(transformers, "AutoTokenizer", tok)
    monkeypatch.setattr(transformers, "AutoModelForSequenceClassification", net)
    no_net = lambda repo: pytest.fail(f"network call for {repo}")  # noqa: E731
    bert = resolve_model("google-bert/bert-large-uncased", commit_of=no_net)
    assert (bert.name, bert.path, bert.revision, bert.source) == ("bert_large_uncased",
                                                                 "google-bert/bert-large-uncased", BERT_COMMIT,
                                                                 "pinned")
    t, m = load_model(bert)
    want = {"revision": BERT_COMMIT, "trust_remote_code": False}
    assert tok.calls == [("google-bert/bert-large-uncased", want)]
    assert net.calls == [("google-bert/bert-large-uncased", {"num_labels": 2, **want})]
    assert t.pad_token == "<unk>" and m.config.pad_token_id == 7  # no pad, no eos token: unk pads
    with pytest.raises(hub.HubError, match="trust_unpinned=true"):
        resolve_model("meta-llama/Llama-2-7b-hf", commit_of=no_net)
    llama = resolve_model("meta-llama/Llama-2-7b-hf", trust_unpinned=True, commit_of=lambda r: C1)
    assert (llama.revision, llama.source) == (C1, "resolved")
    load_model(llama)
    assert tok.calls[-1] == ("meta-llama/Llama-2-7b-hf", {"revision": C1, "trust_remote_code": False})


def test_text_model_config_validates_model_and_revision():
    from icml25.core.config import ConfigError, build, load_yaml, merge_scale
    from icml25.studies.coalition_attribution.config import Config

    paper = merge_scale(load_yaml(YAML), "paper")
    cfg = build(Config, paper)
    assert (cfg.real.sst2_bert_large.revision, cfg.real.sst2_bert_large.local_dir) == (None, None)
    for key, value, match in (("revision", "main", "sst2_llama.revision"), ("model", "gpt2", "models.csv")):
        bad = {**paper, "real": {**paper["real"], "sst2_llama": {**paper["real"]["sst2_llama"], key: value}}}
        with pytest.raises(ConfigError, match=match):
            build(Config, bad)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    pytest.importorskip("transformers")
    from icml25.studies.coalition_attribution.rehearsal import write_manual

    root = tmp_path_factory.mktemp("tiny")
    write_manual(root)
    return root


def test_word_masking_game(tiny_models):
    from icml25.core.hub import directory_digest
    from icml25.studies.coalition_attribution.realtext import load_model, masked_sequences, resolve_model

    res = resolve_model("google-bert/bert-large-uncased", local_dir=tiny_models / "tiny-bert")
    assert (res.revision, res.source) == (f"local:{directory_digest(tiny_models / 'tiny-bert')}", "local")
    tok, model = load_model(res)
    assert type(model).__name__ == "BertForSequenceClassification" and not model.config.to_dict().get("auto_map")
    words = "the film is mesmerizing .".split()
    seqs = masked_sequences(tok, words, [1, 3])
    ids = tok(" ".join(words))["input_ids"]
    assert seqs.shape == (4, len(ids)) and seqs[3].tolist() == ids                 # both present: the sentence
    mask_id = tok.mask_token_id
    assert seqs[0].tolist() == [ids[0], ids[1], mask_id, ids[3], mask_id, ids[5], ids[6]]   # [CLS] the _ is _ . [SEP]
    assert seqs[1].tolist() == [ids[0], ids[1], ids[2], ids[3], mask_id, ids[5], ids[6]]    # bit 0 = word 1 present
    tok_l, model_l = load_model(resolve_model("meta-llama/Llama-2-7b-hf", local_dir=tiny_models / "tiny-llama"))
    assert type(model_l).__name__ == "LlamaForSequenceClassification"
    s = masked_sequences(tok_l, words, [0])
    assert s[0, 1] == tok_l.unk_token_id != tok_l.pad_token_id                     # no mask token: unk [R]


def test_rehearsal_style_train_real_records_the_commit_for_claims(tiny_models, tmp_path):
    """train_real of sst2_bert_large as the rehearsal runs it (its yaml; the tiny BERT as real.sst2_bert_large.
    local_dir, the miniature SST-2.zip): the document records the local model by its digest, and evaluate's
    hub_models turns the documents into claims.json's models block (a conflict between experiments is refused)."""
    import json

    import yaml

    from icml25.core.claims import Evidence, check, load_claims, write_claims
    from icml25.core.config import deep_merge, load_yaml
    from icml25.core.download import record_path, sha256_file
    from icml25.core.hub import directory_digest
    from icml25.studies.coalition_attribution.__main__ import main as stage_cli
    from icml25.studies.coalition_attribution.rehearsal import sst2_zip
    from icml25.studies.coalition_attribution.stages import hub_models

    doc = load_yaml(YAML)
    rehearsal = load_yaml(ROOT / "config" / "rehearsal" / "coalition_attribution.yaml")
    doc["scales"]["paper"] = deep_merge(deep_merge(doc["scales"]["paper"], rehearsal),
                                        {"real": {"sst2_bert_large": {"local_dir": str(tiny_models / "tiny-bert")}}})
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    raw = tmp_path / "SST-2.zip"
    raw.write_bytes(sst2_zip())
    record_path(raw).write_text(sha256_file(raw))  # as a verified download leaves it
    out = tmp_path / "sst2_bert_large.json"
    assert stage_cli(["train_real", "--scale", "paper", "--no-track", "--config", str(cfg), "--arm",
                      "sst2_bert_large", "--in", str(raw), "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    local = {"repo_id": "google-bert/bert-large-uncased", "source": "local",
             "revision": f"local:{directory_digest(tiny_models / 'tiny-bert')}"}
    assert rec["model"]["hub"] == {"bert_large_uncased": local} and rec["model"]["revision"] == local["revision"]
    models = hub_models({"sst2_bert_large": rec, "mnist_vgg11": {"model": {"arch": "vgg11"}}})
    assert models == {"bert_large_uncased": local}  # image experiments load no hub model
    with pytest.raises(ValueError, match="sst2_bert_large loaded it at local:"):
        hub_models({"sst2_bert_large": rec, "z": {"model": {"hub": {"bert_large_uncased": {**local, "revision": C1}}}}})
    c = check("k1", "x holds", holds=True, data="synthetic", test="exact", threshold="== 0",
              statistic={"value": 0.0}, evidence=Evidence(1, "case", None, "exact"))
    write_claims(tmp_path / "claims.json", study="coalition_attribution", scale="paper", data_source="remote",
                 claims=[c], models=models)
    assert load_claims(tmp_path / "claims.json")["models"] == {"bert_large_uncased": local}


# ------------------------------------------------------------------------------------------ claims of paper scale
def _doc(n_games: int, break_identity: bool = False) -> dict:
    from icml25.studies.coalition_attribution.realexp import analyse_game

    rng = np.random.default_rng(0)
    games = []
    for _ in range(n_games):
        g = analyse_game(rng.normal(size=2 ** 4), (2, 3), 1e-9)
        if break_identity:
            g["identity_errors"]["thm3_4"] = 1e-3
        games.append(g)
    return {"test": {"accuracy": 0.9}, "n_variables": 4, "inputs": games}


def test_real_entries_check_identities_and_mark_go_untested():
    from icml25.studies.coalition_attribution.evaluate import real_entries

    entries, summary = real_entries({"cifar10_resnet20": _doc(3), "mnist_vgg11": _doc(2, break_identity=True)})
    by_id = {e.id: e for e in entries}
    assert by_id["c4_cifar10_resnet20"].holds is True and by_id["c4_cifar10_resnet20"].evidence.n == 3
    assert by_id["c4_mnist_vgg11"].holds is False and by_id["c4_mnist_vgg11"].key_numbers["n_fail"] == 2
    go = by_id["c5_go_katago"]
    assert go.status == "untested" and "professional" in go.note and "KataGo" in go.note
    assert summary["cifar10_resnet20"]["by_size"]["2"]["n"] == 3 * 6 and summary["cifar10_resnet20"]["test_accuracy"] == 0.9
    empty, _ = real_entries({"sst2_llama": {"inputs": []}})
    assert empty[0].holds is None


# ----------------------------------------------------------------------------------------- rehearsal miniatures
def test_miniatures_are_read_by_the_real_loaders(tmp_path):
    from icml25.core.download import read_manifest
    from icml25.studies.coalition_attribution import MANIFEST
    from icml25.studies.coalition_attribution.rehearsal import write_miniatures

    manifest = read_manifest(MANIFEST, rehearsal=False)
    names = write_miniatures(tmp_path, manifest)
    assert sorted(names) == sorted(manifest)
    f = {n: tmp_path / manifest[n].mirror_path for n in names}
    sst = read_sst2(f["sst2"])
    assert len(sst["train"][0]) == 64 and len(sst["dev"][0]) == 16 and f["sst2"].name == "SST-2.zip"
    cifar = read_cifar10(f["cifar10"])
    assert cifar["train"][0].shape == (60, 3, 32, 32) and cifar["test"][0].shape == (20, 3, 32, 32)
    with tarfile.open(f["cifar10"]) as tf:
        assert {m.name for m in tf.getmembers()} >= {"cifar-10-batches-py/batches.meta", "cifar-10-batches-py/test_batch"}
    mnist = read_mnist({k: f[f"mnist_{k}"] for k in ("train_images", "train_labels", "test_images", "test_labels")})
    assert mnist["train"][0].shape == (60, 28, 28) and mnist["test"][1].shape == (20,)


def test_paper_config_and_stage_errors(tmp_path):
    from icml25.core.config import ConfigError, build, load_yaml, merge_scale
    from icml25.studies.coalition_attribution.__main__ import main as stage_cli
    from icml25.studies.coalition_attribution.config import REAL_FILES, Config

    paper = merge_scale(load_yaml(YAML), "paper")
    cfg = build(Config, paper)
    assert set(cfg.real.experiments) == set(REAL_FILES) and cfg.real.device == "cuda"
    assert cfg.real.sst2_bert_large.model == "google-bert/bert-large-uncased" and cfg.real.n_variables == 10
    bad = {**paper, "real": {**paper["real"], "experiments": ["go_katago"]}}
    with pytest.raises(ConfigError, match="real.experiments"):
        build(Config, bad)
    with pytest.raises(SystemExit, match="--arm must be one of"):
        stage_cli(["train_real", "--scale", "paper", "--no-track", "--config", str(YAML), "--arm", "go_katago",
                   "--in", "x", "--out", str(tmp_path / "x.json")])
    with pytest.raises(SystemExit, match="expected --in sst2"):
        stage_cli(["train_real", "--scale", "paper", "--no-track", "--config", str(YAML), "--arm",
                   "sst2_bert_large", "--in", "a", "b", "--out", str(tmp_path / "x.json")])
