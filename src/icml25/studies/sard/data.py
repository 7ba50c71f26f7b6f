"""Data, agents and costs of the sard study: scikit-learn's bundled ``digits`` and ``diabetes`` (offline scales);
the paper-scale archives are read by :mod:`.paper_data` and prepared by :mod:`.agents` through the same
:func:`prepare` and processed-file functions.

The three files ship inside the scikit-learn wheel (``sklearn/datasets/data/``) and are read offline with
:func:`icml25.core.datasets.packaged_bytes`, checked against the sha256 of the study's ``manifest.csv`` (which
also lists the paper-scale archives: CIFAR-10, California Housing, Pascal VOC 2007). The download stage copies
them to ``raw/``; preprocessing parses them (:func:`read_raw`), builds the agents and costs of every seed
(:func:`prepare`) and stores them as plain npz arrays (:func:`prepared_arrays`; the main model g is kept as its
linear parameters, :func:`main_predict`, so the threat model can re-evaluate it at x′ without a pickle).

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

import gzip
import io
import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from icml25.core.datasets import DataError, packaged_bytes
from icml25.core.download import read_manifest

MANIFEST = Path(__file__).with_name("manifest.csv")
#: the three bundled files, as ``(manifest name, path inside the sklearn package)``
PACKAGE_FILES = {"digits": "datasets/data/digits.csv.gz",
                 "diabetes_data_raw": "datasets/data/diabetes_data_raw.csv.gz",
                 "diabetes_target": "datasets/data/diabetes_target.csv.gz"}
#: manifest rows each dataset reads, in the order its reader takes them
DATASET_FILES = {"digits": ("digits",), "diabetes": ("diabetes_data_raw", "diabetes_target"),
                 "cifar10": ("cifar10",), "california_housing": ("california_housing",),
                 "voc2007": ("voc2007_trainval", "voc2007_test")}
#: file names under raw/ of every manifest row
RAW_NAMES = {"digits": "digits.csv.gz", "diabetes_data_raw": "diabetes_data_raw.csv.gz",
             "diabetes_target": "diabetes_target.csv.gz", "cifar10": "cifar-10-python.tar.gz",
             "california_housing": "cal_housing.tgz", "voc2007_trainval": "VOCtrainval_06-Nov-2007.tar",
             "voc2007_test": "VOCtest_06-Nov-2007.tar"}
DIGITS_SHAPE = (1797, 65)          #: 64 pixels + label
DIABETES_SHAPE = (442, 10)         #: age, sex, bmi, bp, s1..s6 (raw units)
DIABETES_COLUMNS = ("age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6")
SPLITS = ("agents", "train", "val", "test")
DATASETS = ("digits", "diabetes")


# ------------------------------------------------------------------------------------------- raw files


def package_bytes(name: str) -> bytes:
    """The bytes of the bundled file ``name`` (a key of :data:`PACKAGE_FILES`) from the installed scikit-learn
    wheel, checked against the sha256 of the study's ``manifest.csv`` (:func:`icml25.core.datasets.packaged_bytes`;
    scikit-learn is located, not imported)."""
    if name not in PACKAGE_FILES:
        raise DataError(f"sard data: unknown package file {name!r}; expected one of {list(PACKAGE_FILES)}")
    entry = read_manifest(MANIFEST)[name]
    return packaged_bytes("sklearn", PACKAGE_FILES[name], entry.sha256, requirement="scikit-learn>=1.4")


def _table(raw: bytes, name: str, delimiter: str | None) -> np.ndarray:
    try:
        return np.loadtxt(io.BytesIO(gzip.decompress(raw)), delimiter=delimiter, dtype=np.float64, ndmin=2)
    except (OSError, ValueError, EOFError) as exc:
        raise DataError(f"{name}: cannot parse ({exc})") from exc


def parse_digits(raw: bytes, name: str = "digits.csv.gz") -> tuple[np.ndarray, np.ndarray]:
    """digits.csv.gz bytes → X (1797, 64) float64 pixels in 0..16, y (1797,) int64 labels 0..9."""
    t = _table(raw, name, ",")
    if t.shape != DIGITS_SHAPE:
        raise DataError(f"{name}: expected shape {DIGITS_SHAPE}, got {t.shape}")
    X, y = t[:, :64], t[:, 64]
    if X.min() < 0 or X.max() > 16 or not np.all(X == np.round(X)):
        raise DataError(f"{name}: pixel columns 0..63 must be integers in 0..16")
    if not (np.all(y == np.round(y)) and set(np.unique(y).astype(int)) == set(range(10))):
        raise DataError(f"{name}: label column 64 must hold the integers 0..9")
    return X, y.astype(np.int64)


def parse_diabetes(raw_x: bytes, raw_y: bytes, names: tuple[str, str] = ("diabetes_data_raw.csv.gz",
                                                                          "diabetes_target.csv.gz")
                   ) -> tuple[np.ndarray, np.ndarray]:
    """diabetes_data_raw / diabetes_target bytes → X (442, 10) float64 raw units, y (442,) float64."""
    X = _table(raw_x, names[0], None)
    y = _table(raw_y, names[1], None).reshape(-1)
    if X.shape != DIABETES_SHAPE:
        raise DataError(f"{names[0]}: expected shape {DIABETES_SHAPE}, got {X.shape}")
    if y.shape != (DIABETES_SHAPE[0],):
        raise DataError(f"{names[1]}: expected {DIABETES_SHAPE[0]} values, got {y.shape}")
    if set(np.unique(X[:, 1])) != {1.0, 2.0}:
        raise DataError(f"{names[0]}: column 'sex' (1) must hold the codes 1 and 2")
    if not (np.isfinite(X).all() and np.isfinite(y).all()):
        raise DataError(f"{names[0]}: non-finite values")
    return X, y


def read_raw(dataset: str, paths: Sequence[str | Path]) -> tuple[np.ndarray, np.ndarray]:
    """Parse a dataset's raw files (downloaded or copied by the download stage, in :data:`DATASET_FILES` order)."""
    paths = [Path(p) for p in paths]
    try:
        raws = [p.read_bytes() for p in paths]
    except OSError as exc:
        raise DataError(f"sard data: cannot read {dataset} raw file: {exc}") from exc
    if dataset == "digits" and len(raws) == 1:
        return parse_digits(raws[0], str(paths[0]))
    if dataset == "diabetes" and len(raws) == 2:
        return parse_diabetes(raws[0], raws[1], (str(paths[0]), str(paths[1])))
    raise DataError(f"sard data: {dataset} with {len(raws)} raw file(s) has no reader here (the paper-scale "
                    "archives are read by read_paper_raw)")


