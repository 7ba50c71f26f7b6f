"""One arm × seed of the fedecado study, end to end in memory: :func:`run`.

Arms. Quadratic consensus problem (claims 1–2): ``quad_fedavg``, ``quad_fednova`` (iterate ``rounds_fixed_point``
rounds with full participation and fixed τ_i; compare with the closed-form fixed points at η and η/2),
``quad_fedecado`` (FedECADO-R with full participation and fixed τ_i for ``rounds_full`` rounds, then from scratch
with ``participation`` of the clients and τ_i redrawn every round for ``rounds_partial`` rounds).
MNIST-5k (claim 3): ``fedavg``, ``fedprox``, ``fednova``, ``fedexp``, ``fedecado``, ``fedecado_lte``,
``fedecado_noflow``.

Randomness (shared by every arm of a seed, so arms are paired): problem = default_rng(seed) (quadratic) or
:func:`~.data.mnist5k_split` (seed) + :func:`~.data.dirichlet_partition` (seed); τ_i ~ U{..} from
default_rng(seed+100); partial-participation draws (quadratic) from default_rng(seed+200); per-client lr_i, e_i from
default_rng(seed+1000); active clients per round from default_rng(seed+2000); train subsample from
default_rng(seed+3000); minibatch order of client i in round r from default_rng([seed, r, i]); θ₀ from
torch.Generator(seed).
"""
from __future__ import annotations

import time
from functools import lru_cache
from collections.abc import Mapping
from typing import Any

import numpy as np

from .data import dirichlet_partition, mnist5k_split, pca_standardise, quadratic_consensus
from .method import fixed_point_fedavg, fixed_point_fednova
from .settings import QUAD_ARMS
from .train import METHODS, federated_train


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


# ---------------------------------------------------------------------------------------------- quadratic


