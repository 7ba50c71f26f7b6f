"""ROMS terrain-following s-coordinates (spec "Method: S-coordinate [V]").

Levels: s_rho = (k - N - 1/2)/N for k = 1..N and s_w = (k - N)/N for k = 0..N. Stretching 4 (Shchepetkin 2010):
C = (1 - cosh(theta_s s))/(cosh(theta_s) - 1), then C <- (exp(theta_b C) - 1)/(1 - exp(-theta_b)) if theta_b > 0.
Transform 1: Z0 = hc s + (h - hc) C, z = Z0 + zeta (1 + Z0/h).  Transform 2: Z0 = (hc s + h C)/(hc + h),
z = zeta + (zeta + h) Z0.  Depths are metres, negative down.
"""
from __future__ import annotations

from typing import Literal

import numpy as np


def s_levels(n: int, grid: Literal["rho", "w"] = "rho") -> np.ndarray:
    """s at rho levels (N,) or w levels (N+1,), bottom first, in [-1, 0]."""
    if grid == "rho":
        k = np.arange(1, n + 1)
        return (k - n - 0.5) / n
    if grid == "w":
        return (np.arange(0, n + 1) - n) / n
    raise ValueError(f"grid must be 'rho' or 'w', got {grid!r}")


def stretching(s: np.ndarray, theta_s: float, theta_b: float, vstretching: int = 4) -> np.ndarray:
    """C(s) of Vstretching 4 (the only one this study writes; others raise naming the value)."""
    if vstretching != 4:
        raise ValueError(f"Vstretching={vstretching} is not supported (only 4)")
    s = np.asarray(s, dtype=float)
    c = (1.0 - np.cosh(theta_s * s)) / (np.cosh(theta_s) - 1.0) if theta_s > 0 else -s**2
    if theta_b > 0:
        c = (np.exp(theta_b * c) - 1.0) / (1.0 - np.exp(-theta_b))
    return c


def z_of_s(s, c, h, zeta, hc: float, vtransform: int):
    """Depth z (m) for s, C(s) broadcast against h and zeta (NumPy, dask or xarray objects).

    ``s`` and ``c`` must already be shaped to broadcast (e.g. (N, 1, 1) against (ny, nx)).
    """
    if vtransform == 1:
        z0 = hc * s + (h - hc) * c
        return z0 + zeta * (1.0 + z0 / h)
    if vtransform == 2:
        z0 = (hc * s + h * c) / (hc + h)
        return zeta + (zeta + h) * z0
    raise ValueError(f"Vtransform={vtransform} is not supported (1 or 2)")
