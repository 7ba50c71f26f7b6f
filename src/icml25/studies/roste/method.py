"""RoSTE's quantizer, Walsh–Hadamard rotations and the Proposition 4.4 error bounds.

Paper: *RoSTE: An Efficient Quantization-Aware Supervised Fine-Tuning Approach for Large Language Models*
(Wei, Chen, Ma, Chen, Li, Hong; ICML 2025; https://arxiv.org/abs/2502.09003).

* §3 (quantizer): ``Q(X) = (clamp(round(X/s) + z) - z) * s`` per group, asymmetric (``s = c (max - min) /
  (2^b - 1)``, ``z = round(-c min / s)``, integers in ``[0, 2^b - 1]``: the clipped range ``[c min, c max]`` is
  centred on the data's, as in the official code, ``quant_utils/quant_linear.py``) or symmetric (``s = c max|X| /
  (2^(b-1) - 1)``, ``z = 0``, integers in ``[-2^(b-1), 2^(b-1) - 1]``); ``c`` is the clip factor. Training uses
  the straight-through estimator ``x + (Q(x) - x).detach()`` (gradient = identity).
* §4.1 (rotations): ``R = diag(r) H_d / sqrt(d)``, ``H_d`` the Sylvester Hadamard matrix, ``r`` random signs
  applied *first* (``x R = (x * r) H_d / sqrt(d)``), as the official code's ``random_hadamard_matrix``
  (``matmul_hadU(diag(r))``). With the signs after ``H_d`` they would only flip output coordinates, to which a
  per-channel weight quantizer is blind, so the error would not depend on the draw (Prop. 4.4's randomness inert).
  Online rotations use the fast Walsh–Hadamard transform (O(d log d)) above :data:`DENSE_MAX`, the dense matrix at
  or below it (faster on a CPU there; same product up to float rounding); merged ones a dense matrix.
* §4.2, Proposition 4.4: for a row ``w`` of dimension ``d`` quantized symmetrically with ``c = 1``,
  ``||Q(w) - w||^2 <= d max_i w_i^2 / (4 (2^(b-1) - 1)^2)`` always, and after a random Hadamard rotation
  ``||Q(R^T w) - R^T w||^2 <= log(4d/δ) ||w||^2 / (2 (2^(b-1) - 1)^2)`` with probability at least ``1 - δ``.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import torch
from torch import Tensor

SCALE_FLOOR = 1e-8  # [R] smallest quantization step s (keeps constant groups finite)


@dataclass(frozen=True)
class QuantConfig:
    """Bit widths of the W/A/KV quantizers (``None`` disables one), their symmetry and clip factor ``c``.

    The default is the paper's W4A4KV4, asymmetric, no clipping. Weights are quantized per output channel,
    activations per token, K and V per token and head (group = head_dim) [R].
    """

    w_bits: int | None = 4
    a_bits: int | None = 4
    kv_bits: int | None = 4
    symmetric: bool = False
    clip: float = 1.0

    def __post_init__(self) -> None:
        for name in ("w_bits", "a_bits", "kv_bits"):
            b = getattr(self, name)
            if b is not None and (not isinstance(b, int) or b < 2 or b > 16):
                raise ValueError(f"QuantConfig.{name}: bits must be an int in [2, 16] or None, got {b!r}")
        if not 0 < self.clip <= 1:
            raise ValueError(f"QuantConfig.clip: clip factor must be in (0, 1], got {self.clip!r}")

    @property
    def off(self) -> bool:
        """True when every quantizer is disabled (the full-precision forward)."""
        return self.w_bits is None and self.a_bits is None and self.kv_bits is None


def quant_params(x: Tensor, bits: int, symmetric: bool = False, clip: float = 1.0) -> tuple[Tensor, Tensor, int, int]:
    """Step ``s``, zero point ``z`` and integer range ``(lo, hi)`` of groups along the last dimension of ``x``.

    ``s`` and ``z`` have ``x``'s shape with the last dimension reduced to 1. Asymmetric: ``s = c (max - min) /
    (2^b - 1)``, ``z = round(-c min / s)`` (the grid covers ``[c min, c max]`` up to the rounding of ``z``).
    """
    if symmetric:
        qmax = 2 ** (bits - 1) - 1
        s = (clip * x.abs().amax(dim=-1, keepdim=True) / qmax).clamp_min(SCALE_FLOOR)
        return s, torch.zeros_like(s), -(2 ** (bits - 1)), qmax
    hi = 2 ** bits - 1
    # amin and amax separately: the same values as torch.aminmax, several times faster on CPU for short groups
    mn, mx = x.amin(dim=-1, keepdim=True), x.amax(dim=-1, keepdim=True)
    if clip == 1.0:  # the formulas below without their multiplications by 1.0 (bit-identical)
        s = ((mx - mn) / hi).clamp_min(SCALE_FLOOR)
        return s, torch.round(-mn / s), 0, hi
    s = (clip * (mx - mn) / hi).clamp_min(SCALE_FLOOR)
    return s, torch.round(-clip * mn / s), 0, hi


def quantize(x: Tensor, bits: int | None = 4, symmetric: bool = False, group_size: int | None = None,
             clip: float = 1.0, ste: bool = True) -> Tensor:
    """Fake-quantize ``x`` (any shape ``(..., d)``) to ``bits`` bits in contiguous groups of the last dimension.

    ``group_size=None`` makes the whole last dimension one group: activations ``(..., d)`` are then quantized per
    token and weights ``(out, in)`` per output channel; K/V use ``group_size=head_dim``. The output has the input's
    shape and dtype and lies on the group's grid ``(k - z) s`` with integer ``k`` in range. With ``ste=True`` the
    result is ``x + (Q(x) - x).detach()``: the value is ``Q(x)``, the gradient the identity. ``bits=None``
    returns ``x`` unchanged.
    """
    if bits is None:
        return x
    d = x.shape[-1]
    g = d if group_size is None else int(group_size)
    if g <= 0 or d % g:
        raise ValueError(f"quantize: group_size {group_size} must divide the last dimension {d}")
    if ste:
        return _STE.apply(x, bits, symmetric, g, clip)
    return _fake_quant(x, bits, symmetric, g, clip)


def _fake_quant(x: Tensor, bits: int, symmetric: bool, g: int, clip: float) -> Tensor:
    """``Q(x)`` in groups of ``g`` along the last dimension (no gradient bookkeeping of its own)."""
    xg = x.reshape(*x.shape[:-1], x.shape[-1] // g, g)
    s, z, lo, hi = quant_params(xg, bits, symmetric, clip)
    k = (xg / s).round_()  # in place on the fresh quotient (same values as torch.round, one pass less)
    k.add_(z).clamp_(lo, hi).sub_(z)  # (clamp(round(x/s) + z, lo, hi) - z), in place on the fresh k
    return k.mul_(s).reshape(x.shape)


class _STE(torch.autograd.Function):
    """Straight-through fake quantization as one autograd node: forward ``Q(x)``, backward the identity -- the
    value and gradient of ``x + (Q(x) - x).detach()`` without its add/sub nodes."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, bits: int, symmetric: bool, g: int, clip: float) -> Tensor:  # noqa: D102
        return _fake_quant(x, bits, symmetric, g, clip)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None, None]:  # noqa: D102
        return grad, None, None, None, None