def _quad_problem(q: Mapping[str, Any], seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    prob = quadratic_consensus(K=q["K"], d=q["d"], eig_range=tuple(q["eig_range"]), c_scale=q["c_scale"],
                               n_range=tuple(q["n_range"]), seed=seed)
    lo, hi = q["tau_range"]
    taus = np.random.default_rng(seed + 100).integers(lo, hi + 1, size=q["K"])
    return prob, taus


def _quad_grad_for(A: np.ndarray, c: np.ndarray):
    def grad_for(r: int, i: int):
        return lambda x, k: A[i] @ (x - c[i])
    return grad_for


def run_quadratic(settings: Mapping[str, Any], arm: str, seed: int) -> dict[str, Any]:
    """Quadratic arm × seed → {"curves": {name: list per round}, "metrics": {...}}; see module docstring."""
    q = settings["quad"]
    prob, taus = _quad_problem(q, seed)
    A, c, p, x_star = prob["A"], prob["c"], prob["p"], prob["x_star"]
    K, d = c.shape
    eta = q["eta"]
    grad_for = _quad_grad_for(A, c)
    full_plan = lambda r: (range(K), {i: (int(taus[i]), eta) for i in range(K)})  # noqa: E731
    curves: dict[str, list[float]] = {"rel_err": []}
    metrics: dict[str, float] = {}

    if arm in ("quad_fedavg", "quad_fednova"):
        method = arm.removeprefix("quad_")
        fp = fixed_point_fedavg if method == "fedavg" else fixed_point_fednova
        x_fp, x_fp_half = fp(A, c, p, taus, eta), fp(A, c, p, taus, eta / 2)
        curves["dist_fixed_point"] = []

        def log(r: int, x: np.ndarray, info: dict) -> None:
            curves["rel_err"].append(_rel(x, x_star))
            curves["dist_fixed_point"].append(_rel(x, x_fp))

        x, _ = federated_train(method, np.zeros(d), p, q["rounds_fixed_point"], full_plan, grad_for, on_round=log)
        bias, bias_half = np.linalg.norm(x_fp - x_star), np.linalg.norm(x_fp_half - x_star)
        metrics.update(iter_vs_closed_form=_rel(x, x_fp), bias_rel=float(bias / np.linalg.norm(x_star)),
                       bias_ratio_half_eta=float(bias_half / bias), rel_err=_rel(x, x_star))
        return {"curves": curves, "metrics": metrics, "x": x}

    if arm != "quad_fedecado":
        raise ValueError(f"run_quadratic: unknown arm {arm!r}; expected one of {QUAD_ARMS}")
    fed = dict(settings["fedecado"])
    for key in ("kcl_residual", "n_substeps", "n_rejects", "T_max", "L"):
        curves[key] = []

    def log_full(r: int, x: np.ndarray, info: dict) -> None:
        curves["rel_err"].append(_rel(x, x_star))
        for key in ("kcl_residual", "n_substeps", "n_rejects", "T_max", "L"):
            curves[key].append(float(info[key]))

    x, _ = federated_train("fedecado", np.zeros(d), p, q["rounds_full"], full_plan, grad_for, fedecado=fed,
                           on_round=log_full)
    metrics.update(rel_err_full=_rel(x, x_star), kcl_max_full=max(curves["kcl_residual"]))

    m = max(1, int(round(q["participation"] * K)))
    rng = np.random.default_rng(seed + 200)
    lo, hi = q["tau_range"]

    def partial_plan(r: int):
        S = np.sort(rng.choice(K, size=m, replace=False))
        t = rng.integers(lo, hi + 1, size=K)
        return [int(i) for i in S], {int(i): (int(t[i]), eta) for i in S}

    curves["rel_err_partial"], curves["kcl_residual_partial"] = [], []

    def log_partial(r: int, x: np.ndarray, info: dict) -> None:
        curves["rel_err_partial"].append(_rel(x, x_star))
        curves["kcl_residual_partial"].append(float(info["kcl_residual"]))

    x2, _ = federated_train("fedecado", np.zeros(d), p, q["rounds_partial"], partial_plan, grad_for, fedecado=fed,
                            on_round=log_partial)
    metrics.update(rel_err_partial=_rel(x2, x_star), kcl_max_partial=max(curves["kcl_residual_partial"]))
    metrics["kcl_max"] = max(metrics["kcl_max_full"], metrics["kcl_max_partial"])
    return {"curves": curves, "metrics": metrics, "x": x}


# ----------------------------------------------------------------------------------------------- MNIST-5k


@lru_cache(maxsize=4)
def _features(seed: int, pca_dim: int) -> tuple[np.ndarray, ...]:
    """MNIST-5k split of ``seed`` → PCA-standardised (X_train, y_train, X_test, y_test); cached per seed."""
    split = mnist5k_split(seed)
    X_tr, X_te = pca_standardise(split["X_train"], split["X_test"], k=pca_dim)
    for a in (X_tr, X_te):
        a.flags.writeable = False
    return X_tr, split["y_train"], X_te, split["y_test"]


def image_setup(settings: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Data, partition and client schedule of one seed (identical for every arm): features (PCA, standardised),
    client index arrays, p (K,), lr (K,), epochs (K,)."""
    im = settings["image"]
    if im["dataset"] != "mnist5k":
        raise NotImplementedError(f"image dataset {im['dataset']!r}: only mnist5k runs in this phase; the "
                                  f"CIFAR paper-scale path (GPU) is not wired yet")
    X_tr, y_tr, X_te, y_te = _features(seed, im["pca_dim"])
    if im["n_train"] < len(y_tr):
        keep = np.sort(np.random.default_rng(seed + 3000).permutation(len(y_tr))[:im["n_train"]])
        X_tr, y_tr = X_tr[keep], y_tr[keep]
    parts = dirichlet_partition(y_tr, im["n_clients"], im["alpha"], min_size=im["min_size"], seed=seed)
    sizes = np.array([len(x) for x in parts], dtype=np.float64)
    crng = np.random.default_rng(seed + 1000)
    lr = crng.uniform(*im["lr_range"], size=im["n_clients"])
    epochs = crng.integers(im["epoch_range"][0], im["epoch_range"][1] + 1, size=im["n_clients"])
    return {"X_train": X_tr, "y_train": y_tr, "X_test": X_te, "y_test": y_te, "parts": parts,
            "p": sizes / sizes.sum(), "lr": lr, "epochs": epochs}


def run_image(settings: Mapping[str, Any], arm: str, seed: int) -> dict[str, Any]:
    """MNIST-5k arm × seed → {"curves", "metrics", "theta", "setup_summary"}; curves per round: test_acc,
    train_loss, T_max, n_steps_total (+ kcl_residual, n_substeps, n_rejects, L for FedECADO-R arms)."""
    import torch

    from .model import init_mlp, mlp_loss_grad, mlp_metrics

    if arm not in METHODS:
        raise ValueError(f"run_image: unknown arm {arm!r}; expected one of {METHODS}")
    im = settings["image"]
    st = image_setup(settings, seed)
    sizes = (im["pca_dim"], im["hidden"], 10)
    Xtr, ytr = torch.tensor(st["X_train"]), torch.tensor(st["y_train"])
    Xte, yte = torch.tensor(st["X_test"]), torch.tensor(st["y_test"])
    parts = [torch.from_numpy(ix) for ix in st["parts"]]
    K, B = im["n_clients"], im["batch_size"]
    m = max(1, int(round(im["participation"] * K)))
    srng = np.random.default_rng(seed + 2000)
    batches: dict[int, list[torch.Tensor]] = {}

    def plan(r: int):
        S = [int(i) for i in np.sort(srng.choice(K, size=m, replace=False))]
        work = {}
        for i in S:
            brng = np.random.default_rng([seed, r, i])
            n_i = len(parts[i])
            bl = []
            for _ in range(int(st["epochs"][i])):
                perm = torch.from_numpy(brng.permutation(n_i))
                bl.extend(parts[i][perm[j:j + B]] for j in range(0, n_i, B))
            batches[i] = bl
            work[i] = (len(bl), float(st["lr"][i]))
        return S, work

    def grad_for(r: int, i: int):
        bl = batches[i]

        def g(theta: torch.Tensor, k: int) -> torch.Tensor:
            idx = bl[k]
            return mlp_loss_grad(theta, Xtr[idx], ytr[idx], sizes)[1]
        return g

    curves: dict[str, list[float]] = {k: [] for k in ("test_acc", "train_loss", "T_max", "n_steps_total")}

    def log(r: int, theta: torch.Tensor, info: dict) -> None:
        loss, _ = mlp_metrics(theta, Xtr, ytr, sizes)
        _, acc = mlp_metrics(theta, Xte, yte, sizes)
        curves["test_acc"].append(acc)
        curves["train_loss"].append(loss)
        for key, val in info.items():
            curves.setdefault(key, []).append(float(val))

    theta0 = init_mlp(sizes, seed)
    theta, _ = federated_train(arm, theta0, st["p"], im["rounds"], plan, grad_for,
                               fedecado=settings["fedecado"], client_lte=settings["client_lte"],
                               prox_mu=im["prox_mu"], fedexp_eps=im["fedexp_eps"], on_round=log)
    final_loss, final_acc = mlp_metrics(theta, Xte, yte, sizes)
    metrics = {"test_acc": final_acc, "test_loss": final_loss, "train_loss": curves["train_loss"][-1],
               "finite": float(bool(torch.isfinite(theta).all()))}
    summary = {"client_sizes": [len(x) for x in st["parts"]], "lr": st["lr"].tolist(),
               "epochs": st["epochs"].tolist()}
    return {"curves": curves, "metrics": metrics, "theta": theta, "setup_summary": summary}


def run(settings: Mapping[str, Any], arm: str, seed: int) -> dict[str, Any]:
    """Run one arm × seed end to end in memory → {"arm", "seed", "curves", "metrics", "seconds", ...}."""
    t0 = time.perf_counter()
    out = run_quadratic(settings, arm, seed) if arm in QUAD_ARMS else run_image(settings, arm, seed)
    out.update(arm=arm, seed=seed, seconds=time.perf_counter() - t0, fidelity="reconstructed")
    return out
