"""PiD residuals (Pixelwise Decomposition residuals, the paper's Section 3) and the NPR-style baseline residual.

For one 8-bit RGB pixel x ∈ {0..255}³ (float64): y = M x in another colour space, q = s·round(y/s) with
round-half-to-even, x̂ = M⁻¹ q, residual r = x − x̂ ∈ ℝ³. The residual depends only on the pixel's own colour, so it
carries no spatial (semantic) content; it must be computed on original pixels (crops/flips commute with it,
resizing does not). The colour matrices, the step s and the rounding rule are reconstructions [R] (no official
code): ``yuv601`` (analogue BT.601 YUV, the default), ``ycbcr601`` (full range; the +128 offset cancels exactly
in r only when it is a multiple of s, so it is applied explicitly) and ``ycocg``.

Layouts: NumPy ``(..., H, W, 3)`` uint8 (channels last) or torch ``(B, 3, H, W)`` (channels first); the output has
the input's layout, float64 (a float torch input keeps its dtype, computed in float64).
"""
from __future__ import annotations

import functools
import numpy as np

COLOUR_SPACES = ("yuv601", "ycbcr601", "ycocg")


@functools.lru_cache(maxsize=None)
def _matrices(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if name == "yuv601":
        kr, kg, kb = 0.299, 0.587, 0.114
        m = np.array([[kr, kg, kb],
                      [-0.492 * kr, -0.492 * kg, 0.492 * (1 - kb)],
                      [0.877 * (1 - kr), -0.877 * kg, -0.877 * kb]])
        offset = np.zeros(3)
    elif name == "ycbcr601":
        kr, kg, kb = 0.299, 0.587, 0.114
        m = np.array([[kr, kg, kb],
                      [-0.5 * kr / (1 - kb), -0.5 * kg / (1 - kb), 0.5],
                      [0.5, -0.5 * kg / (1 - kr), -0.5 * kb / (1 - kr)]])
        offset = np.array([0.0, 128.0, 128.0])
    elif name == "ycocg":
        m = np.array([[0.25, 0.5, 0.25], [0.5, 0.0, -0.5], [-0.25, 0.5, -0.25]])
        offset = np.zeros(3)
    else:
        raise ValueError(f"colour_space {name!r} unknown; choose one of {COLOUR_SPACES}")
    minv = np.linalg.inv(m)
    for a in (m, minv, offset):
        a.flags.writeable = False
    return m, minv, offset


def colour_matrix(name: str = "yuv601") -> tuple[np.ndarray, np.ndarray]:
    """(M, M⁻¹), both float64 (3, 3): y = M x maps RGB column vectors to ``name`` (offset excluded) [R]."""
    m, minv, _ = _matrices(name)
    return m.copy(), minv.copy()


def residual_bound(step: float, colour_space: str = "yuv601") -> np.ndarray:
    """Per-channel bound (3,) on |r_c|: (s/2)·Σ_j |M⁻¹_cj|, since |q − y| ≤ s/2 per channel (claim 1)."""
    if not step > 0:
        raise ValueError(f"step must be > 0, got {step}")
    _, minv, _ = _matrices(colour_space)
    return step / 2.0 * np.abs(minv).sum(axis=1)


def _residual_channels(c: tuple, step: float, colour_space: str, rnd, noise=None) -> tuple:
    """r per channel from the three colour channels ``c`` (broadcastable float64 NumPy arrays or torch tensors).

    Written out per channel (no BLAS) so that NumPy, torch and the chunked bound check do the same float64
    operations in the same order and agree bitwise. ``rnd`` rounds half to even; ``noise`` (3 arrays) is a·u."""
    m, minv, off = _matrices(colour_space)
    q = []
    for k in range(3):
        z = (m[k, 0] * c[0] + m[k, 1] * c[1] + m[k, 2] * c[2] + off[k]) / step
        if noise is not None:
            z = z + noise[k]
        q.append(step * rnd(z) - off[k])
    return tuple(c[i] - (minv[i, 0] * q[0] + minv[i, 1] * q[1] + minv[i, 2] * q[2]) for i in range(3))


def _residual_np(x: np.ndarray, step: float, colour_space: str, noise_amp: float,
                 rng: np.random.Generator | None) -> np.ndarray:
    """x (..., 3) values 0..255 -> r (..., 3) float64."""
    xf = np.asarray(x, dtype=np.float64)
    noise = None
    if noise_amp:
        if rng is None:
            raise ValueError("pid_residual: noise_amp > 0 needs an rng (numpy Generator or torch Generator)")
        u = noise_amp * rng.uniform(-0.5, 0.5, size=xf.shape)
        noise = (u[..., 0], u[..., 1], u[..., 2])
    r = _residual_channels((xf[..., 0], xf[..., 1], xf[..., 2]), step, colour_space, np.round, noise)
    return np.stack(r, axis=-1)


def pid_residual(x, step: float = 1.0, colour_space: str = "yuv601", noise_amp: float = 0.0, rng=None):
    """PiD residual r = x − M⁻¹(s·round(M x / s)) per pixel (not divided by s).

    x: NumPy ``(..., H, W, 3)`` (uint8 or integer-valued, 0..255) -> float64 same shape; or torch ``(B, 3, H, W)``
    -> float64 tensor of the same shape (float32 input gives float32 computed in float64). ``noise_amp`` > 0 is the
    noise-aware variant [R]: q = s·round(y/s + a·u), u ~ U(−½, ½) per pixel and channel drawn from ``rng`` (a NumPy
    Generator; for torch input a ``torch.Generator`` or None). Bad input (wrong layout, values outside 0..255)
    raises ValueError.
    """
    if not step > 0:
        raise ValueError(f"step must be > 0, got {step}")
    if isinstance(x, np.ndarray):
        if x.ndim < 3 or x.shape[-1] != 3:
            raise ValueError(f"pid_residual: NumPy input must be (..., H, W, 3), got shape {x.shape}")
        if x.size and (x.min() < 0 or x.max() > 255):
            raise ValueError("pid_residual: pixel values must lie in 0..255")
        return _residual_np(x, step, colour_space, noise_amp, rng)
    import torch
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"pid_residual: expected a numpy array or torch tensor, got {type(x).__name__}")
    if x.ndim != 4 or x.shape[1] != 3:
        raise ValueError(f"pid_residual: torch input must be (B, 3, H, W), got shape {tuple(x.shape)}")
    xf = x.to(torch.float64)
    noise = None
    if noise_amp:
        gen = rng if isinstance(rng, torch.Generator) else None
        u = noise_amp * (torch.rand(xf.shape, generator=gen, dtype=torch.float64, device=x.device) - 0.5)
        noise = (u[:, 0], u[:, 1], u[:, 2])
    r = torch.stack(_residual_channels((xf[:, 0], xf[:, 1], xf[:, 2]), step, colour_space, torch.round, noise), 1)
    return r.to(x.dtype) if x.is_floating_point() else r