def read_paper_raw(dataset: str, paths: Sequence[str | Path], image_size: int | None = None) -> tuple:
    """Parse a paper-scale dataset's archive(s) (:mod:`.paper_data`): cifar10 → (x uint8 (N, 3, 32, 32), y);
    california_housing → (X (N, 8), y in 100,000 $); voc2007 (trainval tar, test tar) → (x uint8 (N, 3, S, S),
    labels, boxes) with S = ``image_size``."""
    from . import paper_data as P

    paths = [Path(p) for p in paths]
    if dataset == "cifar10" and len(paths) == 1:
        return P.read_cifar10(paths[0])
    if dataset == "california_housing" and len(paths) == 1:
        return P.read_california_housing(paths[0])
    if dataset == "voc2007" and len(paths) == 2:
        if image_size is None:
            raise DataError("sard data: voc2007 needs image_size")
        x, labels, boxes, _ = P.read_voc(paths, int(image_size))
        return x, labels, boxes
    raise DataError(f"sard data: no paper-scale reader for {dataset!r} with {len(paths)} file(s)")


@lru_cache(maxsize=1)
def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """digits from the scikit-learn wheel (sha256-checked): X (1797, 64) pixels 0..16, y (1797,) int64."""
    X, y = parse_digits(package_bytes("digits"))
    X.flags.writeable = y.flags.writeable = False
    return X, y


