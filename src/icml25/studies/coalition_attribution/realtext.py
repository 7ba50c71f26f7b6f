"""The SST-2 experiments of Sec. 5 (Zheng, Deng & Zhang, ICML 2025): a pretrained Hugging Face text model fine-tuned
on SST-2, and the word-masking game of a sentence.

* Loading: :func:`resolve_model` finds the model's row in ``models.csv`` (:mod:`icml25.core.hub`; BERT-large at a
  pinned commit, LLaMA ``UNPINNED``) and gives the path and commit to load: the row's commit, the config's
  ``real.<experiment>.revision`` (a 40-hex commit) in its place, an ``UNPINNED`` row's hub commit resolved once under
  ``trust_unpinned``, or ``local_dir`` (the rehearsal's tiny model of the same class, recorded as ``local:<sha256>``).
  :func:`load_model` loads ``AutoTokenizer`` / ``AutoModelForSequenceClassification`` there, always
  ``trust_remote_code=False``.
* Fine-tuning [R] (the paper gives no schedule): AdamW, weight decay 0.01, linear warm-up over the first 10 % of the
  steps and linear decay to 0; ``trainable: all`` (BERT-large) or ``head`` (LLaMA: the frozen model's last-token
  state through a trained linear head, a reconstruction sized for one GPU).
* The game (:func:`masked_sequences`): a sentence (GLUE SST-2 is already tokenised into space-separated words) is a
  sequence of words, encoded by the tokenizer with ``is_split_into_words`` (each token knows its word); the n variables are n of the words, and an absent variable has every
  one of its tokens replaced by the baseline token (the tokenizer's mask token, else its unk token [R]); the other
  words keep their tokens. v(S) = log p(y*|x_S) / (1 - p(y*|x_S)) (Eq. 1), y* the true label.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from icml25.core import hub

#: The paper's text models at their hub commits (``name,repo_id,revision,licence``, :mod:`icml25.core.hub`).
#: bert-large-uncased: the commit of google-bert/bert-large-uncased that a public test suite pins (not verified from
#: here, no network); LLaMA: the paper names no version [R] and none could be pinned offline, so it is UNPINNED
#: (loading needs trust_unpinned; the weights are gated behind Meta's licence).
MODELS_CSV = Path(__file__).with_name("models.csv")


def hub_model(model_id: str, revision: str | None = None) -> hub.HubModel:
    """The row of :data:`MODELS_CSV` whose ``repo_id`` is ``model_id``; ``revision`` (a 40-hex commit, the config's
    ``real.<experiment>.revision``) replaces the row's. Raises :class:`~icml25.core.hub.HubError` for an id that
    is not listed or a revision that is not a commit."""
    return hub.model_by_repo(MODELS_CSV, model_id, revision, what="text model", revision_key="real.<experiment>.revision")


def resolve_model(model_id: str, revision: str | None = None, *, local_dir: str | Path | None = None,
                  trust_unpinned: bool = False, commit_of: Callable[[str], str] = hub.hub_commit
                  ) -> hub.ResolvedModel:
    """Where and at which commit to load ``model_id`` (:func:`icml25.core.hub.resolve` of :func:`hub_model`): a
    pinned row at its commit, an UNPINNED one refused unless ``trust_unpinned`` (then ``commit_of(repo_id)`` is
    resolved once), ``local_dir`` in place of the hub id."""
    return hub.resolve(hub_model(model_id, revision), trust_unpinned=trust_unpinned, local_dir=local_dir,
                       commit_of=commit_of)


def load_model(model: hub.ResolvedModel, num_labels: int = 2):
    """(tokenizer, model) of a sequence classifier: ``from_pretrained(model.path, **model.kwargs())``, i.e. at the
    resolved commit and ``trust_remote_code=False``. A tokenizer without a pad token gets its eos (else unk) token
    as pad, and the model's config the same id."""
    try:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
    except ImportError as e:  # pragma: no cover - the paper path's extra
        raise RuntimeError("the SST-2 experiments need transformers: pip install 'icml25[coalition_attribution]'") from e
    tok = AutoTokenizer.from_pretrained(model.path, **model.kwargs())
    net = AutoModelForSequenceClassification.from_pretrained(model.path, num_labels=num_labels, **model.kwargs())
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.unk_token
    net.config.pad_token_id = tok.pad_token_id
    return tok, net


def baseline_token_id(tok) -> int:
    """The token an absent word is replaced with: the mask token, else the unk token [R]; never the pad token (a
    sequence classifier that reads the last non-pad token would move)."""
    tid = tok.mask_token_id if tok.mask_token_id is not None else tok.unk_token_id
    if tid is None:
        raise ValueError("the tokenizer has neither a mask nor an unk token: no baseline for absent words")
    if tid == tok.pad_token_id:
        raise ValueError(f"the baseline token id {tid} is the pad token: absent words would read as padding")
    return int(tid)


def log_odds(logits: np.ndarray, y: int | np.ndarray) -> np.ndarray:
    """Eq. 1: log p(y|x) / (1 - p(y|x)) from logits (B, C) = z_y - logsumexp_{c != y} z_c, computed stably."""
    z = np.asarray(logits, dtype=np.float64)
    y = np.broadcast_to(np.asarray(y, dtype=np.int64), (z.shape[0],))
    zy = z[np.arange(z.shape[0]), y]
    other = z.copy()
    other[np.arange(z.shape[0]), y] = -np.inf
    m = other.max(axis=1)
    return zy - (m + np.log(np.exp(other - m[:, None]).sum(axis=1)))


