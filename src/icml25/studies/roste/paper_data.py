"""The SFT data of the roste paper scale: TL;DR and the Tulu 3 SFT mixture, read and tokenised.

The paper (Wei et al., ICML 2025, §5) fine-tunes on Reddit TL;DR summarisation (the ``trl-lib/tldr`` parquet files:
columns ``prompt``, the post ending in ``TL;DR:``, and ``completion``, the reference summary) and on a 100k subsample
of the Tulu 3 SFT mixture (``allenai/tulu-3-sft-mixture``: column ``messages``, a list of ``{"role", "content"}``
turns). Every example becomes a (prompt, response) pair of strings; the SFT loss covers the response tokens only
(labels -100 on the prompt), as in the paper's supervised fine-tuning.

[R] Tulu 3: the response is the last assistant turn and the prompt every turn before it, rendered with the
tokenizer's chat template when it has one (else ``"<role>: <content>"`` lines); the held-out split is a seeded
draw of ``paper.tulu3_test_examples`` rows of the file (the mixture has no test split). Sequences longer than
``max_length`` keep their response and lose prompt tokens from the left.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

TLDR_COLUMNS = ("prompt", "completion")
TULU_COLUMNS = ("messages",)


def _read_parquet(path: Path, columns: Sequence[str]) -> Any:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as err:  # noqa: BLE001 - pyarrow raises several kinds; re-raised naming the file
        raise ValueError(f"{path}: not a readable parquet file ({type(err).__name__}: {str(err)[:200]})") from None
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing} (has {table.column_names})")
    return table


def read_tldr(path: str | Path) -> list[tuple[str, str]]:
    """(prompt, completion) string pairs of a TL;DR parquet file; ``ValueError`` naming the file, column and row
    of a missing or non-string cell."""
    path = Path(path)
    table = _read_parquet(path, TLDR_COLUMNS)
    cols = {c: table.column(c).to_pylist() for c in TLDR_COLUMNS}
    pairs = []
    for i, (p, c) in enumerate(zip(cols["prompt"], cols["completion"])):
        for name, v in (("prompt", p), ("completion", c)):
            if not isinstance(v, str) or not v.strip():
                raise ValueError(f"{path}: column {name!r} row {i}: expected a non-empty string, got {v!r:.60}")
        pairs.append((p, c))
    if not pairs:
        raise ValueError(f"{path}: no rows")
    return pairs


def split_messages(messages: Any, where: str) -> tuple[list[dict[str, str]], str]:
    """(prompt turns, last assistant reply) of one Tulu 3 ``messages`` cell; ``ValueError`` naming ``where``."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise ValueError(f"{where}: expected a non-empty list of turns, got {messages!r:.60}")
    turns = []
    for t in messages:
        if not isinstance(t, dict) or not isinstance(t.get("role"), str) or not isinstance(t.get("content"), str):
            raise ValueError(f"{where}: a turn is not {{'role': str, 'content': str}}: {t!r:.80}")
        turns.append({"role": t["role"], "content": t["content"]})
    last = max((k for k, t in enumerate(turns) if t["role"] == "assistant"), default=None)
    if last is None or last == 0:
        raise ValueError(f"{where}: no assistant turn after a prompt")
    return turns[:last], turns[last]["content"]


def read_tulu3(path: str | Path) -> list[tuple[list[dict[str, str]], str]]:
    """(prompt turns, response) of every row of a Tulu 3 SFT-mixture parquet file."""
    path = Path(path)
    msgs = _read_parquet(path, TULU_COLUMNS).column("messages").to_pylist()
    if not msgs:
        raise ValueError(f"{path}: no rows")
    return [split_messages(m, f"{path}: column 'messages' row {i}") for i, m in enumerate(msgs)]


def render_prompt(tokenizer: Any, turns: Sequence[dict[str, str]]) -> str:
    """The prompt text of chat turns: the tokenizer's chat template (generation prompt added) if it has one, else
    ``"<role>: <content>"`` lines ending in ``"assistant: "`` [R]."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(list(turns), tokenize=False, add_generation_prompt=True)
    return "".join(f"{t['role']}: {t['content']}\n" for t in turns) + "assistant: "


def tokenise_pair(tokenizer: Any, prompt: str, response: str, max_length: int) -> dict[str, list[int]]:
    """``{"input_ids", "labels"}`` of prompt + response + EOS: labels are -100 on the prompt tokens (loss on the
    response only). Longer than ``max_length``: prompt tokens are dropped from the left (the response, cut to
    ``max_length - 1`` tokens if it alone is longer, is kept)."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError(f"tokenizer {getattr(tokenizer, 'name_or_path', '?')}: no eos_token (needed to end answers)")
    p = tokenizer(prompt, add_special_tokens=True)["input_ids"]
    r = tokenizer(response, add_special_tokens=False)["input_ids"][: max_length - 1] + [eos]
    p = p[max(0, len(p) + len(r) - max_length):]
    if not p:
        raise ValueError(f"max_length {max_length}: no room left for the prompt")
    return {"input_ids": p + r, "labels": [-100] * len(p) + r}