@lru_cache(maxsize=1)
def load_diabetes() -> tuple[np.ndarray, np.ndarray]:
    """diabetes from the scikit-learn wheel (sha256-checked): X (442, 10) raw units, y (442,) disease progression."""
    X, y = parse_diabetes(package_bytes("diabetes_data_raw"), package_bytes("diabetes_target"))
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


def prepare_digits(seed: int, cfg: Mapping[str, Any], data: tuple[np.ndarray, np.ndarray] | None = None
                   ) -> dict[str, Any]:
    """digits, split, agents and costs for one seed (see the module docstring). ``cfg`` = the ``digits`` section
    (a mapping); ``data`` = (X (1797, 64) pixels 0..16, y) as parsed from the raw file (default: the wheel's).

    Returns x (1797, 64) float32 in [0, 1], y (1797,), idx {split: indices}, preds (1797, 3) agent predictions,
    costs (1797, 3) float32, the main model's parameters ``g`` (:func:`main_predict`), ``task``="classification",
    ``clip`` (0, 1), and ``info`` (agent accuracies on the test split, oracle deferral loss E[min_j c_j] on test)."""
    X, y = load_digits() if data is None else data
    x = (X / 16.0).astype(np.float32)
    idx = split_indices(len(y), cfg["split"], seed, stratify=y)
    a = idx["agents"]
    g = _fit_digits_main(x[a], y[a], cfg["main_weak_classes"], float(cfg["main_weak_keep"]), seed,
                         int(cfg["main_max_iter"]))
    preds = np.column_stack([g.predict(x), simulate_experts(y, cfg["expert_classes"], float(cfg["expert_p"]), 10,
                                                            seed)])
    costs = classification_costs(y, preds, cfg["beta"])
    params = {"coef": g.coef_, "intercept": g.intercept_, "classes": g.classes_, "columns": np.arange(x.shape[1])}
    return _finish("digits", x, y, idx, preds, costs, params, cfg["beta"], (0.0, 1.0), 1.0)


def prepare_diabetes(seed: int, cfg: Mapping[str, Any], data: tuple[np.ndarray, np.ndarray] | None = None
                     ) -> dict[str, Any]:
    """diabetes, split, agents and costs for one seed (see the module docstring). ``cfg`` = the ``diabetes``
    section (a mapping); ``data`` = (X (442, 10) raw units, y (442,)) (default: the wheel's).

    Features and target are standardised with the agent split's mean and std. Returns the same keys as
    :func:`prepare_digits` (``clip`` None, ``task`` "regression", ``cost_scale``)."""
    from sklearn.linear_model import Ridge

    X, yraw = load_diabetes() if data is None else data
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
    params = {"coef": np.atleast_1d(g.coef_), "intercept": np.atleast_1d(g.intercept_),
              "classes": np.zeros(0, dtype=np.int64), "columns": np.asarray(cols, dtype=np.int64)}
    return _finish("diabetes", x, y, idx, preds, costs, params, cfg["beta"], None, float(cfg["cost_scale"]))


#: task of each dataset: how its costs are computed (classification, regression, multitask = class + box)
TASKS = {"digits": "classification", "diabetes": "regression", "cifar10": "classification",
         "california_housing": "regression", "voc2007": "multitask"}


def _finish(name: str, x, y, idx, preds, costs, g, beta, clip, cost_scale: float) -> dict[str, Any]:
    if not (np.isfinite(costs).all() and costs.min() >= 0.0 and costs.max() <= 1.0):
        raise DataError(f"{name}: costs must lie in [0, 1], got [{costs.min()}, {costs.max()}]")
    te = idx["test"]
    task = TASKS[name]
    if task in ("classification", "multitask"):
        quality = {f"agent_acc_{j}": float((preds[te, j] == y[te]).mean()) for j in range(preds.shape[1])}
    else:
        quality = {f"agent_mse_{j}": float(((preds[te, j] - y[te]) ** 2).mean()) for j in range(preds.shape[1])}
    info = {**quality, "oracle_def_loss": float(costs[te].min(axis=1).mean()),
            **{f"oracle_rate_{j}": float((costs[te].argmin(axis=1) == j).mean()) for j in range(costs.shape[1])}}
    return {"name": name, "task": task, "x": x, "y": y, "idx": idx, "preds": preds,
            "costs": costs.astype(np.float32), "g": g, "beta": [float(b) for b in beta], "clip": clip,
            "cost_scale": float(cost_scale), "info": info}