def quant_error(x: Tensor, bits: int | None, symmetric: bool = False, group_size: int | None = None,
                clip: float = 1.0) -> float:
    """``||Q(x) - x||_F^2`` (0 when the quantizer is off)."""
    if bits is None:
        return 0.0
    with torch.no_grad():
        return float(((quantize(x, bits, symmetric, group_size, clip, ste=False) - x) ** 2).sum())


# ------------------------------------------------------------------------------------------------ Hadamard


def _check_pow2(d: int) -> None:
    if not isinstance(d, int) or d < 1 or d & (d - 1):
        raise ValueError(f"Hadamard rotation: dimension must be a power of 2, got {d!r}")


def sylvester_hadamard(d: int, dtype: torch.dtype = torch.float64) -> Tensor:
    """The ``(d, d)`` Sylvester Hadamard matrix (entries ±1, ``H H^T = d I``); ``d`` a power of 2."""
    _check_pow2(d)
    h = torch.ones(1, 1, dtype=dtype)
    while h.shape[0] < d:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h


def hadamard_signs(d: int, seed: int) -> Tensor:
    """The seeded random signs ``r`` in ``{±1}^d`` (float64) of :func:`random_hadamard`."""
    _check_pow2(d)
    rng = np.random.default_rng([int(seed), d])
    return torch.from_numpy(rng.choice(np.array([-1.0, 1.0]), size=d))


def random_hadamard(d: int, seed: int, dtype: torch.dtype = torch.float64) -> Tensor:
    """Orthonormal ``R = diag(r) H_d / sqrt(d)`` of shape ``(d, d)`` with seeded signs ``r`` (signs first, the
    official convention).

    Deterministic per ``(d, seed)``; ``ValueError`` unless ``d`` is a power of 2.
    """
    return signed_hadamard(hadamard_signs(d, seed)).to(dtype)


