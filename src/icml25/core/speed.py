"""Faster paper train steps on a GPU (issue 39, item 5): channels_last, bf16 autocast, ``torch.compile``.

A study's paper path embeds :class:`Fast` as a config section (e.g. ``lfss.train.fast``, ``fedecado.image.fast``)
and calls :func:`prepare_model`, :func:`prepare_input` and :func:`autocast` in its train step. The switches act on
CUDA only: on CPU (default and smoke scales, the CPU rehearsals of the paper DAG, a paper config run on a CPU) they
are ignored, so CPU numbers do not move. bf16 autocast keeps float32 weights and optimizer state (mixed precision:
matrix products and convolutions in bfloat16, reductions and losses as autocast decides); the test suite checks on
CPU that a few hundred steps of a small ResNet track float32 within a stated tolerance (tests/core/test_gpucheck.py).
The speed-up on a GPU is unmeasured (docs/gpu.md).
"""
from __future__ import annotations

import contextlib
from typing import Any, Literal

from pydantic import Field

from .config import Section


class Fast(Section):
    """Speed switches of a paper train step; each acts on CUDA only (ignored on CPU)."""

    channels_last: bool = Field(False, description="NHWC memory format for the model and its image batches (CUDA)")
    autocast: Literal["float32", "bfloat16"] = Field(
        "float32", description="precision of forward passes: float32 (no autocast) or bfloat16 autocast over "
                               "float32 weights (CUDA)")
    compile: bool = Field(False, description="torch.compile the trained network in place (nn.Module.compile; CUDA)")


def _active(device: Any, force: bool) -> bool:
    return force or str(getattr(device, "type", device)) == "cuda"


def _get(fast: Any, key: str) -> Any:
    if fast is None:
        return Fast.model_fields[key].default
    return fast[key] if isinstance(fast, dict) else getattr(fast, key)


def prepare_model(module: Any, fast: Any, device: Any, *, compile_part: Any = None, force: bool = False) -> Any:
    """``module`` in channels_last and compiled in place as ``fast`` asks (on CUDA, or anywhere with ``force``);
    ``compile_part`` (a submodule, e.g. the trained encoder) is compiled instead of the whole module. Compilation
    is in place (:meth:`torch.nn.Module.compile`): parameter names and state dicts are unchanged."""
    import torch

    if not _active(device, force):
        return module
    if _get(fast, "channels_last"):
        module = module.to(memory_format=torch.channels_last)
    if _get(fast, "compile"):
        (module if compile_part is None else compile_part).compile()
    return module


def prepare_input(x: Any, fast: Any, device: Any, *, force: bool = False) -> Any:
    """An image batch (N, C, H, W) in channels_last when ``fast`` asks for it (CUDA, or ``force``)."""
    import torch

    if _active(device, force) and _get(fast, "channels_last") and getattr(x, "dim", lambda: 0)() == 4:
        return x.contiguous(memory_format=torch.channels_last)
    return x


def autocast(fast: Any, device: Any, *, force: bool = False) -> contextlib.AbstractContextManager:
    """The autocast context of a forward pass: bfloat16 when ``fast.autocast`` says so (CUDA, or ``force``),
    else a no-op context."""
    import torch

    if _active(device, force) and _get(fast, "autocast") == "bfloat16":
        kind = str(getattr(device, "type", device))
        return torch.autocast(device_type=kind, dtype=torch.bfloat16)
    return contextlib.nullcontext()