def prepare(dataset: str, seed: int, settings: Mapping[str, Any], data: tuple | None = None) -> dict[str, Any]:
    """Dispatch to :func:`prepare_digits` / :func:`prepare_diabetes` with ``settings[dataset]``, or to the
    paper-scale preparations of :mod:`.agents` (``settings["device"]`` trains their image main models)."""
    if dataset == "digits":
        return prepare_digits(seed, settings["digits"], data)
    if dataset == "diabetes":
        return prepare_diabetes(seed, settings["diabetes"], data)
    from . import agents as A

    if data is None:
        raise DataError(f"sard: dataset {dataset!r} (paper scale) needs its parsed archive (read_paper_raw)")
    device = str(settings.get("device", "cpu"))
    if dataset == "cifar10":
        return A.prepare_cifar10(seed, settings["cifar10"], data, device)
    if dataset == "california_housing":
        return A.prepare_california_housing(seed, settings["california_housing"], data)
    if dataset == "voc2007":
        return A.prepare_voc2007(seed, settings["voc2007"], data, device)
    raise DataError(f"sard: unknown dataset {dataset!r} (known: {list(TASKS)})")


def main_predict(g: Mapping[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """The main model's prediction from its parameters: a linear score s = x[:, columns] @ coef.T + intercept;
    classification (``classes`` non-empty): classes[argmax s] (first maximum, as scikit-learn); regression: s.
    x (n, d) → (n,)."""
    s = x[:, g["columns"]] @ np.asarray(g["coef"]).T + g["intercept"]
    if len(g["classes"]):
        return np.asarray(g["classes"])[np.argmax(s, axis=1)]
    return s.reshape(len(x), -1)[:, 0] if s.ndim > 1 else s


def main_costs_at(prep: Mapping[str, Any], x_new, rows: np.ndarray) -> np.ndarray:
    """Cost of the main model g re-evaluated at inputs ``x_new`` (n, d) (numpy, or a tensor on any device) for the
    examples ``rows`` (n,) — the ``agents_see_perturbation`` threat model (an image g: :func:`.agents.net_main_costs`). Experts are simulated from (x, y) and keep their clean costs.
    Returns (n,) in the dtype of ``prep["costs"]``."""
    if "kind" in prep["g"]:  # an image main model (ResNet-18 record, paper scale)
        import torch

        from .agents import net_main_costs

        return net_main_costs(prep, x_new if isinstance(x_new, torch.Tensor) else torch.from_numpy(x_new), rows)
    if not isinstance(x_new, np.ndarray):
        x_new = x_new.detach().cpu().numpy()
    fee_max = 1.0 + max(prep["beta"])
    y = prep["y"][rows]
    pred = main_predict(prep["g"], x_new)
    if prep["task"] == "classification":
        c = (pred != y).astype(np.float64) / fee_max
    else:
        c = np.minimum(1.0, (pred - y) ** 2 / prep["cost_scale"]) / fee_max
    return c.astype(prep["costs"].dtype)  # the stored costs' precision, so that x_new = x gives them back exactly


# ------------------------------------------------------------------------------------ processed files

_ARRAYS = ("x", "y", "preds", "costs")
_G = ("coef", "intercept", "classes", "columns")


def prepared_arrays(prep: Mapping[str, Any], seed: int, shared_x: bool = False) -> dict[str, np.ndarray]:
    """One seed's prepared data as plain npz arrays under ``s<seed>/`` (no pickles): x, y, preds, costs, the split
    indices ``idx_<split>``, the main model's parameters ``g_<name>`` (an image g: ``gnet_kind``, ``gnet_spec``
    and its state dict ``gnet/<param>``), ``box`` (multitask), ``info_keys``/``info_values``. ``shared_x``: x is
    left out (the same for every seed; stored once as ``x`` by the caller)."""
    p = f"s{seed}/"
    out = {p + k: np.asarray(prep[k]) for k in _ARRAYS if not (k == "x" and shared_x)}
    out.update({f"{p}idx_{s}": np.asarray(prep["idx"][s]) for s in SPLITS})
    if "kind" in prep["g"]:  # image main model: its record, the state dict as plain arrays
        out[p + "gnet_kind"] = np.array(prep["g"]["kind"])
        out[p + "gnet_spec"] = np.array(json.dumps(prep["g"]["spec"], sort_keys=True))
        out.update({f"{p}gnet/{k}": np.asarray(v) for k, v in prep["g"]["state"].items()})
    else:
        out.update({f"{p}g_{k}": np.asarray(prep["g"][k]) for k in _G})
    if "box" in prep:
        out[p + "box"] = np.asarray(prep["box"])
    out[p + "info_keys"] = np.array(sorted(prep["info"]), dtype=str)
    out[p + "info_values"] = np.array([prep["info"][k] for k in sorted(prep["info"])], dtype=np.float64)
    return out


def dataset_arrays(name: str, task: str, beta: Sequence[float], clip: tuple[float, float] | None,
                   cost_scale: float) -> dict[str, np.ndarray]:
    """The seed-independent entries of a processed file."""
    return {"name": np.array(name), "task": np.array(task), "beta": np.asarray(beta, dtype=np.float64),
            "clip": np.asarray(clip if clip is not None else (), dtype=np.float64),
            "cost_scale": np.array(float(cost_scale))}


def prepared_from_arrays(arrays: Mapping[str, np.ndarray], seed: int, where: str = "processed file"
                         ) -> dict[str, Any]:
    """Inverse of :func:`prepared_arrays` + :func:`dataset_arrays`: the prep dict of one seed (as returned by
    :func:`prepare`). A missing array raises :class:`DataError` naming it and ``where``."""
    p = f"s{seed}/"
    net = p + "gnet_kind" in arrays
    x_key = "x" if (p + "x" not in arrays and "x" in arrays) else p + "x"  # per seed, or stored once (images)
    need = [x_key] + [p + k for k in _ARRAYS[1:]] + [f"{p}idx_{s}" for s in SPLITS] + \
        ([p + "gnet_spec"] if net else [f"{p}g_{k}" for k in _G]) + \
        [p + "info_keys", p + "info_values", "name", "task", "beta", "clip", "cost_scale"]
    missing = [k for k in need if k not in arrays]
    if missing:
        raise DataError(f"{where}: missing array(s) {missing} (seed {seed} not prepared?)")
    clip = arrays["clip"]
    prep = {k: arrays[p + k] for k in _ARRAYS[1:]}
    x = arrays[x_key]
    if x.dtype == np.uint8:  # images stored as bytes: scaled to [0, 1] and flattened to (n, C·H·W)
        x = (x.reshape(len(x), -1).astype(np.float32) / np.float32(255.0))
    prep["x"] = x
    prep.update(name=str(arrays["name"]), task=str(arrays["task"]), beta=[float(b) for b in arrays["beta"]],
                clip=(float(clip[0]), float(clip[1])) if clip.size else None,
                cost_scale=float(arrays["cost_scale"]),
                idx={s: arrays[f"{p}idx_{s}"] for s in SPLITS},
                g=({"kind": str(arrays[p + "gnet_kind"]), "spec": json.loads(str(arrays[p + "gnet_spec"])),
                    "state": {k[len(p + "gnet/"):]: v for k, v in arrays.items() if k.startswith(p + "gnet/")}}
                   if net else {k: arrays[f"{p}g_{k}"] for k in _G}),
                info=dict(zip(arrays[p + "info_keys"].tolist(), arrays[p + "info_values"].tolist())))
    if p + "box" in arrays:
        prep["box"] = arrays[p + "box"]
    c = prep["costs"]
    if c.ndim != 2 or c.shape[0] != len(prep["x"]) or not (np.isfinite(c).all() and c.min() >= 0 and c.max() <= 1):
        raise DataError(f"{where}: s{seed}/costs must be (n, J+1) in [0, 1], got shape {c.shape}")
    return prep