def trainable_parameters(model, scope: str):
    """``all``: every parameter; ``head``: only those outside ``model.base_model`` (the classification head)."""
    if scope == "all":
        return [p for p in model.parameters()]
    if scope != "head":
        raise ValueError(f"trainable must be 'all' or 'head', got {scope!r}")
    base = {id(p) for p in model.base_model.parameters()}
    head = []
    for p in model.parameters():
        p.requires_grad_(id(p) not in base)
        if id(p) not in base:
            head.append(p)
    return head


def _batches(tok, sentences: Sequence[str], max_length: int, device: str):
    enc = tok(list(sentences), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    return {k: v.to(device) for k, v in enc.items()}


def adamw_warmup_linear(model, settings: Mapping[str, Any], steps: int):
    """The fine-tuning's optimizer [R]: AdamW (``settings`` lr, weight decay 0.01) on the ``settings`` trainable
    parameters, linear warm-up over the first 10 % of ``steps`` and linear decay to 0. -> (optimizer, scheduler)."""
    import torch

    params = trainable_parameters(model, settings["trainable"])
    opt = torch.optim.AdamW(params, lr=settings["lr"], weight_decay=0.01)
    warm = max(1, int(0.1 * steps))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / (steps - warm + 1e-9))))
    return opt, sched


def fine_tune_step(model, opt, sched, enc: Mapping[str, Any], y):
    """One fine-tuning step: cross-entropy of ``model(**enc).logits`` (B, C) against ``y`` (B,), backward,
    optimizer and scheduler step. Returns the (detached) mean loss."""
    import torch

    loss = torch.nn.functional.cross_entropy(model(**enc).logits.float(), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    sched.step()
    return loss.detach()


def fine_tune(model, tok, sentences: Sequence[str], labels: np.ndarray, settings: Mapping[str, Any], seed: int,
              device: str = "cpu", log=None) -> dict[str, Any]:
    """Fine-tune on (sentences, labels) [R]: AdamW (weight decay 0.01), linear warm-up (10 % of the steps) and
    decay; ``settings``: epochs, batch_size, lr, max_length, trainable. Returns the loss per epoch."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    model.to(device).train()
    n, bs = len(sentences), int(settings["batch_size"])
    opt, sched = adamw_warmup_linear(model, settings, max(1, settings["epochs"] * math.ceil(n / bs)))
    y = torch.as_tensor(np.asarray(labels, dtype=np.int64))
    curve = []
    for epoch in range(settings["epochs"]):
        perm = torch.randperm(n, generator=gen).tolist()
        total = 0.0
        for k in range(0, n, bs):
            idx = perm[k:k + bs]
            enc = _batches(tok, [sentences[i] for i in idx], settings["max_length"], device)
            loss = fine_tune_step(model, opt, sched, enc, y[idx].to(device))
            total += float(loss) * len(idx)
        curve.append(total / n)
        if log is not None:
            log(epoch, curve[-1])
    model.eval()
    return {"loss_curve": curve}


def predict_logits(model, tok, sentences: Sequence[str], max_length: int, device: str = "cpu",
                   batch_size: int = 64) -> np.ndarray:
    """Logits (N, 2) float64."""
    import torch

    model.eval()
    out = []
    with torch.no_grad():
        for k in range(0, len(sentences), batch_size):
            enc = _batches(tok, sentences[k:k + batch_size], max_length, device)
            out.append(model(**enc).logits.double().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, 2))


def word_encoding(tok, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The tokenizer's own encoding of a sentence given as words (``is_split_into_words``, special tokens added):
    (ids (L,) int64, word index of each token (L,), -1 for special tokens). Needs a fast tokenizer; a word with
    no token raises naming it."""
    if not getattr(tok, "is_fast", False):
        raise ValueError("the SST-2 game needs a fast tokenizer (word_ids of each token)")
    enc = tok(list(words), is_split_into_words=True, add_special_tokens=True)
    wid = np.asarray([-1 if w is None else int(w) for w in enc.word_ids()], dtype=np.int64)
    empty = sorted(set(range(len(words))) - set(wid.tolist()))
    if empty:
        raise ValueError(f"words {[words[w] for w in empty]} have no tokens")
    return np.asarray(enc["input_ids"], dtype=np.int64), wid


def masked_sequences(tok, words: Sequence[str], variables: Sequence[int], absent_id: int | None = None
                     ) -> np.ndarray:
    """The 2**n token sequences of a sentence (int64, (2**n, L)) for the variables ``variables`` (word indices; bit
    k of a mask is word ``variables[k]``): an absent variable's tokens are all ``absent_id`` (default
    :func:`baseline_token_id`); special tokens and every other word keep their ids."""
    absent_id = baseline_token_id(tok) if absent_id is None else absent_id
    ids, wid = word_encoding(tok, words)
    n = len(variables)
    seqs = np.repeat(ids[None], 2 ** n, axis=0)
    masks = np.arange(2 ** n)
    for k, w in enumerate(variables):
        seqs[np.ix_((masks >> k & 1) == 0, wid == int(w))] = absent_id
    return seqs


def sequence_logits(model, seqs: np.ndarray, device: str = "cpu", batch_size: int = 128) -> np.ndarray:
    """Logits (B, C) float64 of equal-length token sequences (B, L) (no padding)."""
    import torch

    out = []
    with torch.no_grad():
        for k in range(0, len(seqs), batch_size):
            ids = torch.from_numpy(seqs[k:k + batch_size]).to(device)
            out.append(model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.double().cpu().numpy())
    return np.concatenate(out)
