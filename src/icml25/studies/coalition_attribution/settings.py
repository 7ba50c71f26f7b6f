"""Scale settings of the coalition_attribution study as plain nested dicts (phase 2 turns them into the yaml and
the pydantic ``Config``). Every [R] (reconstruction: the paper leaves it open) is a key here.

Paper: Zheng, Deng & Zhang, "Towards Attributions of Input Variables in a Coalition", ICML 2025 (PMLR 267,
arXiv:2309.13411).
"""
from __future__ import annotations

import copy
from typing import Any

_COMMON: dict[str, Any] = {
    "arms": ["oracle", "mlp", "mlp_adam"],   # oracle: v from f itself; mlp: the trained net, LP gamma; mlp_adam: Adam gamma
    "seeds": [0, 1, 2],                        # evaluation seeds (tuning used seeds >= 100 only)
    "toy": {
        "n": 8,                                # [R] number of input variables (games have 2**n values)
        "n_functions": 20,                     # target functions per seed
        "m_range": [3, 6],                     # [R] number of monomials m ~ U{3..6}
        "order_range": [2, 5],                 # [R] monomial order |T_k| ~ U{2..5}, support uniform
        "weight_range": [0.5, 2.0],            # [R] |w_k| ~ U(0.5, 2), sign +-1 with prob. 1/2
        "coalition_sizes": [2, 4],             # [R] candidate coalitions: 2 <= |S| <= 4
        "coalitions_per_type": 5,              # [R] at most 5 coalitions of each type F/P/U per function
    },
    "mlp": {                                   # [R] the toy network, trained full batch on all 2**n inputs
        "hidden": 64,                          # width of each hidden layer (paper scale: 100)
        "layers": 3,                           # hidden layers (ReLU)
        "lr": 3e-3,                            # Adam learning rate (paper scale: 1e-3)
        "lr_decay": "linear",                  # 'linear' to 0 at the last epoch, or 'none' (paper scale)
        "epochs": 800,                         # full-batch epochs (paper scale: 3000)
        "log_every": 100,                      # epochs between logged train losses
        "rel_mse_flag": 1e-3,                  # train MSE / Var(f) above this is flagged
    },
    "gamma": {
        "solver": "lp",                        # [R] 'lp' (exact, scipy HiGHS) for arms oracle/mlp; mlp_adam uses 'adam'
        "include_empty": True,                 # [R] the sparsity objective sums over every T including the empty set
        "noise_bound": 0.0,                    # [R] Li & Zhang's optional noise term: off (only 0 is implemented)
        "adam_steps": 5000,                    # [R] Adam ablation: subgradient steps from gamma = 0
        "adam_lr_scale": 0.01,                 # [R] Adam learning rate = 0.01 * std(v), linear decay, best iterate kept
    },
    "identities": {
        "tol": 1e-9,                           # claim 2: max abs error <= tol * (1 + max|v|) per game
        "random_gamma_std": 1.0,               # claim 2 also checks gamma ~ N(0, std^2)
    },
    "claims": {                                # [R] thresholds of claims 1 and 3
        "bootstrap_resamples": 2000,           # claim 1: resamples of target functions
        "ci_level": 0.95,
        "bootstrap_seed": 0,
        "f_min": 0.80,                         # claim 1: mean_F >= 0.80 for R, R', Q
        "u_max": 0.15,                         # claim 1: mean_U <= 0.15
        "p_range": [0.2, 0.8],                 # claim 1: mean_P in [0.2, 0.8]
        "oracle_f_min": 0.99,                  # claim 3: oracle F means of R, R', Q >= 0.99
        "oracle_u_q_max": 0.01,                # claim 3: oracle U mean Q <= 0.01
    },
}

_OVERRIDES: dict[str, dict[str, Any]] = {
    "smoke": {"seeds": [0], "toy": {"n": 6, "n_functions": 4}, "mlp": {"epochs": 300},
              "gamma": {"adam_steps": 1000}},
    "default": {},
    # paper scale: the toy at n = 10 with the stated MLP; the SST-2 / MNIST / CIFAR-10 / KataGo experiments are a
    # separate path (GPU; not part of phase 1)
    "paper": {"toy": {"n": 10}, "mlp": {"hidden": 100, "lr": 1e-3, "lr_decay": "none", "epochs": 3000}},
}


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if k not in out:
            raise KeyError(f"unknown settings key {k!r}")
        out[k] = _merge(out[k], v) if isinstance(v, dict) else copy.deepcopy(v)
    return out


#: The full settings of each scale: the common keys above with the scale's overrides applied.
SCALES: dict[str, dict[str, Any]] = {name: _merge(_COMMON, over) for name, over in _OVERRIDES.items()}


def settings_for(scale: str) -> dict[str, Any]:
    """A deep copy of ``SCALES[scale]``."""
    if scale not in SCALES:
        raise KeyError(f"unknown scale {scale!r}; expected one of {sorted(SCALES)}")
    return copy.deepcopy(SCALES[scale])
