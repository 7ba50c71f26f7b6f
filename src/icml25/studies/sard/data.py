"""Data, agents and costs of the sard study (offline scales): scikit-learn's bundled ``digits`` and ``diabetes``.

The three files ship inside the scikit-learn wheel (``sklearn/datasets/data/``) and are located with
``importlib.util.find_spec`` (scikit-learn is not imported), never downloaded; each is checked against the sha256
pinned for the installed scikit-learn version in the study's ``data_files.csv``.

Agents (all [R]; the paper's offline agents were not read): J = 2 experts plus the main model, fixed before the
rejector is trained.

* ``digits`` (1797 × 64 pixels in 0..16, scaled to [0, 1]): stratified split 30 % agents / 40 % rejector-train /
  10 % validation / 20 % test. Main model g = multinomial logistic regression fitted on the agent split with
  classes 5–9 subsampled to 10 % (weak on 5–9). Expert 1 is correct with probability 0.95 on {5, 6, 7}, expert 2 on
  {7, 8, 9}; otherwise an expert predicts a uniform random label. Expert predictions are drawn once per example.
  Costs c₀ = 1{g(x) ≠ y}, c_j = 1{m_j(x) ≠ y} + β_j, all divided by 1 + max β (so c ∈ [0, 1]).
* ``diabetes`` (442 × 10, features and target standardised with agent-split statistics): the same four fractions,
  unstratified. g = ridge on {age, sex, bmi}; expert 1 = ridge on all features fitted on the agent rows with
  sex = 1 (raw code), expert 2 on the agent rows with bmi above the agent-split median. Costs
  c = min(1, (ŷ − y)²/4) + β_j (β₀ = 0), divided by 1 + max β.

Random streams (shared by every arm of a seed): split = ``default_rng([seed, 0])``, g's subsample
``default_rng([seed, 1])``, expert draws ``default_rng([seed, 2])``.
"""
from __future__ import annotations

import csv
import gzip
import hashlib
import importlib.metadata
import importlib.util
import io
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

PACKAGE = "sklearn"
DIST = "scikit-learn"
RESOURCE_DIR = ("datasets", "data")
#: the bundled files this study reads; their sha256 per scikit-learn version are rows of ``data_files.csv``
PACKAGE_FILES = ("digits.csv.gz", "diabetes_data_raw.csv.gz", "diabetes_target.csv.gz")
DIGITS_SHAPE = (1797, 65)          #: 64 pixels + label
DIABETES_SHAPE = (442, 10)         #: age, sex, bmi, bp, s1..s6 (raw units)
DIABETES_COLUMNS = ("age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6")
SPLITS = ("agents", "train", "val", "test")
DATASETS = ("digits", "diabetes")


class DataError(ValueError):
    """A data file is missing, corrupt or not what the study expects."""


# ------------------------------------------------------------------------------------------- raw files


def data_files() -> list[dict[str, str]]:
    """Rows of the study's ``data_files.csv`` (name, version, source, sha256, size, licence, note)."""
    return list(csv.DictReader(Path(__file__).with_name("data_files.csv").read_text().splitlines()))


def installed_version() -> str:
    """The installed scikit-learn version, read from its metadata (without importing it); "none" if absent."""
    try:
        return importlib.metadata.version(DIST)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def pinned_sha256(filename: str, version: str | None = None) -> str:
    """The sha256 that ``data_files.csv`` pins for ``filename`` under scikit-learn ``version`` (default: installed).

    Raises :class:`DataError` when no row pins it for that version."""
    version = installed_version() if version is None else version
    rows = [r for r in data_files() if r["name"] == filename and r["version"] == version and r["sha256"]]
    if not rows:
        raise DataError(f"{filename}: data_files.csv has no sha256 for scikit-learn {version}; check the bundled "
                        f"file and pin it there")
    return rows[0]["sha256"]


def verify_sha256(raw: bytes, expected: str, name: str) -> None:
    """Raise :class:`DataError` naming ``name`` when sha256(raw) differs from ``expected``."""
    got = hashlib.sha256(raw).hexdigest()
    if got != expected:
        raise DataError(f"{name}: sha256 {got} differs from the pinned {expected} (data_files.csv, "
                        f"scikit-learn {installed_version()})")


