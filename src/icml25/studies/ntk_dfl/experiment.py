"""One arm × seed of the ntk_dfl study end to end, in memory, and the two exact mechanism checks.

:func:`run` builds the seed's data (MNIST-5k split, PCA features, Dirichlet shards), the identical initial weights
of all clients, and the round graphs G_r (identical across arms for a seed), then runs ``rounds`` rounds of the
arm's method and evaluates after every round on the held-out test split:

* ``agg_acc``: accuracy of the aggregated model (uniform mean of all client weights),
* ``mean_client_acc`` / ``std_client_acc``: mean / std over clients of each client model's test accuracy,
* ``mean_loss``: mean over clients of the client model's cross-entropy on its own shard,
* ``lr`` (η_r for NTK-DFL, the local lr for baselines) and ``bytes_sent`` (fp32 bytes that round).
"""
from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from . import data as D
from .method import cross_entropy, mix, ntk_dfl_round, empirical_ntk, evolve_function, evolve_weights
from .model import flat_weights, forward, mlp
from .config import arm_config
from .train import baseline_round


def arm_topology(config: Mapping[str, Any], arm: str) -> str:
    """The peer-graph topology an arm runs on (its override, else the config's)."""
    return arm_config(dict(config), arm)[1]["topology"]


def arm_alpha(config: Mapping[str, Any], arm: str) -> float:
    """The Dirichlet concentration of an arm's partition (its override, else the config's)."""
    return float(arm_config(dict(config), arm)[1]["alpha"])


def client_shards(config: Mapping[str, Any], seed: int, alpha: float | None = None, X: np.ndarray | None = None,
                  y: np.ndarray | None = None, split: Mapping[str, np.ndarray] | None = None,
                  source: str | None = None) -> dict[str, Any]:
    """Features and client partition of one seed: X_train, y_train, X_test, y_test (numpy) and ``parts`` (list of K
    index arrays into the train set). ``alpha`` defaults to the config's; (X, y) is MNIST-5k (default: the shared
    loader) unless ``split`` gives the published train/test arrays (paper scale). ``source`` (default
    ``data.source``) ``femnist``: ``split`` is :func:`~.data.read_femnist`'s output and the clients are whole
    writers (:func:`~.data.femnist_split`; ``alpha`` and ``partition`` do not apply)."""
    d = config["data"]
    if (source or d["source"]) == "femnist":
        fsplit, parts = D.femnist_split(split, int(config["n_clients"]), seed, int(config["n_classes"]),
                                        int(config["min_size"]))
        feats = D.features(seed, None, d["pca_dim"], split=fsplit)
        return {**feats, "parts": parts}
    feats = D.features(seed, d["train_per_class"], d["pca_dim"], X, y, dict(split) if split is not None else None)
    a = float(config["alpha"] if alpha is None else alpha)
    if config["partition"] == "per_client":
        parts = D.per_client_partition(feats["y_train"], int(config["n_clients"]), int(config["samples_per_client"]),
                                       a, seed)
    else:
        parts = D.dirichlet_partition(feats["y_train"], int(config["n_clients"]), a, int(config["min_size"]), seed)
    return {**feats, "parts": parts}


def evaluate_round(model: torch.nn.Module, weights: torch.Tensor, shards: list, X_test: torch.Tensor,
                   y_test: torch.Tensor) -> dict[str, float]:
    """Test accuracy of the aggregated model and of each client, and the mean local training loss."""
    with torch.no_grad():
        agg = weights.mean(0)
        agg_acc = float((forward(model, agg, X_test).argmax(1) == y_test).double().mean())
        accs = np.array([float((forward(model, w, X_test).argmax(1) == y_test).double().mean()) for w in weights])
        losses = [float(cross_entropy(forward(model, w, X), Y)) for w, (X, Y) in zip(weights, shards)]
    return {"agg_acc": agg_acc, "mean_client_acc": float(accs.mean()), "std_client_acc": float(accs.std()),
            "mean_loss": float(np.mean(losses)), "client_accs": accs}


