"""Miniature real-format files for the paper-scale rehearsal of coalition_attribution (``icml25.core.rehearsal``).

* ``sst2``: GLUE's ``SST-2.zip`` with its members ``SST-2/train.tsv``, ``SST-2/dev.tsv`` (header ``sentence<TAB>label``,
  lower-cased space-separated words, GLUE's trailing space after train phrases) and ``SST-2/test.tsv`` (``index<TAB>
  sentence``); the sentences are drawn from a small vocabulary with a fixed seed, labelled by their sentiment words.
* ``mnist_*``: the four gzipped idx files (magic 2051 / 2049, big-endian dimensions, uint8), 60 training and 20 test
  digits of random strokes.
* ``cifar10``: ``cifar-10-python.tar.gz`` with ``cifar-10-batches-py/{batches.meta, data_batch_1..5, readme.html,
  test_batch}``, each batch a protocol-2 pickle of a dict with byte keys (``b"batch_label"``, ``b"labels"``,
  ``b"data"`` (N, 3072) uint8, ``b"filenames"``), 12 images per training batch and 20 test images.

Deterministic: fixed seeds, fixed mtimes (0) in the gzip, tar and zip headers. ``write_manual`` builds the two tiny
text models of the rehearsal locally (no download): a ``BertForSequenceClassification`` and a
``LlamaForSequenceClassification`` of a few thousand weights with a word-level tokenizer over the miniature's
vocabulary, saved with ``save_pretrained``; ``config/rehearsal/coalition_attribution.yaml`` points
``real.sst2_*.local_dir`` at them (standing in for the hub weights of ``real.sst2_*.model``).
"""
from __future__ import annotations

import gzip
import io
import pickle
import tarfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

POSITIVE = ("good", "great", "charming", "mesmerizing", "moving", "funny", "brilliant", "warm")
NEGATIVE = ("bad", "dull", "boring", "tedious", "awful", "flat", "lifeless", "clumsy")
NEUTRAL = ("the", "film", "movie", "performances", "story", "is", "a", "and", "it", "'s", "with", "of", "rivaling",
           "blair", "witch", "plot", "acting", "its", "director", ".", ",")
