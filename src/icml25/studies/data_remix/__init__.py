"""data_remix — Improving Multimodal Learning Balance and Sufficiency through Data Remixing (Ma, Chen & Deng,
ICML 2025; https://arxiv.org/abs/2506.11550).

Public API, re-exported lazily (PEP 562) so that importing the package imports neither torch nor sklearn:

* :func:`kl_to_uniform` — KL (bits) of each softmax row to the uniform distribution
* :func:`assign_modalities` — True = audio subset (KL_a < KL_v; ties to the visual subset)
* :func:`remix_batches` — all visual batches, then all audio batches; each sample exactly once
* :func:`masked_forward` — fused / audio / visual logits with the other modality zeroed in mode "a" / "v"
* :class:`FusionNet` — the two-encoder fusion model (defaults: synth-AV)
* :func:`make_synth_av` — the synthetic two-modality generator with corruption flags
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "kl_to_uniform": "method",
    "assign_modalities": "method",
    "remix_batches": "method",
    "masked_forward": "method",
    "FusionNet": "model",
    "make_synth_av": "data",
    "make_digit_pairs": "data",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
