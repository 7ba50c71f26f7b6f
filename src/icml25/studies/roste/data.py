"""Generated data of the roste study [R]: a sparse Markov language and a top-k counting SFT task.

Stand-ins for the paper's pretraining corpus and its TL;DR summarisation SFT data (paper §5):

* **Markov chain** over ``n_states`` tokens: each state has ``successors`` distinct next states with
  Dirichlet(``dirichlet``) probabilities (``default_rng([data_seed, 0])``).
* **Pretraining**: length-``context`` walks from uniform starts (``default_rng([data_seed, 1])``).
* **SFT** (a summary of the input): input = ``input_len`` chain tokens + SEP; output = the ``top_k`` most frequent
  input tokens (frequency descending, ties → lower id) + EOS. Train split ``default_rng([data_seed, 2])``, test
  split ``default_rng([data_seed, 3])``.

Token ids: ``0 .. n_states-1`` chain tokens, then SEP, EOS.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

PRETRAIN, SFT_TRAIN, SFT_TEST = 1, 2, 3  # split ids of default_rng([data_seed, split_id])


def special_tokens(n_states: int) -> dict[str, int]:
    """Ids of SEP and EOS (right after the chain tokens)."""
    return {"sep": n_states, "eos": n_states + 1}


def markov_chain(n_states: int, successors: int, dirichlet: float, data_seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(next_states (S, k) int64, probs (S, k) float64)`` of the sparse chain; each row of probs sums to 1."""
    if not 1 <= successors <= n_states:
        raise ValueError(f"data.successors must be in [1, n_states={n_states}], got {successors}")
    rng = np.random.default_rng([int(data_seed), 0])
    nxt = np.stack([rng.choice(n_states, size=successors, replace=False) for _ in range(n_states)])
    probs = rng.dirichlet(np.full(successors, float(dirichlet)), size=n_states)
    return nxt.astype(np.int64), probs


def walks(nxt: np.ndarray, probs: np.ndarray, n: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` walks of ``length`` tokens (n, length) int64 from uniform starting states."""
    s = nxt.shape[0]
    out = np.empty((n, length), dtype=np.int64)
    out[:, 0] = rng.integers(0, s, size=n)
    cum = np.cumsum(probs, axis=1)
    for t in range(1, length):
        u = rng.random(n)[:, None]
        j = np.minimum((u > cum[out[:, t - 1]]).sum(axis=1), nxt.shape[1] - 1)
        out[:, t] = nxt[out[:, t - 1], j]
    return out


def top_k_tokens(x: np.ndarray, k: int, n_states: int) -> np.ndarray:
    """The ``k`` most frequent tokens of each row of ``x`` (n, L), frequency descending, ties → lower id."""
    counts = np.zeros((x.shape[0], n_states), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(x.shape[0]), x.shape[1]), x.ravel()), 1)
    order = np.lexsort((np.broadcast_to(np.arange(n_states), counts.shape), -counts), axis=1)
    return order[:, :k]


def sft_examples(nxt: np.ndarray, probs: np.ndarray, n: int, input_len: int, top_k: int,
                 rng: np.random.Generator) -> np.ndarray:
    """SFT sequences (n, input_len + top_k + 2): input, SEP, the top-k tokens, EOS."""
    s = nxt.shape[0]
    sp = special_tokens(s)
    x = walks(nxt, probs, n, input_len, rng)
    y = top_k_tokens(x, top_k, s)
    return np.concatenate([x, np.full((n, 1), sp["sep"]), y, np.full((n, 1), sp["eos"])], axis=1)


def build_data(d: Mapping[str, Any], context: int, pretrain_sequences: int) -> dict[str, Tensor]:
    """All generated tensors: ``next``, ``probs``, ``pretrain`` (N, context), ``sft_train``, ``sft_test``.

    ``d``: the config's ``data`` section (data_seed, n_states, successors, dirichlet, input_len, top_k, sft_train,
    sft_test).
    """
    nxt, probs = markov_chain(d["n_states"], d["successors"], d["dirichlet"], d["data_seed"])
    seed = int(d["data_seed"])
    length = d["input_len"] + d["top_k"] + 2
    if length > context:
        raise ValueError(f"data: SFT sequences of {length} tokens exceed the model context {context}")
    return {
        "next": torch.from_numpy(nxt), "probs": torch.from_numpy(probs),
        "pretrain": torch.from_numpy(walks(nxt, probs, pretrain_sequences, context, np.random.default_rng([seed, PRETRAIN]))),
        "sft_train": torch.from_numpy(sft_examples(nxt, probs, d["sft_train"], d["input_len"], d["top_k"],
                                                   np.random.default_rng([seed, SFT_TRAIN]))),
        "sft_test": torch.from_numpy(sft_examples(nxt, probs, d["sft_test"], d["input_len"], d["top_k"],
                                                  np.random.default_rng([seed, SFT_TEST]))),
    }


def calibration_draw(sft_train: Tensor, n: int, seed: int) -> Tensor:
    """``n`` calibration sequences drawn without replacement from the SFT train split by ``seed`` (n, T)."""
    if n > sft_train.shape[0]:
        raise ValueError(f"search.calib_examples {n} exceeds the {sft_train.shape[0]} SFT train examples")
    g = torch.Generator().manual_seed(int(seed) + 7919)
    return sft_train[torch.randperm(sft_train.shape[0], generator=g)[:n]]


DATA_KEYS = ("next", "probs", "pretrain", "sft_train", "sft_test")


def save_data(path: Path, data: Mapping[str, Tensor]) -> None:
    """Write the data tensors atomically (``.pt``)."""
    from icml25.core.io import atomic_path

    with atomic_path(path) as tmp:
        torch.save(dict(data), tmp)


def load_data(path: Path) -> dict[str, Tensor]:
    """Read the data tensors (``weights_only``), naming the file and any missing key."""
    try:
        data = torch.load(path, weights_only=True)
    except Exception as err:  # noqa: BLE001 - re-raised with the file named
        raise ValueError(f"{path}: not a readable roste data file ({err})") from err
    missing = [k for k in DATA_KEYS if k not in data]
    if missing:
        raise ValueError(f"{path}: missing tensors {missing}")
    return data
