"""Scale settings of the fedecado study as plain nested dicts (phase 2 turns them into the yaml + pydantic Config).

Every [R] reconstruction of the study is a key here: ``fedecado.kappa``, ``fedecado.h_bar``,
``fedecado.sensitivity``, ``fedecado.sync``, ``fedecado.lte_tol``, ``fedecado.h_min_frac``, ``client_lte.*``,
``image.lr_range``, ``image.epoch_range``, ``image.alpha``, ``image.participation``, ``fedexp_eps``.
Claim thresholds are not settings: they are the spec's constants in :mod:`.evaluate`.
"""
from __future__ import annotations

import copy

_FEDECADO = {
    "kappa": 2.0,            # [R] branch inductance L = kappa * T_max^2 (explicit coupling needs h/sqrt(L_i p_i) <~ 1)
    "h_bar": 1.0,            # [R] scalar Hessian surrogate in the sensitivity G_i = w_i (1/h + h_bar)
    "sensitivity": "data",   # [V]/[R] w_i = p_i ("data", paper: relative data size) or p_i T_i/T_max ("data_x_time")
    "lte_tol": 1e-2,         # [R] central backward-Euler LTE tolerance (reject above, double below lte_tol/4)
    "sync": "linear",        # [R] trajectory beyond T_i: linear extrapolation ("linear") or held at x_i^end ("hold")
    "h_min_frac": 1 / 256,   # [R] smallest central sub-step, as a fraction of T_max
}
_CLIENT_LTE = {              # client step control of the fedecado_lte arm [R; ECCO-DNN rule]
    "tol": 1e-3,             # accept a step if (dt/2)||F(x1) - F(x0)||_inf <= tol
    "dt_min": 1e-6,          # floor of the halved step
    "dt_max_factor": 1.0,    # cap of the doubled step, times the client's learning rate
}

SCALES: dict[str, dict] = {
    "smoke": {
        "quad": {                      # claims 1-2: quadratic consensus problem (numpy float64)
            "seeds": [0],              # evaluation seeds
            "K": 4,                    # clients
            "d": 5,                    # dimension
            "eig_range": [1.0, 10.0],  # eigenvalues of A_i ~ U[lo, hi]
            "c_scale": 3.0,            # c_i ~ c_scale * N(0, I)
            "n_range": [50, 500],      # n_i log-uniform in [lo, hi]
            "eta": 0.01,               # local GD learning rate
            "tau_range": [1, 10],      # local steps tau_i ~ U{lo..hi} (default_rng(seed+100))
            "rounds_fixed_point": 60,  # FedAvg/FedNova rounds (claim 1)
            "rounds_full": 60,         # FedECADO-R rounds, full participation, fixed tau_i (claim 2)
            "rounds_partial": 60,      # FedECADO-R rounds, partial participation, tau_i redrawn (claim 2)
            "participation": 0.5,      # fraction of clients active per round in the partial run
        },
        "image": {                     # claim 3: MNIST-5k, PCA-64, MLP
            "seeds": [0],
            "dataset": "mnist5k",      # mnist5k (smoke/default) | cifar10 | cifar100 (paper, GPU)
            "n_train": 400,            # training samples used (subsample of the 4000-image split)
            "pca_dim": 64,             # PCA components (input width of the MLP)
            "hidden": 128,             # MLP hidden width
            "n_clients": 4,            # clients
            "alpha": 0.1,              # [R] Dirichlet concentration of the label split
            "min_size": 10,            # smallest client
            "participation": 0.5,      # [R] active fraction per round
            "rounds": 2,               # communication rounds
            "batch_size": 20,          # minibatch size
            "lr_range": [0.01, 0.1],   # [R] client learning rate lr_i ~ U[lo, hi], fixed per client (rng seed+1000)
            "epoch_range": [1, 5],     # [R] local epochs e_i ~ U{lo..hi}, fixed per client
            "prox_mu": 0.01,           # FedProx proximal weight
            "fedexp_eps": 1e-3,        # [R] FedExp epsilon
            "arms": ["fedavg", "fedprox", "fednova", "fedexp", "fedecado", "fedecado_lte", "fedecado_noflow"],
        },
        "fedecado": dict(_FEDECADO),
        "client_lte": dict(_CLIENT_LTE),
    },
}

SCALES["default"] = copy.deepcopy(SCALES["smoke"])
SCALES["default"]["quad"].update(seeds=[0, 1, 2, 3, 4], K=10, d=20, rounds_fixed_point=2000, rounds_full=500,
                                 rounds_partial=800)
SCALES["default"]["image"].update(seeds=[0, 1, 2], n_train=4000, n_clients=20, rounds=40)

SCALES["paper"] = copy.deepcopy(SCALES["default"])
SCALES["paper"]["image"].update(
    dataset="cifar10",           # and cifar100 (ResNet-34) as a second grid [V]
    model="vgg11",               # vgg11 (CIFAR-10) | resnet34 (CIFAR-100) [V]
    n_train=50000, n_clients=100,  # [V]
    participation=0.1,           # [R] 10 % active
    lr_range=[1e-4, 1e-3],       # [R]
    epoch_range=[1, 10],         # [R]
    rounds=200,                  # [R]
    batch_size=64,               # [R]
    arms=["fedavg", "fedprox", "fednova", "fedexp", "fedecado", "fedecado_lte", "fedecado_noflow"],
)
SCALES["paper"]["image"].pop("pca_dim")
SCALES["paper"]["image"].pop("hidden")

QUAD_ARMS = ("quad_fedavg", "quad_fednova", "quad_fedecado")


def get(scale: str) -> dict:
    """A deep copy of the settings of ``scale`` (smoke | default | paper)."""
    if scale not in SCALES:
        raise KeyError(f"fedecado settings: unknown scale {scale!r}; expected one of {sorted(SCALES)}")
    return copy.deepcopy(SCALES[scale])
