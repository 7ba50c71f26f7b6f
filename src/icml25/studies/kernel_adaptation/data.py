"""Tasks of the kernel_adaptation study: two offline generators and the bundled scikit-learn digits.

Both generators are reconstructions [R] of the paper's "linearly separable Ising task" (Rubin et al., ICML 2025,
App. C.3) and of a sign-teacher task; they draw from ``numpy.random.Generator(PCG64(seed))`` in a fixed order:

* ``ising`` (:func:`ising_chain`): a 1-D Ising chain of length D (odd) with free ends, x₁ = ±1 uniformly and
  x_{k+1} = x_k with probability (1 + tanh J)/2, else −x_k, so that E[x_k x_{k+1}] = tanh J. Label
  y = sign(Σ_k x_k) (never 0 for odd D); the teacher direction is 1/√D · (1, …, 1).
* ``teacher`` (:func:`sign_teacher`): w* ~ N(0, I_D) drawn first, then x ~ N(0, I_D), y = sign(w*ᵀx).

One draw of P + P* rows is split into the first P (train) and the last P* (test) rows.

``digits03`` (:func:`digits03`): classes 0 (y = +1) and 3 (y = −1) of scikit-learn's bundled 8×8 digits file,
pixels standardised with the train split's mean and std (constant pixels left at 0), then scaled by √(D/‖x‖²)
on average so that ‖x‖² ≈ D like the generators; the file is checked against the sha256 in ``data_files.csv``.
"""
from __future__ import annotations

import csv
import gzip
import hashlib
import importlib.resources
from pathlib import Path

import numpy as np

TASKS = ("ising", "teacher", "digits03", "mnist03")
GENERATED = ("ising", "teacher")


def _rng(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(int(seed)))


