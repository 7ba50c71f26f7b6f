"""Miniature files for the paper-scale rehearsal of roste (``icml25.core.rehearsal``).

The paper DAG (``scales.paper``, dataset ``tldr``) reads two kinds of input:

* the TL;DR parquet files of ``trl-lib/tldr`` (manifest rows ``tldr_train``, ``tldr_test``): one row group, string
  columns ``prompt`` (``"SUBREDDIT: r/<name>\\n\\nTITLE: <title>\\n\\nPOST: <post>\\n\\nTL;DR:"``) and
  ``completion`` (``" <summary>"``, a leading space), read by :func:`.paper_data.read_tldr` after the download
  path checks the columns. The miniatures have that container, those columns and that text layout; the words are
  drawn from a fixed list by a fixed seed (24 train rows, 8 test rows; the real files have 116,722 and 6,553).
* the model (``paper.model``, default ``Qwen/Qwen2.5-0.5B``), which a cluster fetches into the Hugging Face cache.
  :func:`write_manual` writes a random ``Qwen2ForCausalLM`` of the same architecture as Qwen2.5-0.5B at 1/8 of its
  width (hidden 112 = 28·4 like 896 = 28·32, 7 query heads sharing 1 K/V head as 14 share 2, intermediate
  304 = 76·4 like 4864 = 76·64, q/k/v biases, tied embeddings; 2 layers instead of 24) with transformers' own
  ``save_pretrained`` (``config.json``, ``generation_config.json``, ``model.safetensors``) and a word-level
  ``tokenizers`` tokenizer saved with ``PreTrainedTokenizerFast.save_pretrained`` (``tokenizer.json`` and its
  configs; EOS = pad = ``<|endoftext|>`` as Qwen's). The rehearsal yaml points ``paper.local_dir`` at that
  directory (standing in for ``paper.model``'s hub weights).
  The non-power-of-2 widths make the rehearsal go through the Paley ``H_m ⊗ H_{2^k}`` rotations of
  :mod:`.hadamard_any`, as the real model does.

Nothing is downloaded; the bytes are the same on every call (fixed seeds; parquet and safetensors carry no
timestamps). Needs the optional extra ``icml25[roste-paper]`` (transformers), as the paper stages do.
"""
from __future__ import annotations

import io
import shutil
from collections.abc import Mapping
from pathlib import Path

import numpy as np

ROWS = {"tldr_train": 24, "tldr_test": 8}  #: manifest row -> miniature rows
SEEDS = {"tldr_train": 20250611, "tldr_test": 20250612}
MODEL_DIR = "qwen2_tiny"  #: under write_manual's root; config/rehearsal/roste.yaml's paper.local_dir points here
SUBREDDITS = ("relationships", "AskReddit", "personalfinance", "tifu", "dating_advice")
WORDS = ("i my me we you he she they it the a an and but so to of in on at for with about after before was is am "
         "are have had do did not never always today yesterday friend boyfriend girlfriend mom dad sister brother "
         "job work money rent car house school class dog cat party date phone text call told asked wanted "
         "felt happy sad angry worried help advice should what how why now later week month year").split()
PUNCT = (":", "/", ";", ".", ",", "?", "!", "'")
SPECIAL = ("<|endoftext|>", "<unk>")  # Qwen's EOS / pad; an unknown token for words outside the list


def _words(rng: np.random.Generator, n: int) -> str:
    return " ".join(rng.choice(WORDS, n))


def _tldr_rows(n: int, seed: int) -> dict[str, list[str]]:
    """``n`` TL;DR-layout rows: prompt = subreddit, title, post, ``TL;DR:``; completion = a leading space and the
    summary (the post's first words, so a model can learn it)."""
    rng = np.random.default_rng(seed)
    prompts, completions = [], []
    for _ in range(n):
        sub = SUBREDDITS[int(rng.integers(len(SUBREDDITS)))]
        title = _words(rng, int(rng.integers(4, 9))).capitalize() + "?"
        post = _words(rng, int(rng.integers(14, 26)))
        prompts.append(f"SUBREDDIT: r/{sub}\n\nTITLE: {title}\n\nPOST: {post}.\n\nTL;DR:")
        completions.append(" " + " ".join(post.split()[:5]))
    return {"prompt": prompts, "completion": completions}


def _parquet(columns: Mapping[str, list[str]]) -> bytes:
    """A one-row-group parquet file of string columns (pyarrow; no timestamps in the footer)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table({k: pa.array(v, type=pa.string()) for k, v in columns.items()}), buf)
    return buf.getvalue()


def _write(dest: Path, data: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(dest)


def write_miniatures(root: Path, manifest: Mapping) -> list[str]:
    """Write ``tldr_train`` and ``tldr_test`` at their manifest ``mirror_path`` under ``root``; return the rows."""
    for name, n in ROWS.items():
        _write(Path(root) / manifest[name].mirror_path, _parquet(_tldr_rows(n, SEEDS[name])))
    return list(ROWS)


def _tokenizer(dest: Path) -> None:
    """A word-level tokenizer over the miniatures' words and punctuation, saved in the ``tokenizers`` format."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIAL)}
    for w in ("SUBREDDIT", "TITLE", "POST", "TL", "DR", "r", *SUBREDDITS, *PUNCT,
              *sorted({w.capitalize() for w in WORDS}), *WORDS):
        vocab.setdefault(w, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                                   unk_token="<unk>", model_max_length=32768)
    fast.save_pretrained(dest)


def _model(dest: Path, vocab: int) -> None:
    """A random Qwen2ForCausalLM shaped like Qwen2.5-0.5B at 1/8 width (see the module docstring)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=vocab, hidden_size=112, intermediate_size=304, num_hidden_layers=2,
                      num_attention_heads=7, num_key_value_heads=1, max_position_embeddings=512,
                      rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, bos_token_id=0,
                      eos_token_id=0, pad_token_id=0, torch_dtype="float32")
    state = torch.random.get_rng_state()
    torch.manual_seed(20250613)
    try:
        model = Qwen2ForCausalLM(cfg)
    finally:
        torch.random.set_rng_state(state)
    model.save_pretrained(dest, safe_serialization=True)


def write_manual(root: Path) -> None:
    """Write the tiny Qwen2 model and its tokenizer at ``root / MODEL_DIR`` (replaced whole, written beside it
    first so a half-written model is never left)."""
    from .hf import EXTRA, transformers_available

    if not transformers_available():
        raise RuntimeError(f"the roste rehearsal loads a Hugging Face model like its paper stages: pip install "
                           f"'{EXTRA}' (transformers)")
    from transformers import AutoTokenizer

    root = Path(root)
    dest, tmp = root / MODEL_DIR, root / f".{MODEL_DIR}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    _tokenizer(tmp)
    _model(tmp, len(AutoTokenizer.from_pretrained(tmp)))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