def package_bytes(filename: str) -> bytes:
    """The bytes of ``sklearn/datasets/data/<filename>``, checked against the sha256 pinned for the installed
    scikit-learn version in ``data_files.csv``."""
    if filename not in PACKAGE_FILES:
        raise DataError(f"sard data: unknown package file {filename!r}; expected one of {list(PACKAGE_FILES)}")
    where = f"{PACKAGE}/{'/'.join(RESOURCE_DIR)}/{filename}"
    spec = importlib.util.find_spec(PACKAGE)  # locates the installed package without importing it (slow)
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"sard data: {where} not found; install scikit-learn")
    path = Path(list(spec.submodule_search_locations)[0]).joinpath(*RESOURCE_DIR, filename)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"sard data: cannot read {where} ({path}): {exc}") from exc
    verify_sha256(raw, pinned_sha256(filename), where)
    return raw


def _table(raw: bytes, name: str, delimiter: str | None) -> np.ndarray:
    try:
        return np.loadtxt(io.BytesIO(gzip.decompress(raw)), delimiter=delimiter, dtype=np.float64, ndmin=2)
    except (OSError, ValueError, EOFError) as exc:
        raise DataError(f"{name}: cannot parse ({exc})") from exc


def parse_digits(raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    """digits.csv.gz bytes → X (1797, 64) float64 pixels in 0..16, y (1797,) int64 labels 0..9."""
    t = _table(raw, "digits.csv.gz", ",")
    if t.shape != DIGITS_SHAPE:
        raise DataError(f"digits.csv.gz: expected shape {DIGITS_SHAPE}, got {t.shape}")
    X, y = t[:, :64], t[:, 64]
    if X.min() < 0 or X.max() > 16 or not np.all(X == np.round(X)):
        raise DataError("digits.csv.gz: pixel columns 0..63 must be integers in 0..16")
    if not (np.all(y == np.round(y)) and set(np.unique(y).astype(int)) == set(range(10))):
        raise DataError("digits.csv.gz: label column 64 must hold the integers 0..9")
    return X, y.astype(np.int64)


def parse_diabetes(raw_x: bytes, raw_y: bytes) -> tuple[np.ndarray, np.ndarray]:
    """diabetes_data_raw / diabetes_target bytes → X (442, 10) float64 raw units, y (442,) float64."""
    X = _table(raw_x, "diabetes_data_raw.csv.gz", None)
    y = _table(raw_y, "diabetes_target.csv.gz", None).reshape(-1)
    if X.shape != DIABETES_SHAPE:
        raise DataError(f"diabetes_data_raw.csv.gz: expected shape {DIABETES_SHAPE}, got {X.shape}")
    if y.shape != (DIABETES_SHAPE[0],):
        raise DataError(f"diabetes_target.csv.gz: expected {DIABETES_SHAPE[0]} values, got {y.shape}")
    if set(np.unique(X[:, 1])) != {1.0, 2.0}:
        raise DataError("diabetes_data_raw.csv.gz: column 'sex' (1) must hold the codes 1 and 2")
    if not (np.isfinite(X).all() and np.isfinite(y).all()):
        raise DataError("diabetes: non-finite values")
    return X, y


@lru_cache(maxsize=1)
def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """digits from the scikit-learn wheel (sha256-checked): X (1797, 64) pixels 0..16, y (1797,) int64."""
    X, y = parse_digits(package_bytes("digits.csv.gz"))
    X.flags.writeable = y.flags.writeable = False
    return X, y


@lru_cache(maxsize=1)
def load_diabetes() -> tuple[np.ndarray, np.ndarray]:
    """diabetes from the scikit-learn wheel (sha256-checked): X (442, 10) raw units, y (442,) disease progression."""
    X, y = parse_diabetes(package_bytes("diabetes_data_raw.csv.gz"), package_bytes("diabetes_target.csv.gz"))
    X.flags.writeable = y.flags.writeable = False
    return X, y


# --------------------------------------------------------------------------------------------- splits


def split_indices(n: int, fractions: Sequence[float], seed: int,
                  stratify: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Split range(n) into the four parts of :data:`SPLITS` with the given fractions (summing to 1).

    rng = ``default_rng([seed, 0])``. Without ``stratify``: one permutation cut at round(cumsum(fractions)·n).
    With it: the same per class (ascending), so every class is split in the same proportions. Returns sorted
    int64 index arrays per split, disjoint and covering range(n)."""
    fr = np.asarray(fractions, dtype=np.float64)
    if fr.shape != (len(SPLITS),) or (fr <= 0).any() or abs(fr.sum() - 1.0) > 1e-9:
        raise ValueError(f"split_indices: fractions must be {len(SPLITS)} positive numbers summing to 1 "
                         f"({'/'.join(SPLITS)}), got {list(fractions)}")
    rng = np.random.default_rng([seed, 0])
    groups = [np.arange(n)] if stratify is None else [np.flatnonzero(stratify == c) for c in np.unique(stratify)]
    parts: dict[str, list[np.ndarray]] = {s: [] for s in SPLITS}
    for idx in groups:
        perm = rng.permutation(idx)
        cuts = np.round(np.cumsum(fr)[:-1] * len(perm)).astype(np.int64)
        for name, chunk in zip(SPLITS, np.split(perm, cuts)):
            parts[name].append(chunk)
    return {s: np.sort(np.concatenate(p)).astype(np.int64) for s, p in parts.items()}


# ------------------------------------------------------------------------------------------- agents


def classification_costs(y: np.ndarray, preds: np.ndarray, beta: Sequence[float]) -> np.ndarray:
    """c₀ = 1{ŷ₀ ≠ y}, c_j = 1{ŷ_j ≠ y} + β_j, divided by 1 + max β: y (n,), preds (n, J+1) → (n, J+1) in [0, 1]."""
    fee = np.concatenate([[0.0], np.asarray(beta, dtype=np.float64)])
    if preds.ndim != 2 or preds.shape[1] != len(fee):
        raise ValueError(f"classification_costs: preds must be (n, {len(fee)}), got {preds.shape}")
    return ((preds != y[:, None]).astype(np.float64) + fee) / (1.0 + fee.max())


def regression_costs(y: np.ndarray, preds: np.ndarray, beta: Sequence[float], scale: float = 4.0) -> np.ndarray:
    """c_j = min(1, (ŷ_j − y)²/scale) + β_j (β₀ = 0), divided by 1 + max β: → (n, J+1) in [0, 1]."""
    fee = np.concatenate([[0.0], np.asarray(beta, dtype=np.float64)])
    if preds.ndim != 2 or preds.shape[1] != len(fee):
        raise ValueError(f"regression_costs: preds must be (n, {len(fee)}), got {preds.shape}")
    return (np.minimum(1.0, (preds - y[:, None]) ** 2 / scale) + fee) / (1.0 + fee.max())


def simulate_experts(y: np.ndarray, competence: Sequence[Sequence[int]], p_correct: float, n_classes: int,
                     seed: int) -> np.ndarray:
    """Simulated class experts: expert j is correct with probability ``p_correct`` when y ∈ competence[j], and
    otherwise predicts a uniform random label (which may be right by chance).

    rng = ``default_rng([seed, 2])``; for each expert in order: u ~ U[0,1)^n then labels ~ U{0..K−1}^n.
    y (n,) → (n, J) int64, drawn once per example (a function of (x, y) through the example index only)."""
    rng = np.random.default_rng([seed, 2])
    out = np.empty((len(y), len(competence)), dtype=np.int64)
    for j, classes in enumerate(competence):
        u = rng.random(len(y))
        rand = rng.integers(0, n_classes, size=len(y))
        knows = np.isin(y, np.asarray(classes)) & (u < p_correct)
        out[:, j] = np.where(knows, y, rand)
    return out


def _fit_digits_main(X: np.ndarray, y: np.ndarray, weak: Sequence[int], keep: float, seed: int, max_iter: int):
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng([seed, 1])
    weak_rows = np.isin(y, np.asarray(weak))
    keep_mask = ~weak_rows | (rng.random(len(y)) < keep)
    return LogisticRegression(max_iter=max_iter).fit(X[keep_mask], y[keep_mask])


def prepare_digits(seed: int, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """digits, split, agents and costs for one seed (see the module docstring). ``cfg`` = settings["digits"].

    Returns x (1797, 64) float32 in [0, 1], y (1797,), idx {split: indices}, preds (1797, 3) agent predictions,
    costs (1797, 3) float32, the fitted main model ``g`` (sklearn), ``task``="classification", ``clip`` (0, 1),
    and ``info`` (agent accuracies on the test split, oracle deferral loss E[min_j c_j] on test)."""
    X, y = load_digits()
    x = (X / 16.0).astype(np.float32)
    idx = split_indices(len(y), cfg["split"], seed, stratify=y)
    a = idx["agents"]
    g = _fit_digits_main(x[a], y[a], cfg["main_weak_classes"], float(cfg["main_weak_keep"]), seed,
                         int(cfg["main_max_iter"]))
    preds = np.column_stack([g.predict(x), simulate_experts(y, cfg["expert_classes"], float(cfg["expert_p"]), 10,
                                                            seed)])
    costs = classification_costs(y, preds, cfg["beta"])
    return _finish("digits", x, y, idx, preds, costs, g, None, cfg["beta"], (0.0, 1.0))


def prepare_diabetes(seed: int, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """diabetes, split, agents and costs for one seed (see the module docstring). ``cfg`` = settings["diabetes"].

    Features and target are standardised with the agent split's mean and std. Returns the same keys as
    :func:`prepare_digits` (``clip`` None, ``task`` "regression"; ``g_columns`` the main model's features)."""
    from sklearn.linear_model import Ridge

    X, yraw = load_diabetes()
    idx = split_indices(len(yraw), cfg["split"], seed)
    a = idx["agents"]
    mu, sd = X[a].mean(axis=0), X[a].std(axis=0)
    x = ((X - mu) / np.where(sd > 0, sd, 1.0)).astype(np.float32)
    y = (yraw - yraw[a].mean()) / yraw[a].std()
    cols = [DIABETES_COLUMNS.index(c) for c in cfg["main_features"]]
    alpha = float(cfg["ridge_alpha"])
    g = Ridge(alpha=alpha).fit(x[a][:, cols], y[a])
    sex1 = a[X[a, 1] == 1.0]
    bmi_hi = a[X[a, 2] > np.median(X[a, 2])]
    e1 = Ridge(alpha=alpha).fit(x[sex1], y[sex1])
    e2 = Ridge(alpha=alpha).fit(x[bmi_hi], y[bmi_hi])
    preds = np.column_stack([g.predict(x[:, cols]), e1.predict(x), e2.predict(x)])
    costs = regression_costs(y, preds, cfg["beta"], float(cfg["cost_scale"]))
    out = _finish("diabetes", x, y, idx, preds, costs, g, cols, cfg["beta"], None)
    out["cost_scale"] = float(cfg["cost_scale"])
    return out


def _finish(name: str, x, y, idx, preds, costs, g, g_columns, beta, clip) -> dict[str, Any]:
    if not (np.isfinite(costs).all() and costs.min() >= 0.0 and costs.max() <= 1.0):
        raise DataError(f"{name}: costs must lie in [0, 1], got [{costs.min()}, {costs.max()}]")
    te = idx["test"]
    task = "classification" if name == "digits" else "regression"
    if task == "classification":
        quality = {f"agent_acc_{j}": float((preds[te, j] == y[te]).mean()) for j in range(preds.shape[1])}
    else:
        quality = {f"agent_mse_{j}": float(((preds[te, j] - y[te]) ** 2).mean()) for j in range(preds.shape[1])}
    info = {**quality, "oracle_def_loss": float(costs[te].min(axis=1).mean()),
            **{f"oracle_rate_{j}": float((costs[te].argmin(axis=1) == j).mean()) for j in range(costs.shape[1])}}
    return {"name": name, "task": task, "x": x, "y": y, "idx": idx, "preds": preds,
            "costs": costs.astype(np.float32), "g": g, "g_columns": g_columns, "beta": list(beta), "clip": clip,
            "info": info}


def prepare(dataset: str, seed: int, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Dispatch to :func:`prepare_digits` / :func:`prepare_diabetes` with ``settings[dataset]``."""
    if dataset == "digits":
        return prepare_digits(seed, settings["digits"])
    if dataset == "diabetes":
        return prepare_diabetes(seed, settings["diabetes"])
    raise ValueError(f"sard: unknown dataset {dataset!r}; expected one of {DATASETS}")


def main_costs_at(prep: Mapping[str, Any], x_new: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Cost of the main model g re-evaluated at inputs ``x_new`` (n, d) for the examples ``rows`` (n,) — the
    ``agents_see_perturbation`` threat model. Experts are simulated from (x, y) and keep their clean costs.
    Returns (n,) in the dtype of ``prep["costs"]``."""
    fee_max = 1.0 + max(prep["beta"])
    y = prep["y"][rows]
    if prep["task"] == "classification":
        c = (prep["g"].predict(x_new) != y).astype(np.float64) / fee_max
    else:
        pred = prep["g"].predict(x_new[:, prep["g_columns"]])
        c = np.minimum(1.0, (pred - y) ** 2 / prep["cost_scale"]) / fee_max
    return c.astype(prep["costs"].dtype)  # the stored costs' precision, so that x_new = x gives them back exactly