def residual_lut(step: float = 1.0, colour_space: str = "yuv601") -> np.ndarray:
    """The colour→residual lookup table (256, 256, 256, 3) float64, indexed [R, G, B] (≈ 400 MB; tests use slices)."""
    return _residual_np(all_colours().reshape(256, 256, 256, 3), step, colour_space, 0.0, None)


def all_colours(start: int = 0, stop: int = 256 ** 3) -> np.ndarray:
    """Colours with flat indices start..stop-1 of the cube, index = 65536·R + 256·G + B: (n, 3) uint8."""
    idx = np.arange(start, stop, dtype=np.int64)
    return np.stack([idx >> 16, (idx >> 8) & 255, idx & 255], axis=-1).astype(np.uint8)


def bound_check(steps=(0.5, 1.0, 2.0, 4.0, 8.0), colour_space: str = "yuv601", n_random: int | None = None,
                seed: int = 0, tol: float = 1e-9) -> dict:
    """Claim 1: max over colours of |r_c| − bound_c, per step, exhaustive over {0..255}³ in 256 slabs (``n_random`` =
    None) or on ``n_random`` uniform random colours (smoke). Returns ``{"steps", "max_excess" (per step),
    "max_ratio" (max |r_c|/bound_c per step), "n_colours", "exhaustive", "holds"}``; holds iff every excess ≤ tol.
    """
    excess, ratio = [], []
    if n_random is None:  # exhaustive: one 256x256 (G, B) slab per red level, the same float64 ops as pid_residual
        g = np.arange(256, dtype=np.float64)[:, None]
        bl = np.arange(256, dtype=np.float64)[None, :]
        slabs = lambda: ((np.float64(red), g, bl) for red in range(256))  # noqa: E731
        n = 256 ** 3
    else:
        cols = np.random.default_rng(seed).integers(0, 256, size=(n_random, 3)).astype(np.float64)
        slabs = lambda: iter([(cols[:, 0], cols[:, 1], cols[:, 2])])  # noqa: E731
        n = n_random
    for s in steps:
        b = residual_bound(s, colour_space)
        worst_e, worst_r = -np.inf, 0.0
        for c in slabs():
            for k, rk in enumerate(_residual_channels(c, s, colour_space, np.round)):
                a = float(np.abs(rk).max())
                worst_e, worst_r = max(worst_e, a - b[k]), max(worst_r, a / b[k])
        excess.append(float(worst_e))
        ratio.append(float(worst_r))
    return {"steps": [float(s) for s in steps], "max_excess": excess, "max_ratio": ratio, "n_colours": int(n),
            "exhaustive": n_random is None, "holds": bool(max(excess) <= tol)}


def npr_residual(x):
    """NPR-style residual [R]: x − up_nearest(x[::2, ::2]) with a 2× nearest upsample (float64; same layout as x).

    NumPy ``(..., H, W, C)`` or torch ``(B, C, H, W)``; odd sizes are handled by cropping the upsample to H, W."""
    if isinstance(x, np.ndarray):
        if x.ndim < 3:
            raise ValueError(f"npr_residual: NumPy input must be (..., H, W, C), got shape {x.shape}")
        xf = x.astype(np.float64)
        h, w = xf.shape[-3], xf.shape[-2]
        up = np.repeat(np.repeat(xf[..., ::2, ::2, :], 2, axis=-3), 2, axis=-2)[..., :h, :w, :]
        return xf - up
    import torch
    if x.ndim != 4:
        raise ValueError(f"npr_residual: torch input must be (B, C, H, W), got shape {tuple(x.shape)}")
    xf = x.to(torch.float64)
    h, w = xf.shape[-2:]
    up = xf[..., ::2, ::2].repeat_interleave(2, dim=-2).repeat_interleave(2, dim=-1)[..., :h, :w]
    return xf - up