def subsample(n_rows: int, n: int | None, seed: int) -> np.ndarray:
    """Sorted indices of a seeded draw of ``n`` of ``n_rows`` rows (all when ``n`` is None or >= n_rows)."""
    if n is None or n >= n_rows:
        return np.arange(n_rows)
    return np.sort(np.random.default_rng([seed, 19]).choice(n_rows, size=n, replace=False))


def sft_examples(dataset: str, files: dict[str, Path], tokenizer: Any, max_length: int, train_examples: int | None,
                 tulu3_test_examples: int, seed: int = 0) -> dict[str, Any]:
    """Tokenised ``{"train": [...], "test": [...]}`` examples (see :func:`tokenise_pair`), each test example with
    its ``"prompt_ids"`` and reference ``"reference"`` text too. ``files``: manifest name -> parquet path."""
    if dataset == "tldr":
        need = ("tldr_train", "tldr_test")
        missing = [n for n in need if n not in files]
        if missing:
            raise ValueError(f"dataset tldr: missing input file(s) {missing} (got {sorted(files)})")
        train = [(p, c) for p, c in read_tldr(files["tldr_train"])]
        test = [(p, c) for p, c in read_tldr(files["tldr_test"])]
    elif dataset == "tulu3":
        rows = [(render_prompt(tokenizer, t), r) for name in sorted(files) if name.startswith("tulu3")
                for t, r in read_tulu3(files[name])]
        if not rows:
            raise ValueError(f"dataset tulu3: no tulu3_* input file (got {sorted(files)})")
        held = set(subsample(len(rows), tulu3_test_examples, seed + 1).tolist())
        if len(held) >= len(rows):
            raise ValueError(f"paper.tulu3_test_examples {tulu3_test_examples} leaves no training rows")
        train = [r for k, r in enumerate(rows) if k not in held]
        test = [r for k, r in enumerate(rows) if k in held]
    else:
        raise ValueError(f"paper.dataset: unknown {dataset!r} (known: tldr, tulu3)")
    train = [train[k] for k in subsample(len(train), train_examples, seed)]
    out_train = [tokenise_pair(tokenizer, p, r, max_length) for p, r in train]
    out_test = []
    for p, r in test:
        ex = tokenise_pair(tokenizer, p, r, max_length)
        n_prompt = sum(1 for v in ex["labels"] if v == -100)
        out_test.append({**ex, "prompt_ids": ex["input_ids"][:n_prompt], "reference": r})
    return {"train": out_train, "test": out_test}


def batches(examples: Sequence[dict[str, list[int]]], batch: int, pad_id: int, seed: int, epochs: int = 1
            ) -> list[dict[str, Any]]:
    """Shuffled (seeded, per epoch) right-padded batches ``{"input_ids", "labels", "attention_mask"}`` (B, T) of
    LongTensors; padding has label -100 and mask 0."""
    import torch

    rng = np.random.default_rng([seed, 23])
    out = []
    for _ in range(epochs):
        order = rng.permutation(len(examples))
        for k in range(0, len(order), batch):
            chunk = [examples[i] for i in order[k:k + batch]]
            t = max(len(e["input_ids"]) for e in chunk)
            ids = torch.full((len(chunk), t), pad_id, dtype=torch.long)
            lab = torch.full((len(chunk), t), -100, dtype=torch.long)
            mask = torch.zeros((len(chunk), t), dtype=torch.long)
            for j, e in enumerate(chunk):
                n = len(e["input_ids"])
                ids[j, :n] = torch.tensor(e["input_ids"])
                lab[j, :n] = torch.tensor(e["labels"])
                mask[j, :n] = 1
            out.append({"input_ids": ids, "labels": lab, "attention_mask": mask})
    return out


__all__ = ["read_tldr", "read_tulu3", "split_messages", "render_prompt", "tokenise_pair", "sft_examples", "batches",
           "subsample", "TLDR_COLUMNS", "TULU_COLUMNS"]