def signed_hadamard(signs: Tensor) -> Tensor:
    """``diag(signs) H_d / sqrt(d)`` (d, d) float64 for signs (d,) (``d`` a power of 2)."""
    d = signs.shape[0]
    return signs.to(torch.float64)[:, None] * sylvester_hadamard(d) / math.sqrt(d)


def _butterflies(x: Tensor, reverse: bool = False) -> Tensor:
    """The log2(d) butterfly levels ``(a, b) -> (a + b, a - b)`` of the Walsh–Hadamard transform along the last
    dimension, pair distance h = 1, 2, 4, ... (``reverse``: h = d/2, ..., 1)."""
    d = x.shape[-1]
    lead = x.shape[:-1]
    y = x.reshape(-1, d)
    levels = [1 << k for k in range(d.bit_length() - 1)]
    for h in reversed(levels) if reverse else levels:
        y = y.reshape(-1, d // (2 * h), 2, h)
        a, b = y[:, :, 0, :], y[:, :, 1, :]
        y = torch.stack((a + b, a - b), dim=2)
    return y.reshape(*lead, d)


class _FWHT(torch.autograd.Function):
    """``x H_d`` with a one-node backward: ``H_d`` is symmetric, so the gradient is ``g H_d``, computed by the
    butterflies in reverse order -- the same additions, in the same order, as autograd's chain through
    :func:`_butterflies`, hence bit-identical gradients at a fraction of the graph overhead."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:  # noqa: D102
        return _butterflies(x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:  # noqa: D102
        return _butterflies(g, reverse=True)


def fwht(x: Tensor) -> Tensor:
    """``x H_d`` along the last dimension by the fast Walsh–Hadamard transform, O(d log d) per row (unnormalised;
    ``H_d`` symmetric). Differentiable (the backward is the transform itself)."""
    _check_pow2(x.shape[-1])
    return _FWHT.apply(x)


#: largest dimension rotated online by a dense matmul instead of the FWHT (on a CPU the dense product is faster up
#: to d = 256: benchmarks/roste_hadamard.py); the two agree up to float rounding
DENSE_MAX = 256


@lru_cache(maxsize=64)
def _dense(signs_key: bytes, d: int, dtype: torch.dtype) -> Tensor:
    signs = torch.frombuffer(bytearray(signs_key), dtype=torch.float64)
    return signed_hadamard(signs).to(dtype)


def rotate(x: Tensor, signs: Tensor) -> Tensor:
    """``x R`` with ``R = diag(signs) H / sqrt(d)`` along the last dimension: ``(x * signs) H / sqrt(d)``, by
    :func:`fwht` for ``d > DENSE_MAX``, by the cached dense matrix otherwise (CPU tensors)."""
    d = x.shape[-1]
    if d <= DENSE_MAX and x.device.type == "cpu":
        return x @ _dense(signs.detach().to("cpu", torch.float64).contiguous().numpy().tobytes(), d, x.dtype)
    return fwht(x * signs.to(x.dtype)) / math.sqrt(d)


def slot_seed(seed: int, slot: str) -> int:
    """Seed of one rotation slot (``"r1"``, ``"r2.0"``, ...) derived from the run seed: each slot has its own
    independent signs."""
    return int(np.random.SeedSequence([int(seed), zlib.crc32(slot.encode())]).generate_state(1)[0])


# ------------------------------------------------------------------------------------- Proposition 4.4


def no_rotation_bound(w: Tensor, bits: int) -> Tensor:
    """Prop. 4.4, without rotation: ``d max_i w_i^2 / (4 (2^(b-1) - 1)^2)`` per row of ``w`` (..., d)."""
    d = w.shape[-1]
    return d * (w ** 2).amax(dim=-1) / (4 * (2 ** (bits - 1) - 1) ** 2)


def rotated_bound(w: Tensor, bits: int, delta: float) -> Tensor:
    """Prop. 4.4, after a random Hadamard rotation: ``log(4d/δ) ||w||^2 / (2 (2^(b-1) - 1)^2)`` per row."""
    d = w.shape[-1]
    return math.log(4 * d / delta) * (w ** 2).sum(dim=-1) / (2 * (2 ** (bits - 1) - 1) ** 2)


def row_errors_symmetric(w: Tensor, bits: int) -> Tensor:
    """``||Q(w_row) - w_row||^2`` per row under symmetric, ``c = 1`` quantization (the bound's quantizer)."""
    with torch.no_grad():
        return ((quantize(w, bits, symmetric=True, ste=False) - w) ** 2).sum(dim=-1)
