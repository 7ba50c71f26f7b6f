"""Hadamard rotations of sizes ``m * 2^k`` for the paper models (Hugging Face path, :mod:`.hf`).

The paper models' widths are mostly not powers of 2: Llama 3.1 8B's intermediate size is 14336 = 28 * 2^9, Qwen2.5-7B
has hidden 3584 = 28 * 2^7 and intermediate 18944 = 148 * 2^7, Qwen2.5-0.5B hidden 896 = 28 * 2^5 and intermediate
4864 = 76 * 2^6. The paper applies its rotations with the ``fast-hadamard-transform`` kernels, which handle such
sizes as a Kronecker product ``H_m ⊗ H_{2^k}`` of a small Hadamard matrix and a Sylvester one; this module does the
same in PyTorch, with ``H_m`` from Paley's constructions (Paley, 1933): type I for a prime ``q ≡ 3 (mod 4)``
(order ``q + 1``: 4, 8, 12, 20, 24, 32, 44, 48, ...) and type II for a prime ``q ≡ 1 (mod 4)`` (order ``2 (q + 1)``:
12, 28, 36, 60, 76, 108, 124, 148, ...). Powers of 2 use :mod:`.method` unchanged (same signs, same FWHT), so the
tiny decoder's rotations and :func:`.method.random_hadamard`'s contract (powers of 2 only) are untouched.

``R = diag(r) H_d / sqrt(d)`` with seeded signs ``r`` applied first, as in :mod:`.method`.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

from .method import fwht, hadamard_signs, sylvester_hadamard


def _is_prime(q: int) -> bool:
    return q >= 2 and all(q % k for k in range(2, int(math.isqrt(q)) + 1))


def _jacobsthal(q: int) -> np.ndarray:
    """``Q[i, j] = χ(j - i)`` with χ the quadratic character mod the prime ``q`` (χ(0) = 0)."""
    squares = {(k * k) % q for k in range(1, q)}
    chi = np.array([0] + [1 if a in squares else -1 for a in range(1, q)])
    idx = (np.arange(q)[None, :] - np.arange(q)[:, None]) % q
    return chi[idx]


@lru_cache(maxsize=None)
def paley_hadamard(m: int) -> np.ndarray:
    """A Hadamard matrix of order ``m`` (entries ±1, ``H H^T = m I``) from Paley I (``q = m - 1 ≡ 3 mod 4``
    prime) or Paley II (``q = m / 2 - 1 ≡ 1 mod 4`` prime); ``ValueError`` if neither applies."""
    q = m - 1
    if _is_prime(q) and q % 4 == 3:
        s = np.zeros((m, m), dtype=np.int64)
        s[0, 1:], s[1:, 0], s[1:, 1:] = 1, -1, _jacobsthal(q)
        return s + np.eye(m, dtype=np.int64)
    q = m // 2 - 1
    if m % 2 == 0 and _is_prime(q) and q % 4 == 1:
        c = np.zeros((q + 1, q + 1), dtype=np.int64)
        c[0, 1:], c[1:, 0], c[1:, 1:] = 1, 1, _jacobsthal(q)
        zero, one = np.array([[1, -1], [-1, -1]]), np.array([[1, 1], [1, -1]])
        return np.kron(c, one) + np.kron((c == 0).astype(np.int64), zero)
    raise ValueError(f"no Paley construction of a Hadamard matrix of order {m}")


def split(d: int) -> tuple[int, int]:
    """``(m, p)`` with ``d = m * p``, ``p`` the largest power of 2 such that a Hadamard matrix of order ``m`` exists
    here (``m = 1`` for a power of 2); ``ValueError`` naming ``d`` otherwise."""
    p = d & -d
    while p >= 1:
        m = d // p
        if m == 1:
            return 1, p
        try:
            paley_hadamard(m)
            return m, p
        except ValueError:
            p //= 2
    raise ValueError(f"rotation size {d}: no Hadamard matrix of order m * 2^k (Paley m) for it")


def signs(d: int, seed: int) -> Tensor:
    """Seeded signs (d,) float64: :func:`.method.hadamard_signs` for a power of 2, the same draw otherwise."""
    if split(d)[0] == 1:
        return hadamard_signs(d, seed)
    rng = np.random.default_rng([int(seed), d])
    return torch.from_numpy(rng.choice(np.array([-1.0, 1.0]), size=d))


def hadamard(d: int) -> Tensor:
    """``H_d = H_m ⊗ H_{2^k}`` (d, d) float64 (Sylvester for a power of 2)."""
    m, p = split(d)
    if m == 1:
        return sylvester_hadamard(d)
    return torch.kron(torch.from_numpy(paley_hadamard(m)).to(torch.float64), sylvester_hadamard(p))


def matrix(r: Tensor) -> Tensor:
    """Orthonormal ``R = diag(r) H_d / sqrt(d)`` on ``r``'s device (signs first, the official convention)."""
    d = r.shape[0]
    return r.to(torch.float64)[:, None] * hadamard(d).to(r.device) / math.sqrt(d)


def rotate(x: Tensor, r: Tensor) -> Tensor:
    """``x R = (x * r) H_d / sqrt(d)`` along the last dimension: ``x (H_m ⊗ H_p) = H_m^T X H_p`` on ``x`` viewed
    as (..., m, p), with the fast Walsh–Hadamard transform for ``H_p``."""
    d = x.shape[-1]
    m, p = split(d)
    x = x * r.to(x.dtype)
    y = fwht(x if m == 1 else x.reshape(*x.shape[:-1], m, p))
    if m > 1:
        a = torch.from_numpy(paley_hadamard(m)).to(device=x.device, dtype=x.dtype)
        y = torch.einsum("...ip,ik->...kp", y, a).reshape(x.shape)
    return y / math.sqrt(d)


__all__ = ["paley_hadamard", "split", "signs", "hadamard", "matrix", "rotate"]