def run(config: Mapping[str, Any], arm: str, seed: int, shards: Mapping[str, Any] | None = None,
        graphs: Sequence[Sequence[Sequence[int]]] | None = None, device: str = "cpu") -> dict[str, Any]:
    """Run ``arm`` with ``seed``: returns ``curves`` (dict of per-round lists, rounds 1..R), ``t_star`` (R, K) for
    NTK-DFL arms (else None), ``final`` (the last round's metrics plus ``client_accs``), ``weights`` (K, P) the
    final client weights (CPU), ``n_params``, ``client_sizes`` and ``seconds``.

    config: the plain study config; ``shards`` the seed's data for the arm's alpha (:func:`client_shards`, the
    preprocess output; default: computed here); ``graphs`` the edge lists of rounds 0..R-1 for the arm's topology
    (the prepare output; default: :func:`~.data.round_graph`)."""
    t0 = time.perf_counter()
    method, s = arm_config(dict(config), arm)
    torch.set_num_threads(int(s.get("threads", 1)))
    dev = torch.device(device)
    torch.manual_seed(seed)
    sh = client_shards(s, seed) if shards is None else shards
    C = int(s["n_classes"])
    Xtr, ytr = torch.from_numpy(np.asarray(sh["X_train"])).to(dev), np.asarray(sh["y_train"])
    Ytr = torch.from_numpy(D.one_hot(ytr, C)).to(dev)
    shards_k = [(Xtr[torch.from_numpy(np.asarray(p)).to(dev)], Ytr[torch.from_numpy(np.asarray(p)).to(dev)])
                for p in sh["parts"]]
    X_test = torch.from_numpy(np.asarray(sh["X_test"])).to(dev)
    y_test = torch.from_numpy(np.asarray(sh["y_test"])).to(dev)
    K = len(shards_k)
    if K != int(s["n_clients"]):
        raise ValueError(f"run: the data have {K} client shards, n_clients is {s['n_clients']}")
    R = int(s["rounds"])
    if graphs is not None and len(graphs) < R:
        raise ValueError(f"run: {len(graphs)} round graphs for {R} rounds")

    def model_fn() -> torch.nn.Module:
        return mlp(Xtr.shape[1], s["hidden"], C).to(dev)

    model = model_fn()
    torch.manual_seed(seed)
    w0 = flat_weights(mlp(Xtr.shape[1], s["hidden"], C, init=s["init"])).to(dev)  # identical for every client/arm
    weights = w0.unsqueeze(0).repeat(K, 1)
    keys = ("round", "agg_acc", "mean_client_acc", "std_client_acc", "mean_loss", "lr", "bytes_sent")
    curves: dict[str, list] = {k: [] for k in keys}
    t_stars = []
    final: dict[str, Any] = {}
    for r in range(R):
        g = (D.graph_from_edges(graphs[r], K) if graphs is not None
             else D.round_graph(s["topology"], K, seed, r, int(s["degree"]), float(s["er_p"])))
        if method == "ntk_dfl":
            nt = s["ntk"]
            lr = float(nt["lr0"]) * math.exp(-float(nt["lr_decay"]) * r)
            weights, info = ntk_dfl_round(weights, shards_k, g, model_fn, lr, nt["t_cand"], nt["t_select"],
                                          nt["ode"], int(nt["chunk"]), float(nt["rtol"]), float(nt["atol"]))
            t_stars.append(info["t_star"].tolist())
        else:
            opt = s["baselines"][method]
            lr = float(opt["lr"])
            weights, info = baseline_round(weights, shards_k, g, model, opt, seed, r)
        if not torch.isfinite(weights).all():
            raise FloatingPointError(f"{arm} seed {seed}: non-finite weights after round {r + 1}")
        final = evaluate_round(model, weights, shards_k, X_test, y_test)
        row = {"round": r + 1, "lr": lr, "bytes_sent": int(info["bytes"]), **final}
        for k in keys:
            curves[k].append(row[k])
    return {"arm": arm, "seed": seed, "curves": curves, "t_star": t_stars or None,
            "final": {k: final[k] for k in ("agg_acc", "mean_client_acc", "std_client_acc", "mean_loss")}
            | {"client_accs": final["client_accs"].tolist()}, "weights": weights.detach().cpu(),
            "n_params": int(w0.numel()), "client_sizes": [len(p) for p in sh["parts"]],
            "seconds": time.perf_counter() - t0}


# ------------------------------------------------------------------------------------------------ checks


def linear_identity_gaps(ts: list[int], n: int = 60, dim: int = 8, n_classes: int = 10, lr: float = 0.5,
                         seed: int = 0) -> dict[int, float]:
    """Claim 4: for a bias-free multinomial linear model f(x) = Wx in float64 on a random problem (n samples,
    ``dim`` inputs, random labels), max |W_ntk(t) − W_gd(t)| where W_ntk(t) is the NTK weight evolution with Euler
    function dynamics (step lr) and W_gd(t) is t full-batch gradient-descent steps (lr) on mean cross-entropy."""
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(n, dim, generator=gen, dtype=torch.float64)
    Y = torch.nn.functional.one_hot(torch.randint(0, n_classes, (n,), generator=gen), n_classes).double()
    lin = torch.nn.Linear(dim, n_classes, bias=False, dtype=torch.float64)
    with torch.no_grad():
        lin.weight.copy_(0.3 * torch.randn(n_classes, dim, generator=gen, dtype=torch.float64))
    w0 = flat_weights(lin)
    J, H = empirical_ntk(lin, X)
    with torch.no_grad():
        traj = evolve_function(H, forward(lin, w0, X), Y, lr, max(ts), "euler")
    gaps, w, done = {}, w0.clone(), 0
    for t in sorted(ts):
        while done < t:
            wg = w.requires_grad_(True)
            (g,) = torch.autograd.grad(cross_entropy(forward(lin, wg, X), Y), wg)
            w, done = (wg - lr * g).detach(), done + 1
        gaps[int(t)] = float((evolve_weights(w0, J, traj, Y, lr, t) - w).abs().max())
    return gaps


def mixing_mean_gap(n_clients: int, degree: int, n_params: int, seed: int) -> float:
    """Claim 5: max |mean_k w̄_k − mean_k w_k| after one averaging step on the seed's round-0 d-regular graph,
    float32 weights drawn N(0, 1)."""
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(n_clients, n_params, generator=gen, dtype=torch.float32)
    g = D.round_graph("regular", n_clients, seed, 0, degree)
    return float((mix(w, g).mean(0) - w.mean(0)).abs().max())


def run_checks(config: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """Both exact checks for one seed: ``identity_gaps`` {t: max|ΔW|} and ``mixing_gap``."""
    c = config["checks"]
    P = mlp(int(config["data"]["pca_dim"] or 784), config["hidden"], int(config["n_classes"])).parameters()
    return {"identity_gaps": linear_identity_gaps(list(c["identity_t"]), int(c["identity_n"]), int(c["identity_dim"]),
                                                  int(config["n_classes"]), float(c["identity_lr"]), seed),
            "mixing_gap": mixing_mean_gap(int(config["n_clients"]), int(config["degree"]),
                                          sum(p.numel() for p in P), seed)}
