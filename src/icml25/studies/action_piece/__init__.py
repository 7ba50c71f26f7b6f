"""action_piece — ActionPiece: Contextually Tokenizing Action Sequences for Generative Recommendation
(Yupeng Hou, Jianmo Ni, Zhankui He, Noveen Sachdeva, Wang-Cheng Kang, Ed H. Chi, Julian McAuley, Derek Zhiyuan Cheng;
ICML 2025; https://arxiv.org/abs/2502.13581). The study README describes what is implemented and reconstructed.

Public API (pure Python + numpy; no torch import):

* :func:`build_vocabulary` ``(corpus, vocab_size, *, items=None) -> ActionPieceTokenizer``
* :class:`ActionPieceTokenizer` (``encode``, ``decode``, ``expand``, ``save``/``load``)
* :func:`fuse_rankings` ``(rankings) -> list[tuple]``

``encode``, ``decode``, ``expand`` and ``save`` are also exported as the unbound tokenizer methods
(``encode(tokenizer, sequence, shuffle, rng)``), since the spec lists them under the public API.
"""
from __future__ import annotations

import importlib
from typing import Any

PAPER = {"title": "ActionPiece: Contextually Tokenizing Action Sequences for Generative Recommendation",
         "ref": "Hou, Ni, He, Sachdeva, Kang, Chi, McAuley, Cheng; ICML 2025; arXiv:2502.13581"}

_EXPORTS = {"build_vocabulary": "tokenizer", "ActionPieceTokenizer": "tokenizer", "fuse_rankings": "tokenizer"}
_METHODS = ("encode", "decode", "expand", "save")
__all__ = sorted([*_EXPORTS, *_METHODS])


def __getattr__(name: str) -> Any:
    if name in _METHODS:
        return getattr(importlib.import_module(f"{__name__}.tokenizer").ActionPieceTokenizer, name)
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
