"""The client network and flat-weight helpers.

Every client holds its weights as one flat vector w ∈ R^P (the order of ``module.parameters()``, as
``torch.nn.utils.parameters_to_vector``); :func:`forward` evaluates the network at any flat vector with
``torch.func.functional_call``, so K clients share one module.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.func import functional_call


INITS: tuple[str, ...] = ("kaiming_normal", "torch_default")


def init_weights(module: nn.Module, scheme: str = "kaiming_normal") -> nn.Module:
    """Initialise every ``nn.Linear`` of ``module`` in place and return it.

    ``kaiming_normal`` (the official code's ``init_weights``): W ~ N(0, 2/fan_in) (``kaiming_normal_``, a = 0,
    mode fan_in), biases 0. ``torch_default``: leave PyTorch's default (W, b ~ U(±1/√fan_in), std of W
    1/√(3·fan_in), i.e. √6 ≈ 2.45× smaller than kaiming_normal).
    """
    if scheme not in INITS:
        raise ValueError(f"init_weights: scheme must be one of {INITS}, got {scheme!r}")
    if scheme == "kaiming_normal":
        for m in module.modules():
            if isinstance(m, nn.Linear):
                nn.init.kaiming_normal_(m.weight, a=0, mode="fan_in")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
    return module


def mlp(in_dim: int, hidden: Sequence[int], n_classes: int, dtype: torch.dtype = torch.float32,
        init: str = "torch_default") -> nn.Sequential:
    """ReLU MLP in_dim -> hidden... -> n_classes (logits), initialised by :func:`init_weights` (``init``).
    Default scale: 32-32-10, P = 1386."""
    layers: list[nn.Module] = []
    prev = in_dim
    for h in hidden:
        layers += [nn.Linear(prev, h, dtype=dtype), nn.ReLU()]
        prev = h
    layers.append(nn.Linear(prev, n_classes, dtype=dtype))
    return init_weights(nn.Sequential(*layers), init)


def n_params(module: nn.Module) -> int:
    """P, the number of trainable parameters."""
    return sum(p.numel() for p in module.parameters())


def flat_weights(module: nn.Module) -> torch.Tensor:
    """The module's parameters as one detached flat vector (P,)."""
    return torch.nn.utils.parameters_to_vector(module.parameters()).detach().clone()


def unflatten(module: nn.Module, w: torch.Tensor) -> dict[str, torch.Tensor]:
    """Views of the flat vector ``w`` (P,) shaped as the module's named parameters (no copy; keeps autograd)."""
    out, i = {}, 0
    for name, p in module.named_parameters():
        out[name] = w[i:i + p.numel()].view_as(p)
        i += p.numel()
    if i != w.numel():
        raise ValueError(f"unflatten: weight vector has {w.numel()} entries, the module has {i} parameters")
    return out


def forward(module: nn.Module, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Logits f(x; w): (N, D) -> (N, C) at flat weights ``w`` (P,)."""
    return functional_call(module, unflatten(module, w), (x,))


def set_weights(module: nn.Module, w: torch.Tensor) -> nn.Module:
    """Copy the flat vector ``w`` into the module's parameters (in place) and return the module."""
    torch.nn.utils.vector_to_parameters(w.detach().to(next(module.parameters()).dtype), module.parameters())
    return module