VOCAB = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") + POSITIVE + NEGATIVE + NEUTRAL
CIFAR_CLASSES = (b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse", b"ship", b"truck")


def _write(dest: Path, data: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not dest.exists() or dest.read_bytes() != data:
        tmp = dest.with_name(dest.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(dest)


def _gzip(data: bytes) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
        gz.write(data)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------------------- SST-2
def _sentence(rng: np.random.Generator, lo: int, hi: int) -> tuple[str, int]:
    n = int(rng.integers(lo, hi + 1))
    label = int(rng.integers(0, 2))
    words = list(rng.choice(NEUTRAL[:-2], size=n - 3))
    own = POSITIVE if label else NEGATIVE
    words += list(rng.choice(own, size=2)) + [str(rng.choice(POSITIVE + NEGATIVE))]
    rng.shuffle(words)
    return " ".join(words + ["."]), label


def sst2_zip() -> bytes:
    rng = np.random.default_rng(20250701)
    train = [_sentence(rng, 4, 12) for _ in range(64)]
    dev = [_sentence(rng, 10, 16) for _ in range(16)]
    test = [_sentence(rng, 10, 16)[0] for _ in range(8)]
    files = {
        "SST-2/dev.tsv": "sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in dev),
        "SST-2/original/README.txt": "Miniature of the Stanford Sentiment Treebank for the rehearsal (synthetic).\n",
        "SST-2/test.tsv": "index\tsentence\n" + "".join(f"{i}\t{s}\n" for i, s in enumerate(test)),
        "SST-2/train.tsv": "sentence\tlabel\n" + "".join(f"{s} \t{y}\n" for s, y in train),
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in ("SST-2/", "SST-2/original/"):
            zf.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), b"")
        for name, text in files.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, text.encode("utf-8"))
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------------------- MNIST
def _digits(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n 28 x 28 uint8 images: a bright bar whose position encodes the label, plus noise."""
    y = rng.integers(0, 10, n).astype(np.uint8)
    x = rng.integers(0, 40, (n, 28, 28)).astype(np.uint8)
    for k in range(n):
        r = 4 + 2 * int(y[k])
        x[k, r:r + 3, 4:24] = 255
    return x, y


def idx_bytes(arr: np.ndarray) -> bytes:
    """An idx file: magic 2051 (3-d images) or 2049 (labels), big-endian dimensions, uint8 data."""
    arr = np.ascontiguousarray(arr, dtype=np.uint8)
    magic = 2051 if arr.ndim == 3 else 2049
    head = magic.to_bytes(4, "big") + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    return head + arr.tobytes()


# ------------------------------------------------------------------------------------------------------- CIFAR-10
def cifar_batch(x: np.ndarray, y: np.ndarray, label: bytes, first: int) -> bytes:
    """A CIFAR-10 python batch: protocol-2 pickle of a dict with byte keys; x (N, 3, 32, 32) uint8."""
    doc = {b"batch_label": label, b"labels": [int(v) for v in y],
           b"data": np.ascontiguousarray(x.reshape(len(x), 3072), dtype=np.uint8),
           b"filenames": [b"mini_%05d.png" % (first + k) for k in range(len(x))]}
    return pickle.dumps(doc, protocol=2)


def _cifar_images(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, 10, n)
    x = rng.integers(0, 60, (n, 3, 32, 32)).astype(np.uint8)
    for k in range(n):
        x[k, int(y[k]) % 3, :, 3 * int(y[k]):3 * int(y[k]) + 3] = 250  # a class-coloured stripe
    return x, y


def cifar_tar() -> bytes:
    rng = np.random.default_rng(20250703)
    members: dict[str, bytes] = {
        "cifar-10-batches-py/batches.meta": pickle.dumps(
            {b"num_cases_per_batch": 12, b"label_names": list(CIFAR_CLASSES), b"num_vis": 3072}, protocol=2)}
    for b in range(1, 6):
        x, y = _cifar_images(rng, 12)
        members[f"cifar-10-batches-py/data_batch_{b}"] = cifar_batch(
            x, y, b"training batch %d of 5" % b, 12 * (b - 1))
    members["cifar-10-batches-py/readme.html"] = b"<meta HTTP-EQUIV=\"REFRESH\" content=\"0; url=https://www.cs.toronto.edu/~kriz/cifar.html\">\n"
    x, y = _cifar_images(rng, 20)
    members["cifar-10-batches-py/test_batch"] = cifar_batch(x, y, b"testing batch 1 of 1", 0)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tf:
        dir_info = tarfile.TarInfo("cifar-10-batches-py")
        dir_info.type, dir_info.mode, dir_info.mtime = tarfile.DIRTYPE, 0o755, 0
        tf.addfile(dir_info)
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(members[name]), 0o644, 0
            tf.addfile(info, io.BytesIO(members[name]))
    return _gzip(raw.getvalue())


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """Write every manifest row's miniature at its ``mirror_path`` under ``root``; return the row names."""
    rng = np.random.default_rng(20250702)
    tr, te = _digits(rng, 60), _digits(rng, 20)
    files = {"sst2": sst2_zip(),
             "mnist_train_images": _gzip(idx_bytes(tr[0])), "mnist_train_labels": _gzip(idx_bytes(tr[1])),
             "mnist_test_images": _gzip(idx_bytes(te[0])), "mnist_test_labels": _gzip(idx_bytes(te[1])),
             "cifar10": cifar_tar()}
    for name, data in files.items():
        _write(Path(root) / manifest[name].mirror_path, data)
    return list(files)


# ------------------------------------------------------------------------------------- tiny text models (manual)
def _word_tokenizer(kind: str):
    """A word-level fast tokenizer over :data:`VOCAB` (BERT: [CLS] x [SEP] around a sentence; LLaMA: <s> first)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    if kind == "bert":
        vocab = {w: i for i, w in enumerate(VOCAB)}
    else:
        rename = {"[PAD]": "<pad>", "[UNK]": "<unk>", "[CLS]": "<s>", "[SEP]": "</s>"}
        vocab = {rename.get(w, w): i for i, w in enumerate(w for w in VOCAB if w != "[MASK]")}
    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]" if kind == "bert" else "<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if kind == "bert":
        tk.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    else:
        tk.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", 2)])
    return tk, len(vocab)


def write_manual(root: Path) -> None:
    """The rehearsal's text models, built here from a fixed seed: ``root/tiny-bert`` (BERT: 2 layers, hidden 16)
    and ``root/tiny-llama`` (LLaMA: 2 layers, hidden 16), each with its tokenizer, via ``save_pretrained``."""
    import torch
    from transformers import (BertConfig, BertForSequenceClassification, LlamaConfig, LlamaForSequenceClassification,
                              PreTrainedTokenizerFast)

    root = Path(root)
    specs = {
        "tiny-bert": ("bert", lambda v: BertForSequenceClassification(BertConfig(
            vocab_size=v, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
            max_position_embeddings=64, num_labels=2, pad_token_id=0))),
        "tiny-llama": ("llama", lambda v: LlamaForSequenceClassification(LlamaConfig(
            vocab_size=v, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
            intermediate_size=32, max_position_embeddings=64, num_labels=2, pad_token_id=0, bos_token_id=2,
            eos_token_id=3))),
    }
    for name, (kind, make) in specs.items():
        out = root / name
        tk, v = _word_tokenizer(kind)
        special = ({"unk_token": "[UNK]", "pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]",
                    "mask_token": "[MASK]"} if kind == "bert" else
                   {"unk_token": "<unk>", "pad_token": "<pad>", "bos_token": "<s>", "eos_token": "</s>"})
        tok = PreTrainedTokenizerFast(tokenizer_object=tk, **special)
        torch.manual_seed(20250704)
        model = make(v)
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out, safe_serialization=True)
        tok.save_pretrained(out)