def ising_chain(n: int, D: int, J: float = 0.5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` samples of the free-ended Ising chain of length ``D`` and their majority labels.

    Returns X (n, D) with entries ±1 (float64) and y = sign(Σ_k x_k) (n,) in {−1, +1}.
    Raises ValueError for even D (ties) or D < 1.
    """
    if D < 1 or D % 2 == 0:
        raise ValueError(f"ising_chain: D must be odd and positive (majority label), got D={D}")
    rng = _rng(seed)
    x1 = rng.choice(np.array([-1.0, 1.0]), size=n)
    same = rng.random((n, D - 1)) < (1.0 + np.tanh(J)) / 2.0
    steps = np.where(same, 1.0, -1.0)
    X = x1[:, None] * np.concatenate([np.ones((n, 1)), np.cumprod(steps, axis=1)], axis=1)
    y = np.sign(X.sum(axis=1))
    return X, y


def sign_teacher(n: int, D: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaussian inputs labelled by a random sign teacher: returns X (n, D), y (n,) ∈ {±1}, w* (D,)."""
    rng = _rng(seed)
    w_star = rng.standard_normal(D)
    X = rng.standard_normal((n, D))
    y = np.sign(X @ w_star)
    y[y == 0] = 1.0
    return X, y, w_star


def make_task(task: str, D: int, P: int, P_test: int, seed: int, J: float = 0.5) -> dict[str, np.ndarray]:
    """One task instance: ``{X (P,D), y (P,), X_test (P*,D), y_test (P*,), teacher (D,)}`` (float64).

    ``digits03`` ignores ``D`` (it is 64) and draws the train/test split from the 361 images of classes 0 and 3 with ``seed``.
    """
    if task == "ising":
        X, y = ising_chain(P + P_test, D, J=J, seed=seed)
        teacher = np.ones(D) / np.sqrt(D)
    elif task == "teacher":
        X, y, teacher = sign_teacher(P + P_test, D, seed=seed)
    elif task == "digits03":
        return digits03(P, P_test, seed)
    else:
        raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")
    return {"X": X[:P], "y": y[:P], "X_test": X[P:], "y_test": y[P:], "teacher": teacher}


# --------------------------------------------------------------------------------------------- digits03


def data_files() -> list[dict[str, str]]:
    """Rows of the study's ``data_files.csv`` (name, source, sha256, size, licence, note)."""
    text = importlib.resources.files(__package__).joinpath("data_files.csv").read_text()
    return list(csv.DictReader(text.splitlines()))


def digits_file() -> Path:
    """Path of scikit-learn's bundled ``digits.csv.gz``."""
    import sklearn

    return Path(sklearn.__file__).parent / "datasets" / "data" / "digits.csv.gz"


def verify_digits_file(path: Path | None = None) -> Path:
    """Check the digits file against the sha256 in data_files.csv for the installed scikit-learn version.

    Raises FileNotFoundError if absent and ValueError naming the file, the version and both hashes if it differs
    or if data_files.csv has no row for this version.
    """
    import sklearn

    path = Path(path) if path is not None else digits_file()
    if not path.is_file():
        raise FileNotFoundError(f"digits03: bundled file {path} not found (is scikit-learn installed?)")
    rows = [r for r in data_files() if r["name"] == "digits03" and r["version"] == sklearn.__version__]
    if not rows:
        raise ValueError(f"digits03: data_files.csv has no sha256 for scikit-learn {sklearn.__version__}; "
                         f"pin it after checking {path}")
    got = hashlib.sha256(path.read_bytes()).hexdigest()
    if got != rows[0]["sha256"]:
        raise ValueError(f"digits03: {path} has sha256 {got}, data_files.csv pins {rows[0]['sha256']} "
                         f"for scikit-learn {sklearn.__version__}")
    return path


def digits03(P: int, P_test: int, seed: int) -> dict[str, np.ndarray]:
    """Digits 0 (y=+1) vs 3 (y=−1) from the verified bundled file; random split of P + P* rows with ``seed``."""
    path = verify_digits_file()
    with gzip.open(path, "rt") as fh:
        table = np.loadtxt(fh, delimiter=",")
    if table.ndim != 2 or table.shape[1] != 65:
        raise ValueError(f"digits03: {path} should have 65 columns (64 pixels + label), got {table.shape}")
    keep = np.isin(table[:, -1], (0, 3))
    X_all, labels = table[keep, :-1], table[keep, -1]
    if P + P_test > len(X_all):
        raise ValueError(f"digits03: P + P_test = {P + P_test} exceeds the {len(X_all)} images of classes 0 and 3")
    return split_standardise(X_all, labels, P, P_test, seed)


def split_standardise(X_all: np.ndarray, labels: np.ndarray, P: int, P_test: int, seed: int) -> dict[str, np.ndarray]:
    """Random split of P + P* rows of classes 0 (y = +1) and 3 (y = −1) with ``seed``; pixels standardised with
    the train split (constant pixels 0) and scaled so that the mean train ‖x‖² is D; teacher = Xᵀy direction."""
    idx = _rng(seed).permutation(len(X_all))[: P + P_test]
    X, y = X_all[idx], np.where(labels[idx] == 0, 1.0, -1.0)
    mu, sd = X[:P].mean(axis=0), X[:P].std(axis=0)
    Z = np.where(sd > 0, (X - mu) / np.where(sd > 0, sd, 1.0), 0.0)
    D = Z.shape[1]
    Z *= np.sqrt(D / np.mean(np.sum(Z[:P] ** 2, axis=1)))
    teacher = Z[:P].T @ y[:P]
    return {"X": Z[:P], "y": y[:P], "X_test": Z[P:], "y_test": y[P:], "teacher": teacher / np.linalg.norm(teacher)}


# --------------------------------------------------------------------------------------------- mnist03


#: Instances of OpenML's mnist_784 (data id 554): 60,000 train + 10,000 test images. The first-use check of its
#: UNPINNED manifest row counts them, so a transfer cut at a row boundary is refused rather than pinned.
MNIST784_ROWS = 70000


def mnist_arff_check(path: Path) -> None:
    """Download-time check of the mnist_784 ARFF (:func:`icml25.core.download.fetch`'s ``check``): every ``@data``
    row parses to 785 numbers and there are :data:`MNIST784_ROWS` of them (raises ``ValueError`` naming the count)."""
    _, labels = read_mnist_arff(path)
    if len(labels) != MNIST784_ROWS:
        raise ValueError(f"{len(labels)} @data rows, expected {MNIST784_ROWS} (cut short?)")


def read_mnist_arff(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Pixels (n, 784) float64 and labels (n,) of OpenML's ``mnist_784`` ARFF file (data id 554): the ``@data``
    rows are comma-separated numbers, the class last (quotes tolerated). Errors name the file and the line."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    rows: list[list[float]] = []
    with opener(path, "rt") as fh:
        in_data = False
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line or line.startswith("%"):
                continue
            if not in_data:
                in_data = line.lower() == "@data"
                continue
            try:
                rows.append([float(v.strip().strip("'\"")) for v in line.split(",")])
            except ValueError as err:
                raise ValueError(f"mnist03: {path}:{lineno}: not a row of numbers ({err})") from None
            if len(rows[-1]) != 785:
                raise ValueError(f"mnist03: {path}:{lineno}: {len(rows[-1])} values, expected 785 (784 pixels + class)")
    if not rows:
        raise ValueError(f"mnist03: {path}: no @data rows")
    table = np.asarray(rows)
    return table[:, :-1], table[:, -1]


def mnist03(path: str | Path, P: int, P_test: int, seed: int) -> dict[str, np.ndarray]:
    """MNIST 0 (y = +1) vs 3 (y = −1) from the downloaded OpenML ARFF file, split and standardised like
    :func:`digits03` (D = 784)."""
    X, labels = read_mnist_arff(path)
    keep = np.isin(labels, (0, 3))
    if P + P_test > int(keep.sum()):
        raise ValueError(f"mnist03: P + P_test = {P + P_test} exceeds the {int(keep.sum())} images of classes 0 and 3")
    return split_standardise(X[keep], labels[keep], P, P_test, seed)
