"""roste — RoSTE: An Efficient Quantization-Aware Supervised Fine-Tuning Approach for Large Language Models
(Quan Wei, Chung-Yiu Yau, Hoi-To Wai, Yang Zhao, Dongyeop Kang, Youngsuk Park, Mingyi Hong; ICML 2025;
https://arxiv.org/abs/2502.09003). The study README describes what is implemented and reconstructed.

Public API, re-exported lazily so that importing the package (which the Snakefile does to read :mod:`.config`)
does not import torch:

* :func:`quantize` ``(x, bits=4, symmetric=False, group_size=None, clip=1.0, ste=True) -> Tensor``
* :func:`random_hadamard` ``(d, seed, dtype=torch.float64) -> Tensor (d, d)``
* :func:`search_rotation_config` ``(model, calib_tokens, qcfg, seed=0) -> (choices, errors)``
* :func:`fake_quant_forward` ``(model, tokens, rotations, qcfg) -> logits (B, T, V)``
* :class:`QuantConfig`, :class:`Model` (``Model()`` = the default-scale tiny decoder), :class:`ModelConfig`
"""
from __future__ import annotations

import importlib
from typing import Any

PAPER = {"title": "RoSTE: An Efficient Quantization-Aware Supervised Fine-Tuning Approach for Large Language Models",
         "ref": "Wei, Yau, Wai, Zhao, Kang, Park, Hong; ICML 2025; arXiv:2502.09003"}

_EXPORTS = {
    "quantize": "method",
    "random_hadamard": "method",
    "QuantConfig": "method",
    "search_rotation_config": "search",
    "fake_quant_forward": "model",
    "Model": "model",
    "ModelConfig": "model",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
