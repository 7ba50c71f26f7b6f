"""One arm × seed of the fedecado study, end to end in memory: :func:`run`.

Arms. Quadratic consensus problem (claims 1–2): ``quad_fedavg``, ``quad_fednova`` (iterate ``rounds_fixed_point``
rounds with full participation and fixed τ_i; compare with the closed-form fixed points at η and η/2),
``quad_fedecado`` (FedECADO-R with full participation and fixed τ_i for ``rounds_full`` rounds, then from scratch
with ``participation`` of the clients and τ_i redrawn every round for ``rounds_partial`` rounds).
Image data (claims 3-5; MNIST-5k, or CIFAR at paper scale): ``fedavg``, ``fedprox``, ``fednova``, ``fedexp``,
``feddecorr``, ``fedrs``, ``fednova_matched``, ``fedecado``, ``fedecado_lte``, ``fedecado_noflow``.

Randomness (shared by every arm of a seed, so arms are paired): problem = default_rng(seed) (quadratic) or
:func:`icml25.core.datasets.mnist5k_split` (seed) + :func:`icml25.core.datasets.dirichlet_partition` (seed); τ_i ~ U{..} from
default_rng(seed+100); partial-participation draws (quadratic) from default_rng(seed+200); per-client lr_i, e_i from
default_rng(seed+1000); active clients per round from default_rng(seed+2000); train subsample from
default_rng(seed+3000); minibatch order of client i in round r from default_rng([seed, r, i]); θ₀ from
torch.Generator(seed).
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from icml25.core.datasets import dirichlet_partition, load_mnist5k, mnist5k_split

from .config import QUAD_ARMS
from .data import pca_standardise, quadratic_consensus
from .method import fixed_point_fedavg, fixed_point_fednova
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


def run_quadratic(q: Mapping[str, Any], fedecado: Mapping[str, Any], arm: str, seed: int) -> dict[str, Any]:
    """Quadratic arm × seed → {"curves": {name: list per round}, "metrics": {...}, "x": (d,)}; q: the ``quad``
    section, fedecado: the FedECADO-R server keys; see the module docstring."""
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
    fed = dict(fedecado)
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


# ------------------------------------------------------------------------------------------ image data


def client_schedule(image: Mapping[str, Any], seed: int, y_train: np.ndarray) -> dict[str, Any]:
    """Partition and client work of one seed, identical for every arm: Dirichlet label-skew ``parts`` (list of
    n_clients sorted index arrays into y_train), data weights p (K,), learning rates lr (K,) ~ U[lr_range] and local
    epochs (K,) ~ U{epoch_range}, the last two from default_rng(seed+1000)."""
    parts = dirichlet_partition(y_train, image["n_clients"], image["alpha"], min_size=image["min_size"], seed=seed)
    sizes = np.array([len(x) for x in parts], dtype=np.float64)
    crng = np.random.default_rng(seed + 1000)
    lr = crng.uniform(*image["lr_range"], size=image["n_clients"])
    epochs = crng.integers(image["epoch_range"][0], image["epoch_range"][1] + 1, size=image["n_clients"])
    return {"parts": parts, "p": sizes / sizes.sum(), "lr": lr, "epochs": epochs}


def train_subsample(n_available: int, n_train: int | None, seed: int) -> np.ndarray | None:
    """Indices of the seeded training subsample (default_rng(seed+3000), sorted), or None to keep every image."""
    if n_train is None or n_train >= n_available:
        return None
    return np.sort(np.random.default_rng(seed + 3000).permutation(n_available)[:n_train])


def mnist_setup(image: Mapping[str, Any], seed: int, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """MNIST-5k data of one seed: :func:`~icml25.core.datasets.mnist5k_split` (seed) of the (5000, 784) pixels X and
    labels y, PCA-``pca_dim`` features z-scored with train statistics (float32), the optional ``n_train``
    subsample, then :func:`client_schedule`. Returns X_train (n, pca_dim), y_train (n,), X_test (1000, pca_dim),
    y_test, parts, p, lr, epochs."""
    split = mnist5k_split(seed, X, y)
    X_tr, X_te = pca_standardise(split["X_train"], split["X_test"], k=image["pca_dim"])
    y_tr = split["y_train"]
    keep = train_subsample(len(y_tr), image["n_train"], seed)
    if keep is not None:
        X_tr, y_tr = X_tr[keep], y_tr[keep]
    return {"X_train": X_tr, "y_train": y_tr, "X_test": X_te, "y_test": split["y_test"],
            **client_schedule(image, seed, y_tr)}


def _n_classes(learner: Any) -> int:
    return int(getattr(learner, "n_classes", None) or learner.sizes[2])


def client_objectives(arm: str, image: Mapping[str, Any], y_train: np.ndarray, parts: Sequence[np.ndarray],
                      n_classes: int) -> list[dict[str, Any]]:
    """Keyword arguments of ``learner.grad`` per client: FedDecorr's β (``image.feddecorr_beta``) for every
    client of ``feddecorr``; for ``fedrs`` the logit scale (n_classes,) float32 with 1 for the classes the client
    holds a sample of and α = ``image.fedrs_alpha`` for the others (restricted softmax); nothing for other arms."""
    import torch

    if arm == "feddecorr":
        return [{"decorr": float(image["feddecorr_beta"])} for _ in parts]
    if arm == "fedrs":
        out = []
        for ix in parts:
            present = np.bincount(np.asarray(y_train)[np.asarray(ix, dtype=np.int64)], minlength=n_classes) > 0
            out.append({"logit_scale": torch.tensor(np.where(present, 1.0, float(image["fedrs_alpha"])),
                                                    dtype=torch.float32)})
        return out
    return [{} for _ in parts]


def run_image(image: Mapping[str, Any], fed: Mapping[str, Any], client_lte: Mapping[str, Any], arm: str, seed: int,
              setup: Mapping[str, Any], learner: Any = None) -> dict[str, Any]:
    """Image arm × seed on the data of ``setup`` (:func:`mnist_setup`, or the CIFAR setup of :mod:`.cifar` with a
    ``learner``) → {"curves", "metrics", "theta", "setup_summary"}; curves per round: test_acc, train_loss, T_max,
    n_steps_total (+ kcl_residual, n_substeps, n_rejects, L for FedECADO-R arms; eta_g for FedExp).

    ``learner`` (default: the MNIST MLP, :class:`~.model.MlpLearner`) gives init(seed), grad(θ, idx, k) on the
    training images idx, round_metrics(θ) = (train loss, test accuracy) and final_metrics(θ) = (test loss, test
    accuracy)."""
    import torch

    from .model import MlpLearner

    if arm not in METHODS:
        raise ValueError(f"run_image: unknown arm {arm!r}; expected one of {METHODS}")
    if learner is None:
        learner = MlpLearner(setup["X_train"], setup["y_train"], setup["X_test"], setup["y_test"], image["hidden"])
    parts = [torch.from_numpy(np.asarray(ix, dtype=np.int64)) for ix in setup["parts"]]
    p, lr, epochs = np.asarray(setup["p"]), np.asarray(setup["lr"]), np.asarray(setup["epochs"])
    K, B = image["n_clients"], image["batch_size"]
    if len(parts) != K:
        raise ValueError(f"run_image: the setup has {len(parts)} clients, image.n_clients is {K}")
    m = max(1, int(round(image["participation"] * K)))
    srng = np.random.default_rng(seed + 2000)
    batches: dict[int, list[torch.Tensor]] = {}

    def plan(r: int):
        S = [int(i) for i in np.sort(srng.choice(K, size=m, replace=False))]
        work = {}
        for i in S:
            brng = np.random.default_rng([seed, r, i])
            n_i = len(parts[i])
            bl = []
            for _ in range(int(epochs[i])):
                perm = torch.from_numpy(brng.permutation(n_i))
                bl.extend(parts[i][perm[j:j + B]] for j in range(0, n_i, B))
            batches[i] = bl
            work[i] = (len(bl), float(lr[i]))
        return S, work

    y_train = setup["y_train"] if "y_train" in setup else learner.ytr.cpu().numpy()
    client_kw = client_objectives(arm, image, y_train, setup["parts"], _n_classes(learner))

    def grad_for(r: int, i: int):
        bl, kw = batches[i], client_kw[i]
        return lambda theta, k: learner.grad(theta, bl[k], k, **kw)

    curves: dict[str, list[float]] = {k: [] for k in ("test_acc", "train_loss", "T_max", "n_steps_total")}

    def log(r: int, theta: Any, info: dict) -> None:
        loss, acc = learner.round_metrics(theta)
        curves["test_acc"].append(acc)
        curves["train_loss"].append(loss)
        for key, val in info.items():
            curves.setdefault(key, []).append(float(val))

    theta, _ = federated_train(arm, learner.init(seed), p, image["rounds"], plan, grad_for, fedecado=fed,
                               client_lte=client_lte, prox_mu=image["prox_mu"], fedexp_eps=image["fedexp_eps"],
                               server_lr=image.get("server_lr"), on_round=log)
    final_loss, final_acc = learner.final_metrics(theta)
    metrics = {"test_acc": final_acc, "test_loss": final_loss, "train_loss": curves["train_loss"][-1],
               "finite": float(bool(torch.isfinite(theta).all()))}
    summary = {"client_sizes": [len(x) for x in setup["parts"]], "lr": np.asarray(lr).tolist(),
               "epochs": np.asarray(epochs).tolist()}
    return {"curves": curves, "metrics": metrics, "theta": theta, "setup_summary": summary}


def run(settings: Mapping[str, Any], arm: str, seed: int, setup: Mapping[str, Any] | None = None,
        learner: Any = None) -> dict[str, Any]:
    """Run one arm × seed end to end in memory → {"arm", "seed", "curves", "metrics", "seconds", ...}.

    settings: plain dicts ``quad``, ``image``, ``fedecado``, ``client_lte`` (the sections of the study config).
    Image arms need the seed's ``setup`` (:func:`mnist_setup`; default: computed from MNIST-5k here)."""
    t0 = time.perf_counter()
    if arm in QUAD_ARMS:
        out = run_quadratic(settings["quad"], settings["fedecado"], arm, seed)
    else:
        if setup is None:
            if settings["image"]["dataset"] != "mnist5k":
                raise ValueError(f"run: arm {arm!r} on {settings['image']['dataset']} needs its setup (preprocess)")
            setup = mnist_setup(settings["image"], seed, *load_mnist5k())
        out = run_image(settings["image"], settings["fedecado"], settings["client_lte"], arm, seed, setup, learner)
    out.update(arm=arm, seed=seed, seconds=time.perf_counter() - t0, fidelity="reconstructed")
    return out
